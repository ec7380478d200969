"""Command line: ``python -m benchmark <command>`` (:mod:`benchmark.cli.main`), one module per group of
commands."""
