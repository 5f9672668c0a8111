"""The cache across processes: concurrent writers, and a read-only file system."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import time

import pytest

from zluda_py.cache.compile import HELPERS
from zluda_py.cache.settings import DB_NAME

from .conftest import add_kernel_ptx, run_python

WRITERS = 8

# waits for a start file so that all writers compile and store at the same moment
_WRITER = """
import os, sys, time
sys.path.insert(0, {tests!r})
from cache.conftest import add_kernel_ptx, check_adds
from zluda_py.cache import compile_cached, events, key
key.compiler_identity = lambda: "pinned"  # other sessions may edit the compiler source meanwhile
ptx = add_kernel_ptx({k})
while not os.path.exists({go!r}):
    time.sleep(0.005)
check_adds(compile_cached(ptx), {k})
print(dict(events.counts))
"""


def _writers(tmp_path, ks: list[int]) -> list[subprocess.Popen]:
    import os
    import sys
    from .conftest import REPO

    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDA_CACHE_PATH=str(tmp_path / "cache"))
    env.pop("CUDA_CACHE_DISABLE", None)
    env.pop("CUDA_CACHE_MAXSIZE", None)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER.format(tests=str(REPO / "tests"), k=k, go=str(go))],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in ks]
    time.sleep(3)  # let every process get to the start line (imports)
    go.touch()
    return procs


def _finish(procs) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert err == "", err  # no warning, no error
        outs.append(out)
    return outs


def _entries(tmp_path) -> int:
    """Entries in the cache, the CPU's shared helpers (stored at a process's first load) not counted."""
    conn = sqlite3.connect(tmp_path / "cache" / DB_NAME)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = conn.execute("SELECT count(*) FROM entries WHERE label != ?", (HELPERS,)).fetchone()[0]
    conn.close()
    return n


def test_processes_starting_together_compile_a_module_once(tmp_path):
    outs = _finish(_writers(tmp_path, [21] * WRITERS))
    assert _entries(tmp_path) == 1
    assert sum("'compiled': 1" in o for o in outs) == 1, outs  # the others waited and took its entry
    assert sum("'hit': 1" in o for o in outs) == WRITERS - 1, outs
    verify = subprocess.run(["zluda", "cache", "verify", "--cache", str(tmp_path / "cache")],
                            capture_output=True, text=True)
    assert verify.returncode == 0 and "ok: 2 entries" in verify.stdout, verify.stdout + verify.stderr


def test_concurrent_writers_of_different_modules(tmp_path):
    _finish(_writers(tmp_path, list(range(30, 30 + WRITERS))))
    assert _entries(tmp_path) == WRITERS


# --------------------------------------------------------------------------- read-only
# Tests run as root, for whom chmod does not make a directory read-only. A read-only bind
# mount in a private mount namespace (unshare -m) does: EROFS, as on a read-only image layer.
def _read_only_prefix(directory) -> list[str]:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.fail("needs `unshare -m` (mount namespaces) to make a read-only file system")
    d = str(directory)
    return ["unshare", "-m", "sh", "-c", f'mount --bind "{d}" "{d}" && mount -o remount,bind,ro "{d}" && exec "$@"',
            "sh"]


_TWICE = """
from zluda_py.cache import compile_cached, events, key
key.compiler_identity = lambda: "pinned"  # other sessions may edit the compiler source meanwhile
import sys; sys.path.insert(0, {tests!r})
from cache.conftest import add_kernel_ptx, check_adds
for _ in range(2):
    check_adds(compile_cached(add_kernel_ptx({k})), {k})
print(dict(events.counts))
"""


def test_read_only_file_system_means_no_cache_and_one_warning(tmp_path):
    from .conftest import REPO

    ro = tmp_path / "ro"
    ro.mkdir()
    res = run_python(_TWICE.format(tests=str(REPO / "tests"), k=41), {"CUDA_CACHE_PATH": str(ro / "cache")},
                     _read_only_prefix(ro))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("zluda: warning:") == 1 and "Read-only file system" in res.stderr, res.stderr
    assert "'compiled': 2" in res.stdout and "stored" not in res.stdout
    assert not (ro / "cache").exists()


def test_prewarmed_cache_on_read_only_file_system_serves_hits(tmp_path):
    from .conftest import REPO

    ro = tmp_path / "ro"
    env = {"CUDA_CACHE_PATH": str(ro / "cache")}
    warm = run_python(_TWICE.format(tests=str(REPO / "tests"), k=42), env)
    assert warm.returncode == 0, warm.stderr
    res = run_python(_TWICE.format(tests=str(REPO / "tests"), k=42), env, _read_only_prefix(ro))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("zluda: warning:") == 1 and "read-only" in res.stderr, res.stderr
    assert "'hit': 2" in res.stdout and "compiled" not in res.stdout


_HOLDER = """
import sys, time
from zluda_py.cache import from_environment, store_for, cache_key
from zluda_py.compiler.cpu.target import CPU
with store_for(from_environment()).compiling(cache_key([sys.argv[1]], CPU)):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_compile_lock_dies_with_its_holder(tmp_path):
    import os
    import signal
    import sys

    from .conftest import REPO
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDA_CACHE_PATH=str(tmp_path / "cache"))
    ptx = add_kernel_ptx(77)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, ptx], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        r = run_python(f"import sys; sys.path.insert(0, {str(REPO / 'tests')!r})\n"
                       "from cache.conftest import add_kernel_ptx, check_adds\n"
                       "from zluda_py.cache import compile_cached\n"
                       "check_adds(compile_cached(add_kernel_ptx(77)), 77); print('ran')",
                       env={"CUDA_CACHE_PATH": str(tmp_path / "cache")}, timeout=120)
        assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    finally:
        holder.kill()
