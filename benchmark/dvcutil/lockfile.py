"""Stage outputs as ``dvc.lock`` records them: read, compare, and the outputs that embed a measured time or a
record of the run.

DVC hashes every stage output (md5 of a file; of a folder, the md5 of its file
list with each file's md5, ``.dir``). Two runs that produced byte-identical
outputs have equal md5s, so comparing two lock files compares every output
byte for byte without reading the outputs. Outputs that embed a measured time
or a record of the run (:data:`MEASURED`) differ between two runs and are never
compared.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from ruamel.yaml import YAML

from benchmark.storage.atomic import write_text

if TYPE_CHECKING:
    import pandas as pd

# Outputs that embed a measured time or a record of the run (path patterns relative to the dvc.yaml's folder) and
# why: the one list the gate (benchmark.reproduce.gate) leaves out.
MEASURED: tuple[tuple[str, str], ...] = (
    ("results/cost/*.json", "the model's cost record: measured CPU throughput (images/s)"),
    ("results/methods/*", "the method's cost.json: measured CPU throughput"),
    ("results/method_checkpoints/sve", "outputs/sizes.json: each SVE size's cost record, measured throughput"),
    ("results/metrics.csv", "the throughput column (measured)"),
    ("results/models.csv", "the throughput column (measured)"),
    (
        "results/units",
        "the evaluate stage's persisted unit cache: its last_run.json counts the units this run computed "
        "and reused (a fresh clone computes all, a rerun reuses them); the units' rows are compared in "
        "results/metrics.csv",
    ),
    ("reports", "the leaderboard page and its data show the measured throughput"),
)


def measured(path: str) -> str | None:
    """Why output ``path`` embeds a measured time (None when it does not)."""
    return next((why for pattern, why in MEASURED if fnmatch.fnmatchcase(path, pattern)), None)


def parse(text: str, where: str) -> dict[str, dict[str, dict[str, str]]]:
    """``stage -> {"outs": {path: md5}, "deps": {path: md5}}`` of a ``dvc.lock`` text (params left out)."""
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{where}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(d, dict) or not isinstance(d.get("stages"), dict):
        raise ValueError(f"{where}: not a dvc.lock (no 'stages' mapping)")
    out = {}
    for stage, s in d["stages"].items():
        if not isinstance(s, dict):
            raise ValueError(f"{where}: stage {stage!r} is not a mapping")
        out[str(stage)] = {
            kind: {
                str(o["path"]): str(o.get("md5") or o.get("hash") or "")
                for o in s.get(kind) or []
                if isinstance(o, dict) and "path" in o
            }
            for kind in ("outs", "deps")
        }
    return out


def read(path) -> dict:
    """The stages of the ``dvc.lock`` at ``path`` (:func:`parse`); ``FileNotFoundError`` when there is none."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such dvc.lock")
    return parse(path.read_text(encoding="utf-8"), str(path))


def committed_text(path: str, root=".") -> str:
    """Text of ``path`` as committed at ``HEAD`` (``git show``)."""
    proc = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FileNotFoundError(f"{path}: not committed at HEAD ({proc.stderr.strip() or 'git show failed'})")
    return proc.stdout


def current_stages(root=".", dvcfile: str = "dvc.yaml") -> set[str] | None:
    """The stage names ``dvcfile`` defines now (foreach items expanded), by DVC's own parser; None when DVC
    cannot tell (then no lock entry is called stale)."""
    try:
        from dvc.repo import Repo

        with Repo(str(root)) as repo:
            target = str(Path(root) / dvcfile)
            return {s.name for s in repo.index.stages if Path(s.dvcfile.path).resolve() == Path(target).resolve()}
    except Exception:  # noqa: BLE001 - any DVC trouble: compare without stale detection
        return None


def _rewrite(path, change) -> bool:
    """Apply ``change(stages)`` (the lock's ``stages`` mapping; returns True when it changed it) to the ``dvc.lock`` at
    ``path`` and rewrite the file atomically in DVC's own format (ruamel round trip) when it did."""
    path = Path(path)
    rt = YAML()  # round trip, as DVC writes the lock
    data = rt.load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("stages"), dict):
        raise ValueError(f"{path}: not a dvc.lock (no 'stages' mapping)")
    if not change(data["stages"]):
        return False
    buf = StringIO()
    rt.dump(data, buf)
    write_text(path, buf.getvalue())
    return True


