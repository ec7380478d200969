"""Risk-coverage curves and reliability diagrams of the headline methods of a split.

For the best-ranked base of each plotted split (``config.plot_splits``, labelled
splits only), every headline row is rebuilt from logits with what the results
table records for it, through :mod:`benchmark.core.combine` (the evaluate
stage's own functions): the base alone and its duos from the models' logits
(``<logits>/<model>/<split>.safetensors``) with the recorded temperatures and
weights; deep ensembles from their members' logits (mean of softmaxes, or
softmax of mean logits for ``_logit``); method outputs (SVE sizes, soups, MC
dropout, Laplace, ...) from their stage's logits (``<methods>/<name>/<split>.safetensors``,
the folder whose ``cost.json`` names the row's family, method, base and members),
the mean of member softmaxes as the evaluate stage scores them. They are drawn
with :mod:`benchmark.core.curves`: selective risk against coverage (the curve
whose mean is AURC) and accuracy against confidence per bin (the gaps whose
weighted sum is ECE), one column of panels per method family (the base alone
repeated in each as the reference), legends under the panels.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from benchmark.core.combine import duo_prediction, ensemble_prediction, single_prediction
from benchmark.core.curves import aurc_from_curve, ece_from_bins, reliability, risk_coverage
from benchmark.core.temperature import DuoFit
from benchmark.report.plots import RC_PARAMS, palette, plain_text, save_figure
from benchmark.report.provenance import file_slug
from benchmark.report.tables import match_any, member_names, method_label
from benchmark.storage import store


def _find_row(rows: pd.DataFrame, label: str, models: str):
    for r in rows.to_dict("records"):
        if (
            method_label(r["family"], r["method"]) == label
            and " + ".join(member_names(r["members"], r["base"], r["sidekick"])) == models
        ):
            return r
    return None


def method_folders(methods_dir) -> dict[tuple, Path]:
    """``(family, method, base, members) -> folder`` of every method output under ``methods_dir``
    (its ``cost.json``; members as the evaluate stage names them: the ingredients, else the base)."""
    out: dict[tuple, Path] = {}
    if methods_dir is None or not Path(methods_dir).is_dir():
        return out
    for cost in sorted(Path(methods_dir).glob("*/cost.json")):
        try:
            info = store.read_json(cost)
            ingredients = info.get("ingredients")
            members = "+".join(ingredients) if isinstance(ingredients, list) and ingredients else info["base"]
            out[(info["family"], info["method"], info["base"], members)] = cost.parent
        except (store.StoreError, KeyError, TypeError, AttributeError):
            continue  # not a method output: no curve for it
    return out


def _other_prediction(r: dict, load, split: str, methods: dict):
    """Deep ensembles (members' logits) and method outputs (their stage's logits), max confidence only."""
    if r.get("confidence") != "max":
        return None
    if r["family"] == "deep_ensemble":
        files = [load(m) for m in str(r["members"]).split("+")]
        if any(f is None for f in files):
            return None
        for f in files[1:]:
            store.check_aligned(files[0], f)
        mode = "logits" if str(r["method"]).endswith("_logit") else "probs"
        return ensemble_prediction([f.logits for f in files], mode=mode), files[0].labels
    folder = methods.get((r["family"], r["method"], r["base"], r["members"]))
    path = folder / f"{split}.safetensors" if folder is not None else None
    if path is None or not path.exists():
        return None
    f = store.load_logits_file(path)
    z = f.logits
    return (ensemble_prediction(z, mode="probs") if z.ndim == 3 else single_prediction(z)), f.labels


def predict_row(r: dict, logits_dir: Path, split: str, reference_family: str, methods: dict | None = None):
    """``(prediction, labels)`` of a headline row from logits; None when not rebuildable.

    ``methods``: :func:`method_folders` (method outputs; without it only singles, duos
    and deep ensembles are rebuilt)."""

    def load(name):
        path = logits_dir / name / f"{split}.safetensors"
        return store.load_logits_file(path) if path.exists() else None

    temps = [r.get("temperature_base"), r.get("temperature_side")]
    if r["family"] == reference_family and not r.get("sidekick"):
        f = load(r["base"])
        if f is None or not _finite(temps[0]):
            return None
        return single_prediction(f.logits, float(temps[0])), f.labels
    if r.get("sidekick") and _finite(r.get("balance")):
        fb, fs = load(r["base"]), load(r["sidekick"])
        if (
            fb is None
            or fs is None
            or not all(_finite(v) for v in (*temps, r.get("weight_base"), r.get("weight_side")))
        ):
            return None
        store.check_aligned(fb, fs)
        conf = r["confidence"] if r["confidence"] in ("max", "published") else "max"
        if r["method"] == "unweighted":
            pred = duo_prediction(
                fb.logits, fs.logits, variant="unweighted", single_temperatures=(temps[0], temps[1]), confidence=conf
            )
        elif r["method"] in ("weighted", "uq_only"):
            fit = DuoFit(
                t_base=float(temps[0]),
                t_side=float(temps[1]),
                w_base=float(r["weight_base"]),
                w_side=float(r["weight_side"]),
                nll=math.nan,
                mode="",
            )
            pred = duo_prediction(fb.logits, fs.logits, variant=r["method"], fit=fit, confidence=conf)
        else:
            return None
        return pred, fb.labels
    if not r.get("sidekick") and not _finite(r.get("balance")):
        return _other_prediction(r, load, split, methods or {})
    return None


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


PANELS = ("base alone and duos", "deep ensembles", "SVE", "other baselines")


def panel_of(kind: str, family: str) -> str:
    """The column of :func:`curves_figure` a headline row is drawn in."""
    if kind in ("alone", "duo"):
        return PANELS[0]
    return {"deep_ensemble": PANELS[1], "sve": PANELS[2]}.get(family, PANELS[3])


def split_curves(
    split: dict,
    rows: pd.DataFrame,
    metric: str,
    logits_dir: Path,
    split_name: str,
    reference_family: str,
    ece_bins: int = 15,
    methods: dict | None = None,
) -> list[dict]:
    """The curves of the best-ranked base's headline rows (every kind that can be rebuilt):
    name, panel, whether it is the base alone, risk-coverage and reliability bins."""
    order = split["order"].get(metric, [])
    if not order:
        return []
    top = split["entries"][order[0][0]]["base"]
    out = []
    for i, role in order:
        e = split["entries"][i]
        if e["base"] != top:
            continue
        r = _find_row(rows, e["label"], e["models"])
        got = predict_row(r, logits_dir, split_name, reference_family, methods) if r is not None else None
        if got is None:
            continue
        pred, labels = got
        labels = labels.long()
        if (labels < 0).any():
            return []  # an OOD split: no correct/wrong
        correct = (pred.prediction == labels).numpy()
        top_conf, top_cls = pred.probs.max(1)
        name = f"{role}:\n{e['label']} ({e['models']})" if e["kind"] != "other" else f"{e['label']} ({e['models']})"
        out.append(
            {
                "name": name,
                "panel": panel_of(e["kind"], r["family"]),
                "alone": e["kind"] == "alone",
                "curve": risk_coverage(pred.confidence.numpy(), correct),
                "bins": reliability(top_conf.numpy(), (top_cls == labels).numpy(), ece_bins),
            }
        )
    return out


def curves_figure(curves: list[dict], title: str) -> Figure:
    """Selective risk against coverage (top row) and the reliability diagram (bottom row), one column
    per method family present (:data:`PANELS`), each with its own risk range; the base alone is
    drawn in every column (grey, dashed) as the reference."""
    alone = [c for c in curves if c.get("alone")]
    panels = [p for p in PANELS if any(c.get("panel", PANELS[0]) == p and not c.get("alone") for c in curves)] or [
        PANELS[0]
    ]
    fig = Figure(figsize=(1.2 + 3.6 * len(panels), 7.4), layout="constrained")
    axes = fig.subplots(2, len(panels), squeeze=False)
    for col, panel in enumerate(panels):
        top, bottom = axes[0, col], axes[1, col]
        mine = alone + [c for c in curves if not c.get("alone") and c.get("panel", PANELS[0]) == panel]
        # each column's risk axis shows its curves from 10% coverage on in full (below that the
        # first answers' risk jumps by 1/k)
        risk_top = max(
            float(np.max(c["curve"]["selective_risk"][c["curve"]["coverage"] >= 0.1], initial=0.0)) for c in mine
        )
        colors = palette([c["name"] for c in mine if not c.get("alone")])  # distinct colours within a column
        for c in mine:
            cv, b = c["curve"], c["bins"]
            style = dict(color="0.35", ls="--") if c.get("alone") else dict(color=colors[c["name"]])
            top.plot(cv["coverage"], cv["selective_risk"], lw=1.3, **style)
            ok = b["count"] > 0
            bottom.plot(
                b["confidence"][ok],
                b["accuracy"][ok],
                marker="o",
                ms=3,
                lw=1.1,
                label=plain_text(f"{c['name']}\nAURC {aurc_from_curve(cv):.4f}, ECE {ece_from_bins(b):.4f}"),
                **style,
            )
        bottom.plot([0, 1], [0, 1], color="0.6", ls=":", lw=1, label="perfect calibration")
        top.set_title(plain_text(panel), fontsize=9)
        top.set_xlim(0, 1)
        top.set_ylim(0, 1.05 * risk_top if risk_top > 0 else None)
        top.set_xlabel("coverage (most confident first)", fontsize=8)
        bottom.set_xlim(0, 1)
        bottom.set_ylim(0, 1)
        bottom.set_xlabel("confidence (max probability, bin mean)", fontsize=8)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
        bottom.legend(loc="upper left", bbox_to_anchor=(0.0, -0.2), fontsize=6.5, frameon=False)
    axes[0, 0].set_ylabel("selective risk (error rate among the answered)", fontsize=8)
    axes[1, 0].set_ylabel("accuracy in the bin", fontsize=8)
    fig.suptitle(plain_text(title), fontsize=10)
    return fig


def write_curve_figures(
    head: dict, view: pd.DataFrame, config, out_dir: Path, logits_dir, figures: dict, methods_dir=None
) -> None:
    """Add the risk-coverage / reliability figure of each plotted split to ``figures`` (when its logits exist).

    ``methods_dir``: the method outputs (default: ``methods`` beside ``logits_dir``, as results/ holds them)."""
    if logits_dir is None or not Path(logits_dir).is_dir() or view.empty:
        return
    methods = method_folders(Path(logits_dir).parent / "methods" if methods_dir is None else methods_dir)
    metric = config.headline_metric
    with matplotlib.rc_context(RC_PARAMS):
        for suite in head["suites"]:
            for split in suite["splits"]:
                if not match_any(split["name"], config.plot_splits):
                    continue
                rows = view[(view["suite"] == suite["name"]) & (view["split"] == split["name"])]
                curves = split_curves(
                    split, rows, metric, Path(logits_dir), split["name"], config.reference_family, methods=methods
                )
                if not curves:
                    continue
                fig = curves_figure(
                    curves,
                    f"{suite['name']} / {split['name']}: risk-coverage and reliability "
                    f"(headline rows of {split['entries'][split['order'][metric][0][0]]['base']})",
                )
                paths = save_figure(
                    fig,
                    out_dir / "plots" / f"curves_{file_slug(suite['name'])}_{file_slug(split['name'])}",
                    config.formats,
                    config.dpi,
                )
                figures.setdefault(f"{suite['name']}/{split['name']}", []).append(
                    {
                        "caption": "Risk-coverage curves (mean = AURC) and reliability diagrams (weighted gaps = ECE) "
                        "of the headline methods, one column per method family",
                        "files": {p.suffix[1:]: p.relative_to(out_dir).as_posix() for p in paths},
                    }
                )
