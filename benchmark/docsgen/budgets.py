"""The README/docs block of training budgets: what each method family on the headline split cost to train.

For the headline's seed-group base (the first model of the first seed group, :func:`benchmark.core.noise.seed_groups`)
and the methods built on or beside it (the base alone, its weighted duo with each sidekick, the deep ensembles, SVE
sizes, soups, MC dropout, Laplace, ...: every row whose models all belong to that seed group), on the headline split
in the page's default view: the rows' training budget (columns ``train_images``, ``train_params``), their test
metrics, and the wall seconds of the stages that made their models when ``results/timings.json`` has them (the
``train@<model>`` stage of every zoo model behind the row and the method's own stages, found in the bundle's
``dvc.lock``). Then one generated sentence on SVE against its base and the learning-rate grids of
``results/tuning.json`` (:mod:`benchmark.models.tune`). Nothing here is typed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmark.core import noise
from benchmark.models import tune
from benchmark.report.tables import default_view, fmt_count, member_names, method_label, wide_table
from benchmark.report.tables import fmt_short as fmt

METRICS = [("accuracy", "acc"), ("nll", "NLL"), ("aurc", "AURC")]
FAMILY_ORDER = {"single": 0, "duo": 1, "deep_ensemble": 2, "sve": 3, "soup": 4}
LEGACY_STAGES = {"sve-train": "sve"}  # timing records written before `pipelines/sve.py --train` was named sve-train


def seed_base(zoo: dict) -> tuple[str, tuple[str, ...]]:
    """(the first model of the first seed group, that group's names); ('', ()) without one."""
    groups = noise.seed_groups(zoo)
    return (groups[0].names[0], tuple(groups[0].names)) if groups else ("", ())


def budget_rows(rows: pd.DataFrame, zoo: dict, config) -> tuple[str, pd.DataFrame]:
    """(base, the headline split's default-view rows of it and of the methods built on or beside it, in block order)."""
    base, group = seed_base(zoo)
    split = rows[rows["split"] == config.headline_split]
    if not base or split.empty:
        return base, pd.DataFrame()
    view = default_view(wide_table(split), config.fit, config.confidence)
    names = view.apply(lambda r: member_names(r["members"], r["base"], r["sidekick"]), axis=1)
    single = (view["family"] == "single") & (view["base"] == base)
    duo = (view["family"] == "duo") & (view["base"] == base) & (view["method"] == "weighted")
    other = ~view["family"].isin(["single", "duo"]) & names.map(lambda ns: bool(ns) and set(ns) <= set(group))
    keep = view[single | duo | other].copy()
    keep["_order"] = keep["family"].map(lambda f: FAMILY_ORDER.get(f, len(FAMILY_ORDER)))
    keep["_size"] = names[keep.index].map(len)
    out = keep.sort_values(["_order", "family", "_size", "method", "members", "sidekick"], kind="stable")
    return base, out.drop(columns=["_order", "_size"])


def _stage_outs(lock: dict | None) -> dict[str, str]:
    """Output path -> the dvc.lock stage that writes it."""
    out = {}
    for stage, s in ((lock or {}).get("stages") or {}).items():
        for o in (s or {}).get("outs") or []:
            if isinstance(o, dict) and o.get("path"):
                out[str(o["path"])] = stage
    return out


def _method_stages(name: str, lock: dict | None) -> list[str] | None:
    """The stages that made method output ``name``: the one writing ``results/methods/<name>`` and those writing the
    method checkpoints it reads (e.g. SVE's ``sve-train``); None when the lock does not say."""
    writers = _stage_outs(lock)
    stage = writers.get(f"results/methods/{name}")
    if stage is None:
        return None
    deps = [d.get("path") for d in (lock["stages"][stage].get("deps") or []) if isinstance(d, dict)]
    return [
        writers[p] for p in deps if isinstance(p, str) and p.startswith("results/method_checkpoints") and p in writers
    ] + [stage]


def row_stages(r, units: dict, lock: dict | None) -> list[str] | None:
    """The stages that made the models of wide row ``r`` (``units``: the manifest's units by their rows'
    ``inputs_hash``): ``train@<m>`` of every zoo model behind it, and a method output's own stages."""
    u = units.get(r["inputs_hash"])
    if u is None:
        return None
    if u["kind"] != "method":
        return [f"train@{m}" for m in u["members"]]
    own = _method_stages(u["members"][0], lock)
    built = (u.get("info") or {}).get("builds_on")
    if own is None or built is None:
        return None
    return [f"train@{m}" for m in built] + own


def wall_seconds(stages: list[str] | None, timings: dict | None) -> float | None:
    """Summed wall seconds of ``stages`` in a timings record; None unless every one of them was measured."""
    if not stages or not timings:
        return None
    by_stage = {}
    for s in timings.get("stages") or []:
        by_stage[s.get("stage")] = by_stage.get(s.get("stage"), 0.0) + float(s.get("wall_s") or 0.0)
    total = 0.0
    for st in stages:
        name = st if st in by_stage else LEGACY_STAGES.get(st, st)
        if name not in by_stage:
            return None
        total += by_stage[name]
    return total


def _stage_text(stages: list[str]) -> str:
    trains = [s for s in stages if s.startswith("train@")]
    rest = [s for s in stages if not s.startswith("train@")]
    text = f"{len(trains)} × train@" if len(trains) > 2 else ", ".join(trains)
    return ", ".join([t for t in [text] if t] + rest)


def budgets_table(
    rows: pd.DataFrame, manifest: dict, lock: dict | None, config, timings: dict | None, tuning: dict | None
) -> str:
    """The budgets block's body (see the module docstring)."""
    zoo = manifest.get("zoo") or {}
    base, view = budget_rows(rows, zoo, config)
    if view.empty:
        return "No seed group of models in the committed bundle: no budgets to compare.\n"
    units = {u["inputs_hash"]: u for u in manifest.get("units") or []}
    lines = [
        f"Split `{config.headline_split}`, the page's default view (`{config.fit}` fit, `{config.confidence}` "
        f"confidence where a method has them); base **{base}** (the first model of the first seed group) and the "
        "methods built "
        "on or beside it. Train images: epochs × training images × members that each run the whole network, summed "
        "over every training run behind the row (the fine-tunes a method starts from included); trained params: the "
        "parameters those runs trained; wall s: the stages that made its models, from `results/timings.json`.",
        "",
        "| row | models | train images | trained params | wall s (stages) | "
        + " | ".join(f"{config.headline_split} {label}" for _, label in METRICS)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(METRICS),
    ]
    for r in view.to_dict("records"):
        stages = row_stages(r, units, lock)
        wall = wall_seconds(stages, timings)
        when = f"{wall:.1f} ({_stage_text(stages)})" if wall is not None else "not measured"
        cells = [fmt(r.get(m)) for m, _ in METRICS]
        lines.append(
            f"| {method_label(r['family'], r['method'])} | "
            f"{' + '.join(member_names(r['members'], r['base'], r['sidekick']))} "
            f"| {fmt_count(r['train_images'])} | {fmt_count(r['train_params'])} | {when} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n\n" + sve_sentence(view, base, config.headline_split) + tuning_lines(tuning)


def sve_sentence(view: pd.DataFrame, base: str, split: str) -> str:
    """One sentence: the largest SVE on ``base`` against the base alone (accuracy decides whether it trails)."""
    alone = view[(view["family"] == "single") & (view["base"] == base)]
    sve = view[(view["family"] == "sve") & (view["base"] == base)]
    if alone.empty or sve.empty:
        return ""
    a = alone.iloc[0]
    members = sve["method"].str.extract(r"^m(\d+)$")[0].astype(float)
    s = sve.loc[members.idxmax()] if members.notna().any() else sve.iloc[-1]
    acc_s, acc_a = float(s.get("accuracy", math.nan)), float(a.get("accuracy", math.nan))
    if not (np.isfinite(acc_s) and np.isfinite(acc_a)):
        return ""
    verdict = "SVE trails its base" if acc_s < acc_a else "SVE matches or beats its base"
    others = ", ".join(f"{label} {fmt(s.get(m))} against {fmt(a.get(m))}" for m, label in METRICS[1:])
    counts = [s["train_images"], s["train_params"], a["train_images"], a["train_params"]]
    spent = (
        f", after {fmt_count(counts[0])} training images and {fmt_count(counts[1])} trained parameters against the "
        f"base's {fmt_count(counts[2])} and {fmt_count(counts[3])}"
        if all(np.isfinite(float(c)) for c in counts)
        else " (the bundle records no training budgets)"
    )
    return (
        f"{verdict} on the {split} split: {method_label(s['family'], s['method'])} reaches accuracy {fmt(acc_s)} "
        f"against {fmt(acc_a)} for {base} alone ({others}){spent}.\n"
    )


def tuning_lines(tuning: dict | None) -> str:
    """The learning-rate grids of ``results/tuning.json``: lr -> validation score, the one params.yaml uses in bold."""
    if not tuning:
        return (
            "\nNo learning-rate grid recorded (`results/tuning.json`; `python -m benchmark reproduce tune` writes "
            "it).\n"
        )
    lines = [
        "",
        "Learning rates tuned on validation under each recipe's own budget (`results/tuning.json`; the lr "
        "params.yaml uses in bold):",
        "",
        "| recipe | stage | budget | lr → validation score |",
        "|---|---|---|---|",
    ]
    notes = []
    for name in sorted(tuning):
        rec = tuning[name]
        b = rec.get("budget") or {}
        budget = ", ".join(
            f"{k.replace('_', ' ')} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
            for k, v in b.items()
            if v is not None
        )
        cells = []
        for g in sorted(rec.get("grid") or [], key=lambda g: g["lr"]):
            score = "—" if g.get("val_score") is None else f"{g['val_score']:.4f}"
            text = f"{g['lr']:g} → {score}"
            used = abs(g["lr"] - rec["params_lr"]) <= 1e-12 * max(1.0, g["lr"])
            cells.append(f"**{text}**" if used else text)
        extra = "".join(f", {k}={v}" for k, v in (rec.get("set") or {}).items())
        lines.append(f"| {name} | {rec.get('stage', '')}{extra} | {budget} | {' · '.join(cells)} |")
        why = tune.check(rec) if rec.get("grid") else None
        if why:
            notes.append(why)
    return "\n".join(lines) + "\n" + "".join(f"\n{n}.\n" for n in notes)
