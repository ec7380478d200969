"""The streaming evaluate stage: memory-mapped logits, worker processes, per-unit cache."""

import gc
import io
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from benchmark.config.evaluate import EvalConfig
from benchmark.evaluation import stage
from benchmark.evaluation.runner import Context, Runner, Unit, UnitError, batches
from benchmark.evaluation.sweep_bench import make_zoo, params
from benchmark.stages.params_config import parse_params
from benchmark.storage import store

SIZES = {"n_test": 300, "n_val": 200, "n_ood": 100, "classes": 10}


def _params(workers: int):
    p = params(workers, n_bootstrap=20, deep_ensembles=[2])
    p["evaluate"]["bootstrap_splits"] = ["test", "ood"]
    return parse_params(p, "params")


def _tree(root: Path, models: int = 4) -> Path:
    make_zoo(root, models=models, seed=1, progress=False, **SIZES)
    g = torch.Generator().manual_seed(9)  # a 3-member method output (e.g. MC dropout) on m01
    for split in ("val", "test", "ood"):
        ref = store.load_logits_file(root / "results" / "logits" / "m01" / f"{split}.safetensors")
        z = ref.logits[None] + torch.randn(3, *ref.logits.shape, generator=g)
        store.save_logits_file(root / "results" / "methods" / "mcd" / f"{split}.safetensors", z, ref.labels, ref.ids)
    store.write_json(
        root / "results" / "methods" / "mcd" / "cost.json",
        {"family": "mc_dropout", "method": "t3", "base": "m01", "gflops": 6.0, "params": 2000, "throughput": 20.0},
    )
    return root


