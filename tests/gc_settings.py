"""The cyclic garbage collector's settings in the test processes (tests/conftest.py's ``pytest_collection_finish``):
a module of its own, so that a test of it imports it without running conftest.py's set-up a second time."""

import gc

GC_YOUNG = 10_000  # the youngest generation is collected every GC_YOUNG allocations (the interpreter's default: 700)


def settle() -> None:
    """Freeze what exists now (the libraries, the collected test modules and their tests: kept for the whole run) out
    of the collector's reach (``gc.freeze``), which would otherwise walk them again at every full collection, and
    collect the youngest generation every :data:`GC_YOUNG` allocations instead of 700, a default sized for small
    programs. The tests' own objects are collected as before, in fewer, larger passes. In the report, core and bundle
    tests in one process (``-n 0``) the collector took 11 % of the process's CPU time in about 7,600 collections, and
    4 % in about 1,500 so (docs/how-to/tests.md). Stage processes keep the interpreter's defaults."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
