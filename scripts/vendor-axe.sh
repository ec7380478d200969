#!/usr/bin/env bash
# Refresh the accessibility checker the browser tests run in the pages: axe-core (MPL-2.0) from npm's axe-core,
# gzipped into benchmark/report/static/vendor/ beside plotly.js. The pages never load it (write_assets leaves it out);
# tests/report/test_browser_layout.py injects it. Usage: bash scripts/vendor-axe.sh VERSION
# Then set AXE_VERSION and AXE_SHA256 in benchmark/report/assets.py to the lines printed (a test checks them).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: bash scripts/vendor-axe.sh VERSION (e.g. 4.14.1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "axe-core@$version" >/dev/null && tar xzf ./*.tgz)
dst=benchmark/report/static/vendor
gzip -9n -c "$tmp/package/axe.min.js" > "$dst/axe.min.js.gz"
cp "$tmp/package/LICENSE" "$dst/axe-LICENSE"
cp "$tmp/package/LICENSE-3RD-PARTY.txt" "$dst/axe-LICENSE-3RD-PARTY.txt"
echo "AXE_VERSION = \"$version\""
echo "AXE_SHA256 = \"$(sha256sum "$tmp/package/axe.min.js" | cut -d' ' -f1)\""
