#!/usr/bin/env bash
# What the GitHub workflows run on result bundles (.github/workflows/pr.yml and deploy.yml); tests/bundle runs it too.
#   bash scripts/ci-bundles.sh verify BASE_REF         verify every bundle under leaderboard/ with a file added, changed or
#                                                       deleted since BASE_REF (exit 2 on a path outside [A-Za-z0-9._/-])
#   bash scripts/ci-bundles.sh verify-all RECORDS_DIR  verify every bundle and record the verified ones in RECORDS_DIR
#                                                       (outside the checkout); the embedded default against ./results
#                                                       when a `dvc repro` made it, the others through their DVC remote
#   bash scripts/ci-bundles.sh publish SITE_DIR [RECORDS_DIR]  build the static site; badges from RECORDS_DIR only
# $PYTHON: the interpreter with the benchmark installed (default: python). $BUNDLES: the bundles folder (default leaderboard).
# $CI_NO_REMOTE: set to never pull logits through a DVC remote (tests).
set -euo pipefail
export LC_ALL=C  # the character classes below are ASCII, whatever the runner's locale
PYTHON=${PYTHON:-python}
BUNDLES=${BUNDLES:-leaderboard}
SAFE='^[A-Za-z0-9._/-]+$'

refuse() {  # one line naming the path (shell-quoted: newlines and the like stay visible), exit 2
  printf 'ci-bundles: refusing %q: %s\n' "$1" "$2" >&2
  exit 2
}

pull_flag() {  # pull through the remote the manifest names, unless told not to
  if [ -z "${CI_NO_REMOTE:-}" ]; then echo --pull; fi
}

case "${1:-}" in
  verify)
    base=${2:?usage: ci-bundles.sh verify BASE_REF}
    # NUL-separated names (-z: no quoting, no mangling); every status (deleted files too: their bundle is checked again)
    declare -A seen=()
    changed=()
    while IFS= read -r -d '' f; do
      [[ $f =~ $SAFE ]] || refuse "$f" "a path under $BUNDLES/ may only use the characters A-Z a-z 0-9 . _ - /"
      rel=${f#"$BUNDLES"/}
      IFS=/ read -r -a parts <<< "$rel"
      for p in "${parts[@]}"; do [[ $p != . && $p != .. && -n $p ]] || refuse "$f" "empty, . or .. path component"; done
      case ${#parts[@]} in
        1) [ "$rel" = README.md ] || refuse "$f" "only README.md may be directly in $BUNDLES/; bundles are $BUNDLES/<suite>/<id>/" ;;
        2) refuse "$f" "a file directly in $BUNDLES/<suite>/ is no bundle; bundles are folders $BUNDLES/<suite>/<id>/" ;;
        *) d="$BUNDLES/${parts[0]}/${parts[1]}"
           if [ -z "${seen[$d]:-}" ]; then seen[$d]=1; changed+=("$d"); fi ;;
      esac
    done < <(git diff -z --name-only --no-renames "$base" -- "$BUNDLES")
    echo "bundles to verify: ${#changed[@]}"
    status=0
    for b in "${changed[@]}"; do
      if [ ! -e "$b" ] && [ ! -L "$b" ]; then echo "$b: removed"; continue; fi
      rc=0
      "$PYTHON" -m benchmark verify "$b" --quiet $(pull_flag) || rc=$?
      [ "$rc" -gt "$status" ] && status=$rc
    done
    exit "$status"
    ;;
  verify-all)
    records=${2:?usage: ci-bundles.sh verify-all RECORDS_DIR}
    mkdir -p "$records"
    n=0 verified=0
    for b in "$BUNDLES"/*/*/; do
      [ -d "$b" ] || continue
      b=${b%/}
      n=$((n + 1))
      if [ "$(basename "$(dirname "$b")")" = embedded ]; then
        # the embedded default is verified by reproduction: a from-scratch `dvc repro` in this checkout made ./results
        if [ -f results/metrics.csv ]; then args=(--logits results); else args=(); fi
      else
        args=($(pull_flag))
      fi
      rc=0
      "$PYTHON" -m benchmark verify "$b" --quiet --record-to "$records" "${args[@]}" || rc=$?
      if [ "$rc" -ne 0 ]; then printf '::warning::%q: not verified (verify exit %s); published as self-reported, or left out when malformed\n' "$b" "$rc"; fi
    done
    verified=$(find "$records" -name '*.json' -type f | wc -l)
    echo "bundles: $n, verified: $verified (records in $records)"
    ;;
  publish)
    site=${2:?usage: ci-bundles.sh publish SITE_DIR [RECORDS_DIR]}
    args=()
    if [ -n "${3:-}" ]; then args=(--verified "$3"); fi
    "$PYTHON" -m benchmark publish --bundles "$BUNDLES" --out "$site" --quiet "${args[@]}"
    ;;
  *)
    echo "usage: bash scripts/ci-bundles.sh verify BASE_REF | verify-all RECORDS_DIR | publish SITE_DIR [RECORDS_DIR]" >&2
    exit 2
    ;;
esac
