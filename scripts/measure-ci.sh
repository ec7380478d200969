#!/usr/bin/env bash
# Time .ci/run step by step in a fresh clone of this checkout's HEAD and write results/ci_run.json here (the docs'
# CI figure is generated from it: python -m benchmark reproduce readme --write). Usage: bash scripts/measure-ci.sh
# Needs what .ci/run needs (root for apt-get, ~10 GB of disk); takes as long as CI (about 40 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/measure-ci.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/clone"
commit=$(git -C "$work/clone" rev-parse HEAD)
rc=0
# PS4 through BASH_ENV: bash does not take PS4 from the environment when it runs as root (CI's containers do)
printf '%s\n' "PS4='+ \$(date +%s.%N) '" > "$work/ps4"
(cd "$work/clone" && BASH_ENV="$work/ps4" bash -x .ci/run 2> >(tee "$work/trace" >&2)) || rc=$?
end=$(date +%s.%N)
failed=()
[ "$rc" = 0 ] || failed=(--failed)
"$work/clone/.venv/bin/python" -m benchmark.reproduce.ci_timing "$work/trace" --end "$end" --commit "$commit" \
  --out "$root/results/ci_run.json" "${failed[@]}"
exit "$rc"
