#!/usr/bin/env bash
# Measure the README's main job on this checkout (run it in a fresh clone, on a quiet machine): the install, then the
# README's command (`python -m benchmark run`, two stages at a time) with per-stage timing records, then `dvc repro`
# (one stage at a time) in a clean copy for comparison, whose stage outputs must be the same. Writes
# results/timings.json (rendered into the README by `python -m benchmark reproduce readme --write`).
# Usage: bash scripts/measure-main-job.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s.%N)
bash scripts/setup.sh
install_s=$(echo "$(date +%s.%N) - $start" | bc)
. .venv/bin/activate
python -m benchmark reproduce timings --jobs 2 --compare-jobs 1 --install-seconds "$install_s" "$@"
