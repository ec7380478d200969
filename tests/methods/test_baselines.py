"""Baselines: deep ensembles (cached logits), model soups, MC dropout, shallow ensembles."""

import copy
import math

import pytest
import timm
import torch
from torch import nn

from benchmark.config.evaluate import EvalConfig
from benchmark.core.combine import ensemble_prediction, single_prediction
from benchmark.methods.deep_ensemble import deep_ensemble_groups, ensemble_unit
from benchmark.methods.mc_dropout import MCDropout
from benchmark.methods.rows import multi_member_unit
from benchmark.methods.shallow import EnsembleHeads, ShallowEnsemble
from benchmark.methods.soups import average_state_dicts, greedy_soup, uniform_soup
from benchmark.models.cost import count_flops
from benchmark.models.zoo import ZooEntry

CFG = EvalConfig(suite="t", fits=("converged",), n_bootstrap=0)


def _logits(seed, n=60, c=4):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, c, generator=g) * 2
    return z, torch.randint(0, c, (n,), generator=g)


# --- deep ensembles --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["probs", "logits"])
@pytest.mark.parametrize("m", [1, 2, 5])
def test_ensemble_of_identical_members_is_the_member(mode, m):
    z, _ = _logits(0)
    ens, single = ensemble_prediction([z] * m, mode=mode), single_prediction(z)
    assert torch.allclose(ens.probs, torch.softmax(z, 1), atol=1e-6)
    assert torch.equal(ens.prediction, single.prediction)
    assert torch.allclose(ens.confidence, single.confidence, atol=1e-6)
    stacked = ensemble_prediction(torch.stack([z] * m), mode=mode)
    assert torch.allclose(stacked.probs, single.probs, atol=1e-6)


def _split_logits(seed):
    (zv, yv), (zt, yt), (zo, _) = _logits(seed), _logits(seed + 1), _logits(seed + 2, n=30)
    return {"val": (zv, yv), "test": (zt, yt), "ood": (zo, torch.full((30,), -1))}


def test_ensemble_unit_of_identical_members_equals_the_member():
    logits = _split_logits(0)
    single = {
        (r["split"], r["metric"]): r["value"]
        for r in multi_member_unit(CFG, {"family": "single", "method": "raw", "base": "a", "members": "a"}, logits)
    }
    rows = ensemble_unit(CFG, ["a", "a2", "a3"], [logits] * 3)
    assert {r["method"] for r in rows} == {"m3", "m3_logit"}
    for r in rows:
        assert r["fit"] == "none" and r["members"] == "a+a2+a3"
        assert r["value"] == pytest.approx(single[(r["split"], r["metric"])], rel=1e-5, abs=1e-6, nan_ok=True), (
            r["method"],
            r["split"],
            r["metric"],
        )


def test_ensemble_unit_differs_from_member_when_members_differ():
    a, b = _split_logits(0), _split_logits(10)
    rows = {(r["method"], r["split"], r["metric"]): r["value"] for r in ensemble_unit(CFG, ["a", "b"], [a, b])}
    zt = (a["test"][0], b["test"][0])
    nll = -torch.log((torch.softmax(zt[0], 1) + torch.softmax(zt[1], 1)) / 2).gather(1, a["test"][1][:, None]).mean()
    nll_logit = torch.nn.functional.cross_entropy((zt[0] + zt[1]) / 2, a["test"][1])
    assert rows[("m2", "test", "nll")] == pytest.approx(float(nll), rel=1e-5)
    assert rows[("m2_logit", "test", "nll")] == pytest.approx(float(nll_logit), rel=1e-5)


def _entry(name, seed, arch="test_resnet"):
    return ZooEntry(name=name, arch=arch, init="scratch", img_size=32, seed=seed, recipe="scratch")


def test_deep_ensemble_groups_take_the_first_seeds_of_each_architecture():
    zoo = {e.name: e for e in [_entry("r-s2", 2), _entry("r-s0", 0), _entry("r-s1", 1), _entry("v", 0, "test_vit")]}
    assert deep_ensemble_groups(zoo, [2, 3]) == [["r-s0", "r-s1"], ["r-s0", "r-s1", "r-s2"]]


@pytest.mark.parametrize("m", [4, 8])
def test_deep_ensemble_more_members_than_seeds_names_method_and_model(m):
    zoo = {e.name: e for e in [_entry("r-s0", 0), _entry("r-s1", 1), _entry("r-s2", 2)]}
    with pytest.raises(ValueError, match=rf"deep_ensemble m={m} of model 'test_resnet'.*only 3 seeds"):
        deep_ensemble_groups(zoo, [2, m])


