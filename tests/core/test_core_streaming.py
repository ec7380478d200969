"""Row-block mixture terms and the stats built from them, against the probability-matrix path."""

import pytest
import torch

from benchmark.core.combine import Prediction, duo_prediction
from benchmark.core.evaluate import evaluate, paired_difference
from benchmark.core.evaluate import evaluate_stats as stats_evaluate
from benchmark.core.evaluate import paired_difference_stats as stats_paired_difference
from benchmark.core.samples import sample_stats
from benchmark.core.streaming import MixtureTerms, mixture_terms, terms_stats
from benchmark.core.temperature import DuoFit
from benchmark.core.validation import InputError

N, C = 700, 7  # 700 rows: two full 256-row blocks and a partial one


def _members(seed=0, n=N, c=C):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    onehot = torch.nn.functional.one_hot(y, c)
    return (torch.randn(n, c, generator=g) * 2 + 2 * onehot, torch.randn(n, c, generator=g) + 1.5 * onehot, y)


def _fit(wb, ws):
    return DuoFit(t_base=1 / (2 * wb), t_side=1 / (2 * ws), w_base=wb, w_side=ws, nll=0.0, mode="converged")


def test_mixture_terms_match_a_direct_float64_computation():
    zb, zs, y = _members()
    weights = [[0.7, 0.4], [0.25, 0.6]]
    base = zb.argmax(1)
    terms, base_pred = mixture_terms([zb, zs], weights, y, base_conf=True)
    assert torch.equal(base_pred, base)
    for (wb, ws), t in zip(weights, terms):
        p = torch.softmax(wb * zb.double() + ws * zs.double(), 1)
        assert torch.equal(t.top, p.argmax(1))
        torch.testing.assert_close(t.top_conf.double(), p.amax(1), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(t.base_conf.double(), p.gather(1, base[:, None])[:, 0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(t.nll, -torch.log(p.gather(1, y[:, None])[:, 0]), rtol=1e-5, atol=1e-6)
        onehot = torch.nn.functional.one_hot(y, C).double()
        torch.testing.assert_close(t.sq, ((p - onehot) ** 2).sum(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "variant, confidence", [("weighted", "max"), ("weighted", "published"), ("uq_only", "published")]
)
def test_duo_metrics_match_the_prediction_path(variant, confidence):
    zb, zs, y = _members(1)
    fit = _fit(0.6, 0.35)
    (t,), base = mixture_terms([zb, zs], [[fit.w_base, fit.w_side]], y, base_conf=True)
    stats = terms_stats(
        t,
        y,
        num_classes=C,
        confidence=t.base_conf if confidence == "published" else None,
        prediction=base if variant == "uq_only" else None,
    )
    got = stats_evaluate(stats, n_bootstrap=0)
    want = evaluate(duo_prediction(zb, zs, variant=variant, fit=fit, confidence=confidence), y, n_bootstrap=0)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k][0] == pytest.approx(want[k][0], rel=1e-5, abs=1e-7), k


def _terms_of(probs: torch.Tensor, y: torch.Tensor) -> MixtureTerms:
    """The terms of a given probability matrix, computed as sample_stats does."""
    eps = torch.finfo(probs.dtype).eps
    py = probs.gather(1, y[:, None])[:, 0].double()
    top_conf, top = probs.max(1)
    sq = torch.linalg.vecdot(probs, probs).double() - 2 * py + 1
    return MixtureTerms(top_conf=top_conf, top=top, base_conf=None, nll=-torch.log(py.clamp(eps, 1 - eps)), sq=sq)


@pytest.mark.parametrize("explicit", [False, True])
def test_terms_stats_equal_sample_stats_with_ties(explicit):
    g = torch.Generator().manual_seed(2)
    y = torch.randint(0, C, (N,), generator=g)
    z = torch.randint(0, 3, (N, C), generator=g).float()  # few distinct rows: many tied confidences
    probs = torch.softmax(z, 1)
    conf = pred = None
    if explicit:
        conf, pred = torch.randint(0, 4, (N,), generator=g).double(), torch.randint(0, C, (N,), generator=g)
    a = terms_stats(
        _terms_of(probs, y), y, num_classes=C, confidence=conf, prediction=pred, ece_bins=10, brier="per_entry"
    )
    b = sample_stats(probs, y, confidence=conf, prediction=pred, ece_bins=10, brier="per_entry")
    for field in ("order", "rank", "additive", "labels", "prediction", "err_idx", "first_kind"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    for part in ("pure", "mixed"):
        for field in ("k_before", "k_end", "e_before", "e_end"):
            assert torch.equal(getattr(getattr(a, part), field), getattr(getattr(b, part), field)), (part, field)
    assert (a.num_classes, a.brier_scale) == (b.num_classes, b.brier_scale)


def test_bootstrap_on_stats_equals_evaluate_and_paired_difference():
    zb, zs, y = _members(3)
    pa, pb = torch.softmax(zb, 1), torch.softmax(zs, 1)
    sa, sb = terms_stats(_terms_of(pa, y), y, num_classes=C), terms_stats(_terms_of(pb, y), y, num_classes=C)
    rec_a, rec_b = Prediction(pa, pa.argmax(1), pa.amax(1)), Prediction(pb, pb.argmax(1), pb.amax(1))
    assert stats_evaluate(sa, n_bootstrap=30, seed=4) == evaluate(rec_a, y, n_bootstrap=30, seed=4)
    got = stats_paired_difference(sa, sb, n_bootstrap=30, seed=4)
    want = paired_difference(rec_a, rec_b, y, n_bootstrap=30, seed=4)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], nan_ok=True), k


def test_argmax_takes_the_first_maximum_and_every_block_is_released_once():
    zb = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]]).repeat(
        200, 1
    )  # ties: first index, as torch
    zs = torch.randn(600, 3, generator=torch.Generator().manual_seed(5))
    released = []
    (t,), base = mixture_terms(
        [zb, zs], [[1.0, 0.0]], base_conf=True, release=lambda b: released.append((b.data_ptr(), b.shape))
    )
    assert torch.equal(base, torch.tensor([1, 0, 2]).repeat(200)) and torch.equal(t.top, zb.argmax(1))
    rows = [0, 256, 512]
    want = sorted((z[r:].data_ptr(), z[r : r + 256].shape) for z in (zb, zs) for r in rows)
    assert sorted(released) == want


