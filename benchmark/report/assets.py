"""Files the pages load besides their own data: the charting library, shipped inside the report or site.

The Pareto charts are drawn in the browser by plotly.js, its basic bundle (scatter,
bar and pie traces; MIT licence), kept gzipped in ``static/vendor/`` (the repository
holds no file over 1 MB) as npm's ``plotly.js-basic-dist-min`` publishes it (``bash
scripts/vendor-js.sh plotly VERSION`` refreshes it; :data:`PLOTLY_SHA256` pins the bytes
the pages get, decompressed). Shipped with the pages, it works
offline and from ``file://``, and nothing is fetched from a network. A report folder
holds its own copy (``assets/``); a site holds one copy for all its pages.

The basic bundle rather than the plotly wheel's full ``plotly.min.js``: 1.2 MB
instead of 4.8 MB, and it starts in about 0.2 s instead of 1.2 s in Chromium on the
2-core machine (measured: executing the script, after parsing), which decides whether
a page's chart is up within a second.

``static/vendor/`` also holds axe-core (MPL-2.0; npm's ``axe-core``, gzipped, pinned by
:data:`AXE_SHA256`; ``bash scripts/vendor-js.sh axe VERSION`` refreshes it): the accessibility checker the browser
tests run inside the pages. The pages never load it: :func:`write_assets` leaves it out.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

from benchmark.storage.store import StoreError, atomic_path

PLOTLY = "plotly-basic.min.js"
PLOTLY_VERSION = "4.1.1"
PLOTLY_SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"
VENDOR = Path(__file__).parent / "static" / "vendor"
SHIPPED = PLOTLY + ".gz"  # what static/vendor/ holds
FILES = (PLOTLY, "plotly-LICENSE")
AXE = "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"


def _vendored(name: str, sha256: str, pin: str, script: str) -> bytes:
    """The decompressed bytes of ``static/vendor/<name>.gz``, checked against ``sha256`` (the constant ``pin``)."""
    path = VENDOR / f"{name}.gz"
    data = gzip.decompress(path.read_bytes())
    if hashlib.sha256(data).hexdigest() != sha256:
        raise StoreError(
            f"{path}: content differs from {pin} in {__file__}; refresh it with `bash scripts/{script} VERSION`"
        )
    return data


def plotly_js() -> bytes:
    """The bytes of the shipped plotly.js (decompressed), checked against :data:`PLOTLY_SHA256`."""
    return _vendored(PLOTLY, PLOTLY_SHA256, "PLOTLY_SHA256", "vendor-js.sh plotly")


def axe_js() -> str:
    """The source of the vendored axe-core (for the browser tests), checked against :data:`AXE_SHA256`."""
    return _vendored(AXE, AXE_SHA256, "AXE_SHA256", "vendor-js.sh axe").decode("utf-8")


def write_assets(folder) -> list[Path]:
    """Write the pages' shared files (plotly.js and its licence) into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in FILES:
        path = folder / name
        with atomic_path(path) as tmp:
            tmp.write_bytes(plotly_js() if name == PLOTLY else (VENDOR / name).read_bytes())
        paths.append(path)
    return paths
