"""The docs site: it builds offline with ``mkdocs build --strict`` (no warning, no broken link or anchor), its reference
pages are generated from the code (every command, option, params key and results column), and the README leads a
new reader to the set-up, the concepts and the tutorials."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import cli_reference  # noqa: E402  (docs/hooks/)
import reference  # noqa: E402

sys.path.pop(0)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as the deploy workflow builds it, into a temporary folder."""
    out = tmp_path_factory.mktemp("docs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert not re.search(r"^(WARNING|ERROR)\b", log, re.M), log[-5000:]
    return out


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_every_page_is_built_and_reachable_from_the_nav(site):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav):
        for item in nav:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"]))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert listed == on_disk, (
        f"pages not in the nav: {sorted(on_disk - listed)}; nav entries without a page: {sorted(listed - on_disk)}"
    )
    for page in listed:
        assert (site / page.replace(".md", ".html")).is_file(), page
    assert not (site / "hooks").exists()  # the generators are not published


def test_the_site_fetches_nothing_from_a_network(site):
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        external = re.findall(r"<(?:script|link|img)[^>]+(?:src|href)=\"(https?:)?//[^\"]+", html)
        stylesheets = [m for m in re.findall(r"<link[^>]+>", html) if "stylesheet" in m and "//" in m]
        assert not external and not stylesheets, (page, external, stylesheets)


def test_cli_reference_has_every_command_and_option(site):
    from benchmark.cli.main import build_parser

    html = (site / "reference" / "cli.html").read_text(encoding="utf-8")

    def walk(parser, words):
        yield words, parser
        for name, sub, _ in cli_reference._subcommands(parser):
            yield from walk(sub, [*words, name])

    seen = 0
    for words, parser in walk(build_parser(), ["python -m benchmark"]):
        if len(words) > 1:
            assert f"<code>{' '.join(words)}</code>" in html, words
        for action in parser._actions:
            for opt in action.option_strings:
                if opt not in ("-h", "--help"):
                    assert re.search(rf"<code>[^<]*(?<![\w-]){re.escape(opt)}(?![\w-])", html), (words, opt)
                    seen += 1
    assert seen > 40
    for script in (ROOT / "pipelines").glob("*.py"):
        assert f"pipelines/{script.name}" in html


def test_params_reference_has_every_key_with_its_default_and_bounds(site):
    from benchmark.stages.params_config import Params

    html = (site / "reference" / "params.html").read_text(encoding="utf-8")
    for f in reference.config_fields(Params):
        assert f"<code>{f.name}</code>" in html, f.name
    evaluate = typing.get_type_hints(Params)["evaluate"]
    rows = {r.split("|")[1].strip(" `"): r for r in reference.config_table(evaluate, {})[2:]}
    for f in reference.config_fields(evaluate):
        assert f.name in rows, f.name
    assert "`1000`" in rows["n_bootstrap"] and "≥ 0" in rows["n_bootstrap"]  # default and bound from the field
    assert "&gt; 0; ≤ 1" in rows["bootstrap_level"]  # ">" escaped: the cell is Markdown
    assert "each ≥ 2; distinct values" in rows["deep_ensembles"]
    assert "one of `auto`, `cpu`, `cuda`" in reference.params_reference()  # choices of params `device`
    text = _text(html)
    for section in ("recipes.<name>", "report", "distributed", "evaluate", "sve", "baselines.laplace.<key>"):
        assert section in text.replace("&lt;", "<").replace("&gt;", ">"), section


@dataclasses.dataclass(frozen=True)
class Inner:
    depth: int = dataclasses.field(default=3, metadata={"minimum": 1, "maximum": 9})


@dataclasses.dataclass(frozen=True)
class Toy:
    """A toy block."""

    name: str  # what it is called
    # the sizes to try
    sizes: tuple[int, ...] = dataclasses.field(default=(1, 2), metadata={"minimum": 1, "unique": True})
    mode: str = dataclasses.field(default="a", metadata={"choices": ("a", "b")})
    inner: Inner = dataclasses.field(default_factory=Inner)
    maybe: float | None = None
    given: str = dataclasses.field(default="", metadata={"derived": True})


def test_config_reference_reads_the_dataclass_metadata():
    rows = reference.config_table(Toy, {Inner: "inner"})
    assert rows[2] == "| `name` | text | **required** |  | what it is called |"
    assert rows[3] == "| `sizes` | list of integer | `[1, 2]` | each ≥ 1; distinct values | the sizes to try |"
    assert rows[4] == "| `mode` | text | `a` | one of `a`, `b` |  |"
    assert rows[5] == "| `inner` | [Inner](#inner) | (the defaults below) |  |  |"
    assert rows[6] == "| `maybe` | number or null | `null` |  |  |"
    assert len(rows) == 7  # a derived field is not a key of the block


