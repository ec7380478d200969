"""Headless Chromium for the page tests: one browser per test module and one tab that its tests reopen.

Needs Debian's ``chromium`` (:data:`CHROMIUM`) and the PyPI package ``playwright`` (its wheel carries the driver; no
``playwright install``). A module that uses these fixtures marks itself ``browser`` and skips without them.

A new tab starts a renderer process and compiles the page's scripts again: about 0.5 CPU s a load of a leaderboard
page on the 2-core machine, against 0.2 for a load in a tab that already exists (10 loads of the embedded site's page,
measured with ``getrusage`` of the browser's processes). :func:`reopen` therefore loads a test's page in the module's
one tab as a new document: ``about:blank`` first (so that even a link followed to ``#anchor`` by the previous test is
left), the pointer moved off the page, the viewport and the recorded problems reset. The benchmarks that time a first
render keep opening a new tab for each sample, as a visitor's first visit does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1500, "height": 1000}


def _sync_api():
    return pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the test module."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium")
    with _sync_api().sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def tab(browser):
    """The module's one tab. ``tab.problems`` collects what a page must never do: a console error, an uncaught
    exception, a failed request, a dialog (dismissed); :func:`reopen` empties it."""
    pg = browser.new_page(viewport=VIEWPORT)
    pg.problems = []
    pg.on("console", lambda m: m.type == "error" and pg.problems.append(f"console: {m.text}"))
    pg.on("pageerror", lambda e: pg.problems.append(f"pageerror: {e}"))
    pg.on("requestfailed", lambda r: pg.problems.append(f"request failed: {r.url}"))
    pg.on("dialog", lambda d: (pg.problems.append(f"dialog: {d.message}"), d.dismiss()))
    yield pg
    pg.close()


def reopen(tab, url: str, viewport: dict | None = None):
    """``url`` loaded in ``tab`` as a new document (nothing of the previous test's page left), in a window of
    ``viewport`` (default :data:`VIEWPORT`); returns ``tab``."""
    tab.goto("about:blank")
    tab.mouse.move(0, 0)  # a pointer left over a chart would hover the next page's points
    tab.set_viewport_size(viewport or VIEWPORT)
    tab.problems.clear()
    tab.goto(url)
    tab.wait_for_load_state("load")
    return tab
