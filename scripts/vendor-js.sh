#!/usr/bin/env bash
# Refresh a JavaScript library vendored gzipped into benchmark/report/static/vendor/ (the repository holds no file over
# 1 MB) from npm, with its licence. Usage: bash scripts/vendor-js.sh plotly|axe VERSION
#   plotly: plotly.js's basic bundle (scatter, bar, pie; MIT) from plotly.js-basic-dist-min, which the pages ship for
#           their Pareto charts. Why the basic bundle and not the plotly wheel's plotly.min.js: 1.2 MB instead of
#           4.8 MB, and about 0.2 s instead of 1.2 s to start in Chromium on the 2-core machine, which decides whether
#           a page's chart is up within 1 s.
#   axe:    axe-core (MPL-2.0), the accessibility checker the browser tests run inside the pages
#           (tests/report/test_browser_layout.py); the pages never load it.
# Then set <NAME>_VERSION and <NAME>_SHA256 in benchmark/report/assets.py to the lines printed (a test checks them).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: bash scripts/vendor-js.sh plotly|axe VERSION}
version=${2:?usage: bash scripts/vendor-js.sh plotly|axe VERSION (e.g. plotly 4.1.1, axe 4.14.1)}
case "$name" in
  plotly) package=plotly.js-basic-dist-min; file=plotly-basic.min.js; licences="LICENSE:plotly-LICENSE" ;;
  axe) package=axe-core; file=axe.min.js; licences="LICENSE:axe-LICENSE LICENSE-3RD-PARTY.txt:axe-LICENSE-3RD-PARTY.txt" ;;
  *) echo "unknown library '$name': plotly or axe" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$package@$version" >/dev/null && tar xzf ./*.tgz)
dst=benchmark/report/static/vendor
gzip -9n -c "$tmp/package/$file" > "$dst/$file.gz"
for pair in $licences; do cp "$tmp/package/${pair%%:*}" "$dst/${pair##*:}"; done
upper=$(echo "$name" | tr a-z A-Z)
echo "${upper}_VERSION = \"$version\""
echo "${upper}_SHA256 = \"$(sha256sum "$tmp/package/$file" | cut -d' ' -f1)\""
