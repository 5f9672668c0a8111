"""Cache trust and repair: a cache others could write is never used; damage of any kind is
rebuilt once, and `zluda cache verify|clear` report what they actually did."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess

import pytest

from zluda_py import cache
from zluda_py.cache import events, from_environment, trust
from zluda_py.cache.settings import DB_NAME

from .conftest import add_kernel_ptx, check_adds

NOBODY = 65534


def _new_process_state() -> None:
    """What a new process starts with: no open connection, no store."""
    for s in cache.store._stores.values():
        s._close()
    cache.store._stores.clear()


def _uses_cache(cache_dir) -> bool:
    _new_process_state()
    check_adds(cache.compile_cached(add_kernel_ptx(5)), 5)
    return cache.store_for(from_environment()).usable


def _warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "warning" in line]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")


@pytest.mark.parametrize("setup", ["world-writable directory", "group-writable directory",
                                   "symlink to a world-writable directory", "database file symlink"])
def test_a_cache_others_could_write_is_not_used(cache_dir, capsys, tmp_path, setup):
    if setup == "world-writable directory":
        cache_dir.mkdir()
        cache_dir.chmod(0o777)
    elif setup == "group-writable directory":
        cache_dir.mkdir()
        cache_dir.chmod(0o770)
    elif setup == "symlink to a world-writable directory":
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        cache_dir.symlink_to(shared)
    else:
        cache_dir.mkdir(mode=0o700)
        elsewhere = tmp_path / "elsewhere.sqlite3"
        sqlite3.connect(elsewhere).close()
        (cache_dir / DB_NAME).symlink_to(elsewhere)
    assert not _uses_cache(cache_dir)
    warnings = _warnings(capsys)
    assert len(warnings) == 1 and "compiling without the cache" in warnings[0], warnings
    assert events.counts[events.HIT] == 0 and events.counts[events.STORED] == 0


@needs_root
@pytest.mark.parametrize("what", ["directory", "database", "parent"])
def test_a_cache_of_another_user_is_not_used(cache_dir, capsys, what):
    assert _uses_cache(cache_dir)  # a working cache, one entry
    target = {"directory": cache_dir, "database": cache_dir / DB_NAME, "parent": cache_dir.parent}[what]
    os.chown(target, NOBODY, -1)
    events.counts.clear()
    assert not _uses_cache(cache_dir)
    assert "belongs to user 65534" in _warnings(capsys)[0]
    assert events.counts[events.HIT] == 0


def test_the_sticky_bit_makes_a_shared_parent_acceptable(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # like /tmp
    assert trust.check(tmp / "cache").problem is None
    tmp.chmod(0o777)
    assert "without the sticky bit" in trust.check(tmp / "cache").problem


def test_a_damaged_schema_is_rebuilt_once_and_the_cache_works_again(cache_dir, capsys):
    assert _uses_cache(cache_dir)
    with sqlite3.connect(cache_dir / DB_NAME) as conn:  # what a random corruption once produced
        conn.execute("ALTER TABLE entries RENAME COLUMN key TO kez")
    assert _uses_cache(cache_dir)
    assert events.counts[events.REBUILT] == 1
    events.counts.clear()
    assert _uses_cache(cache_dir) and events.counts[events.HIT] == 1  # the next run hits
    assert _warnings(capsys) and not _warnings(capsys)


def _zluda_cache(*args: str, cache_dir) -> subprocess.CompletedProcess:
    return subprocess.run(["zluda", "cache", *args, "--cache", str(cache_dir)], capture_output=True, text=True)


def test_verify_and_clear_report_a_rebuild_as_a_rebuild(cache_dir):
    assert _uses_cache(cache_dir)
    with sqlite3.connect(cache_dir / DB_NAME) as conn:
        conn.execute("ALTER TABLE entries RENAME COLUMN key TO kez")
    out = _zluda_cache("verify", cache_dir=cache_dir)
    assert out.returncode == 1 and "recreated empty" in out.stdout, out.stdout + out.stderr
    assert _zluda_cache("verify", cache_dir=cache_dir).stdout.startswith("ok: 0 entries")
    assert _uses_cache(cache_dir)
    with sqlite3.connect(cache_dir / DB_NAME) as conn:
        conn.execute("ALTER TABLE entries RENAME COLUMN size TO sise")
    out = _zluda_cache("clear", cache_dir=cache_dir)
    assert out.returncode == 0 and "recreated empty" in out.stdout and "removed" not in out.stdout, out.stdout


def test_an_entry_whose_listed_text_is_not_utf8_is_dropped_by_verify(cache_dir):
    """`zluda cache verify` lists the entries after checking them; a build or label that is
    not UTF-8 made that listing fail and the cache 'not used' (a random corruption hit it)."""
    assert _uses_cache(cache_dir)
    with sqlite3.connect(cache_dir / DB_NAME) as conn:
        conn.execute("UPDATE entries SET build = CAST(X'8478E9' AS TEXT)")
    out = _zluda_cache("verify", cache_dir=cache_dir)
    assert out.returncode == 1 and "repaired; 0 intact entries remain" in out.stdout, out.stdout + out.stderr
    assert _zluda_cache("verify", cache_dir=cache_dir).stdout.startswith("ok: 0 entries")


def test_random_corruptions_never_leave_the_cache_disabled(cache_dir):
    """20 random byte corruptions of a populated database: every run still computes the right
    answer, and the run after each damaged one uses the cache again (no lasting 'disabled')."""
    rng = random.Random(20)
    for trial in range(20):
        for k in range(3):
            _new_process_state()
            check_adds(cache.compile_cached(add_kernel_ptx(k)), k)
        _new_process_state()
        path = cache_dir / DB_NAME
        sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        _uses_cache(cache_dir)  # this run may find the damage and rebuild: the answer is right either way
        assert _uses_cache(cache_dir), f"trial {trial}: the cache stayed disabled"
        _new_process_state()
        verify = _zluda_cache("verify", cache_dir=cache_dir)
        again = _zluda_cache("verify", cache_dir=cache_dir)
        assert again.returncode == 0, f"trial {trial}: {verify.stdout} / then {again.stdout}"
