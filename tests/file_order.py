"""The order pytest-xdist hands out the test files in (tests/conftest.py's ``pytest_collection_modifyitems``): a module
of its own, so that a test of it imports it without running conftest.py's set-up a second time."""


def uses_caltech(item) -> bool:
    return "caltech" in getattr(item, "fixturenames", ())


def schedule(items) -> list:
    """The order the test files are handed out in (pytest-xdist's ``loadfile`` sends whole files in collection
    order): files with a ``slow`` test (an end-to-end run or another test of whole processes) first, so that the
    longest files do not start last and leave one worker running alone at the end; files that read the shared
    ``caltech`` run last (their slow files first), so that no worker sits waiting on its lock while it is built; the
    rest between. Within a file, the order is kept."""
    caltech, slow = set(), set()
    for item in items:
        f = item.nodeid.split("::")[0]
        if uses_caltech(item):
            caltech.add(f)
        if item.get_closest_marker("slow"):
            slow.add(f)

    def rank(item) -> int:
        f = item.nodeid.split("::")[0]
        return (2 if f in caltech else 0) + (0 if f in slow else 1)

    return sorted(items, key=rank)  # stable: a file's tests stay together and in their order


def named_files(args, cwd) -> int | None:
    """How many test files the command line's arguments ``args`` (relative to ``cwd``) name, when each is a file or
    a test in one (``tests/x/test_y.py``, ``tests/x/test_y.py::test_z``); None when any names a folder or nothing (the
    whole suite: ``testpaths``)."""
    from pathlib import Path

    files = set()
    for arg in args:
        path = Path(cwd, arg.split("::", 1)[0])
        if path.suffix != ".py" or not path.is_file():
            return None
        files.add(path.resolve())
    return len(files) or None
