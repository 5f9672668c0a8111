"""The on-disk cache: one SQLite database (WAL mode) of checksummed entries, shared by processes.

Every failure here degrades to "no cache" (or "no new entries") with one warning: a cache
problem must never fail or corrupt a CUDA program. A directory others could write is never
used (trust.py). A damaged database, its schema included, is deleted and rebuilt; a damaged
entry is deleted and reported as a miss, so its bytes never reach the loader.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import events, trust
from .settings import DB_NAME, Settings

SCHEMA_VERSION = 1
LOCK_NAME = "zluda-cache.lock"  # one byte per key is locked while that key compiles
BUSY_TIMEOUT_S = 60.0  # writers queue on SQLite's lock; a compile takes longer than any write

# SQLite primary result codes (sqlite3.h). SQLITE_ERROR from our own fixed statements means the
# schema is not ours any more ("no such column: key"): damage, like CORRUPT and NOTADB.
# SQLITE_IOERR: what a damaged file or a stale -shm index reads as; deleting a cache is cheap.
SQLITE_ERROR, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB = 1, 10, 11, 26
DAMAGE = (SQLITE_ERROR, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB)
SQLITE_BUSY, SQLITE_LOCKED = 5, 6

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key       TEXT PRIMARY KEY,   -- zluda_py.cache.key.cache_key
    build     TEXT NOT NULL,      -- key.build_id: compiler + target, for `zluda cache info`
    label     TEXT NOT NULL,      -- a readable name (first kernel), for listings only
    kernels   INTEGER NOT NULL,
    object    BLOB NOT NULL,      -- native object code, loaded as is
    metadata  TEXT NOT NULL,      -- the pipeline's metadata as JSON
    checksum  TEXT NOT NULL,      -- sha256 over key, object and metadata
    size      INTEGER NOT NULL,   -- bytes counted against CUDA_CACHE_MAXSIZE
    created   INTEGER NOT NULL,
    last_used INTEGER NOT NULL    -- ns since the epoch: least recently used is evicted first
);
CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_used);
"""


_COLUMNS = [line.split()[0] for line in _SCHEMA.split("(", 1)[1].split(");")[0].splitlines() if line.strip()]


def _current(conn: sqlite3.Connection) -> bool:
    """The database has our schema version and the entries table has exactly our columns."""
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return False
    return [r[1] for r in conn.execute("PRAGMA table_info(entries)")] == _COLUMNS


def _intact(key: str, obj: object, meta: object, stored_sum: object) -> dict:
    """The entry's metadata if its fields have their types and its checksum matches, else
    ValueError (a damaged entry; its metadata is read as bytes so bad text is damage too)."""
    if not (isinstance(obj, bytes) and isinstance(meta, bytes)):
        raise ValueError("a field of the wrong type")
    text = meta.decode()  # UnicodeDecodeError is a ValueError
    if checksum(key, obj, text) != stored_sum:
        raise ValueError("checksum mismatch")
    return json.loads(text)


def checksum(key: str, object_code: bytes, metadata_json: str) -> str:
    h = hashlib.sha256(key.encode())
    h.update(len(object_code).to_bytes(8, "little") + object_code)
    h.update(metadata_json.encode())
    return h.hexdigest()


@dataclass
class Row:
    key: str
    build: str
    label: str
    kernels: int
    size: int
    last_used: int