@pytest.mark.parametrize("m", [1, 0, 2.0, True])
def test_deep_ensemble_bad_size(m):
    zoo = {e.name: e for e in [_entry("r-s0", 0), _entry("r-s1", 1)]}
    with pytest.raises(ValueError, match="deep_ensembles"):
        deep_ensemble_groups(zoo, [m])


# --- model soups -----------------------------------------------------------------------------


def _net(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).eval()


def test_average_state_dicts_hand_worked():
    a, b = _net(0), _net(1)
    for m, v in ((a, 1.0), (b, 3.0)):
        with torch.no_grad():
            m[0].weight.fill_(v)
        m[1].running_var.fill_(v * v)
        m[1].num_batches_tracked.fill_(int(v))
    avg = average_state_dicts([a.state_dict(), b.state_dict()])
    assert torch.equal(avg["0.weight"], torch.full((4, 3), 2.0))
    assert torch.equal(avg["1.running_var"], torch.full((4,), 5.0))  # BN statistics are averaged too
    assert avg["1.num_batches_tracked"].item() == 1  # integer buffers from the first ingredient
    assert torch.allclose(avg["3.bias"], (a[3].bias + b[3].bias).detach() / 2)


def test_uniform_soup_of_identical_members_is_the_member():
    base = _net(0)
    soup = uniform_soup([base, _copy(base), _copy(base)], ["a", "b", "c"])
    x = torch.randn(16, 3)
    assert torch.equal(soup(x), base(x))
    assert soup is not base


def _copy(m):
    c = _net(99)
    c.load_state_dict(m.state_dict())
    return c


def _task(seed, n=200):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g)
    return x, (x[:, 0] - 0.5 * x[:, 1] > 0).long()


def _linear(w, b):
    m = nn.Linear(5, 2)
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m.eval()


@pytest.mark.parametrize("seed", range(6))
def test_greedy_soup_never_worse_than_its_first_ingredient(seed):
    x, y = _task(100)
    g = torch.Generator().manual_seed(seed)
    good = torch.tensor([[-1.0, 0.5, 0, 0, 0], [1.0, -0.5, 0, 0, 0]])
    ingredients = [
        _linear(good + torch.randn(2, 5, generator=g) * s, torch.randn(2, generator=g) * s)
        for s in (0.3, 0.8, 1.5, 3.0, 10.0)
    ]  # from near the optimum to mostly noise

    def acc(m):
        with torch.no_grad():
            return float((m(x).argmax(1) == y).double().mean())

    names = [f"i{k}" for k in range(len(ingredients))]
    res = greedy_soup(ingredients, acc, names)
    alone = {n: acc(m) for n, m in zip(names, ingredients)}
    first = res.ingredients[0]
    assert alone[first] == max(alone.values())
    assert acc(res.model) == pytest.approx(res.score)
    assert res.score >= alone[first]
    assert [h["name"] for h in res.history if h["accepted"]] == res.ingredients[1:]
    path = [alone[first]] + [h["score"] for h in res.history if h["accepted"]]
    assert all(a < b for a, b in zip(path, path[1:]))  # each accepted step strictly improves the validation score
    assert all(h["score"] <= res.score for h in res.history if not h["accepted"])
    # the soup's weights are the plain mean of exactly the accepted ingredients
    chosen = [ingredients[names.index(n)] for n in res.ingredients]
    assert torch.allclose(res.model.weight, torch.stack([m.weight for m in chosen]).mean(0))


def test_greedy_soup_rejects_a_harmful_ingredient():
    x, y = _task(100)
    good = _linear(torch.tensor([[-1.0, 0.5, 0, 0, 0], [1.0, -0.5, 0, 0, 0]]), torch.zeros(2))
    bad = _linear(torch.tensor([[10.0, -5.0, 0, 0, 0], [-10.0, 5.0, 0, 0, 0]]), torch.zeros(2))  # flips every label

    def acc(m):
        with torch.no_grad():
            return float((m(x).argmax(1) == y).double().mean())

    res = greedy_soup([bad, good], acc, ["bad", "good"])
    assert res.ingredients == ["good"] and res.history == [
        {"name": "bad", "score": pytest.approx(0.0), "accepted": False}
    ]
    assert acc(res.model) == 1.0


