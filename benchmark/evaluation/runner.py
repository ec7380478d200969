"""Evaluation units of the evaluate stage, run in this process or in worker processes.

A *unit* is one single model, one base-sidekick duo, one deep ensemble or one
method output. It reads only its members' logits, memory-mapped
(:func:`benchmark.storage.store.mmap_logits_file`), and writes its rows to
``<folder>/<key>.csv`` and ``<key>.paired.csv`` atomically as soon as it is
done, then ``<key>.sha256`` (the hashes of both): a run that fails or is
interrupted keeps every unit it finished, and a cached unit is used only while
its files match those hashes.

Units that share their first member (a model's single unit and all pairs with
it as base) form a *batch*: a worker maps that member once for the batch, and
its :class:`~benchmark.methods.rows.ModelMemo` (each model's own temperature)
serves every unit it runs. A unit's rows come from the ``rows`` function its method registered
(:mod:`benchmark.methods.registry`; the unit's identity starts with the method's kind), a stored
method output's from :func:`benchmark.methods.rows.output_rows`. Singles and duos drop the pages of each block of
logits rows once used (:func:`benchmark.storage.store.release_pages`), so a worker's
resident memory does not grow with the number of samples. Results do not
depend on the number of workers or the order of the units.
"""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from benchmark.config.evaluate import EvalConfig
from benchmark.methods import registry
from benchmark.methods.rows import ModelMemo, output_rows
from benchmark.storage import store
from benchmark.storage.results_schema import PAIRED_COLUMNS


class UnitError(ValueError):
    """A unit could not be evaluated; the message names it."""


OUTPUT = "method"  # the kind of a unit that evaluates a stored method output (results/methods/<name>/)


@dataclass(frozen=True)
class Unit:
    """``ident``: ``(kind, *members)``: ``kind`` a method of group ``evaluate`` (``("single", m)``,
    ``("duo", base, side)``, ``("deep_ensemble", *members)``), or ``("method", m)``: the stored output ``m``."""

    ident: tuple
    key: str  # cache key: the unit's CSV files are <key>.csv and <key>.paired.csv
    info: dict | None = None  # method units: the method's cost.json

    @property
    def members(self) -> tuple[str, ...]:
        """The models (or method outputs) whose logits the unit reads."""
        return self.ident[1:]

    def __str__(self) -> str:
        return f"{self.ident[0]} {'+'.join(self.members)}"


@dataclass(frozen=True)
class Context:
    """What every worker needs: the settings, each member's logits files and the output folder."""

    cfg: EvalConfig
    files: dict  # member name -> split -> logits file path
    folder: str


def rows_function(kind: str):
    """What computes the rows of a unit of ``kind``: the ``rows`` its method registered, or a stored output's."""
    return output_rows if kind == OUTPUT else registry.get_method(kind).rows


def _unit_files(folder: Path, key: str) -> dict[str, Path]:
    return {"rows": folder / f"{key}.csv", "paired": folder / f"{key}.paired.csv"}


def _manifest(folder: Path, key: str) -> Path:
    """``<key>.sha256``: the sha256 of the unit's two CSV files, written after them."""
    return folder / f"{key}.sha256"


def _hashes(files: dict[str, Path]) -> dict[str, str]:
    import hashlib

    return {part: hashlib.sha256(path.read_bytes()).hexdigest() for part, path in files.items()}


def cached(folder: Path, key: str) -> bool:
    """Whether the unit's cached files exist and hold what was written (their hashes match its manifest);
    a partial, corrupted or edited entry is not trusted (the unit is computed again)."""
    import json

    files, manifest = _unit_files(folder, key), _manifest(folder, key)
    if not manifest.is_file() or not all(f.is_file() for f in files.values()):
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")) == _hashes(files)
    except (OSError, ValueError):
        return False


def write_unit(folder: Path, key: str, rows: pd.DataFrame, paired: pd.DataFrame) -> None:
    """Write the unit's CSV files, then its manifest (atomic writes: an entry is complete once the manifest is)."""
    files = _unit_files(folder, key)
    _manifest(folder, key).unlink(missing_ok=True)
    store.write_table(files["paired"], paired)
    store.write_table(files["rows"], rows)
    store.write_json(_manifest(folder, key), _hashes(files))


