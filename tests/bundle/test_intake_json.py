"""Intake, strict parsing: the manifest (JSON) and dvc.lock (YAML) are parsed with no duplicate keys, no NaN or
infinities, bounded nesting (checked before the parser recurses), plain values only and clean text."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from helpers import put_file

from benchmark.bundle import intake, strict
from benchmark.bundle.schema import BundleError


def _text(bundle) -> str:
    return (bundle / "manifest.json").read_text()


def _set(bundle, text) -> None:
    (bundle / "manifest.json").write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)


def _sub(text: str, pattern: str, repl: str) -> str:
    out, n = re.subn(pattern, repl, text, count=1)
    assert n == 1, pattern
    return out


def _deep(depth: int, open_="[", close="]") -> str:
    return open_ * depth + close * depth


MANIFEST_EDITS = {
    "duplicate key at the top": (lambda t: _sub(t, r"^\{", '{"suite": "caltech256",'), "duplicate key"),
    "duplicate nested key": (lambda t: _sub(t, r'"git": \{', '"git": {"dirty": true, '), "duplicate key"),
    "NaN": (lambda t: _sub(t, r'"bytes": \d+', '"bytes": NaN'), "NaN is not a JSON number"),
    "Infinity": (lambda t: _sub(t, r'"bytes": \d+', '"bytes": Infinity'), "Infinity is not a JSON number"),
    "-Infinity": (lambda t: _sub(t, r'"bytes": \d+', '"bytes": -Infinity'), "-Infinity is not a JSON number"),
    "overflow to infinity": (lambda t: _sub(t, r'"bytes": \d+', '"bytes": 1e999'), "overflows to infinity"),
    "huge integer": (lambda t: _sub(t, r'"bytes": \d+', '"bytes": ' + "9" * 5000), "integer of 5000 digits"),
    "deep (100,000)": (
        lambda t: _sub(t, r'"params": \{', '"params": {"x": ' + _deep(100_000) + ","),
        "nested deeper than",
    ),
    "deep objects": (
        lambda t: _sub(t, r'"params": \{', '"params": {"x": ' + _deep(50_000, '{"a":', "}").replace(":}", ":1}") + ","),
        "nested deeper than",
    ),
    "just over the depth limit": (
        lambda t: _sub(t, r'"params": \{', '"params": {"x": ' + _deep(intake.MAX_DEPTH) + ","),
        "nested deeper than",
    ),
    "NUL escape": (lambda t: _sub(t, r'"contributor": "', r'"contributor": "\\u0000'), "control character"),
    "unpaired surrogate": (lambda t: _sub(t, r'"contributor": "', r'"contributor": "\\ud800'), "unpaired surrogate"),
    "raw control character": (lambda t: _sub(t, r'"contributor": "', '"contributor": "\x1b[31m'), "control character"),
    "invalid UTF-8": (lambda t: t.encode().replace(b'"contributor": "', b'"contributor": "\xff\xfe'), "not UTF-8"),
    "a list, not an object": (lambda t: "[" + t + "]", "must be dict"),
    "trailing garbage": (lambda t: t + "{}", "not valid JSON"),
    "byte order mark": (lambda t: "\ufeff" + t, "not valid JSON"),
}


@pytest.mark.parametrize("case", list(MANIFEST_EDITS))
def test_strict_json(bundle, load, monkeypatch, case):
    edit, rule = MANIFEST_EDITS[case]
    _set(bundle, edit(_text(bundle)))
    real = json.loads

    def guarded(s, **kw):  # the parser never sees input nested deeper than the limit
        assert strict.json_depth(s) <= intake.MAX_DEPTH
        return real(s, **kw)

    monkeypatch.setattr(strict.json, "loads", guarded)
    with pytest.raises(BundleError, match=re.escape(rule)) as e:
        load(bundle)
    assert "manifest.json" in str(e.value) and "\n" not in str(e.value)


def test_depth_scan_skips_strings():
    assert strict.json_depth('{"a": "[[[[{{{{\\"]]]]", "b": [[1]]}') == 3
    assert strict.json_depth(_deep(10**6)) == intake.MAX_DEPTH + 1  # stops as soon as it is over


LOCK = {
    "schema": "2.0",
    "stages": {"data": {"cmd": "python pipelines/data.py", "outs": [{"path": "results/data", "md5": "0" * 32}]}},
}
LOCK_EDITS = {
    "aliases (billion laughs)": (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
        "anchors and aliases are not allowed",
    ),
    "anchor alone": ("schema: &s '2.0'\nstages: {}\n", "anchors and aliases are not allowed"),
    "python tag": ("schema: !!python/object/apply:os.system ['echo pwned']\n", "explicit YAML tag"),
    "binary tag": ("schema: !!binary aGVsbG8=\n", "explicit YAML tag"),
    "duplicate key": ("schema: '2.0'\nschema: '3.0'\nstages: {}\n", "duplicate key"),
    "non-text key": ("schema: '2.0'\nstages: {}\n1: x\n", "is not text"),
    "deep flow": ("x: " + _deep(100_000) + "\n", "nest"),  # refused by our depth rule or libyaml's own, never recursed
    "just over the depth limit": ("x: " + _deep(intake.MAX_DEPTH) + "\n", "nested deeper than"),
    "NaN": ("schema: .nan\nstages: {}\n", "non-finite number"),
    "two documents": ("schema: '2.0'\n---\nschema: '3.0'\n", "invalid YAML"),
    "control character": ('schema: "\\x1b[2J"\nstages: {}\n', "control character"),
    "not a mapping": ("- a\n- b\n", "not a dvc.lock mapping"),
}


@pytest.mark.parametrize("case", list(LOCK_EDITS))
def test_strict_yaml(bundle, load, case):
    text, rule = LOCK_EDITS[case]
    put_file(bundle, "lock", "dvc.lock", text.encode())
    with pytest.raises(BundleError, match=re.escape(rule)) as e:
        load(bundle)
    assert "dvc.lock" in str(e.value) and "\n" not in str(e.value)


def test_yaml_dates_stay_text(bundle, load):
    put_file(bundle, "lock", "dvc.lock", (yaml.safe_dump(LOCK) + "when: 2001-12-14\n").encode())
    assert load(bundle).lock["when"] == "2001-12-14"
