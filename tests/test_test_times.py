"""scripts/test_times.py: where the suite's time goes, summed from the plugin's JSON lines (a hand-worked case)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from test_times import summarise  # noqa: E402


def test_sums_per_file_fixture_and_test_and_counts_an_xdist_test_once():
    lines = [
        {"kind": "test", "node": "tests/a.py::t1", "when": "setup", "seconds": 1.0, "worker": "gw0"},
        {"kind": "test", "node": "tests/a.py::t1", "when": "call", "seconds": 2.0, "worker": "gw0"},
        {"kind": "test", "node": "tests/b.py::t2", "when": "call", "seconds": 4.0, "worker": "gw1"},
        # the controller's copies of the workers' reports (files written before the plugin left them out)
        {"kind": "test", "node": "tests/a.py::t1", "when": "call", "seconds": 2.0, "worker": "main"},
        {"kind": "test", "node": "tests/b.py::t2", "when": "call", "seconds": 4.0, "worker": "main"},
        {"kind": "fixture", "name": "run", "scope": "session", "node": "tests/a.py::t1", "seconds": 0.5, "worker": "gw0"},
        {"kind": "fixture", "name": "run", "scope": "session", "node": "tests/b.py::t2", "seconds": 1.5, "worker": "gw1"},
    ]
    text = summarise(lines, top=10)
    assert text.splitlines()[0] == "tests: 2, summed test time (set-up + call + teardown): 7 s"
    assert "| tests/b.py | 4.0 | 57.1 % |" in text and "| tests/a.py | 3.0 | 42.9 % |" in text
    assert "| run (session) | 2 | 2.0 |" in text
    assert "| tests/a.py::t1 | 3.0 |" in text


def test_one_process_run_counts_every_record():
    lines = [{"kind": "test", "node": "tests/a.py::t", "when": w, "seconds": 1.0, "worker": "main"} for w in ("setup", "call")]
    assert summarise(lines, top=5).splitlines()[0] == "tests: 1, summed test time (set-up + call + teardown): 2 s"


def test_schedule_hands_out_slow_files_first_and_the_shared_run_readers_last_keeping_files_whole():
    import importlib.util
    from types import SimpleNamespace

    # by its path: under xdist, the module named "conftest" may be another folder's conftest.py
    spec = importlib.util.spec_from_file_location("tests_root_conftest", Path(__file__).with_name("conftest.py"))
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    schedule = root_conftest.schedule

    def item(nodeid, slow=False, fixtures=()):
        return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures),
                               get_closest_marker=lambda name, s=slow: object() if s and name == "slow" else None)

    items = [item("tests/a.py::quick"), item("tests/b.py::reads", fixtures=["caltech"]), item("tests/b.py::other"),
             item("tests/c.py::e2e", slow=True), item("tests/c.py::after"), item("tests/d.py::copy", slow=True,
             fixtures=["caltech_copy", "caltech"]), item("tests/e.py::quick2")]
    order = [i.nodeid for i in schedule(items)]
    assert order == ["tests/c.py::e2e", "tests/c.py::after", "tests/a.py::quick", "tests/e.py::quick2",
                     "tests/d.py::copy", "tests/b.py::reads", "tests/b.py::other"]
