#!/usr/bin/env bash
# Refresh the charting library the pages ship: plotly.js's basic bundle (scatter, bar, pie; MIT) from npm's
# plotly.js-basic-dist-min, gzipped into benchmark/report/static/vendor/. Usage: bash scripts/vendor-plotly.sh VERSION
# Then set PLOTLY_VERSION and PLOTLY_SHA256 in benchmark/report/assets.py to the lines printed (a test checks them).
# Why the basic bundle and not the plotly wheel's plotly.min.js: 1.2 MB instead of 4.8 MB, and about 0.2 s instead
# of 1.2 s to start in Chromium on the 2-core machine, which decides whether a page's chart is up within 1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: bash scripts/vendor-plotly.sh VERSION (e.g. 4.1.1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "plotly.js-basic-dist-min@$version" >/dev/null && tar xzf ./*.tgz)
dst=benchmark/report/static/vendor
gzip -9n -c "$tmp/package/plotly-basic.min.js" > "$dst/plotly-basic.min.js.gz"  # the repository holds no file over 1 MB
cp "$tmp/package/LICENSE" "$dst/plotly-LICENSE"
echo "PLOTLY_VERSION = \"$version\""
echo "PLOTLY_SHA256 = \"$(sha256sum "$tmp/package/plotly-basic.min.js" | cut -d' ' -f1)\""
