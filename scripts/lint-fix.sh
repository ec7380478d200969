#!/usr/bin/env bash
# The mechanical lint pass over the whole tree: what ruff fixes by itself (import order, pyupgrade, unused imports),
# then ruff's formatting, then what is left for a person (`ruff check` lists it; the exit code says whether any).
# Run it after a merge, or when `ruff check` / `ruff format --check` in .ci/run fail on something mechanical.
# Usage: bash scripts/lint-fix.sh   (the ruff of the test extra: bash scripts/setup.sh test)
set -euo pipefail
cd "$(dirname "$0")/.."
ruff=.venv/bin/ruff
[ -x "$ruff" ] || ruff=ruff
"$ruff" check --fix --exit-zero --quiet .
"$ruff" format .
"$ruff" check .
