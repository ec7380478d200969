"""The CONTRIBUTING.md sections that docs pages show are written into the pages' Markdown (so GitHub shows the steps
the site shows) and kept equal to their source: benchmark.docsgen.includes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmark.docsgen import includes

ROOT = Path(__file__).resolve().parents[2]
SHOWN = {  # page -> the CONTRIBUTING.md sections it shows, in order
    "docs/tutorials/add-a-method.md": ["## Add a method", "## Run SVE or a baseline on a suite"],
    "docs/tutorials/add-a-model.md": ["## Add a model", "## Add a pair"],
    "docs/tutorials/submit-results.md": ["## Submit your results"],
    "docs/how-to/add-a-suite.md": ["## Add a suite", "## Add a dataset loader"],
    "docs/reference/params.md": ["## Configuration is typed"],
}


def test_no_page_holds_an_include_comment_in_place_of_its_steps():
    for page in sorted((ROOT / "docs").rglob("*.md")):
        assert "<!-- include:" not in page.read_text(encoding="utf-8"), page


def test_the_written_sections_are_in_sync_with_contributing():
    assert includes.stale(ROOT) == [], "run `python -m benchmark.docsgen.includes --write`"
    assert includes.pages(ROOT) == sorted(SHOWN)


def test_each_page_shows_the_sections_of_contributing_as_written_there():
    """Read directly: the text from the section's heading to the next '## ' heading, character for character (their
    links point into docs/ from the repository root only in prose outside these sections)."""
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    parts = re.split(r"^(?=## )", contributing, flags=re.M)
    for page, heads in SHOWN.items():
        text = (ROOT / page).read_text(encoding="utf-8")
        at = [text.index(next(p for p in parts if p.startswith(h)).rstrip()) for h in heads]
        assert at == sorted(at), page  # in the page's order
        for h in heads:
            section = next(p for p in parts if p.startswith(h)).rstrip()
            assert section in text and len(section.splitlines()) > 4, (page, h)
            start = text.index(section)
            assert text[:start].rstrip().endswith("edit it there -->")  # the note above each copy


def test_update_writes_rewrites_links_and_refuses_an_unclear_name(tmp_path):
    (tmp_path / "docs" / "how-to").mkdir(parents=True)
    (tmp_path / "CONTRIBUTING.md").write_text(
        "# C\n\n## Add a thing: one file\n\nSee [concepts](docs/explanations/concepts.md#x), [site](https://e.org/a.md)"
        " and [here](#add-a-thing-one-file).\n\n```bash\necho [x](docs/y.md)\n```\n\n## Add a thing twice\n\nno\n\n"
        "## Other\n\nzzz\n"
    )
    page = tmp_path / "docs" / "how-to" / "p.md"
    page.write_text(
        "# P\n\n<!-- generated:contributing-add-a-thing-one -->\n<!-- /generated:contributing-add-a-thing-one -->\n"
        "\nafter\n"
    )
    assert includes.stale(tmp_path) == ["docs/how-to/p.md: contributing-add-a-thing-one"]
    assert includes.update(tmp_path) == ["docs/how-to/p.md: contributing-add-a-thing-one"]
    text = page.read_text()
    assert (
        "See [concepts](../explanations/concepts.md#x), [site](https://e.org/a.md) and [here](#add-a-thing-one-file)."
        in text
    )
    assert "echo [x](docs/y.md)" in text  # code is left as it is
    assert "## Add a thing twice" not in text and text.endswith(
        "<!-- /generated:contributing-add-a-thing-one -->\n\nafter\n"
    )
    assert includes.stale(tmp_path) == [] and includes.update(tmp_path) == []
    page.write_text("<!-- generated:contributing-add-a-thing -->\n<!-- /generated:contributing-add-a-thing -->\n")
    with pytest.raises(ValueError, match="CONTRIBUTING.md: 2 sections match 'add-a-thing'"):
        includes.stale(tmp_path)
    page.write_text("<!-- generated:contributing-add-a-thin -->\n<!-- /generated:contributing-add-a-thin -->\n")
    with pytest.raises(ValueError, match="0 sections match 'add-a-thin'"):  # whole words only
        includes.stale(tmp_path)


def test_the_command_checks_and_writes(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "CONTRIBUTING.md").write_text("## Step\n\ndo it\n")
    page = tmp_path / "docs" / "p.md"
    page.write_text("<!-- generated:contributing-step -->\n<!-- /generated:contributing-step -->\n")
    assert includes.main(["--root", str(tmp_path)]) == 1
    assert "stale: docs/p.md: contributing-step" in capsys.readouterr().out
    assert includes.main(["--root", str(tmp_path), "--write"]) == 0 and "do it" in page.read_text()
    assert includes.main(["--root", str(tmp_path)]) == 0
    page.write_text("<!-- generated:contributing-nope -->\n<!-- /generated:contributing-nope -->\n")
    assert includes.main(["--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit) as e:
        includes.main(["--help"])
    assert e.value.code == 0