def _run(root: Path, monkeypatch, workers: int) -> dict:
    monkeypatch.chdir(root)
    return stage.run(_params(workers), progress=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return _tree(tmp_path_factory.mktemp("sweep"))


def test_workers_give_the_same_tables_as_in_process(tree, monkeypatch):
    one = _run(tree, monkeypatch, 1)
    n_units = 4 + 6 + 1 + 1  # singles, pairs, one deep ensemble of 2 seeds, one method output
    assert one == {"units": n_units, "computed": n_units, "reused": 0, "pairs": 6}
    res = {name: (tree / "results" / name).read_bytes() for name in ("metrics.csv", "paired.csv", "models.csv")}
    shutil.rmtree(tree / "results" / "units")
    assert _run(tree, monkeypatch, 2) == one
    # Same rows and keys; numbers equal up to float64 rounding: a base's temperature is fitted once per
    # worker batch, and batches differ with the number of workers (last-bit differences, ~1e-16 relative).
    for name, content in res.items():
        a = pd.read_csv(io.BytesIO(content), keep_default_na=False, na_values=[""])
        b = pd.read_csv(tree / "results" / name, keep_default_na=False, na_values=[""])
        assert list(a.columns) == list(b.columns) and len(a) == len(b), name
        num = [c for c in a.columns if pd.api.types.is_float_dtype(a[c])]
        other = [c for c in a.columns if c not in num]
        assert a[other].equals(b[other]), name
        np.testing.assert_allclose(a[num].to_numpy(float), b[num].to_numpy(float), rtol=1e-12, atol=1e-15, err_msg=name)
    metrics = pd.read_csv(tree / "results" / "metrics.csv")
    assert set(metrics["family"]) == {"single", "duo", "deep_ensemble", "mc_dropout"}
    duo = metrics[metrics["family"] == "duo"]
    assert duo["members"].nunique() == 6 and np.isfinite(duo["value"]).all()
    assert set(pd.read_csv(tree / "results" / "paired.csv")["split"]) == {"test"}  # bootstrap splits that get metrics


def test_a_grown_zoo_computes_only_the_new_units(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    first = _run(root, monkeypatch, 2)
    assert _run(root, monkeypatch, 2)["computed"] == 0
    make_zoo(root, models=5, seed=1, progress=False, **SIZES)  # m00..m03 rewritten byte for byte, m04 new
    grown = _run(root, monkeypatch, 2)
    assert grown == {"units": first["units"] + 1 + 4, "computed": 1 + 4, "reused": first["units"], "pairs": 10}
    assert (
        len(list((root / "results" / "units").glob("*.csv"))) == 2 * grown["units"]
    )  # workers write here, not elsewhere


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_unit_is_named_and_finished_units_stay_valid(tmp_path, monkeypatch, workers):
    root = _tree(tmp_path)
    path = root / "results" / "logits" / "m00" / "test.safetensors"
    lf = store.load_logits_file(path)
    z = lf.logits.clone()
    z[7, 3] = float("nan")
    store.save_logits_file(path, z, lf.labels, lf.ids)
    with pytest.raises(
        UnitError,
        match=r"evaluate: unit (single m00|duo m0\d\+m00) failed: InputError: logits\[\d\]: "
        r"contains NaN \(first non-finite value in row 7\)",
    ):
        _run(root, monkeypatch, workers)
    folder = root / "results" / "units"
    assert not [f for f in folder.iterdir() if f.name.startswith(".")]  # no half-written file
    finished = [f for f in folder.glob("*.csv") if not f.name.endswith(".paired.csv")]
    for rows_file in finished:  # every finished unit: both files, complete, without m00
        rows = pd.read_csv(rows_file)
        assert (folder / rows_file.name.replace(".csv", ".paired.csv")).exists()
        assert len(rows) and not rows["members"].str.contains("m00").any()
    store.save_logits_file(path, lf.logits, lf.labels, lf.ids)
    assert _run(root, monkeypatch, workers)["reused"] == len(finished)


@pytest.mark.parametrize("value", [0, -1, "2", True, 1.5])
def test_workers_must_be_a_positive_integer(value):
    p = params(1)
    p["evaluate"]["workers"] = value
    with pytest.raises(ValueError, match=r"^params: evaluate: workers must be an integer >= 1, got"):
        parse_params(p, "params")  # at the stage's entry, before any work


def test_a_unit_reads_only_its_members_logits(tree):
    files = {
        n: {s: str(tree / "results" / "logits" / n / f"{s}.safetensors") for s in ("val", "test", "ood")}
        for n in ("m00", "m01")
    }
    files["m02"] = {s: str(tree / "missing" / f"{s}.safetensors") for s in ("val", "test", "ood")}
    ctx = Context(cfg=EvalConfig(suite="t", fits=("converged",), n_bootstrap=0), files=files, folder=str(tree / "out"))
    runner = Runner(ctx)
    mapped: dict = {}
    rows, paired = runner.run(Unit(("duo", "m01", "m00"), "k1"), mapped)
    assert set(mapped) == {"m01", "m00"} and rows["members"].eq("m01+m00").all() and paired.empty
    assert (tree / "out" / "k1.csv").exists() and (tree / "out" / "k1.paired.csv").exists()
    with pytest.raises(
        UnitError, match=r"evaluate: unit single m02 failed: StoreError: .*missing/val.safetensors: file not found"
    ):
        runner.run(Unit(("single", "m02"), "k2"), {})


def test_batches_share_their_first_member_and_cover_every_unit_once():
    units = [Unit(("single", n), f"s{n}") for n in "abc"] + [
        Unit(("duo", b, s), f"d{b}{s}") for b, s in ("ab", "ac", "bc")
    ]
    units += [Unit(("duo", "c", s), f"dc{i}") for i, s in enumerate("xyzw")]
    out = batches(units, workers=2)
    assert sorted(u.key for b in out for u in b) == sorted(u.key for u in units)
    cap = math.ceil(len(units) / 8)
    assert all(len({u.members[0] for u in b}) == 1 and len(b) <= cap for b in out)
    assert [len(b) for b in out] == sorted((len(b) for b in out), reverse=True)


def _write(path, z, y, ids=None):
    store.save_logits_file(path, z, y, ids)
    return path


@pytest.mark.parametrize("shape", [(50, 4), (3, 50, 4)])
def test_mmap_logits_file_equals_load_logits_file(tmp_path, shape):
    g = torch.Generator().manual_seed(0)
    p = _write(
        tmp_path / "a.safetensors",
        torch.randn(*shape, generator=g),
        torch.randint(0, 4, (50,), generator=g),
        torch.arange(50),
    )
    a, b = store.mmap_logits_file(p), store.load_logits_file(p)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.labels, b.labels) and torch.equal(a.ids, b.ids)
    assert a.meta == b.meta and a.alignment_key == b.alignment_key and a.logits.dtype == torch.float32


def test_mmap_logits_file_maps_the_file_until_released(tmp_path):
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc (Linux)")
    p = _write(tmp_path / "mapped.safetensors", torch.randn(2000, 100), torch.zeros(2000, dtype=torch.long))
    lf = store.mmap_logits_file(p)
    assert str(p) in maps.read_text()
    assert float(lf.logits[1999].sum()) == pytest.approx(float(store.load_logits_file(p).logits[1999].sum()))
    del lf
    gc.collect()
    assert str(p) not in maps.read_text()


def test_mmap_logits_file_reads_npz_and_other_float_types_whole(tmp_path):
    z, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    npz = _write(tmp_path / "a.npz", z, y)
    assert torch.equal(store.mmap_logits_file(npz).logits, z)
    from safetensors.numpy import save_file

    save_file({"logits": z.double().numpy(), "labels": y.numpy()}, str(tmp_path / "f64.safetensors"))
    lf = store.mmap_logits_file(tmp_path / "f64.safetensors")
    assert lf.logits.dtype == torch.float32 and torch.allclose(lf.logits, z)


def _corrupt(tmp_path, how: str) -> Path:
    p = _write(tmp_path / "a.safetensors", torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 1]), torch.arange(5))
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = raw[8 : 8 + n].decode()
    if how == "truncated":
        p.write_bytes(raw[:5])
    elif how == "length":
        p.write_bytes((10**9).to_bytes(8, "little") + raw[8:])
    elif how == "json":
        p.write_bytes(raw[:8] + b"{" * n + raw[8 + n :])
    elif how == "offsets":
        p.write_bytes(raw[: 8 + n] + raw[8 + n : -4])  # data section 4 bytes short
    elif how == "labels":
        info = yaml.safe_load(header)
        begin = info["labels"]["data_offsets"][0]
        data = bytearray(raw)
        data[8 + n + begin] = 2  # first label 0 -> 2: no longer matches labels_hash
        p.write_bytes(bytes(data))
    return p


