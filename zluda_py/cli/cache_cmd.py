"""`zluda cache info|clear|verify`: inspect and maintain the compiled-code cache."""

from __future__ import annotations

import argparse
import sys
import time

from zluda_py.cache import from_environment, store_for
from zluda_py.cache.key import build_id
from zluda_py.compiler.cpu.target import CPU


def _store(args: argparse.Namespace):
    settings = from_environment(args.cache)
    if not settings.enabled and args.cache is None:
        print("zluda cache: the cache is disabled (CUDA_CACHE_DISABLE=1)", file=sys.stderr)
        return settings, None
    return settings, store_for(settings)


def _current_build() -> str:
    return build_id(CPU)


def _info(args: argparse.Namespace) -> int:
    settings, store = _store(args)
    print(f"directory:  {settings.directory}")
    print(f"database:   {settings.db_path}")
    print(f"max size:   {settings.max_size} bytes (CUDA_CACHE_MAXSIZE)")
    if store is None:
        print("state:      disabled (CUDA_CACHE_DISABLE=1)")
        return 0
    if not settings.db_path.exists():
        print("state:      empty (no database yet)")
        return 0
    rows = store.rows()
    if not store.usable:
        print("state:      not usable (see the warning above)")
        return 1
    current = _current_build()
    used = sum(r.size for r in rows)
    stale = sum(1 for r in rows if r.build != current)
    print(f"state:      {'read-only' if not store.writable else 'ready'}")
    print(f"entries:    {len(rows)} ({sum(r.kernels for r in rows)} kernels), {stale} stale "
          f"(built by another compiler version or for another CPU)")
    print(f"used:       {used} bytes of entries, {store.file_bytes()} bytes on disk")
    if rows and args.verbose:
        print(f"{'key':16}  {'size':>9}  {'kernels':>7}  {'last used':19}  label")
        for r in reversed(rows):
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.last_used / 1e9))
            mark = "" if r.build == current else "  [stale]"
            print(f"{r.key[:16]}  {r.size:>9}  {r.kernels:>7}  {when}  {r.label}{mark}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    settings, store = _store(args)
    if store is None or not settings.db_path.exists():
        print("nothing to clear")
        return 0
    keep = None
    if args.stale:
        keep = {_current_build()}
    rebuilds = store.rebuilds
    n = store.clear(keep)
    if not store.usable or not store.writable:
        print(f"zluda cache: cannot clear {settings.db_path}", file=sys.stderr)
        return 1
    if store.rebuilds != rebuilds:
        print(f"{settings.db_path} was damaged: it was deleted and recreated empty")
        return 0
    print(f"removed {n} {'stale ' if args.stale else ''}entries from {settings.db_path}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    settings, store = _store(args)
    if store is None or not settings.db_path.exists():
        print("nothing to verify")
        return 0
    problems = store.verify()
    for p in problems:
        print(p)
    n = len(store.rows())
    if not store.usable:
        print(f"{len(problems)} problem(s) found; the cache could not be repaired and is not used")
        return 1
    if problems:
        print(f"{len(problems)} problem(s) found and repaired; {n} intact entries remain")
        return 1
    print(f"ok: {n} entries, every checksum matches")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("cache", help="inspect or clear the compiled-code cache",
                              description="The compiled-code cache (CUDA_CACHE_PATH, CUDA_CACHE_MAXSIZE, "
                                          "CUDA_CACHE_DISABLE); see docs/cache.md.")
    sub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    for name, fn, text in (("info", _info, "where the cache is, how full, how many entries"),
                           ("clear", _clear, "delete entries"),
                           ("verify", _verify, "check the database and every entry's checksum; drop damaged ones")):
        q = sub.add_parser(name, help=text, description=text)
        q.add_argument("--cache", metavar="DIR", help="the cache directory (default: CUDA_CACHE_PATH, "
                                                       "$XDG_CACHE_HOME/zluda or ~/.cache/zluda)")
        q.set_defaults(func=fn)
    sub.choices["info"].add_argument("-v", "--verbose", action="store_true", help="list the entries")
    sub.choices["clear"].add_argument("--stale", action="store_true",
                                      help="only entries this compiler and CPU can never use")
