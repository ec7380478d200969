"""Risk-coverage curves and reliability diagrams of the headline methods of a split.

For the best-ranked base of each plotted split (``config.plot_splits``, labelled
splits only), its headline rows that are a single model or a duo are rebuilt
from the models' logits (``<logits>/<model>/<split>.safetensors``) with the
temperatures and weights the results table records for that row, through
:mod:`benchmark.core.combine` (the evaluate stage's own functions), and drawn
with :mod:`benchmark.core.curves`: selective risk against coverage (the curve
whose mean is AURC) and accuracy against confidence per bin (the gaps whose
weighted sum is ECE). Ensembles and method outputs are left out (their logits
are not a pair of model files).
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from benchmark import store
from benchmark.core.combine import duo_prediction, single_prediction
from benchmark.core.curves import aurc_from_curve, ece_from_bins, reliability, risk_coverage
from benchmark.core.temperature import DuoFit
from benchmark.report.plots import _RC, _text, palette, save_figure
from benchmark.report.provenance import file_slug
from benchmark.report.tables import match_any, member_names, method_label


def _find_row(rows: pd.DataFrame, label: str, models: str):
    for r in rows.to_dict("records"):
        if method_label(r["family"], r["method"]) == label and " + ".join(member_names(r["members"], r["base"], r["sidekick"])) == models:
            return r
    return None


def predict_row(r: dict, logits_dir: Path, split: str, reference_family: str):
    """``(prediction, labels)`` of a single or duo row from its models' logits; None when not rebuildable."""
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
        if fb is None or fs is None or not all(_finite(v) for v in (*temps, r.get("weight_base"), r.get("weight_side"))):
            return None
        store.check_aligned(fb, fs)
        conf = r["confidence"] if r["confidence"] in ("max", "published") else "max"
        if r["method"] == "unweighted":
            pred = duo_prediction(fb.logits, fs.logits, variant="unweighted", single_temperatures=(temps[0], temps[1]),
                                  confidence=conf)
        elif r["method"] in ("weighted", "uq_only"):
            fit = DuoFit(t_base=float(temps[0]), t_side=float(temps[1]), w_base=float(r["weight_base"]),
                         w_side=float(r["weight_side"]), nll=math.nan, mode="")
            pred = duo_prediction(fb.logits, fs.logits, variant=r["method"], fit=fit, confidence=conf)
        else:
            return None
        return pred, fb.labels
    return None


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def split_curves(split: dict, rows: pd.DataFrame, metric: str, logits_dir: Path, split_name: str,
                 reference_family: str, ece_bins: int = 15) -> list[dict]:
    """The curves of the best-ranked base's single/duo headline rows: name, risk-coverage, reliability bins."""
    order = split["order"].get(metric, [])
    if not order:
        return []
    top = split["entries"][order[0][0]]["base"]
    out = []
    for i, role in order:
        e = split["entries"][i]
        if e["base"] != top or e["kind"] not in ("alone", "duo"):
            continue
        r = _find_row(rows, e["label"], e["models"])
        got = predict_row(r, logits_dir, split_name, reference_family) if r is not None else None
        if got is None:
            continue
        pred, labels = got
        labels = labels.long()
        if (labels < 0).any():
            return []  # an OOD split: no correct/wrong
        correct = (pred.prediction == labels).numpy()
        top_conf, top_cls = pred.probs.max(1)
        out.append({"name": f"{role}: {e['label']} ({e['models']})",
                    "curve": risk_coverage(pred.confidence.numpy(), correct),
                    "bins": reliability(top_conf.numpy(), (top_cls == labels).numpy(), ece_bins)})
    return out


def curves_figure(curves: list[dict], title: str) -> Figure:
    """Selective risk against coverage (left) and the reliability diagram (right)."""
    colors = palette([c["name"] for c in curves])
    fig = Figure(figsize=(10.5, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    for c in curves:
        cv, b = c["curve"], c["bins"]
        left.plot(cv["coverage"], cv["selective_risk"], color=colors[c["name"]], lw=1.3,
                  label=_text(f"{c['name']}: AURC {aurc_from_curve(cv):.4f}"))
        ok = b["count"] > 0
        right.plot(b["confidence"][ok], b["accuracy"][ok], marker="o", ms=3, color=colors[c["name"]], lw=1.1,
                   label=_text(f"ECE {ece_from_bins(b):.4f}"))
    left.set_xlabel("coverage (share of inputs answered, most confident first)")
    left.set_ylabel("selective risk (error rate among the answered)")
    left.set_xlim(0, 1)
    left.set_ylim(bottom=0)
    left.grid(True, alpha=0.3)
    left.legend(loc="upper left", bbox_to_anchor=(0.0, -0.16), fontsize=7, frameon=False)
    right.plot([0, 1], [0, 1], color="0.5", ls=":", lw=1, label="perfect calibration")
    right.set_xlabel("confidence (max probability, bin mean)")
    right.set_ylabel("accuracy in the bin")
    right.set_xlim(0, 1)
    right.set_ylim(0, 1)
    right.grid(True, alpha=0.3)
    right.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    fig.suptitle(_text(title), fontsize=10)
    return fig


def write_curve_figures(head: dict, view: pd.DataFrame, config, out_dir: Path, logits_dir, figures: dict) -> None:
    """Add the risk-coverage / reliability figure of each plotted split to ``figures`` (when its logits exist)."""
    if logits_dir is None or not Path(logits_dir).is_dir() or view.empty:
        return
    metric = config.headline_metric
    with matplotlib.rc_context(_RC):
        for suite in head["suites"]:
            for split in suite["splits"]:
                if not match_any(split["name"], config.plot_splits):
                    continue
                rows = view[(view["suite"] == suite["name"]) & (view["split"] == split["name"])]
                curves = split_curves(split, rows, metric, Path(logits_dir), split["name"], config.reference_family)
                if not curves:
                    continue
                fig = curves_figure(curves, f"{suite['name']} / {split['name']}: risk-coverage and reliability "
                                            f"(headline rows of {split['entries'][split['order'][metric][0][0]]['base']})")
                paths = save_figure(fig, out_dir / "plots" / f"curves_{file_slug(suite['name'])}_{file_slug(split['name'])}",
                                    config.formats, config.dpi)
                figures.setdefault(f"{suite['name']}/{split['name']}", []).append({
                    "caption": "Risk-coverage curves (mean = AURC) and reliability diagram (weighted gaps = ECE)",
                    "files": {p.suffix[1:]: p.relative_to(out_dir).as_posix() for p in paths}})
