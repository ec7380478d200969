#!/usr/bin/env bash
# Measure the README's test command on this checkout (run it in a fresh clone, on a quiet machine): the install
# (`bash scripts/setup.sh test`), then the whole suite, timed. Writes results/test_command.json (rendered into the
# README by `python -m benchmark reproduce readme --write`); a run with a failing test writes nothing. With --beside
# DIR (a fresh clone of another commit, set up with `bash scripts/setup.sh test`), the same command then runs there
# and is recorded as the baseline: only walls of the same hour compare; every run from an empty .pytest_cache. --rounds
# N (after --beside DIR): each side N times, in the order here, DIR, DIR, here, ..., each side's mean recorded.
# Usage: bash scripts/measure-tests.sh [--beside DIR [--rounds N]] [pytest arguments]
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
beside=()  # DIR as the caller means it: resolved before the cd below
if [ "${1:-}" = "--beside" ]; then beside=(--beside "$(cd "$2" && pwd)"); shift 2; fi
if [ "${1:-}" = "--rounds" ]; then beside+=(--rounds "$2"); shift 2; fi
cd "$(dirname "$0")/.."
start=$(date +%s.%N)
bash scripts/setup.sh test
setup_s=$(echo "$(date +%s.%N) - $start" | bc)
exec .venv/bin/python -m benchmark reproduce test-time --setup-seconds "$setup_s" "${beside[@]}" -- "$@"
