"""The tidy results table: one row per (suite, split, method, metric).

Every producer (single models, duos, ensembles, SVE, other baselines) writes rows
with these columns and every consumer (summary, plots, leaderboard) reads only
them, so a new method family shows up everywhere without code changes.
"""

from __future__ import annotations

import pandas as pd

# column -> (dtype, meaning)
COLUMNS: dict[str, tuple[str, str]] = {
    "suite": ("string", "suite name, e.g. 'embedded'"),
    "split": ("string", "evaluation split, e.g. 'test', 'shift', 'corrupt-noise-3'"),
    "family": ("string", "method family: 'single', 'duo', 'deep_ensemble', 'sve', ..."),
    "method": ("string", "method within the family, e.g. 'weighted', 'unweighted', 'uq_only', 'ts'"),
    "base": ("string", "base (large) model name; the only model for a single"),
    "sidekick": ("string", "sidekick model name for duos, '' otherwise"),
    "members": ("string", "'+'-joined names of every model whose logits were used"),
    "fit": ("string", "temperature fit mode: 'converged' or 'paper-exact'"),
    "confidence": ("string", "confidence score: 'max' (1 - max p) or 'published'"),
    "metric": ("string", "metric name, see benchmark.core.metric_info.METRICS"),
    "value": ("float64", "metric value (fraction)"),
    "ci_low": ("float64", "lower bound of the percentile-bootstrap interval (NaN if none)"),
    "ci_high": ("float64", "upper bound of the percentile-bootstrap interval (NaN if none)"),
    "n": ("int64", "number of evaluated samples"),
    "gflops": ("float64", "inference GFLOPs per image, all members together (fvcore multiply-adds)"),
    "params": ("int64", "parameters, all members together"),
    "throughput": ("float64", "measured images/s on the reference CPU (NaN if not measured)"),
    "balance": ("float64", "FLOPs balance GFLOPs(sidekick)/GFLOPs(base) for duos, NaN otherwise"),
    "temperature_base": ("float64", "fitted temperature of the base (published convention: logits divided by T)"),
    "temperature_side": ("float64", "fitted temperature of the sidekick (NaN for singles)"),
    "weight_base": ("float64", "logit weight of the base: 1/T for singles, 1/(2T) in a duo"),
    "weight_side": ("float64", "logit weight of the sidekick, 1/(2T) (0 for singles)"),
    "inputs_hash": ("string", "hash of the logits files (dvc.lock md5s) the row was computed from"),
    "overhead_percent": (
        "float64",
        "trainable parameters of all M members and their heads, in % of the pretrained backbone (NaN if not reported)",
    ),
    "extra_params_percent": (
        "float64",
        "parameters added over one model, in % of the pretrained backbone: the SVE "
        "paper's overhead, (M - 1) members' adapted parameters, no heads (NaN if not reported)",
    ),
    "train_images": (
        "float64",
        "training budget: training images processed to make the row's models, summed over every "
        "training run behind it (epochs x images per epoch x members, each member a full forward; "
        "0 for pretrained weights used as they are; a method built on fine-tunes includes theirs; "
        "NaN if not recorded)",
    ),
    "train_params": (
        "float64",
        "training budget: parameters trained, summed over the training runs behind the row (all "
        "of a full fine-tune, the trainable ones of a method that trains a subset, e.g. SVE's "
        "singular values, biases and heads of all M members; NaN if not recorded)",
    ),
}
# Columns a producer may leave out (and bundles made before they existed lack): validate_results adds them, empty
# (NaN or '').
OPTIONAL_COLUMNS = ("overhead_percent", "extra_params_percent", "train_images", "train_params")
# results/paired.csv (the evaluate stage writes it, bundles carry it, the report reads it): one row per (suite, split,
# base, sidekick, fit, method, metric), the method's difference to the base with its interval; the identity columns
# (strings) first, then numbers. A reader requires the first ten (p_value: optional when read).
PAIRED_COLUMNS = (
    "suite",
    "split",
    "base",
    "sidekick",
    "fit",
    "method",
    "metric",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
)
PAIRED_KEYS = PAIRED_COLUMNS[:7]
PAIRED_REQUIRED = PAIRED_COLUMNS[:10]


def empty_results() -> pd.DataFrame:
    """A results table without rows, every column typed."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, (t, _) in COLUMNS.items()})


def validate_results(df: pd.DataFrame, *, source: str = "results table") -> pd.DataFrame:
    """Check the columns of a results table and return it with canonical dtypes.

    Missing :data:`OPTIONAL_COLUMNS` are added empty; any other missing column
    raises ``ValueError`` naming the columns and ``source``.
    """
    missing = [c for c in COLUMNS if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}")
    out = df.copy()
    for c in OPTIONAL_COLUMNS:
        if c not in out.columns:
            out[c] = "" if COLUMNS[c][0] == "string" else float("nan")
    for c, (t, _) in COLUMNS.items():
        if t == "string":
            out[c] = out[c].fillna("").astype(str)
        else:
            out[c] = pd.to_numeric(out[c], errors="coerce")
            if t == "int64":
                out[c] = out[c].fillna(-1).astype("int64")
    return out
