"""Separable validation logits: one defined behaviour (FitError) in every fit mode, the CLI and the evaluate stage."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from benchmark.core.separability import separating_direction
from benchmark.core.temperature import FIT_MODES, FitError, fit_duo, fit_temperature, minimise_nll


def _separable(seed, n=400, c=10, margin=1.0):
    """Logits whose label beats every other class by at least ``margin``."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(n, c, generator=g)
    others = z.scatter(1, y[:, None], -torch.inf).amax(1)
    z[torch.arange(n), y] = others + margin + torch.rand(n, generator=g)
    return z, y


def _correct_everywhere(d, logits, labels):
    """Independent check of a separating direction: the label's combined logit is a maximum in every row."""
    s = sum(dj * z.double() for dj, z in zip(d, logits))
    return bool((s.gather(1, labels[:, None])[:, 0] >= s.amax(1)).all())


@pytest.mark.parametrize("mode", FIT_MODES)
def test_duo_with_a_scaled_copy_of_separable_logits_raises(mode):
    z, y = _separable(0)
    assert bool((z.argmax(1) == y).all())
    with pytest.raises(FitError, match="no minimum at a finite temperature") as e:
        fit_duo(z, 0.7 * z, y, mode=mode)  # the input: T = 0.167, NLL 0.0, exit 0 before
    assert f"{mode} fit of the base: the validation logits are separable" in str(e.value)
    with pytest.raises(FitError, match=r"fit of lite0 \(base\): the validation logits are separable"):
        fit_duo(z, 0.7 * z, y, mode=mode, names=("lite0", "lite1"))
    with pytest.raises(FitError, match=r"fit of lite1 \(sidekick\)"):  # the sidekick alone is separable
        fit_duo(
            torch.randn(z.shape, generator=torch.Generator().manual_seed(1)), z, y, mode=mode, names=("lite0", "lite1")
        )


@pytest.mark.parametrize("mode", FIT_MODES)
@pytest.mark.parametrize("margin", [5.0, 1.0, 1e-3, 1e-6, 0.0])
def test_single_raises_whatever_the_margin(mode, margin):
    z, y = _separable(2, margin=margin)
    if margin == 0.0:  # ties at the top: the NLL still decreases towards sum log(ties) / N
        z[:, :] = 0.0
        z[torch.arange(len(y)), y] = 1.0
        z[torch.arange(len(y)), (y + 1) % z.shape[1]] = 1.0
    with pytest.raises(FitError, match="classified correctly") as e:
        fit_temperature(z, y, mode=mode, name="lite2")
    assert f"{mode} fit of lite2: the validation logits are separable: every one of the 400 samples" in str(e.value)
    assert "use a larger or harder validation split" in str(e.value)


def test_labels_at_the_smallest_logit_raise_too():
    z, y = _separable(3)
    with pytest.raises(FitError, match="smallest logit"):
        fit_temperature(-z, y)


def _jointly_separable(seed, side_sign=1.0):
    """Each member misclassifies many samples, the combination base + side_sign * side classifies all."""
    t, y = _separable(seed, margin=0.5)
    e = 3 * torch.randn(t.shape, generator=torch.Generator().manual_seed(seed + 100))
    return t + e, side_sign * (t - e) if side_sign > 0 else e, y


@pytest.mark.parametrize("mode", FIT_MODES)
@pytest.mark.parametrize("side_sign", [1.0, -1.0])
def test_jointly_separable_duo_raises(mode, side_sign):
    zb, zs, y = _jointly_separable(4, side_sign)
    for z in (zb, zs):
        assert float((z.argmax(1) == y).double().mean()) < 0.9
        assert separating_direction([z], y) is None
    sep = separating_direction([zb, zs], y)
    assert sep is not None and _correct_everywhere(sep.direction, [zb, zs], y)
    assert (sep.direction[1] > 0) == (side_sign > 0)  # base - side separates when side = e
    with pytest.raises(
        FitError, match=r"b \(base\) \+ s \(sidekick\): the validation logits are jointly separable: the combination"
    ) as e:
        fit_duo(zb, zs, y, mode=mode, names=("b", "s"))
    assert "duo NLL has no minimum at finite temperatures" in str(e.value)
    for z in (zb, zs):  # each member alone has a finite optimum
        assert fit_temperature(z, y, mode=mode).temperature > 0