def test_greedy_soup_leaves_out_an_ingredient_that_only_ties():
    """The released code adds an ingredient only on a strict improvement (``>``): a tie keeps the smaller soup."""
    ingredients = [_linear(torch.full((2, 5), float(k)), torch.zeros(2)) for k in range(3)]
    scores = iter([0.5, 0.5, 0.5, 0.5, 0.75])  # alone: 0.5 each; soup {0, 1}: 0.5 (tie); soup {0, 2}: 0.75
    res = greedy_soup(ingredients, lambda m: next(scores), ["a", "b", "c"])
    assert [h["accepted"] for h in res.history] == [False, True]
    assert res.ingredients == ["a", "c"] and res.score == 0.75
    assert torch.allclose(res.model.weight, torch.full((2, 5), 1.0))  # mean of a (0) and c (2) only


def test_soup_errors_name_the_ingredients():
    with pytest.raises(ValueError, match=r"model soup of \['a'\]: needs at least 2 ingredients"):
        uniform_soup([_net(0)], ["a"])
    other = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))
    with pytest.raises(ValueError, match=r"'0.weight' has shape \(5, 3\) in 'b' but \(4, 3\) in 'a'"):
        uniform_soup([_net(0), other], ["a", "b"])
    with pytest.raises(ValueError, match="'b' and 'a' have different weights"):
        greedy_soup([_net(0), nn.Linear(3, 2)], lambda m: 0.0, ["a", "b"])


# --- MC dropout ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return timm.create_model("test_efficientnet", num_classes=3).eval()


def _x(n=6, seed=0):
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("t", [1, 4])
def test_mc_dropout_with_dropout_off_is_the_deterministic_model(tiny, t):
    x = _x()
    with torch.no_grad():
        out, ref = MCDropout(tiny, t, p=0.0, variant="post-hoc")(x), tiny(x)
    assert out.shape == (t, 6, 3)
    for k in range(t):  # the head on (T, B, D) may take another GEMM path than on (B, D): equal to rounding
        assert torch.allclose(out[k], ref, rtol=0, atol=1e-6)


def test_mc_dropout_is_seeded_and_samples_differ(tiny):
    x = _x()
    with torch.no_grad():
        a, b, c = (MCDropout(tiny, 5, p=0.3, seed=s, variant="post-hoc")(x) for s in (1, 1, 2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert (a.std(0) > 0).all()


def test_mc_dropout_is_unbiased_at_the_linear_head(tiny):
    # inverted dropout before a linear layer: E[z_t] = W f + b = the deterministic logits
    x, t = _x(3), 4000
    with torch.no_grad():
        z, ref = MCDropout(tiny, t, p=0.5, seed=0, variant="post-hoc")(x), tiny(x)
    tol = 5 * z.std(0) / math.sqrt(t)
    assert ((z.mean(0) - ref).abs() <= tol).all()


def test_mc_dropout_keeps_batchnorm_in_eval_mode(tiny):
    x = _x()
    w = MCDropout(tiny, 3, p=0.2, seed=0, variant="post-hoc")
    with torch.no_grad():
        a = w.eval()(x)
        b = w.train()(x)
    assert torch.equal(a, b) and not w.model.training
    w.eval()


def test_mc_dropout_uses_the_models_own_rate():
    model = timm.create_model("test_efficientnet", num_classes=3, drop_rate=0.25)
    assert MCDropout(model, 2).p == 0.25 and MCDropout(model, 2).variant == "trained"
    assert MCDropout(model, 2, p=0.25).p == 0.25  # the training rate, named explicitly
    assert MCDropout(model, 2, p=0.1, variant="post-hoc").p == 0.1  # another rate: a named variant


def test_mc_dropout_refuses_a_rate_other_than_the_training_rate():
    model = timm.create_model("test_efficientnet", num_classes=3, drop_rate=0.25)
    with pytest.raises(
        ValueError,
        match=r"MC dropout of model 'm': p=0.3 differs from the rate the model was trained "
        r"with \(drop_rate 0.25\); leave p out .* or name variant: post-hoc",
    ):
        MCDropout(model, 2, p=0.3, model_name="m")
    # train.json is the record of the rate it was trained with: it wins over how the skeleton was built
    assert MCDropout(model, 2, train_rate=0.2).p == 0.2
    with pytest.raises(ValueError, match=r"fine-tuned without dropout \(drop_rate 0\).*variant: post-hoc"):
        MCDropout(model, 2, train_rate=0.0, model_name="m")
    assert MCDropout(model, 2, p=0.2, train_rate=0.0, variant="post-hoc").p == 0.2
    with pytest.raises(ValueError, match=r"variant must be one of \['trained', 'post-hoc'\]"):
        MCDropout(model, 2, variant="test-time")


@pytest.mark.parametrize("samples", [0, -1, 1.5, True, None])
def test_mc_dropout_bad_samples(tiny, samples):
    with pytest.raises(ValueError, match=r"MC dropout of model 'tiny-net': samples T must be an integer >= 1"):
        MCDropout(tiny, samples, p=0.1, model_name="tiny-net", variant="post-hoc")


@pytest.mark.parametrize("p", [1.0, -0.1, "0.2"])
def test_mc_dropout_bad_rate(tiny, p):
    with pytest.raises(ValueError, match=r"dropout rate p must be a number in \[0, 1\)"):
        MCDropout(tiny, 2, p=p, model_name="tiny-net", variant="post-hoc")


def test_mc_dropout_needs_a_dropout_layer(tiny):
    with pytest.raises(
        ValueError,
        match=r"MC dropout of model 'tiny-net': the model was fine-tuned without dropout "
        r"\(drop_rate 0\), and Gal & Ghahramani's MC dropout samples the dropout",
    ):
        MCDropout(tiny, 2, model_name="tiny-net")
    with pytest.raises(ValueError, match=r"fine-tuned without dropout"):  # p given: still not the published method
        MCDropout(tiny, 2, p=0.2, model_name="tiny-net")
    with pytest.raises(ValueError, match=r"variant post-hoc needs the dropout rate p"):
        MCDropout(tiny, 2, model_name="tiny-net", variant="post-hoc")
    with pytest.raises(ValueError, match=r"MC dropout does not apply to model 'plain' \(Sequential\)"):
        MCDropout(
            nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 3)), 2, p=0.1, model_name="plain", variant="post-hoc"
        )