@pytest.mark.parametrize(
    "how, match",
    [
        ("truncated", "shorter than a safetensors header"),
        ("length", "header length 1000000000 exceeds the file size"),
        ("json", "bad safetensors header"),
        ("offsets", r"tensor '\w+': data offsets \[\d+, \d+\] do not fit shape"),
        ("labels", "labels do not match the labels_hash in its metadata"),
    ],
)
def test_mmap_logits_file_names_a_corrupt_file(tmp_path, how, match):
    p = _corrupt(tmp_path, how)
    with pytest.raises(store.StoreError, match=match):
        store.mmap_logits_file(p)
    with pytest.raises(store.StoreError):  # the whole-file reader refuses it too
        store.load_logits_file(p)


def _rss_file_mb() -> float:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("RssFile:"))
    return int(line.split()[1]) / 1024


def test_release_pages_drops_resident_pages_and_keeps_the_values(tmp_path):
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux)")
    z = torch.randn(10_000, 1000, generator=torch.Generator().manual_seed(0))  # 40 MB
    lf = store.mmap_logits_file(_write(tmp_path / "big.safetensors", z, torch.zeros(10_000, dtype=torch.long)))
    before = _rss_file_mb()
    assert torch.equal(lf.logits, z)  # every page touched
    touched = _rss_file_mb()
    for start in range(0, 10_000, 256):
        store.release_pages(lf.logits[start : start + 256])
    released = _rss_file_mb()
    assert touched - before > 30 and touched - released > 30
    assert torch.equal(lf.logits, z)  # read back from the file
    plain = z.clone()
    store.release_pages(plain[:256])  # not a mapping: untouched
    assert torch.equal(plain, z)


# --- singles and duos from row blocks, against the probability-matrix path of benchmark.core -----------------


def _model(seed: int, n: int = 600, c: int = 6) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, split in enumerate(("val", "test", "shift")):
        y = torch.randint(0, c, (n,), generator=torch.Generator().manual_seed(100 + i))  # same labels for every model
        out[split] = (torch.randn(n, c, generator=g) * 2 + 2.5 * torch.nn.functional.one_hot(y, c), y)
    out["ood"] = (torch.randn(200, c, generator=g), torch.full((200,), -1))
    return out