def test_margin_is_the_smallest_projected_difference():
    zb, zs, y = _jointly_separable(5)
    sep = separating_direction([zb, zs], y)
    s = sep.direction[0] * zb.double() + sep.direction[1] * zs.double()
    diff = s.gather(1, y[:, None]) - s
    diff[torch.arange(len(y)), y] = float("inf")
    assert sep.margin == pytest.approx(float(diff.min()), rel=1e-9)
    assert sep.margin > 0


def test_one_misclassified_sample_breaks_joint_separability():
    zb, zs, y = _jointly_separable(6)
    c = zb.shape[1]
    zb[0], zs[0] = torch.arange(c, dtype=torch.float32), torch.arange(c, dtype=torch.float32)
    y[0] = 0  # the label is the smallest logit of both members: wrong for every positive combination
    assert separating_direction([zb, zs], y) is None
    fit = fit_duo(zb, zs, y)  # a finite optimum, checked against an independent float64 gradient
    w = torch.tensor([fit.w_base, fit.w_side], dtype=torch.float64, requires_grad=True)
    F.cross_entropy(w[0] * zb.double() + w[1] * zs.double(), y).backward()
    assert float(w.grad.abs().max()) < 1e-6
    assert fit_duo(zb, zs, y, mode="paper-exact").t_base > 0


def test_proportional_members_of_non_separable_data_fit():
    """z_side = 0.7 z_base (float32-rounded): a line of minima, not a separating direction."""
    g = torch.Generator().manual_seed(7)
    y = torch.randint(0, 10, (500,), generator=g)
    z = torch.randn(500, 10, generator=g)
    z[torch.arange(500), y] += 2.0
    assert separating_direction([z, 0.7 * z], y) is None
    fit = fit_duo(z, 0.7 * z, y)
    single = fit_temperature(z, y)
    assert fit.w_base + 0.7 * fit.w_side == pytest.approx(1 / single.temperature, rel=1e-5)


def test_newton_never_reports_an_underflowed_nll_as_converged():
    z, y = _separable(8, margin=3.0)
    with pytest.raises(FitError, match="no finite minimum"):
        minimise_nll([z, 0.7 * z], y, [0.5, 0.5])  # the fit without its separability check


def test_cli_duo_reports_separable_validation_logits_in_one_line(tmp_path, capsys):
    from benchmark.cli.main import main
    from benchmark.storage.store import save_logits_file

    z, y = _separable(9, n=200, c=6)
    paths = {}
    for name, logits in (("base", z), ("side", 0.7 * z)):
        for split in ("val", "test"):
            paths[f"{name}_{split}"] = str(tmp_path / f"{name}_{split}.safetensors")
            save_logits_file(paths[f"{name}_{split}"], logits, y)
    for fit in FIT_MODES:
        code = main(
            [
                "duo",
                "--base-val",
                paths["base_val"],
                "--side-val",
                paths["side_val"],
                "--base-test",
                paths["base_test"],
                "--side-test",
                paths["side_test"],
                "--fit",
                fit,
            ]
        )
        err = capsys.readouterr().err
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err
        assert paths["base_val"] in lines[0] and "separable" in lines[0] and f"{fit} fit" in lines[0]


@pytest.mark.parametrize("fit", FIT_MODES)
def test_evaluate_stage_unit_names_the_models_in_one_line(tmp_path, fit):
    from benchmark.config.evaluate import EvalConfig
    from benchmark.evaluation.runner import Context, Runner, Unit, UnitError
    from benchmark.storage.store import save_logits_file

    z, y = _separable(10, n=120, c=5)
    g = torch.Generator().manual_seed(11)
    noisy = z + 3 * torch.randn(z.shape, generator=g)
    files = {}
    for name, logits in (("sep", z), ("noisy", noisy)):
        files[name] = {}
        for split in ("val", "test"):
            files[name][split] = str(tmp_path / f"{name}_{split}.safetensors")
            save_logits_file(files[name][split], logits, y)
    runner = Runner(
        Context(cfg=EvalConfig(suite="t", fits=(fit,), n_bootstrap=0), files=files, folder=str(tmp_path / "out"))
    )
    with pytest.raises(UnitError) as e:
        runner.run(Unit(("duo", "noisy", "sep"), "k"), {})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("evaluate: unit duo noisy+sep failed: FitError: ")
    assert f"{fit} fit of the sidekick: the validation logits are separable" in msg
    message = f"evaluate: unit single sep failed: FitError: {fit} fit of the model: the validation logits are separable"
    with pytest.raises(UnitError, match=message):
        runner.run(Unit(("single", "sep"), "k2"), {})
    assert not (tmp_path / "out" / "k.csv").exists()
