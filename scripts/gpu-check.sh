#!/usr/bin/env bash
# The GPU path, checked and measured in one prepared run (at most 8 minutes): see benchmark/gpu/check.py
# and README "GPU check". Without CUDA it runs the CPU-capable parts with small sizes and says which
# GPU checks it skipped. Exit status: 0 = no failed check, 1 = a check failed, 2 = bad arguments.
#   scripts/gpu-check.sh [--only a,b,c,d,e] [--out table.md|table.json] [--budget 470] [--help]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
exec "$PY" -m benchmark.gpu.check "$@"
