"""A parallel run's job puts its stage's entry into dvc.lock by splicing the text (lockfile.updated): the result must be
the text DVC's own round trip of the whole lock gives (lockfile.whole, what DVC's ``dump`` does), for the committed
lock and for edge cases, and it must fall back to that round trip where the layout is not DVC's."""

import copy
from pathlib import Path

import pytest
from dvc.utils.serialize import parse_yaml

from benchmark.dvcutil import lockfile

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = (ROOT / "dvc.lock").read_text(encoding="utf-8")


def _entries(text: str) -> dict:
    return parse_yaml(text, "dvc.lock")["stages"]


def _changed(entry: dict, tag: str) -> dict:
    """A copy of a lock entry whose first output got another hash (as a stage that ran with other results)."""
    entry = copy.deepcopy(entry)
    entry["outs"][0]["md5"] = tag * 32
    entry["outs"][0]["size"] = 12345
    return entry


def test_the_committed_lock_splits_into_its_entries_and_back():
    texts = lockfile._entry_texts(COMMITTED)
    assert texts is not None and list(texts) == list(_entries(COMMITTED))
    assert lockfile._HEAD + "".join(texts.values()) == COMMITTED


@pytest.mark.parametrize("where", [0, 7, -1])
def test_a_replaced_entry_gives_dvcs_own_text(where):
    names = list(_entries(COMMITTED))
    name = names[where]
    entry = _changed(_entries(COMMITTED)[name], "a")
    spliced = lockfile.updated(COMMITTED, {name: entry}, names, names)
    assert spliced == lockfile.whole(COMMITTED, {name: entry}, names, names)
    assert spliced != COMMITTED and _entries(spliced)[name] == entry
    assert list(_entries(spliced)) == names


def test_new_entries_are_put_in_the_serial_order_as_dvc_would():
    stages = _entries(COMMITTED)
    names = list(stages)
    kept = [n for n in names if n not in ("sve", "train@lite1")]  # the lock before the run had neither
    before = lockfile.whole(COMMITTED, {}, kept, names)
    before = lockfile._HEAD + "".join(t for n, t in lockfile._entry_texts(before).items() if n in kept)
    new = {"train@lite1": _changed(stages["train@lite1"], "b"), "sve": _changed(stages["sve"], "c")}
    spliced = lockfile.updated(before, new, kept, names)
    assert spliced == lockfile.whole(before, new, kept, names)
    assert list(_entries(spliced)) == kept + ["train@lite1", "sve"]


def test_the_first_entry_of_a_new_lock_and_odd_names():
    entry = _changed(next(iter(_entries(COMMITTED).values())), "d")
    first = lockfile.updated("", {"data": entry}, [], ["data"])
    assert first == lockfile.whole("", {"data": entry}, [], ["data"])
    for name in ("a:b", "yes", "1.5", "#x"):  # names that DVC's dumper quotes (or that YAML 1.1 reads as non-strings)
        text = lockfile.updated(first, {name: entry}, ["data"], ["data", name])
        assert text == lockfile.whole(first, {name: entry}, ["data"], ["data", name]), name
        again = lockfile.updated(text, {name: _changed(entry, "e")}, ["data", name], ["data", name])
        assert again == lockfile.whole(text, {name: _changed(entry, "e")}, ["data", name], ["data", name]), name


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: "# a comment\n" + t,  # not DVC's layout: dumped whole (the comment is dropped, as DVC drops it)
        lambda t: t.replace("stages:\n", "stages:\n  # note\n", 1),
        lambda t: t.rstrip("\n"),
        lambda t: t.replace("schema: '2.0'\n", 'schema: "2.0"\n'),
    ],
)
def test_another_layout_is_dumped_whole(edit):
    text = edit(COMMITTED)
    assert lockfile._entry_texts(text) is None
    names = list(_entries(COMMITTED))
    entry = _changed(_entries(COMMITTED)[names[3]], "f")
    assert lockfile.updated(text, {names[3]: entry}, names, names) == lockfile.whole(
        text, {names[3]: entry}, names, names
    )


def test_record_writes_the_spliced_text(tmp_path):
    path = tmp_path / "dvc.lock"
    path.write_text(COMMITTED, encoding="utf-8")
    names = list(_entries(COMMITTED))
    entry = _changed(_entries(COMMITTED)[names[-1]], "0")
    lockfile.record(path, {names[-1]: entry}, names, names)
    assert path.read_text(encoding="utf-8") == lockfile.whole(COMMITTED, {names[-1]: entry}, names, names)
