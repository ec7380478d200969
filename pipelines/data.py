"""DVC stage `data`: build the suite's splits (embedded: whole splits; paper suite: an index) into results/data/."""

from pathlib import Path

from benchmark.stages.entry import stage_main
from benchmark.stages.suite_source import data_source, prepare_data
from benchmark.storage import store


def _run(source, args) -> None:
    prepare_data(source)
    for folder in args.keep_dir:  # a folder of optional outputs that a later stage depends on must exist
        store.write_text(Path(folder) / ".keep", "")


def _args(parser) -> None:
    parser.add_argument(
        "--keep-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also create DIR/.keep (DIR: a folder of optional stage outputs that another stage depends on)",
    )


if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, _run, _args, load=data_source))
