"""tests/precompiled.py: the run's precompiled bytecode is used, and never when its source changed."""

import importlib.util
import os
import subprocess
import sys

from precompiled import precompile

# imports mod and prints its VALUE and whether the import compiled its source (False: it read the .pyc)
PROBE = """import sys
from importlib import _bootstrap_external as ext
compiled = []
to_code = ext.SourceLoader.source_to_code
ext.SourceLoader.source_to_code = lambda self, *a, **k: compiled.append(1) or to_code(self, *a, **k)
sys.path.insert(0, "benchmark")
import mod
print(mod.VALUE, bool(compiled))
"""


def _value(root, env) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=root, env=env, capture_output=True, text=True, check=True
    ).stdout.split()


def test_precompiled_modules_are_hash_checked_and_an_edit_of_the_same_size_and_time_is_seen(tmp_path):
    src = tmp_path / "benchmark" / "mod.py"
    src.parent.mkdir()
    src.write_text("VALUE = 1\n")
    assert precompile(tmp_path)
    pyc = importlib.util.cache_from_source(str(src))
    flags = int.from_bytes(open(pyc, "rb").read()[4:8], "little")
    assert flags == 0b11  # PEP 552: hash-based (bit 0), checked against the source (bit 1)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    assert _value(tmp_path, env) == ["1", "False"]  # read from the .pyc, not compiled
    stat = src.stat()
    src.write_text("VALUE = 2\n")  # same size; same modification time below: a timestamp .pyc would look current
    os.utime(src, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with open(pyc, "rb") as f:
        before = f.read()
    assert _value(tmp_path, env) == ["2", "True"]  # the .pyc's hash no longer matches: compiled from the source
    with open(pyc, "rb") as f:
        assert f.read() == before  # PYTHONDONTWRITEBYTECODE kept: the stale file was not rewritten, only not used


def test_a_syntax_error_is_reported_as_not_all_compiled(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.py").write_text("def (:\n")
    assert not precompile(tmp_path)