def test_results_reference_has_every_column_and_metric(site):
    from benchmark.core.metric_info import METRICS
    from benchmark.storage.results_schema import COLUMNS

    html = (site / "reference" / "results-schema.html").read_text(encoding="utf-8")
    for name in [*COLUMNS, *METRICS]:
        assert f"<code>{name}</code>" in html, name


def test_api_reference_documents_every_module_of_the_core(site):
    html = (site / "reference" / "api.html").read_text(encoding="utf-8")
    modules = [p.stem for p in (ROOT / "benchmark" / "core").glob("*.py") if not p.stem.startswith("_")]
    assert len(modules) > 10
    for name in modules:
        assert f"benchmark.core.{name}" in html, name
    assert "fit_duo" in html and "paired_difference" in html
    assert ":func:" not in html and "``" not in _text(html)  # reST roles shown as code


def test_embedded_page_is_generated_from_the_committed_files(site):
    from benchmark.models.zoo import load_zoo

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    html = (site / "explanations" / "embedded-suite.html").read_text(encoding="utf-8")
    for name in load_zoo(ROOT / params["zoo"], check_arch=False):
        assert f"<code>{name}</code>" in html, name
    assert f"<code>{params['data']['test']}</code>" in html


def test_markers_fail_loudly(tmp_path):
    with pytest.raises(ValueError, match="unknown generated reference 'nope'"):
        reference.expand("<!-- generated-reference:nope -->\n", ROOT)
    with pytest.raises(ValueError, match="no longer expanded: .* `python -m benchmark.docsgen.includes --write`"):
        reference.expand("text\n<!-- include:C.md#First -->\n", tmp_path)  # the sections are in the pages' Markdown


def test_readme_is_short_and_leads_to_the_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 16_384, (
        f"README is {len(text.encode())} bytes: details belong in docs/"
    )  # a loose guard
    links = set(re.findall(r"\]\((docs/[^)#]+)", text))
    for must in (
        "docs/getting-started.md",
        "docs/explanations/concepts.md",
        "docs/tutorials/own-logits.md",
        "docs/tutorials/paper-suite.md",
        "docs/tutorials/submit-results.md",
    ):
        assert must in links, must
    for link in links:
        assert (ROOT / link).is_file(), link
    head = text.split("## Set-up", 1)[0]
    assert "docs/explanations/concepts.md" in head  # found before the first section


@pytest.mark.parametrize(
    "template, up", [("report/templates/how_to_read.html.j2", "../"), ("bundle/templates/site_index.html.j2", "")]
)
def test_the_leaderboard_links_into_the_docs(template, up):
    """The deployed site has the docs at docs/ beside the site's index and the suites' pages (<suite>/index.html):
    the index and each suite's "How to read this" link to existing pages there."""
    text = (ROOT / "benchmark" / template).read_text(encoding="utf-8")
    targets = re.findall(rf'href="{re.escape(up)}docs/([^"#]+)', text)
    assert targets
    for t in targets:
        assert (ROOT / "docs" / t.replace(".html", ".md")).is_file(), t


def test_a_generated_part_says_so_in_plain_markdown_only(site):
    """On GitHub a reference page's generated part is empty: the quoted note above its marker says where to read it;
    the site drops the note."""
    marked = [p for p in (ROOT / "docs").rglob("*.md") if "<!-- generated-reference:" in p.read_text(encoding="utf-8")]
    assert len(marked) >= 6
    for page in marked:
        text = page.read_text(encoding="utf-8")
        first = text.index("<!-- generated-reference:")
        assert reference.PLAIN_NOTE.search(text) and reference.PLAIN_NOTE.search(text).end() == first, page
        html = (site / page.relative_to(ROOT / "docs")).with_suffix(".html").read_text(encoding="utf-8")
        assert "Generated when the docs site is built" not in html, page


def test_the_leaderboard_screenshots_are_small_pngs_of_both_sizes_shown_in_the_docs(site):
    """scripts/leaderboard-screenshots.py's pictures: PNGs of the two window sizes the browser tests use, under
    200 kB each, shown by the getting-started page (Markdown and site)."""
    import struct

    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for w, h in ((1366, 768), (390, 844)):
        png = ROOT / "docs" / "images" / f"leaderboard-{w}x{h}.png"
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (w, h)
        assert len(data) < 200_000, (png, len(data))
        assert f"(images/{png.name})" in page
        assert (site / "images" / png.name).read_bytes() == data