def prune(path, stages: set[str]) -> list[str]:
    """Drop from the ``dvc.lock`` at ``path`` every entry of a stage not in ``stages`` (the pipeline's stages now,
    :func:`current_stages`) and return their names. DVC keeps a removed stage's entry forever, so a lock rebuilt
    from an older one would go on recording outputs that no committed code produces (DVC also parses the whole
    lock again around each stage it runs). The file is rewritten atomically in DVC's own format (ruamel round
    trip); nothing is written when no entry is stale."""
    stale: list[str] = []

    def drop(entries) -> bool:
        stale.extend(name for name in entries if name not in stages)
        for name in stale:
            del entries[name]
        return bool(stale)

    _rewrite(path, drop)
    return stale


def reorder(path, kept, run_order) -> bool:
    """Put the entries of the ``dvc.lock`` at ``path`` in the order a serial ``dvc repro`` leaves them: DVC keeps
    an entry where it is and appends a new one when its stage has run, so the entries named in ``kept`` (the
    lock's stages before the run, in their order) come first, then the others in ``run_order`` (the order
    ``dvc repro`` runs the stages), then any other entry where it was. Rewrites the file atomically, and only when
    the order changes (the stages' entries themselves are left as DVC wrote them); True when it did. The order is
    read with libyaml first: a lock already in order (a run that found every entry in place, as from a clone) costs
    no round trip through the pure-Python parser, which is most of what DVC's bookkeeping costs per stage."""
    wanted = _serial_order(kept, run_order)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=loader)
    names = list(data["stages"]) if isinstance(data, dict) and isinstance(data.get("stages"), dict) else None
    if names is not None and wanted(names) == names:
        return False

    def sort(entries) -> bool:
        names = list(entries)
        if wanted(names) == names:
            return False
        items = [(n, entries[n]) for n in wanted(names)]
        for n in names:
            del entries[n]
        for n, v in items:
            entries[n] = v
        return True

    return _rewrite(path, sort)


def _serial_order(kept, run_order):
    """``names -> names`` in the order a serial ``dvc repro`` leaves a lock's entries (:func:`reorder`)."""
    rank = {n: i for i, n in enumerate(kept)}
    rank.update({n: len(kept) + i for i, n in enumerate(run_order) if n not in rank})
    return lambda names: sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


def record(path, entries: dict, kept, run_order) -> None:
    """Write the lock entries of stages that ran (``{stage: entry}``, DVC's own serialization of them,
    :func:`dvc.stage.serialize.to_lockfile`) into the ``dvc.lock`` at ``path`` as DVC's ``dump`` writes them (an
    entry replaced where it is, a new one appended, ``schema: '2.0'`` heading a new file), in the order of
    :func:`reorder`, in one atomic write: the same text as DVC's round trip of the whole lock through its pure-Python
    parser and dumper, which is most of what DVC's bookkeeping costs per stage (a cluster or local parallel run's job,
    :mod:`benchmark.cluster.job`). Only the new entries go through DVC's dumper; the others keep their text
    (:func:`_entry_texts`), the whole file is dumped again where the lock is not laid out as DVC writes it."""
    path = Path(path)
    write_text(path, updated(path.read_text(encoding="utf-8") if path.is_file() else "", entries, kept, run_order))


def updated(text: str, entries: dict, kept, run_order) -> str:
    """The text of :func:`record`: the lock ``text`` (empty: none yet) with ``entries`` put in. Spliced where the lock
    is laid out as DVC's dumper lays it out (:func:`_entry_texts`) and no new entry holds an anchor (which DVC's
    dumper numbers across the whole file), else dumped whole (:func:`whole`); both give the same text."""
    texts = _entry_texts(text)
    if texts is not None:
        new = {name: _entry_text(name, entry) for name, entry in entries.items()}
        if not any(re.search(r"[&*]id\d", t) for t in new.values()):
            texts |= new
            return _HEAD + "".join(texts[n] for n in _serial_order(kept, run_order)(list(texts)))
    return whole(text, entries, kept, run_order)


