"""Every manifest field is type- and range-checked, and the names in rows are names: one line naming the field."""

from __future__ import annotations

import re

import pytest
from helpers import manifest, read_rows, write_manifest, write_rows

from benchmark.bundle import manifest as mf
from benchmark.bundle.schema import BundleError

VALUES = [None, True, 7, 1.5, "text", [], {}]


def _edit(bundle, fn):
    m = manifest(bundle)
    fn(m)
    write_manifest(bundle, m)


def _wrong_types():
    for key, (typ, _) in mf.MANIFEST_KEYS.items():
        types = typ if isinstance(typ, tuple) else (typ,)
        for v in VALUES:
            if isinstance(v, types) and not (isinstance(v, bool) and bool not in types):
                continue
            yield key, v


@pytest.mark.parametrize("key, value", list(_wrong_types()))
def test_every_field_has_its_type(bundle, load, key, value):
    _edit(bundle, lambda m: m.__setitem__(key, value))
    with pytest.raises(BundleError, match=rf"manifest.json: {key}: must be"):
        load(bundle)


def test_no_unknown_or_missing_key(bundle, load):
    _edit(bundle, lambda m: m.__setitem__("verified", True))
    with pytest.raises(BundleError, match="unknown key 'verified'"):
        load(bundle)
    _edit(bundle, lambda m: (m.pop("verified"), m.pop("zoo")))
    with pytest.raises(BundleError, match="missing key 'zoo'"):
        load(bundle)


def _set(path, value):
    def fn(m):
        *head, last = path
        for k in head:
            m = m[k]
        m[last] = value

    return fn


def _first(kind):
    return lambda m: next(i for i, u in enumerate(m["units"]) if u["kind"] == kind)


