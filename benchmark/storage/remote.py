"""Share DVC outputs (checkpoints, logits, method outputs) through a DVC remote.

:func:`push`, :func:`pull` and :func:`status` take stages (``logits@lite2``, a
``foreach`` group such as ``logits``) or output paths (``results/logits/lite2``),
by default every stage, and a remote name (by default the project's default
remote). They use DVC's Python API with DVC's console logging captured. The
remote is probed first (one metadata request on its root); any failure becomes
one :class:`RemoteError` naming the remote (name and URL from the DVC config),
the stages concerned, a short reason and what to check.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from benchmark.storage.atomic import PathLike

if TYPE_CHECKING:  # DVC ships no type information: these read as Any
    from dvc.output import Output
    from dvc.repo import Repo
    from dvc.stage import Stage

DVC_LOGGERS = ("dvc", "dvc_data", "dvc_objects")
SHOWN_STAGES = 4  # stage names spelled out in a message; the rest are counted
CLOUD_SCHEMES = {"s3", "gs", "gcs", "azure", "az", "oss"}
# dvc's cloud status of one object -> ours, ordered from worst to best
STATES = {"missing": "missing", "new": "local only", "deleted": "remote only"}


class RemoteError(RuntimeError):
    """A push, pull or status that failed; the message names the remote, the stages and what to check."""


@dataclass(frozen=True)
class Remote:
    name: str
    url: str  # as configured, password masked

    def __str__(self) -> str:
        return f"remote {self.name!r} ({self.url})"


@dataclass(frozen=True)
class Transfer:
    """What one push or pull did."""

    remote: Remote
    stages: tuple[str, ...]  # stages whose outputs were shared
    files: int  # files uploaded (push) or downloaded (pull)
    not_run: tuple[str, ...] = ()  # stages without outputs in dvc.lock: nothing to share yet


def push(
    targets: Sequence[str] = (), *, remote: str | None = None, root: PathLike = ".", jobs: int | None = None
) -> Transfer:
    """Upload the cached outputs of ``targets`` (default: every stage) to the remote."""
    with _project(root) as (repo, log):
        rem = _remote(repo, remote)
        ran, not_run = _split_ran(repo, targets, "push")
        _probe(repo, rem, "pushing", ran)
        try:
            files = repo.push(targets=_dvc_targets(targets, not_run, ran), remote=rem.name, jobs=jobs) if ran else 0
        except Exception as e:  # noqa: BLE001 - any library/network failure becomes one message
            raise _transfer_error(rem, "pushing", ran, e, log) from e
        return Transfer(rem, _names(ran), int(files), _names(not_run))


def pull(
    targets: Sequence[str] = (), *, remote: str | None = None, root: PathLike = ".", jobs: int | None = None
) -> Transfer:
    """Download the outputs of ``targets`` (default: every stage) recorded in dvc.lock and check them out.

    Nothing is recomputed: afterwards ``dvc status`` reports those stages up to date.
    """
    from dvc.exceptions import CheckoutError

    with _project(root) as (repo, log):
        rem = _remote(repo, remote)
        ran, not_run = _split_ran(repo, targets, "pull")
        _probe(repo, rem, "pulling", ran)
        try:
            res = repo.pull(targets=_dvc_targets(targets, not_run, ran), remote=rem.name, jobs=jobs) if ran else {}
        except CheckoutError as e:  # the remote answered but lacks some objects
            lacking = _stages_of(repo, ran, e.target_infos) or ran
            paths = ", ".join(sorted(str(t) for t in e.target_infos))
            names = " ".join(_names(lacking))
            raise RemoteError(
                f"{rem} does not have the outputs of {_what(lacking)} ({paths}): push them from the clone that "
                f"computed them (`python -m benchmark remote push {names}`) or recompute them (`dvc repro {names}`)"
            ) from e
        except Exception as e:  # noqa: BLE001
            raise _transfer_error(rem, "pulling", ran, e, log) from e
        return Transfer(rem, _names(ran), int(res.get("stats", {}).get("fetched", 0)), _names(not_run))


def status(
    targets: Sequence[str] = (), *, remote: str | None = None, root: PathLike = "."
) -> dict[str, dict[str, str]]:
    """State of every output of the stages against the remote: ``{stage: {output path: state}}``.

    States of a DVC-cached output: ``synced`` (in the local cache and on the remote), ``local only``
    (push it), ``remote only`` (pull it), ``missing`` (neither: recompute it),
    ``not run`` (no entry in dvc.lock yet). An output DVC does not cache (``cache: false``) travels through git or
    not at all: ``in git`` (tracked by git: a clone has it) or ``not shared`` (a clone lacks it, so its stage would
    run again there).
    """
    with _project(root) as (repo, log):
        rem = _remote(repo, remote)
        stages = _stages(repo, targets, cached_only=False)
        _probe(repo, rem, "checking", stages)
        try:
            cloud = repo.status(targets=list(targets) or None, cloud=True, remote=rem.name)
            out = {
                s.addressing: {
                    _relpath(repo, o): _state(repo, rem, o, cloud) if o.use_cache else _uncached_state(repo, o)
                    for o in s.outs
                }
                for s in stages
            }
        except Exception as e:  # noqa: BLE001
            raise _transfer_error(rem, "checking", stages, e, log) from e
        return out


def _uncached_state(repo: Repo, out: Output) -> str:
    """``in git`` when git tracks the output (a clone has it), else ``not shared``."""
    try:
        return "in git" if repo.scm.is_tracked(out.fs_path) else "not shared"
    except Exception:  # noqa: BLE001 - no git repository (dvc init --no-scm): nothing but the remote travels
        return "not shared"


def _state(repo: Repo, rem: Remote, out: Output, cloud: dict) -> str:
    """One output's state from dvc's cloud status (object path -> new/deleted/missing). dvc lists nothing
    for a directory whose manifest is neither cached nor on the remote, so that manifest is checked here."""
    if not out.hash_info:
        return "not run"
    oid = out.hash_info.value
    if not out.cache.exists(oid) and not repo.cloud.get_remote_odb(rem.name, "status", hash_name=out.hash_name).exists(
        oid
    ):
        return "missing"
    path = _relpath(repo, out)
    seen = {v for k, v in cloud.items() if k == path or k.startswith(path + "/")}
    return next((ours for theirs, ours in STATES.items() if theirs in seen), "synced")


# -- project, remote and stages ---------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _project(root: PathLike) -> Iterator[tuple[Repo, _Records]]:
    """``(repo, log)``: the DVC project containing ``root`` with the working folder at its root, and the
    log records DVC would have printed (warnings and errors)."""
    from dvc.exceptions import DvcException, NotDvcRepoError
    from dvc.repo import Repo

    try:
        top = Repo.find_root(os.fspath(root))
    except NotDvcRepoError:
        raise RemoteError(
            f"{Path(root).resolve()} is not inside a DVC project (no .dvc folder): run `dvc init` at the repository "
            "root"
        ) from None
    log = _Records()
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in map(logging.getLogger, DVC_LOGGERS)]
    try:
        for lg, _, _ in saved:
            lg.handlers[:] = [log]
            lg.propagate = False
        with _chdir(top):  # targets and stage names are relative to the project root
            try:
                repo = Repo(top)
            except DvcException as e:
                raise RemoteError(f"cannot open the DVC project at {top}: {e}") from None
            with repo:
                yield repo, log
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers[:] = handlers
            lg.propagate = propagate


@contextlib.contextmanager
def _chdir(path: PathLike) -> Iterator[None]:
    """Work in ``path`` and return to the current folder after (``contextlib.chdir`` is Python 3.11's)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _mask(url: str) -> str:
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def _remote(repo: Repo, name: str | None) -> Remote:
    remotes = repo.config.get("remote", {})
    configured = f"configured: {', '.join(sorted(remotes))}" if remotes else "none is configured"
    name = name or repo.config.get("core", {}).get("remote")
    if not name:
        raise RemoteError(
            f"no DVC remote given and no default remote ({configured}): add one with "
            "`dvc remote add -d team s3://bucket/uqbench` (any DVC remote: s3, gs, ssh, a local or NFS folder) "
            "or choose one with --remote NAME"
        )
    if name not in remotes:
        raise RemoteError(f"no DVC remote named {name!r} ({configured}); add it with `dvc remote add {name} URL`")
    return Remote(name, _mask(str(remotes[name].get("url", ""))))


def _cached_outs(stage: Stage) -> list:
    return [o for o in stage.outs if o.use_cache]


def _stages(repo: Repo, targets: Sequence[str], *, cached_only: bool = True) -> list:
    """Stages of ``targets`` (stage names, foreach groups, output paths; default all) that have cached outputs (any
    output: ``cached_only=False``)."""
    from dvc.exceptions import DvcException

    stages = []
    try:
        infos = [i for t in targets for i in _collect(repo, t)] if targets else list(repo.stage.collect_granular())
    except DvcException as e:
        raise RemoteError(f"cannot read the DVC pipeline of {repo.root_dir}: {e}") from None
    for info in infos:
        if info.stage not in stages and (_cached_outs(info.stage) if cached_only else info.stage.outs):
            stages.append(info.stage)
    if targets and not stages:
        raise RemoteError(
            f"{', '.join(targets)}: no output cached by DVC (outputs with `cache: false` are never stored on a remote)"
        )
    return stages


def _collect(repo: Repo, target: str) -> list:
    from dvc.exceptions import DvcException

    try:
        return repo.stage.collect_granular(target)
    except DvcException:
        raise RemoteError(
            f"{target!r} is neither a stage nor a DVC output of {repo.root_dir} (see `dvc stage list`)"
        ) from None


def _split_ran(repo: Repo, targets: Sequence[str], action: str) -> tuple[list, list]:
    """(stages with outputs recorded in dvc.lock, stages not run yet); an error when the named targets never ran."""
    stages = _stages(repo, targets)
    ran = [s for s in stages if all(o.hash_info for o in _cached_outs(s))]
    not_run = [s for s in stages if s not in ran]
    if targets and not ran:
        raise RemoteError(
            f"nothing to {action} for {_what(not_run)}: no outputs recorded in dvc.lock yet; "
            f"run `dvc repro {' '.join(_names(not_run))}` first (or pull dvc.lock from git)"
        )
    return ran, not_run


def _dvc_targets(targets: Sequence[str], not_run: list, ran: list) -> list[str] | None:
    """What to hand DVC's push or pull: the targets given; else every stage (None) when every stage ran, or the stages
    that ran. DVC reads the pipeline and its dvc.lock once per target, so naming all stages one by one costs a read
    of dvc.lock each (seconds on the embedded default's)."""
    if targets:
        return list(targets)
    return None if not not_run else list(_names(ran))


def _relpath(repo: Repo, out: Output) -> str:
    return Path(os.path.relpath(out.fs_path, repo.root_dir)).as_posix()


def _stages_of(repo: Repo, stages: list, paths: Iterable[str]) -> list:
    """The stages owning any of ``paths`` (relative to the project root)."""
    paths = [Path(p).as_posix().rstrip("/") for p in paths]
    outs = {s: [_relpath(repo, o) for o in _cached_outs(s)] for s in stages}
    return [
        s
        for s in stages
        if any(p == o or p.startswith(o + "/") or o.startswith(p + "/") for p in paths for o in outs[s])
    ]


# -- errors ------------------------------------------------------------------------------------


def _names(stages: Iterable[Stage]) -> tuple[str, ...]:
    return tuple(s.addressing for s in stages)


def _what(stages: Sequence[Stage]) -> str:
    names = _names(stages)
    if not names:
        return "no stage"
    if len(names) == 1:
        return f"stage {names[0]}"
    shown = ", ".join(names[:SHOWN_STAGES])
    return f"stages {shown}" + (f" and {len(names) - SHOWN_STAGES} more" if len(names) > SHOWN_STAGES else "")


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _hint(rem: Remote) -> str:
    scheme = urlsplit(rem.url).scheme.lower()
    if len(scheme) <= 1 or scheme == "file":  # a local path (or a Windows drive letter)
        return "check that the folder exists or can be created and is writable (`dvc remote list`)"
    if scheme in CLOUD_SCHEMES:
        return (
            f"check the bucket, the credentials (the provider's environment variables or "
            f"`dvc remote modify --local {rem.name} ...`) and the network"
        )
    return (
        f"check the host, port and credentials of the URL (`dvc remote modify --local {rem.name} ...`) and the network"
    )


def _connection_cause(e: BaseException) -> BaseException | None:
    """The connection-level error behind a 'not found' (fsspec's HTTP filesystem reports a refused
    connection as FileNotFoundError), or None for a genuine 'not found'."""
    c = e.__cause__ or e.__context__
    while c is not None:
        if isinstance(c, OSError) and not isinstance(c, FileNotFoundError):
            return c
        c = c.__cause__ or c.__context__
    return None


def _probe(repo: Repo, rem: Remote, verb: str, stages: Sequence[Stage]) -> None:
    """Raise :class:`RemoteError` unless the remote answers; a remote that does not exist yet answers 'not found'."""
    try:
        remote = repo.cloud.get_remote(rem.name)
    except ImportError as e:  # e.g. s3 without the dvc-s3 plugin
        raise RemoteError(
            f"{rem} cannot be used while {verb} {_what(stages)}: {e} (install the plugin into this environment)"
        ) from None
    except Exception as e:  # noqa: BLE001 - invalid remote configuration
        raise RemoteError(f"{rem} cannot be used while {verb} {_what(stages)}: {_short(e)}; {_hint(rem)}") from None
    try:
        remote.fs.info(remote.path)
    except FileNotFoundError as e:
        cause = _connection_cause(e)
        if cause is not None:
            raise RemoteError(
                f"{rem} unreachable while {verb} {_what(stages)}: {_short(cause)}; {_hint(rem)}"
            ) from None
    except Exception as e:  # noqa: BLE001
        raise RemoteError(f"{rem} unreachable while {verb} {_what(stages)}: {_short(e)}; {_hint(rem)}") from None


def _transfer_error(rem: Remote, verb: str, stages: Sequence[Stage], e: BaseException, log: _Records) -> RemoteError:
    """One message for a failure inside DVC: its error plus the first reason DVC logged for a failed file."""
    from dvc.exceptions import DvcException

    causes = [r.exc_info[1] for r in log.records if r.exc_info and r.exc_info[1] is not None]
    reason = str(e).strip().splitlines()[0] if isinstance(e, DvcException) else _short(e)
    if causes:
        reason += f" ({_short(causes[0])})"
    return RemoteError(f"{rem} failed while {verb} {_what(stages)}: {reason}; {_hint(rem)}")
