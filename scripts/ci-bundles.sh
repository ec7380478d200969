#!/usr/bin/env bash
# What the GitHub workflows run on result bundles (.github/workflows/pr.yml and deploy.yml); tests/bundle runs it too.
#   bash scripts/ci-bundles.sh verify BASE_REF   verify every bundle under leaderboard/ with a file added or changed since BASE_REF
#   bash scripts/ci-bundles.sh publish SITE_DIR  build the static site from every bundle under leaderboard/
# $PYTHON: the interpreter with the benchmark installed (default: python). $BUNDLES: the bundles folder (default leaderboard).
set -euo pipefail
PYTHON=${PYTHON:-python}
BUNDLES=${BUNDLES:-leaderboard}
case "${1:-}" in
  verify)
    base=${2:?usage: ci-bundles.sh verify BASE_REF}
    # bundle folders (those holding a manifest.json) with a changed file; deleted bundles are skipped
    mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- "$BUNDLES" | while read -r f; do
      d=$(dirname "$f")
      while [ "$d" != . ] && [ ! -f "$d/manifest.json" ]; do d=$(dirname "$d"); done
      [ "$d" != . ] && echo "$d"
    done | sort -u)
    echo "bundles to verify: ${#changed[@]}"
    status=0
    for b in "${changed[@]}"; do
      # --strict: a bundle that claims 'verified' must be recomputable here (its logits through its DVC remote)
      remote=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"] or "")' "$b/manifest.json" 2>/dev/null || true)
      if [ -n "$remote" ] && [ -z "${CI_NO_REMOTE:-}" ]; then
        "$PYTHON" -m benchmark verify "$b" --strict --quiet --remote "$remote" || status=$?
      else
        "$PYTHON" -m benchmark verify "$b" --strict --quiet || status=$?
      fi
    done
    exit "$status"
    ;;
  publish)
    site=${2:?usage: ci-bundles.sh publish SITE_DIR}
    "$PYTHON" -m benchmark publish --bundles "$BUNDLES" --out "$site" --quiet
    ;;
  *)
    echo "usage: bash scripts/ci-bundles.sh verify BASE_REF | publish SITE_DIR" >&2
    exit 2
    ;;
esac
