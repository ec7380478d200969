"""Command ``remote`` (registered in :mod:`benchmark.cli.main`; also ``python -m benchmark.cli.remote_commands``):
share outputs through a DVC remote.

``remote push [TARGET ...]``, ``remote pull [TARGET ...]``, ``remote status [TARGET ...]``:
TARGETs are stages (``logits@lite2``), foreach groups (``logits``) or output paths
(``results/logits/lite2``), default every stage; ``-r NAME`` picks the remote
(default: the project's default remote). A failure prints one ``error:`` line
naming the remote, its URL and the stages, and exits with status 2.
"""

from __future__ import annotations

import json
import sys

ACTIONS = {
    "push": "upload the cached outputs of the targets to the remote",
    "pull": "download the outputs recorded in dvc.lock and check them out (nothing is recomputed)",
    "status": "state of every output: synced, local only, remote only, missing, not run; in git or not shared "
    "(outputs DVC does not cache)",
}


def add_remote_command(subparsers) -> None:
    """Register ``remote`` and its actions (push, pull, status) in ``subparsers``."""
    p = subparsers.add_parser(
        "remote",
        help="share checkpoints, logits and method outputs through a DVC remote",
        description="Push, pull or compare the DVC outputs of chosen stages with a DVC remote (S3, GCS, SSH, a "
        "local or NFS folder, ...; configure it once with `dvc remote add -d NAME URL`).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in ACTIONS.items():
        a = actions.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        a.add_argument(
            "targets",
            nargs="*",
            metavar="TARGET",
            help="stage (logits@lite2), foreach group (logits) or output path (results/logits/lite2); default: every "
            "stage",
        )
        a.add_argument("-r", "--remote", metavar="NAME", help="DVC remote (default: the project's default remote)")
        a.add_argument(
            "--root", default=".", metavar="DIR", help="a folder inside the DVC project (default: the current folder)"
        )
        if action == "status":
            a.add_argument("--json", action="store_true", help="print one JSON object {stage: {output: state}}")
        else:
            a.add_argument(
                "-j", "--jobs", type=int, default=None, metavar="N", help="parallel transfers (default: DVC's)"
            )
    p.set_defaults(handler=run_remote)


def run_remote(args) -> int:
    """``remote push|pull|status``: share or compare the chosen stages' outputs with a DVC remote; the exit status."""
    from benchmark.storage import remote

    try:
        if args.action == "status":
            _print_status(remote.status(args.targets, remote=args.remote, root=args.root), args.json)
            return 0
        run = remote.push if args.action == "push" else remote.pull
        t = run(args.targets, remote=args.remote, root=args.root, jobs=args.jobs)
    except remote.RemoteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    verb = "pushed to" if args.action == "push" else "pulled from"
    print(f"{t.files} files {verb} {t.remote} for {len(t.stages)} stage(s): {', '.join(t.stages) or '-'}")
    if t.not_run:
        print(f"not run yet (nothing to {args.action}): {', '.join(t.not_run)}")
    return 0


def _print_status(states: dict[str, dict[str, str]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(states, indent=2))
        return
    rows = [(stage, path, state) for stage, outs in states.items() for path, state in outs.items()]
    w1, w2 = (max((len(r[i]) for r in rows), default=5) for i in (0, 1))
    print(f"{'stage':<{w1}}  {'output':<{w2}}  state")
    for stage, path, state in rows:
        print(f"{stage:<{w1}}  {path:<{w2}}  {state}")


def main(argv=None) -> int:
    """``python -m benchmark.cli.remote_commands``: the ``remote`` command alone."""
    from benchmark.cli.subcommands import run_subcommands

    return run_subcommands("python -m benchmark.cli.remote_commands", [add_remote_command], argv)


if __name__ == "__main__":
    raise SystemExit(main())
