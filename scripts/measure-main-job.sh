#!/usr/bin/env bash
# Measure the README's main job on this checkout (run it in a fresh clone): the install, then `dvc repro`
# with per-stage timing records. Writes results/timings.json (rendered into the README by
# `python -m benchmark reproduce readme --write`). Usage: bash scripts/measure-main-job.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s.%N)
bash scripts/setup.sh
install_s=$(echo "$(date +%s.%N) - $start" | bc)
. .venv/bin/activate
python -m benchmark reproduce timings --install-seconds "$install_s" "$@"
