"""Copy into tests/reproduce/data/intel-run/ what tests/reproduce/test_intel_replay.py replays: a from-scratch run of
commit 0ba6191 on an Intel Xeon (family 6, model 167) and the bundle that commit had committed (made on an AMD EPYC).

    intel-metrics.csv.gz     <- ../shared/reference-runs/intel-xeon-avx512/metrics.csv.gz (the run's
                                results/metrics.csv)
    intel-summary.json       <- ../shared/reference-runs/intel-xeon-avx512/summary.json
    committed-rows.csv.gz    <- git show 0ba6191:leaderboard/embedded/2026-12-02-pinned/rows.csv.gz
    committed-summary.json   <- git show 0ba6191:results/summary.json
    committed-manifest.json  <- that bundle's manifest: zoo (seed groups), params.evaluate, git, created

Rerun from the repository root: python tests/reproduce/data/intel-run/make_intel_run.py
"""

import json
import shutil
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parent
RUN = Path("../shared/reference-runs/intel-xeon-avx512")
COMMIT, BUNDLE = "0ba6191", "leaderboard/embedded/2026-12-02-pinned"


def show(path: str) -> bytes:
    return subprocess.run(["git", "show", f"{COMMIT}:{path}"], check=True, capture_output=True).stdout


if __name__ == "__main__":
    shutil.copyfile(RUN / "metrics.csv.gz", OUT / "intel-metrics.csv.gz")
    shutil.copyfile(RUN / "summary.json", OUT / "intel-summary.json")
    (OUT / "committed-rows.csv.gz").write_bytes(show(f"{BUNDLE}/rows.csv.gz"))
    (OUT / "committed-summary.json").write_bytes(show("results/summary.json"))
    m = json.loads(show(f"{BUNDLE}/manifest.json"))
    keep = {"zoo": m["zoo"], "params": {"evaluate": m["params"]["evaluate"]}, "git": m["git"], "created": m["created"]}
    (OUT / "committed-manifest.json").write_text(json.dumps(keep, indent=1, sort_keys=True))
    print(f"wrote {OUT}")