def test_mc_dropout_on_a_vit_uses_its_head_dropout():
    torch.manual_seed(0)
    vit = timm.create_model("test_vit", num_classes=3, drop_rate=0.1).eval()
    x = torch.randn(2, 3, 160, 160)
    assert MCDropout(vit, 2).p == 0.1
    with torch.no_grad():
        assert torch.allclose(MCDropout(vit, 2, p=0.0, variant="post-hoc")(x)[1], vit(x), atol=1e-6)


# --- shallow ensemble ------------------------------------------------------------------------


def test_shallow_ensemble_of_identical_heads_is_the_member(tiny):
    heads = EnsembleHeads(tiny.num_features, 3, 4, seed=0)
    with torch.no_grad():
        heads.weight.copy_(tiny.classifier.weight.T.expand(4, -1, -1))
        heads.bias.copy_(tiny.classifier.bias.expand(4, 1, -1))
    x = _x()
    with torch.no_grad():
        out, ref = ShallowEnsemble(tiny, heads)(x), tiny(x)
    assert out.shape == (4, 6, 3)
    for member in out:
        assert torch.allclose(member, ref, atol=1e-6)


def test_shallow_heads_are_seeded_independent_linear_layers():
    a, b, c = EnsembleHeads(8, 3, 2, seed=1), EnsembleHeads(8, 3, 2, seed=1), EnsembleHeads(8, 3, 2, seed=2)
    assert torch.equal(a.weight, b.weight) and not torch.equal(a.weight, c.weight)
    assert not torch.equal(a.weight[0], a.weight[1])
    assert a.weight.abs().max() <= 1 / math.sqrt(8)  # nn.Linear's default init range
    f = torch.randn(5, 8)
    with torch.no_grad():
        out = a(f)
        for m in range(2):
            assert torch.allclose(out[m], f @ a.weight[m] + a.bias[m], atol=1e-6)
        assert torch.equal(a(f[:, :, None, None]), out)


def test_shallow_ensemble_flops_are_one_forward_plus_extra_heads(tiny):
    m, d = 4, tiny.num_features
    wrapper = ShallowEnsemble(tiny, EnsembleHeads(d, 3, m))
    assert count_flops(wrapper, 32) == pytest.approx(count_flops(tiny, 32) + (m - 1) * 3 * d / 1e9, abs=1e-12)


