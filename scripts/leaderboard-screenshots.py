"""Screenshots of the leaderboard's first screen for the docs: the published site's embedded page, built from the
committed bundles, at 1366x768 (a laptop) and 390x844 (a phone).

Usage (after set-up 2 of the README: Playwright and Debian's Chromium):

    .venv/bin/python scripts/leaderboard-screenshots.py            # writes docs/images/leaderboard-*.png

Each PNG is reduced to a 256-colour palette so that it stays well under 200 kB; the script fails if one does not.
The pictures are not byte-reproducible (fonts and anti-aliasing are the machine's): regenerate them when the page
changes, not in the tests (tests/report/test_browser_layout.py checks the page itself).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SIZES = {"1366x768": (1366, 768), "390x844": (390, 844)}
LIMIT = 200_000  # bytes per picture


def shoot(page: Path, out: Path, colours: int = 256) -> list[Path]:
    """``out/leaderboard-<size>.png`` of ``page``'s first screen at each of :data:`SIZES`."""
    import io

    from PIL import Image
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        for name, (w, h) in SIZES.items():
            tab = browser.new_page(viewport={"width": w, "height": h})
            tab.goto(page.as_uri())
            tab.wait_for_selector(".chart[data-ready]", state="attached", timeout=60_000)
            tab.mouse.move(0, 0)
            png = tab.screenshot()
            tab.close()
            image = (
                Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colours, method=Image.Quantize.FASTOCTREE)
            )
            path = out / f"leaderboard-{name}.png"
            image.save(path, optimize=True)
            if path.stat().st_size >= LIMIT:
                raise SystemExit(f"{path}: {path.stat().st_size} bytes, over {LIMIT}: use fewer colours")
            written.append(path)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Screenshots of the published embedded leaderboard page's first screen "
        "at 1366x768 and 390x844, for the docs."
    )
    parser.add_argument(
        "--out", default=str(ROOT / "docs" / "images"), help="folder of the PNGs (default: docs/images)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmark.bundle.site import publish

    with tempfile.TemporaryDirectory() as tmp:
        site, problems = publish(ROOT / "leaderboard", Path(tmp) / "site", progress=False, repo=ROOT)
        if problems:
            raise SystemExit("publish: " + "; ".join(problems))
        for path in shoot(site.parent / "embedded" / "index.html", Path(args.out)):
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
