"""Whether a cache directory may be trusted: the cache holds native code that is run as is.

The rules are OpenSSH's for its own files: after symlinks are resolved, the directory and the
database files belong to this user and no one else can write them, and every directory above
is owned by this user or root and is not writable by others (unless its sticky bit stops
others from renaming what is not theirs, as on /tmp). A root-owned cache that a non-root user
cannot write (one baked into an image) is trusted for reading only.

No per-user key signs the entries: whoever can write a file that only this user can write is
this user or root, who could as well change the installed zluda-py itself.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .settings import DB_NAME

DB_FILES = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm")


@dataclass(frozen=True)
class Verdict:
    problem: str | None  # why the cache may not be used at all (None: it may)
    read_only: bool = False  # root's cache seen by another user: read it, never write


def _others_may_write(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _owner_problem(path: Path, st: os.stat_result, what: str) -> str | None:
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"{what} {path} belongs to user {st.st_uid}, not to this user ({me})"
    if _others_may_write(st):
        return f"{what} {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check(directory: Path) -> Verdict:
    """The verdict on a cache directory, which need not exist yet (it is then created 0700)."""
    try:
        real = directory.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        return Verdict(f"cannot resolve {directory}: {e}")
    me = os.geteuid()
    read_only = False
    if real.exists():
        st = os.stat(real)
        if not stat.S_ISDIR(st.st_mode):
            return Verdict(f"{real} is not a directory")
        problem = _owner_problem(real, st, "cache directory")
        if problem:
            return Verdict(problem)
        read_only = st.st_uid != me
        for name in DB_FILES:
            path = real / name
            try:
                fst = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(fst.st_mode):
                return Verdict(f"cache file {path} is not a regular file (a symlink or other)")
            problem = _owner_problem(path, fst, "cache file")
            if problem:
                return Verdict(problem)
            read_only = read_only or fst.st_uid != me
    for parent in real.parents:
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            continue  # created by us, 0700
        if st.st_uid not in (me, 0):
            return Verdict(f"directory {parent} above the cache belongs to user {st.st_uid}, not to this user ({me})")
        if _others_may_write(st) and not st.st_mode & stat.S_ISVTX:
            return Verdict(f"directory {parent} above the cache is writable by other users "
                           f"(mode {stat.S_IMODE(st.st_mode):04o}) without the sticky bit")
    return Verdict(None, read_only)