class Store:
    """The cache database in one directory. Thread-safe; after a fork the child reconnects."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / DB_NAME
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.usable = True  # False: no cache at all (reported once)
        self.writable = True  # False: existing entries are read, nothing is written
        self.rebuilds = 0  # damaged databases replaced by this process
        self._lock_fd: int | None = None  # kept open: closing any descriptor drops all our record locks
        self._lock_pid = 0
        self._compiling: dict[str, threading.Lock] = {}

    # ------------------------------------------------------------------ connection
    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None
        if not self.usable:
            return None
        self._pid = os.getpid()
        verdict = trust.check(self.directory)
        if verdict.problem:
            self._give_up(f"{verdict.problem}; compiling without the cache")
            return None
        try:
            if verdict.read_only:
                self._conn = self._open_read_only("belongs to root")
            else:
                self._conn = self._open_writable()
        except OSError as e:
            if e.errno == errno.EROFS and self.path.is_file():
                self._conn = self._open_read_only("is on a read-only file system")
            else:
                self._give_up(f"cannot use {self.directory}: {e.strerror or e}")
        return self._conn

    def _open_writable(self) -> sqlite3.Connection:
        if not self.directory.is_dir():
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))  # SQLite's -wal/-shm copy this mode
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if not _current(conn):
                conn.execute("BEGIN IMMEDIATE")
                if not _current(conn):  # not upgraded meanwhile
                    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                        self._damaged("its entries table is not the one this version writes")
                    conn.execute("DROP TABLE IF EXISTS entries")  # another layout: its entries are useless
                    for statement in filter(str.strip, _SCHEMA.split(";")):  # executescript would commit
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self, why: str) -> sqlite3.Connection | None:
        """A cache baked into a read-only image (a container layer): serve its entries."""
        events.warn_once(f"compiled-code cache {self.directory} {why}: "
                         f"using its entries, new compiles are not saved")
        self.writable = False
        try:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM entries").fetchone()
            return conn
        except sqlite3.DatabaseError as e:
            self._give_up(f"cannot read {self.path}: {e}")
            return None

    def _give_up(self, reason: str) -> None:
        self.usable = False
        self._close()
        events.warn_once(f"compiled-code cache disabled: {reason}")

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    def _damaged(self, why: object) -> None:
        self.rebuilds += 1
        events.warn_once(f"compiled-code cache {self.path} was damaged ({why}); rebuilding it")
        events.record(events.REBUILT, str(self.path))

    def _rebuild(self, error: sqlite3.DatabaseError) -> None:
        """The database is damaged: delete it (the entries are only a cache) and start again."""
        self._close()
        self._damaged(error)
        if not self.writable:
            self.usable = False
            return
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass
            except OSError as e:
                self._give_up(f"cannot delete the damaged {self.path}{suffix}: {e.strerror}")
                return

    def _run(self, op, default, write: bool = False):
        """op(conn) under the lock; SQLite trouble becomes a warning and `default`."""
        if write and not self.writable:
            return default
        with self._lock:
            for attempt in range(2):
                conn = None
                try:
                    conn = self._connection()  # opening may find the damage too
                    if conn is None:
                        return default
                    return op(conn)
                except sqlite3.DatabaseError as e:
                    if conn is not None and conn.in_transaction:
                        try:
                            conn.rollback()
                        except sqlite3.Error:
                            pass
                    code = getattr(e, "sqlite_errorcode", 0) & 0xFF
                    if code in DAMAGE and attempt == 0:
                        self._rebuild(e)
                        continue
                    if code in (SQLITE_BUSY, SQLITE_LOCKED):
                        events.warn_once(f"compiled-code cache {self.path} stayed locked for {BUSY_TIMEOUT_S:.0f} s; "
                                         f"continuing without it for this module")
                        return default
                    self._give_up(f"{self.path}: {e}")
                    return default
            return default

    # ------------------------------------------------------------------ one compile per key
    def _lock_file(self) -> int | None:
        if self._lock_fd is not None and self._lock_pid == os.getpid():
            return self._lock_fd
        self._lock_fd = None  # a forked child holds none of the parent's record locks
        if self._connection() is None or not self.writable:
            return None
        try:
            self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._lock_pid = os.getpid()
        except OSError:
            return None  # compiles are then merely not shared
        return self._lock_fd

    @contextlib.contextmanager
    def compiling(self, key: str) -> Iterator[None]:
        """Held while `key` is compiled and stored, so that threads and processes compiling the
        same module wait for one compile and take its entry. A byte-range lock on one file: the
        kernel drops it when its holder dies, so a crashed compile never blocks the others."""
        with self._lock:
            gate = self._compiling.setdefault(key, threading.Lock())
            fd = self._lock_file()
        with gate:
            if fd is None:
                yield
                return
            where = int(key[:15], 16)
            fcntl.lockf(fd, fcntl.LOCK_EX, 1, where)
            try:
                yield
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, where)

    # ------------------------------------------------------------------ entries
    def get(self, key: str) -> tuple[bytes, dict] | None:
        """The entry's (object code, metadata) if present and intact; a damaged one is dropped."""

        def op(conn: sqlite3.Connection):
            row = conn.execute("SELECT rowid, object, CAST(metadata AS BLOB), checksum FROM entries WHERE key = ?",
                               (key,)).fetchone()
            if row is None:
                return None
            rowid, obj, meta, stored_sum = row
            try:
                metadata = _intact(key, obj, meta, stored_sum)
            except ValueError as e:
                events.record(events.CORRUPT, f"{key[:16]} ({e}); dropped")
                if self.writable:
                    conn.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))
                return None
            if self.writable:
                conn.execute("UPDATE entries SET last_used = ? WHERE key = ?", (time.time_ns(), key))
            return obj, metadata

        return self._run(op, None)

    def put(self, key: str, build: str, label: str, object_code: bytes, metadata: dict, max_size: int) -> bool:
        """Store an entry, then evict least recently used ones beyond max_size. False: not stored."""
        meta = json.dumps(metadata, sort_keys=True)
        size = len(object_code) + len(meta)
        if size > max_size:
            return False  # as NVIDIA's cache: code larger than the whole cache is not cached

        def op(conn: sqlite3.Connection) -> bool:
            now = time.time_ns()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (key, build, label, len(metadata.get("kernels", ())), object_code, meta,
                          checksum(key, object_code, meta), size, now, now))
            total = conn.execute("SELECT total(size) FROM entries").fetchone()[0]
            if total > max_size:
                victims = []
                for victim, vsize in conn.execute(
                        "SELECT key, size FROM entries WHERE key != ? ORDER BY last_used, rowid", (key,)):
                    if total <= max_size:
                        break
                    victims.append((victim,))
                    total -= vsize
                conn.executemany("DELETE FROM entries WHERE key = ?", victims)
                events.record(events.EVICTED, f"{len(victims)} entries for {key[:16]}", len(victims))
            conn.execute("COMMIT")
            return True

        stored = self._run(op, False, write=True)
        if stored:
            events.record(events.STORED, f"{key[:16]} {label} ({size} bytes)")
        return stored

    # ------------------------------------------------------------------ maintenance
    def rows(self) -> list[Row]:
        return self._run(lambda conn: [Row(*r) for r in conn.execute(
            "SELECT key, build, label, kernels, size, last_used FROM entries ORDER BY last_used")], [])

    def clear(self, builds_to_keep: set[str] | None = None) -> int:
        """Delete every entry (or those whose build is not in builds_to_keep); the count deleted."""

        def op(conn: sqlite3.Connection) -> int:
            if builds_to_keep is None:
                n = conn.execute("DELETE FROM entries").rowcount
            else:
                marks = ",".join("?" * len(builds_to_keep))
                n = conn.execute(f"DELETE FROM entries WHERE build NOT IN ({marks})", tuple(builds_to_keep)).rowcount
            conn.execute("VACUUM")
            return n

        return self._run(op, 0, write=True)

    def verify(self) -> list[str]:
        """SQLite's integrity check plus every entry's checksum; damaged entries are dropped and a
        damaged database is rebuilt. The problems found, one line each (empty: all is well)."""

        def op(conn: sqlite3.Connection) -> tuple[list[str], bool]:
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
            if problems:
                return problems, True
            bad = []
            for rowid, key, obj, meta, stored_sum, build, label in conn.execute(
                    "SELECT rowid, CAST(key AS BLOB), object, CAST(metadata AS BLOB), checksum,"
                    " CAST(build AS BLOB), CAST(label AS BLOB) FROM entries"):
                name = key.decode(errors="replace") if isinstance(key, bytes) else repr(key)
                try:
                    _intact(name, obj, meta, stored_sum)
                    for text in (build, label):  # listings read them as text: bad UTF-8 there is damage too
                        if isinstance(text, bytes):
                            text.decode()
                except ValueError as e:
                    bad.append((rowid,))
                    problems.append(f"entry {name[:16]}: {e}; dropped")
            if bad and self.writable:
                conn.executemany("DELETE FROM entries WHERE rowid = ?", bad)
            return problems, False

        rebuilds = self.rebuilds
        problems, damaged = self._run(op, ([f"{self.path}: cache not usable"], False))
        if damaged:
            with self._lock:
                self._rebuild(sqlite3.DatabaseError("integrity check failed"))
            self._run(lambda conn: None, None)  # recreate it now, so the report below holds
        if self.rebuilds != rebuilds and self.usable:
            problems.insert(0, f"{self.path}: the database was damaged; it was deleted and recreated empty")
        return problems

    def file_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, Path(f"{self.path}-wal")) if p.exists())


_stores: dict[Path, Store] = {}
_stores_lock = threading.Lock()


def store_for(settings: Settings) -> Store:
    """One Store per directory per process (so a problem is reported, and a connection kept, once)."""
    with _stores_lock:
        s = _stores.get(settings.directory)
        if s is None:
            s = _stores[settings.directory] = Store(settings.directory)
        return s