def whole(text: str, entries: dict, kept, run_order) -> str:
    """:func:`updated` as DVC does it: the whole lock parsed, ``entries`` put in, the whole of it dumped again."""
    from dvc.utils.serialize import dumps_yaml, parse_yaml

    data = (parse_yaml(text, "dvc.lock") if text else None) or {"schema": "2.0"}
    stages = data.get("stages") if isinstance(data.get("stages"), dict) else {}
    stages.update(entries)
    data["stages"] = {n: stages[n] for n in _serial_order(kept, run_order)(list(stages))}
    return dumps_yaml(data)


_HEAD = "schema: '2.0'\nstages:\n"  # how DVC's dumper begins a lock (its schema, then the stages' mapping)


def _entry_text(name: str, entry) -> str:
    """One stage's lock entry as DVC's dumper writes it inside the ``stages`` mapping (indented by two spaces)."""
    from dvc.utils.serialize import dumps_yaml

    return dumps_yaml({"stages": {name: entry}}).split("\n", 1)[1]


def _entry_texts(text: str) -> dict[str, str] | None:
    """stage -> the text of its entry, in the lock's order, for a lock laid out as DVC's dumper lays it out (the schema,
    then ``stages:`` last, each entry a line ``  <name>:`` at two spaces and the lines under it indented further);
    None for anything else (an empty file, comments, another layout), which :func:`record` then dumps whole. The
    names are read with libyaml and must match the entries' lines one to one."""
    if not text.startswith(_HEAD) or not text.endswith("\n"):
        return None
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict) or list(data) != ["schema", "stages"] or not isinstance(data["stages"], dict):
        return None
    lines = text[len(_HEAD) :].splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("  ") and line[2:3] not in (" ", "\n", "#", "")]
    names = list(data["stages"])
    if len(starts) != len(names) or (lines and starts[:1] != [0]):
        return None
    ends = starts[1:] + [len(lines)]
    texts = {n: "".join(lines[a:b]) for n, a, b in zip(names, starts, ends)}
    if any(not t.startswith(f"  {n}:") and not t.startswith(("  '", '  "')) for n, t in texts.items()):
        return None
    return texts


def compare_outputs(committed: dict, fresh: dict, stages: set[str] | None = None) -> pd.DataFrame:
    """One row per (stage, output) of either lock: ``status`` identical | different | measured (not compared) |
    missing (committed only) | extra (fresh only) | stale (a stage no longer in dvc.yaml: ``stages``)."""
    rows = []
    for stage in sorted(set(committed) | set(fresh)):
        a, b = committed.get(stage, {}).get("outs", {}), fresh.get(stage, {}).get("outs", {})
        for path in sorted(set(a) | set(b)):
            why = measured(path)
            if stages is not None and stage not in stages:
                status = "stale"
            elif path not in b:
                status = "missing"
            elif path not in a:
                status = "extra"
            elif why:
                status = "measured"
            else:
                status = "identical" if a[path] == b[path] else "different"
            rows.append((stage, path, a.get(path, ""), b.get(path, ""), status, why or ""))
    import pandas as pd  # (imported here: a cluster job reorders a lock without loading pandas)

    return pd.DataFrame(rows, columns=["stage", "path", "committed", "fresh", "status", "measured"])


def summarize(report: pd.DataFrame) -> dict:
    """Counts per status of :func:`compare_outputs`' report, ``compared`` (identical plus different) and the stages that
    fail (an output different, missing or extra)."""
    c = report["status"].value_counts()
    n = {s: int(c.get(s, 0)) for s in ("identical", "different", "measured", "missing", "extra", "stale")}
    n["compared"] = n["identical"] + n["different"]
    n["failing_stages"] = sorted(set(report.loc[report["status"].isin(["different", "missing", "extra"]), "stage"]))
    return n