def test_shallow_ensemble_errors(tiny):
    with pytest.raises(ValueError, match=r"shallow ensemble of model '': members must be an integer >= 2"):
        EnsembleHeads(8, 3, 1)
    with pytest.raises(ValueError, match=r"shallow ensemble of model 'tiny-net': heads map 8 features to 3 classes"):
        ShallowEnsemble(tiny, EnsembleHeads(8, 3, 2), model_name="tiny-net")
    with pytest.raises(ValueError, match=r"shallow ensemble does not apply to model 'plain'"):
        ShallowEnsemble(nn.Sequential(nn.Linear(8, 3)), EnsembleHeads(8, 3, 2), model_name="plain")


def test_joint_shallow_ensemble_backprops_every_head_into_the_shared_backbone(tiny):
    tiny = copy.deepcopy(tiny)
    heads = EnsembleHeads(tiny.get_classifier().in_features, tiny.get_classifier().out_features, 3, seed=0)
    joint = ShallowEnsemble(tiny, heads, backbone="joint").train()
    x = _x()
    grads = []
    for m in range(3):  # each member's loss alone reaches the backbone, and differently
        joint.zero_grad(set_to_none=True)
        joint(x)[m].logsumexp(-1).sum().backward()
        grads.append(
            torch.cat(
                [p.grad.flatten() for n, p in joint.model.named_parameters() if p.requires_grad and p.grad is not None]
            )
        )
    assert all(g.abs().sum() > 0 for g in grads) and not torch.allclose(grads[0], grads[1])
    assert not any(p.requires_grad for p in joint.model.get_classifier().parameters())
    assert joint.model.training  # a joint backbone trains (BatchNorm/dropout in train mode)


def test_frozen_shallow_ensemble_keeps_the_backbone_out_of_training(tiny):
    tiny = copy.deepcopy(tiny)
    heads = EnsembleHeads(tiny.get_classifier().in_features, tiny.get_classifier().out_features, 2, seed=0)
    frozen = ShallowEnsemble(tiny, heads, backbone="frozen").train()
    assert not frozen.model.training and not any(p.requires_grad for p in frozen.model.parameters())
    assert all(p.requires_grad for p in frozen.head.parameters())
    with pytest.raises(
        ValueError, match=r"shallow ensemble of model 'x': backbone must be one of \('joint', 'frozen'\)"
    ):
        ShallowEnsemble(tiny, heads, model_name="x", backbone="both")


def _bn_net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))


def test_recompute_batchnorm_gives_the_statistics_of_the_soups_own_features():
    """Independent definition: the running mean/variance after the pass are the mean over the batches of each
    batch's feature mean and unbiased variance at the BatchNorm input (momentum None = cumulative average), dropout
    stays off (the output is deterministic), and the other weights do not change."""
    from benchmark.methods.soups import recompute_batchnorm

    a, b = _bn_net(0), _bn_net(1)
    soup = uniform_soup([a, b], ["a", "b"])  # averaged statistics
    weights = {k: v.clone() for k, v in soup.state_dict().items() if "running" not in k and "num_batches" not in k}
    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(16, 4, generator=g) * 3 + 1 for _ in range(3)]
    recompute_batchnorm(soup, xs)
    feats = [soup[0](x).detach() for x in xs]
    bn = soup[1]
    torch.testing.assert_close(bn.running_mean, torch.stack([f.mean(0) for f in feats]).mean(0))
    torch.testing.assert_close(bn.running_var, torch.stack([f.var(0, unbiased=True) for f in feats]).mean(0))
    assert not soup.training and bn.momentum == 0.1
    assert all(torch.equal(v, soup.state_dict()[k]) for k, v in weights.items())
    x = torch.randn(5, 4, generator=g)
    assert torch.equal(soup(x), soup(x))  # eval mode: dropout off


def test_recompute_batchnorm_applies_to_soups_only_and_greedy_scores_after_it():
    from benchmark.methods.soups import recompute_batchnorm

    calls = []
    finish = lambda m: calls.append(m)  # noqa: E731
    a = _bn_net(0)
    soup = uniform_soup([a, _bn_net(1)], ["a", "b"], finish)
    assert calls == [soup]
    seen = []

    def score(m):
        seen.append(m in calls)
        return 1.0 if m in calls else 0.5  # a recomputed soup scores higher: the greedy soup must see it first

    calls.clear()
    res = greedy_soup([a, _bn_net(1)], score, ["a", "b"], finish)
    assert seen == [False, False, True] and res.ingredients == ["a", "b"] and len(calls) == 1
    with pytest.raises(ValueError, match="no images to recompute"):
        recompute_batchnorm(_bn_net(3), [])