def test_ood_terms_need_no_labels_and_give_no_metrics():
    zb, zs, _ = _members()
    (t,), base = mixture_terms([zb, zs], [[0.5, 0.5]])
    assert t.nll is None and t.sq is None and t.base_conf is None and base is None
    with pytest.raises(InputError, match="computed without labels"):
        terms_stats(t, torch.zeros(N, dtype=torch.long), num_classes=C)


@pytest.mark.parametrize(
    "bad, match",
    [
        ("nan", r"logits\[1\]: contains NaN \(first non-finite value in row 300\)"),
        ("inf", r"logits\[0\]: contains Inf \(first non-finite value in row 300\)"),
        ("shape", r"logits\[0\] has shape \(700, 7\) but logits\[1\] has \(700, 6\): different number of classes C"),
        ("weights", r"weights\[0\]: must be 2 finite numbers \(one per member\), got \[0.5\]"),
        ("weight_nan", r"weights\[1\]: must be 2 finite numbers"),
        ("labels", r"labels: values must be in \[0, 7\)"),
        ("int", r"logits\[0\]: must be a non-empty \(N, C\) floating tensor, got torch.int64"),
    ],
)
def test_bad_input_is_named(bad, match):
    zb, zs, y = _members()
    weights = [[0.5, 0.5]]
    if bad == "nan":
        zs[300, 2] = float("nan")
    elif bad == "inf":
        zb[300, 0] = float("inf")
    elif bad == "shape":
        zs = zs[:, :6]
    elif bad == "weights":
        weights = [[0.5]]
    elif bad == "weight_nan":
        weights = [[0.5, 0.5], [0.5, float("nan")]]
    elif bad == "labels":
        y = y + C
    elif bad == "int":
        zb = zb.long()
    with pytest.raises(InputError, match=match):
        mixture_terms([zb, zs], weights, y)


@pytest.mark.parametrize(
    "variant, confidence",
    [("weighted", "max"), ("weighted", "published"), ("uq_only", "published"), ("unweighted", "max")],
)
def test_duo_prediction_is_the_evaluate_stage_mixture_to_the_bit(variant, confidence):
    """combine.duo_prediction (the duo command, the curves figure) and the evaluate stage's mixture_terms
    compute one duo mixture with one piece of code: equal bit for bit, not only to rounding."""
    from benchmark.core.combine import duo_weights
    from benchmark.core.streaming import mixture_probs

    zb, zs, y = _members(3)
    fit = _fit(0.6, 0.35)
    temps = (1.3, 0.7)
    w = duo_weights(variant, fit=fit, single_temperatures=temps)
    assert w == ((1 / 2.6, 1 / 1.4) if variant == "unweighted" else (0.6, 0.35))
    (t,), base = mixture_terms([zb, zs], [w], y, base_conf=True)
    pred = duo_prediction(zb, zs, variant=variant, fit=fit, single_temperatures=temps, confidence=confidence)
    published = confidence == "published" and variant != "unweighted"
    assert torch.equal(pred.confidence, t.base_conf if published else t.top_conf)
    assert torch.equal(pred.prediction, base if variant == "uq_only" else t.top)
    probs, top_conf, top = mixture_probs([zb, zs], w)
    assert torch.equal(pred.probs, probs) and torch.equal(top, t.top) and torch.equal(top_conf, t.top_conf)
    want = torch.softmax(w[0] * zb.double() + w[1] * zs.double(), 1)  # independent: float64, one call
    torch.testing.assert_close(probs.double(), want, rtol=1e-6, atol=1e-7)


def test_mixture_probs_names_a_bad_member():
    from benchmark.core.streaming import mixture_probs

    zb, zs, _ = _members(4)
    zs[300, 2] = float("nan")
    with pytest.raises(InputError, match=r"logits\[1\]: contains NaN \(first non-finite value in row 300\)"):
        mixture_probs([zb, zs], [0.5, 0.5])
    with pytest.raises(InputError, match=r"weights\[0\]: must be 2 finite numbers"):
        mixture_probs([zb, zb], [0.5])
