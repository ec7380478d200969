"""Every string a bundle provides reaches the site's pages as text: hostile markup in each free-text field of the
manifest shows up escaped on the provenance, entries and index pages, never as an element."""

from __future__ import annotations

from html.parser import HTMLParser

from helpers import manifest, write_manifest

from benchmark.cli.main import main

PAYLOAD = "<img src=x onerror=alert(1)>\"'&</pre></td><script>alert(2)</script><a href=javascript:alert(3)>x</a>"
TEMPLATE_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "p",
    "a",
    "h1",
    "h2",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "span",
    "code",
    "pre",
    "br",
    "ul",
    "li",
    "div",
}  # div: the boxes the tables scroll in


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.hrefs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.hrefs += [v for k, v in attrs if k == "href"]


def _hostile(bundle):
    m = manifest(bundle)
    m["contributor"] = PAYLOAD
    m["versions"]["torch"] = PAYLOAD
    m["device"] |= {"platform": PAYLOAD, "processor": PAYLOAD, "extra": PAYLOAD}
    m["params"]["note"] = PAYLOAD
    m["params"]["evaluate"]["fits"] = m["params"]["evaluate"]["fits"]  # untouched: verify reads it
    m["params"][PAYLOAD[:60].replace("\n", "")] = PAYLOAD  # as a key too
    u = next(u for u in m["units"] if u["kind"] == "method")
    u["info"] |= {"rule": PAYLOAD, "note": [PAYLOAD, {"k": PAYLOAD}]}
    write_manifest(bundle, m)


def test_every_bundle_string_is_escaped(bundle, tmp_path, fast_report):
    _hostile(bundle)
    assert main(["publish", "--bundles", str(bundle.parent.parent), "--out", str(tmp_path / "site"), "--quiet"]) == 0
    site = tmp_path / "site"
    pages = [
        site / "index.html",
        site / "caltech256" / "entries.html",
        site / "bundles" / "caltech256" / "b1" / "index.html",
    ]
    for page in pages:
        text = page.read_text()
        parser = Tags()
        parser.feed(text)
        assert set(parser.tags) <= TEMPLATE_TAGS, (page, set(parser.tags) - TEMPLATE_TAGS)
        assert not any(h.strip().lower().startswith(("javascript:", "data:")) for h in parser.hrefs), page
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, page  # shown, as text
        assert "<script" not in text.lower()
    provenance = pages[2].read_text()
    assert provenance.count("&lt;script&gt;alert(2)&lt;/script&gt;") >= 6  # contributor, versions, device x3, manifest
