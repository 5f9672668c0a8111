"""The compiled-code cache in one process: hits, keys, settings, permissions, corruption, eviction."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat

import pytest

import zluda_py.compiler.pipeline as pipeline
from zluda_py import cache
from zluda_py.cache import events, key
from zluda_py.cache.compile import HELPERS, helpers
from zluda_py.cache.settings import DB_NAME, DEFAULT_MAXSIZE, from_environment
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.target import TargetUnavailable, get

from .conftest import add_kernel_ptx, check_adds, run_python


def db(cache_dir) -> sqlite3.Connection:
    return sqlite3.connect(cache_dir / DB_NAME)


def keys(cache_dir) -> set[str]:
    with db(cache_dir) as conn:
        return {r[0] for r in conn.execute("SELECT key FROM entries")}


def no_compiler(monkeypatch) -> None:
    """Make any compile (and so any LLVM optimiser run) fail the test."""
    def refuse(*a, **k):
        raise AssertionError("compiled although the module was cached")
    monkeypatch.setattr(pipeline, "compile_object", refuse)


def test_miss_then_hit_loads_without_compiling(cache_dir, monkeypatch):
    ptx = add_kernel_ptx(5)
    check_adds(cache.compile_cached(ptx), 5)
    assert events.counts[events.COMPILED] == 1 and events.counts[events.STORED] == 1
    cache.store._stores.clear()  # as a new process would: nothing kept in memory
    no_compiler(monkeypatch)
    check_adds(cache.compile_cached(ptx), 5)
    assert events.counts[events.HIT] == 1
    assert keys(cache_dir) == {cache.cache_key([ptx], CPU)}


WARM_PROCESS = f"""
import numpy as np
from zluda_py.cache import compile_cached
from zluda_py.compiler.cpu.target import CpuTarget
def refuse(self):
    raise AssertionError("compiled the shared helpers although the cache holds them")