def read_unit(folder: Path, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cached rows and paired differences of a unit (verified against its manifest)."""
    if not cached(folder, key):
        raise store.StoreError(
            f"{folder / key}.csv: cached unit changed since it was written (hash mismatch); rerun the evaluate stage"
        )
    files = _unit_files(folder, key)
    rows = pd.read_csv(files["rows"], keep_default_na=False, na_values=["NaN", "nan", ""])
    return rows, pd.read_csv(files["paired"])


def remove_stale(folder: Path, keys) -> None:
    """Remove the cached files of units not in ``keys`` (and hidden leftovers of killed writes)."""
    for path in folder.glob("*"):
        if path.is_file() and path.name != LAST_RUN and path.name.split(".")[0] not in keys:
            path.unlink()


LAST_RUN = "last_run.json"


class Runner:
    """Evaluates units and writes their CSV files; one per process (it holds the model memo)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.memo = ModelMemo()

    def _logits(self, name: str) -> dict:
        out = {}
        for split, path in self.ctx.files[name].items():
            lf = store.mmap_logits_file(path)
            out[split] = (lf.logits, lf.labels)
        return out

    def _rows(self, unit: Unit, logits: dict) -> tuple[list, list]:
        rows = rows_function(unit.ident[0])
        return rows(
            self.ctx.cfg,
            unit.members,
            [logits[n] for n in unit.members],
            info=unit.info,
            memo=self.memo,
            release=store.release_pages,
        )

    def run(self, unit: Unit, mapped: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Evaluate ``unit`` and write its files; ``mapped``: logits already mapped, by name (updated)."""
        try:
            for name in unit.members:
                if name not in mapped:
                    mapped[name] = self._logits(name)
            rows, paired = self._rows(unit, mapped)
            rows_df, paired_df = pd.DataFrame(rows), pd.DataFrame(paired, columns=list(PAIRED_COLUMNS))
            write_unit(Path(self.ctx.folder), unit.key, rows_df, paired_df)
        except Exception as e:
            raise UnitError(f"evaluate: unit {unit} failed: {type(e).__name__}: {e}") from e
        return rows_df, paired_df

    def run_batch(self, batch: list[Unit]):
        """Evaluate a batch, yielding ``(key, rows, paired)`` per unit; only the batch's
        shared first member stays mapped from one unit to the next."""
        mapped: dict = {}
        for unit in batch:
            mapped = {n: v for n, v in mapped.items() if n == unit.members[0]}
            yield (unit.key, *self.run(unit, mapped))


def batches(units: list[Unit], workers: int) -> list[list[Unit]]:
    """Units grouped by first member (at most ``ceil(len / (4 workers))`` each), largest first."""
    groups: dict[str, list[Unit]] = {}
    for u in units:
        groups.setdefault(u.members[0], []).append(u)
    cap = max(1, math.ceil(len(units) / (4 * workers)))
    out = [g[i : i + cap] for g in groups.values() for i in range(0, len(g), cap)]
    return sorted(out, key=len, reverse=True)


def _mp_context():
    """Workers are forked from a fresh server process that has imported this module (torch, pandas)
    once, so they start fast and share those pages; never from the stage process itself, whose
    OpenMP state a fork would inherit. Spawned where there is no fork server (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


_RUNNER: Runner | None = None  # the worker process's runner
# Torch threads of a process that runs units, whatever params ``threads`` says: the units work on row blocks of a few
# thousand samples, where intra-op threads only wait on each other (a duo unit of the embedded default: 3.4 s of CPU at
# one thread, 2x to 10x that at two); the workers (params ``evaluate.workers``) give the parallelism. The evaluate stage
# and a bundle's verification (benchmark.bundle.verify) both run units so.
THREADS = 1


def _init_worker(ctx: Context) -> None:
    global _RUNNER
    torch.set_num_threads(THREADS)
    _RUNNER = Runner(ctx)


def _run_batch(batch: list[Unit]):
    return list(_RUNNER.run_batch(batch))


def run_units(
    units: list[Unit], ctx: Context, *, workers: int = 1, progress: bool = True
) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Evaluate ``units`` (writing their files); ``key -> (rows, paired)``.

    ``workers = 1`` runs them in this process, more starts that many worker
    processes (:func:`_mp_context`); either way with :data:`THREADS` torch threads per process. The
    first unit that fails raises :class:`UnitError` naming it, once the units
    already running have finished (and written their files); queued units are dropped.
    """
    out: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    with tqdm(total=len(units), desc="evaluate", disable=not progress) as bar:
        if workers <= 1 or len(units) <= 1:
            runner, before = Runner(ctx), torch.get_num_threads()
            torch.set_num_threads(THREADS)
            try:
                for batch in batches(units, 1):
                    for key, rows, paired in runner.run_batch(batch):
                        out[key] = (rows, paired)
                        bar.update()
            finally:
                torch.set_num_threads(before)
            return out
        pool = ProcessPoolExecutor(workers, mp_context=_mp_context(), initializer=_init_worker, initargs=(ctx,))
        try:
            futures = {pool.submit(_run_batch, b): b for b in batches(units, workers)}
            for f in as_completed(futures):
                try:
                    done = f.result()
                except BrokenProcessPool as e:
                    names = ", ".join(str(u) for u in futures[f][:3])
                    raise UnitError(
                        f"evaluate: a worker process died (killed, e.g. out of memory) with units unfinished, "
                        f"e.g. {names}: {e}"
                    ) from e
                for key, rows, paired in done:
                    out[key] = (rows, paired)
                bar.update(len(done))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return out