CASES = {
    "contributor too long": (
        _set(["contributor"], "x" * (mf.MAX_TEXT + 1)),
        "contributor: 201 characters, at most 200",
    ),
    "contributor on two lines": (_set(["contributor"], "a\nb"), "contributor: must be printable text on one line"),
    "contributor with a bidi override": (_set(["contributor"], "abc\u202edcba"), "contributor: must be printable"),
    "version too long": (_set(["versions", "torch"], "1" * 300), "versions.torch: 300 characters"),
    "nested device value": (_set(["device", "cuda"], {"a": 1}), "device.cuda: must be text, a number or null"),
    "device key not a name": (_set(["device", "a b"], "x"), "device: key: 'a b' does not match"),
    "commit not hex": (_set(["git", "commit"], "z" * 40), "git.commit must be 40 hex digits"),
    "dirty not a boolean": (_set(["git", "dirty"], "yes"), "git.dirty must be true, false or null"),
    "remote as an option": (_set(["remote"], "-rf"), "remote: '-rf' does not match"),
    "remote as a URL": (_set(["remote"], "s3://bucket/x"), "remote: 's3://bucket/x' does not match"),
    "file bytes negative": (_set(["files", "rows", "bytes"], -1), "files.rows.bytes: must be >= 0"),
    "file bytes a boolean": (_set(["files", "rows", "bytes"], True), "files.rows.bytes: must be int"),
    "file sha not hex": (_set(["files", "rows", "sha256"], "g" * 64), "sha256 'ggg"),
    "file entry extra key": (_set(["files", "rows", "url"], "http://x"), "files.rows: unknown key 'url'"),
    "stage name as an option": (
        lambda m: m["stages"].__setitem__("--force", {"outs": {}}),
        "stage name: '--force' does not match",
    ),
    "stage out outside results": (
        lambda m: m["stages"].__setitem__("x", {"outs": {"../.git/config": None}}),
        "is not a results/... path",
    ),
    "stage md5 not an md5": (lambda m: m["stages"].__setitem__("x", {"outs": {"results/x": "<b>"}}), "is not an md5"),
    "logits path escaping": (
        lambda m: m["logits"].__setitem__("logits/../../x.safetensors", {"sha256": "0" * 64}),
        "must be <logits|methods>/<name>/<split>.safetensors",
    ),
    "logits other extension": (
        lambda m: m["logits"].__setitem__("logits/res/test.pt", {"sha256": "0" * 64}),
        "must be <logits|methods>/<name>/<split>.safetensors",
    ),
    "unit kind unknown": (lambda m: m["units"][0].__setitem__("kind", "oracle"), "kind 'oracle' unknown"),
    "unit member not a name": (
        lambda m: m["units"][0]["members"].__setitem__(0, "../x"),
        "members: '../x' does not match",
    ),
    "unit folder of another member": (lambda m: m["units"][_first("duo")(m)]["folders"].reverse(), "must be logits/"),
    "unit extra key": (lambda m: m["units"][0].__setitem__("status", "verified"), "unknown key 'status'"),
    "unit hash repeated": (
        lambda m: m["units"][1].__setitem__("inputs_hash", m["units"][0]["inputs_hash"]),
        "repeated",
    ),
    "method family not a name": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("family", "<b>x</b>"),
        "info.family: '<b>x</b>' does not match",
    ),
    "method cost negative": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("gflops", -1),
        "info.gflops: must be a number >= 0",
    ),
    "method cost text": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("params", "many"),
        "info.params: must be a number >= 0",
    ),
    "method budget negative": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("own_train_images", -4),
        "info.own_train_images: must be a number >= 0",
    ),
    "method builds on a path": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("builds_on", ["../x"]),
        "info.builds_on: '../x' does not match",
    ),
    "method builds on text": (
        lambda m: m["units"][_first("method")(m)]["info"].__setitem__("builds_on", "res"),
        "info.builds_on: must be list",
    ),
    "train size zero": (_set(["train_size"], 0), "train_size: must be an integer from 1 to"),
    "train size beyond any dataset": (_set(["train_size"], 10**12), "train_size: must be an integer from 1 to"),
    "zoo name not a name": (
        lambda m: m["zoo"].__setitem__("a/b", m["zoo"]["res"]),
        "zoo: entry name: 'a/b' does not match",
    ),
    "name with a trailing newline": (
        lambda m: m["zoo"].__setitem__("res\n", m["zoo"]["res"]),
        "zoo: entry name: 'res\\n' does not",
    ),
    "remote with a trailing newline": (_set(["remote"], "origin\n"), "remote: 'origin\\n' does not match"),
    "params suite of another": (_set(["params", "suite"], "embedded"), "params.suite 'embedded' differs from suite"),
    "long text in params": (_set(["params", "note"], "x" * (mf.MAX_STRING + 1)), "params: text of 2001 characters"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_field_ranges(bundle, load, case):
    fn, rule = CASES[case]
    _edit(bundle, fn)
    with pytest.raises(BundleError, match=re.escape(rule)) as e:
        load(bundle)
    assert "manifest.json" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "cap, key", [("MAX_UNITS", "units"), ("MAX_LOGITS", "logits"), ("MAX_STAGES", "stages"), ("MAX_ZOO", "zoo")]
)
def test_counts_are_capped(bundle, load, monkeypatch, cap, key):
    monkeypatch.setattr(mf, cap, len(manifest(bundle)[key]) - 1)
    with pytest.raises(BundleError, match=rf"{key}: \d+ entries, at most"):
        load(bundle)


@pytest.mark.parametrize(
    "column, value",
    [
        ("method", "<script>"),
        ("base", "../../x"),
        ("split", "a b"),
        ("members", "res+"),
        ("family", ""),
        ("fit", "x" * 65),
        ("sidekick", "=cmd()"),
    ],
)
def test_row_names_are_names(bundle, load, column, value):
    rows = read_rows(bundle)
    rows.loc[2, column] = value
    write_rows(bundle, rows)
    with pytest.raises(BundleError, match=rf"rows.csv: row 4: column '{column}'"):
        load(bundle)


def test_rows_with_unknown_or_repeated_columns(bundle, load):
    text = (bundle / "rows.csv").read_text().split("\n", 1)
    (bundle / "rows.csv").write_text(text[0] + ",status\n" + text[1].replace("\n", ",verified\n"))
    from helpers import rehash

    rehash(bundle)
    with pytest.raises(BundleError, match=r"unknown columns \['status'\]"):
        load(bundle)