CpuTarget.helpers_object = refuse
a = np.zeros(64, np.uint32)
compile_cached({add_kernel_ptx(5)!r}).launch("add_k", 1, 64, [a])
assert (a == 5).all()
"""


def test_shared_helpers_are_an_entry_of_their_own(cache_dir, monkeypatch):
    """The helpers every CPU module links to are compiled once, stored, and taken from the
    cache by a new process (which links them at its first load) without running LLVM."""
    stored = helpers(CPU)
    assert events.counts[events.STORED] == 1 and keys(cache_dir) == {cache.cache_key([], CPU, HELPERS)}
    check_adds(cache.compile_cached(add_kernel_ptx(5)), 5)  # this process links its own copy
    res = run_python(WARM_PROCESS, env={"CUDA_CACHE_PATH": str(cache_dir)})
    assert res.returncode == 0, res.stderr
    cache.store._stores.clear()
    assert helpers(CPU) == stored


def test_key_covers_ptx_order_target_and_compiler(cache_dir, monkeypatch):
    a, b = add_kernel_ptx(1), add_kernel_ptx(2)
    k = cache.cache_key
    assert len({k([a], CPU), k([b], CPU), k([a, b], CPU), k([b, a], CPU), k([a + b], CPU)}) == 5
    plain = k([a], CPU)
    with monkeypatch.context() as m:
        m.setattr(key, "compiler_identity", lambda: "zluda-py 99 llvm 1 src 0")
        other_compiler = k([a], CPU)
    with monkeypatch.context() as m:
        m.setattr(key, "target_description", lambda t: "aarch64-unknown-linux-gnu neoverse-v2 +sve")
        other_cpu = k([a], CPU)
    assert len({plain, other_compiler, other_cpu}) == 3
    with pytest.raises(TargetUnavailable, match="unknown target"):
        get("sm_86")
    gfx90a, gfx942 = k([a], get("gfx90a")), k([a], get("gfx942"))
    assert len({plain, gfx90a, gfx942}) == 3


class _CountedText(str):
    """PTX text that counts how often it is encoded (hashed for a key)."""

    encoded = 0

    def encode(self, *args, **kwargs) -> bytes:
        type(self).encoded += 1
        return super().encode(*args, **kwargs)


def test_a_module_text_is_hashed_once_for_all_its_parts(cache_dir):
    text = _CountedText(add_kernel_ptx(5) + "// a text no other test hashes\n")
    parts = [None, "@variables", "add", "other"]
    got = [cache.cache_key([text], CPU, part) for part in parts]
    assert _CountedText.encoded == 1
    for part, k in zip(parts, got):  # the key as key.py's docstring defines it, hashed here independently
        data = str(text).encode()
        h = hashlib.sha256(key.build_id(CPU).encode() + len(data).to_bytes(8, "little") + data)
        if part is not None:
            h.update(b"\0part\0" + part.encode())
        assert k == h.hexdigest()


def test_compiler_change_misses(cache_dir, monkeypatch):
    ptx = add_kernel_ptx(3)
    cache.compile_cached(ptx)
    monkeypatch.setattr(key, "compiler_identity", lambda: "another compiler")
    check_adds(cache.compile_cached(ptx), 3)
    assert events.counts[events.COMPILED] == 2 and len(keys(cache_dir)) == 2


def test_permissions(cache_dir):
    s = cache.store_for(from_environment())
    cache.compile_cached(add_kernel_ptx(4))
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    files = [p for p in cache_dir.iterdir()]
    assert {p.name for p in files} >= {DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm"}  # the connection is open
    for p in files:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    assert s.usable and s.writable


def test_disable_switch(cache_dir, monkeypatch):
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "1")
    ptx = add_kernel_ptx(6)
    for _ in range(2):
        check_adds(cache.compile_cached(ptx), 6)
    assert events.counts[events.COMPILED] == 2 and events.counts[events.HIT] == 0
    assert not cache_dir.exists()
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "0")
    cache.compile_cached(ptx)
    assert events.counts[events.STORED] == 1 and cache_dir.exists()


def test_bad_maxsize_warns_and_uses_default(cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", "lots")
    assert from_environment().max_size == DEFAULT_MAXSIZE
    cache.compile_cached(add_kernel_ptx(7))
    cache.compile_cached(add_kernel_ptx(8))
    assert capsys.readouterr().err.count("CUDA_CACHE_MAXSIZE='lots'") == 1


# --------------------------------------------------------------------------- corruption
def _loaded_objects(monkeypatch) -> list[bytes]:
    """Record every object handed to the loader."""
    seen: list[bytes] = []
    real = pipeline.load

    def spy(object_code, metadata, *target):
        seen.append(object_code)
        return real(object_code, metadata, *target)
    monkeypatch.setattr(pipeline, "load", spy)
    monkeypatch.setattr("zluda_py.compiler.load", spy)
    return seen


@pytest.mark.parametrize("damage", ["object byte", "object truncated", "metadata", "checksum", "object as text"])
def test_corrupt_entry_is_dropped_rebuilt_and_never_loaded(cache_dir, monkeypatch, damage):
    ptx = add_kernel_ptx(9)
    cache.compile_cached(ptx)
    with db(cache_dir) as conn:
        good = conn.execute("SELECT object FROM entries").fetchone()[0]
        bad = {"object byte": ("object", good[:100] + bytes([good[100] ^ 0x40]) + good[101:]),
               "object truncated": ("object", good[: len(good) // 2]),
               "metadata": ("metadata", '{"kernels": {}, "globals": {}}'),
               "checksum": ("checksum", "0" * 64),
               "object as text": ("object", "not code")}[damage]
        conn.execute(f"UPDATE entries SET {bad[0]} = ?", (bad[1],))
    cache.store._stores.clear()
    seen = _loaded_objects(monkeypatch)
    check_adds(cache.compile_cached(ptx), 9)
    assert events.counts[events.CORRUPT] == 1 and events.counts[events.COMPILED] == 2
    assert seen == [good]  # the damaged bytes never reached the loader; the fresh compile did
    assert cache.store_for(from_environment()).verify() == []  # the entry was rewritten intact
    check_adds(cache.compile_cached(ptx), 9)
    assert events.counts[events.HIT] == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "zeroed pages"])
def test_damaged_database_is_rebuilt(cache_dir, monkeypatch, capsys, damage):
    for k in range(3):
        cache.compile_cached(add_kernel_ptx(k))
    cache.store._stores.clear()  # closes nothing, but the next use opens the file again
    path = cache_dir / DB_NAME
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    data = path.read_bytes()
    if damage == "garbage":
        data = os.urandom(len(data))
    elif damage == "truncated":
        data = data[: len(data) // 3]
    else:
        data = data[:4096] + bytes(len(data) - 4096)
    path.write_bytes(data)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    seen = _loaded_objects(monkeypatch)
    check_adds(cache.compile_cached(add_kernel_ptx(1)), 1)
    assert events.counts[events.HIT] == 0  # nothing from the damaged file was used
    assert len(seen) == 1
    assert events.counts[events.REBUILT] + events.counts[events.CORRUPT] >= 1 or damage == "truncated"
    # the database works again afterwards
    check_adds(cache.compile_cached(add_kernel_ptx(1)), 1)
    assert events.counts[events.HIT] == 1
    assert cache.store_for(from_environment()).verify() == []


def test_verify_reports_and_drops_bad_entries(cache_dir):
    for k in range(3):
        cache.compile_cached(add_kernel_ptx(k))
    with db(cache_dir) as conn:
        conn.execute("UPDATE entries SET metadata = '{}' WHERE rowid = (SELECT min(rowid) FROM entries)")
    problems = cache.store_for(from_environment()).verify()
    assert len(problems) == 1 and "checksum mismatch" in problems[0]
    assert len(keys(cache_dir)) == 2


# --------------------------------------------------------------------------- size limit
def test_size_limit_evicts_least_recently_used(cache_dir, monkeypatch):
    ptxs = [add_kernel_ptx(k) for k in range(4)]
    cache.compile_cached(ptxs[0])
    with db(cache_dir) as conn:
        size = conn.execute("SELECT size FROM entries").fetchone()[0]
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", str(size * 2 + size // 2))  # room for two entries
    cache.compile_cached(ptxs[1])
    cache.compile_cached(ptxs[0])  # a hit: entry 0 becomes the most recently used
    assert events.counts[events.HIT] == 1
    cache.compile_cached(ptxs[2])  # over the limit: entry 1, least recently used, goes
    k = [cache.cache_key([p], CPU) for p in ptxs]
    assert keys(cache_dir) == {k[0], k[2]}
    assert events.counts[events.EVICTED] == 1
    with db(cache_dir) as conn:
        assert conn.execute("SELECT sum(size) FROM entries").fetchone()[0] <= size * 2 + size // 2
    check_adds(cache.compile_cached(ptxs[1]), 1)  # evicted: compiled again, correctly
    assert keys(cache_dir) == {k[0], k[1]} or keys(cache_dir) == {k[2], k[1]}


def test_entry_larger_than_the_cache_is_not_stored(cache_dir, monkeypatch):
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", "1000")
    check_adds(cache.compile_cached(add_kernel_ptx(11)), 11)
    assert events.counts[events.STORED] == 0 and keys(cache_dir) == set()


# --------------------------------------------------------------------------- zluda cache
def test_cache_command(cache_dir, monkeypatch, capsys):
    from zluda_py.cli import main

    for k in range(2):
        cache.compile_cached(add_kernel_ptx(60 + k))
    with monkeypatch.context() as m:  # an entry from "another compiler": stale
        m.setattr(key, "compiler_identity", lambda: "an older zluda-py")
        cache.compile_cached(add_kernel_ptx(62))
    assert main(["cache", "info", "-v"]) == 0
    out = capsys.readouterr().out
    assert "entries:    3 (3 kernels), 1 stale" in out and out.count("add_k") == 3, out
    with db(cache_dir) as conn:
        conn.execute("UPDATE entries SET checksum = 'x' WHERE rowid = 1")
    assert main(["cache", "verify"]) == 1
    assert "1 problem(s) found and repaired; 2 intact entries remain" in capsys.readouterr().out
    assert main(["cache", "clear", "--stale"]) == 0 and len(keys(cache_dir)) == 1
    assert main(["cache", "clear"]) == 0 and keys(cache_dir) == set()
    assert main(["cache", "verify"]) == 0 and "ok: 0 entries" in capsys.readouterr().out
