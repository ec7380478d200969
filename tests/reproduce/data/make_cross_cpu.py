"""Extract tests/reproduce/data/cross_cpu.csv.gz: the same rows of two runs of the embedded default on two CPU kinds.

``committed``: the bundle leaderboard/embedded/2026-12-01-layout (an Intel Xeon with AVX-512, unpinned numerics);
``other``: the from-scratch run of commit 01a9cfa on an AMD EPYC with AVX2 only (unpinned;
../shared/reference-runs/amd-epyc-avx2/metrics.csv.gz). Kept: the test and ood splits (the splits with bootstrap
intervals), the single, duo and deep-ensemble families, the columns the gate's noise path reads, both runs' values
and intervals side by side, and the bundle's zoo entries (seed groups) in zoo.json. Rerun from the repository root:

    python tests/reproduce/data/make_cross_cpu.py BUNDLE AMD_METRICS_CSV_GZ
"""

import gzip
import json
import sys
from pathlib import Path

from benchmark.bundle.schema import KEY, load_bundle
from benchmark.report.inputs import read_results

OUT = Path(__file__).resolve().parent
SPLITS, FAMILIES = ("test", "ood"), ("single", "duo", "deep_ensemble")
COLS = ["value", "ci_low", "ci_high", "inputs_hash"]


def main(bundle_dir: str, other_csv: str) -> None:
    bundle = load_bundle(bundle_dir, check_arch=False)
    other, _ = read_results(other_csv)
    keep = lambda df: df[df["split"].isin(SPLITS) & df["family"].isin(FAMILIES)]  # noqa: E731
    a, b = keep(bundle.rows)[KEY + COLS], keep(other)[KEY + COLS]
    m = a.merge(b, on=KEY, how="outer", suffixes=("_committed", "_other")).drop(columns="suite")
    m = m.sort_values(KEY[1:], kind="stable")
    with gzip.GzipFile(OUT / "cross_cpu.csv.gz", "wb", mtime=0) as f:
        f.write(m.to_csv(index=False, float_format="%.17g").encode())
    (OUT / "cross_cpu_zoo.json").write_text(json.dumps(bundle.manifest["zoo"], indent=1, sort_keys=True) + "\n")
    print(f"{len(m)} rows -> {OUT / 'cross_cpu.csv.gz'}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
