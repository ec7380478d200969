"""Which environment variables a warm ``python``'s request may set differently from its server (benchmark/warm:
``HARMLESS``): checked, not assumed. Every read of ``os.environ`` while the server's libraries are imported is traced;
none may be of a harmless variable, and a library that reads the whole environment must be a known one."""

import json
import os
import subprocess
import sys

import pytest

from benchmark.warm import warm_server

pytestmark = pytest.mark.slow  # a process that imports every library the server preloads


ENV_READS = r"""
import json, os, sys
reads = {}
Environ = type(os.environ)
getitem, contains, iterate = Environ.__getitem__, Environ.__contains__, Environ.__iter__


def reader():
    # (the first frame outside os and collections.abc; "(all)" when the read is part of an iteration: items(), a copy)
    f, names = sys._getframe(2), set()
    while f.f_code.co_filename in ("<frozen os>", "<frozen _collections_abc>", os.__file__):
        names.add(f.f_code.co_name)
        f = f.f_back
    where = "/".join(f.f_code.co_filename.replace(os.sep, "/").split("/")[-2:])
    return where + (" (all)" if "__iter__" in names else "")


def traced_getitem(self, key):
    reads.setdefault(reader(), set()).add(key)
    return getitem(self, key)


def traced_contains(self, key):
    reads.setdefault(reader(), set()).add(key)
    return contains(self, key)


def traced_iter(self):
    reads.setdefault(reader().split(" (all)")[0] + " (all)", set())
    return iterate(self)


Environ.__getitem__, Environ.__contains__, Environ.__iter__ = traced_getitem, traced_contains, traced_iter
import importlib
sys.path.insert(0, sys.argv[1])
import warm_server
for name in warm_server.PRELOAD:
    importlib.import_module(name)
print(json.dumps({k: sorted(v) for k, v in reads.items()}))
"""


def test_no_library_reads_a_harmless_variable_when_imported(tmp_path):
    """What makes a variable ``HARMLESS`` (a stage may set it differently from its server): none of the libraries the
    server imports reads it while being imported (traced on ``os.environ``). A library that reads the whole
    environment (a copy, or a scan for its prefix) must be a known one whose prefix no harmless variable has."""
    (tmp_path / "reads.py").write_text(ENV_READS)
    out = subprocess.run(
        [sys.executable, str(tmp_path / "reads.py"), os.path.dirname(warm_server.__file__)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    reads = json.loads(out.splitlines()[-1])
    whole = {where.split(" (all)")[0] for where in reads if where.endswith(" (all)")}
    assert whole <= set(warm_server.WHOLE_ENV_READERS), whole  # (unknown reader of the whole environment)
    by_name = {k for where, keys in reads.items() if where.split(" (all)")[0] not in whole for k in keys}
    read = sorted(k for k in by_name if warm_server.harmless(k))
    assert read == [], f"read when the server's libraries are imported, so not harmless: {read}"
    assert "HF_HUB_OFFLINE" in by_name and "DVC_SHOW_TRACEBACK" in by_name  # the tracer sees reads on import
    prefixes = warm_server.WHOLE_ENV_READERS.values()
    assert not [k for k in warm_server.HARMLESS | warm_server.TORCHRUN if k.startswith(tuple(prefixes))]
    assert not [p for p in warm_server.HARMLESS_PREFIXES for q in prefixes if p.startswith(q) or q.startswith(p)]