def _check(rows, want, key):
    got = {key(r): (r["value"], r["ci_low"], r["ci_high"]) for r in rows}
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-6, nan_ok=True), k


def test_duo_and_single_rows_match_core_predictions_and_metrics():
    from benchmark.config.evaluate import EvalConfig
    from benchmark.core.combine import duo_prediction, single_prediction
    from benchmark.core.evaluate import evaluate as core_evaluate
    from benchmark.core.evaluate import paired_difference
    from benchmark.core.ood import ood_evaluate
    from benchmark.core.temperature import fit_duo, fit_temperature
    from benchmark.methods.duo import VARIANTS as DUO_VARIANTS
    from benchmark.methods.duo import duo_unit
    from benchmark.methods.rows import GROUP_METRICS
    from benchmark.methods.single import single_unit

    b, s = _model(1), _model(2)
    groups = {"test": torch.arange(600) % 5}
    cfg = EvalConfig(suite="t", fits=("converged",), n_bootstrap=25, bootstrap_splits=("test", "ood"), groups=groups)
    rows, paired = duo_unit(cfg, "b", "s", b, s)
    singles = single_unit(cfg, "b", b)
    boot = dict(seed=0, level=0.95, ece_bins=15, sac_threshold=0.98)
    want, want_paired, want_single = {}, {}, {}
    for fit in cfg.fits:
        duo = fit_duo(b["val"][0], s["val"][0], b["val"][1], mode=fit)
        tb, ts = (fit_temperature(m["val"][0], m["val"][1], mode=fit).temperature for m in (b, s))
        for method, conf in DUO_VARIANTS:
            preds = {
                split: duo_prediction(
                    b[split][0], s[split][0], variant=method, fit=duo, single_temperatures=(tb, ts), confidence=conf
                )
                for split in ("test", "shift", "ood")
            }
            for split in ("test", "shift"):
                res = core_evaluate(preds[split], b[split][1], n_bootstrap=cfg.n_boot(split), **boot)
                want |= {(fit, method, conf, split, m): v for m, v in res.items()}
            res = ood_evaluate(preds["test"].confidence, preds["ood"].confidence, n_bootstrap=25, seed=0, level=0.95)
            want |= {(fit, method, conf, "ood", m): v for m, v in res.items()}
            if (method, conf) == ("weighted", "max"):
                diff = paired_difference(
                    preds["test"], single_prediction(b["test"][0], tb), b["test"][1], n_bootstrap=25, **boot
                )
                want_paired |= {(fit, m): (d["diff"], d["ci_low"], d["ci_high"]) for m, d in diff.items()}
        base = {split: single_prediction(b[split][0], tb) for split in ("test", "shift", "ood")}
        for split in ("test", "shift"):
            want_single |= {
                (fit, split, m): v
                for m, v in core_evaluate(base[split], b[split][1], n_bootstrap=cfg.n_boot(split), **boot).items()
            }
        res = ood_evaluate(base["test"].confidence, base["ood"].confidence, n_bootstrap=25, seed=0, level=0.95)
        want_single |= {(fit, "ood", m): v for m, v in res.items()}
    group_metrics = set(GROUP_METRICS)
    _check(
        [r for r in rows if r["metric"] not in group_metrics],
        want,
        lambda r: (r["fit"], r["method"], r["confidence"], r["split"], r["metric"]),
    )
    _check(
        [r for r in singles if r["metric"] not in group_metrics],
        want_single,
        lambda r: (r["fit"], r["split"], r["metric"]),
    )
    _check([dict(p, value=p["diff"]) for p in paired], want_paired, lambda p: (p["fit"], p["metric"]))
    assert {r["metric"] for r in rows if r["split"] == "test"} >= group_metrics


def test_an_infinite_temperature_is_refused_by_name():
    from benchmark.config.evaluate import EvalConfig
    from benchmark.methods.rows import ModelMemo
    from benchmark.methods.single import single_unit

    class Useless(ModelMemo):
        def temperature(self, name, logits, fit):
            return float("inf")

    with pytest.raises(ValueError, match=r"temperature: must be a finite non-zero number, got inf"):
        single_unit(EvalConfig(suite="t", fits=("converged",), n_bootstrap=0), "b", _model(1), memo=Useless())
