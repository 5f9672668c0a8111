"""ZLUDA_TRACE=DIR (or `zluda run --trace DIR`): every driver call with its arguments, result
and duration goes to DIR/calls-<pid>.log, and each loaded module's PTX to DIR/module-*.ptx."""

from __future__ import annotations

import hashlib
import os
import threading

_lock = threading.Lock()
_file = None
_dir = os.environ.get("ZLUDA_TRACE") or None


def enabled() -> bool:
    return _dir is not None


def _out():
    global _file
    if _file is None:
        os.makedirs(_dir, exist_ok=True)
        _file = open(os.path.join(_dir, f"calls-{os.getpid()}.log"), "a", buffering=1)
    return _file


def _fmt(arg) -> str:
    from ..cdata import ffi

    if isinstance(arg, ffi.CData):
        kind = ffi.typeof(arg).kind
        if kind == "pointer":
            return hex(int(ffi.cast("uintptr_t", arg)))
        if kind == "struct":
            return "{...}"
        return repr(arg)
    return hex(arg) if isinstance(arg, int) and arg > 4096 else repr(arg)


def call(name: str, args: tuple, rc: int, seconds: float) -> None:
    from ..curesult import error_name

    line = f"{threading.get_native_id()} {name}({', '.join(_fmt(a) for a in args)}) -> {error_name(rc) or rc} [{seconds * 1e6:.1f} us]\n"
    with _lock:
        _out().write(line)


def note(name: str, message: str) -> None:
    with _lock:
        _out().write(f"{threading.get_native_id()} {name}: {message}\n")


def save_ptx(text: str, name: str) -> None:
    if not enabled():
        return
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[-60:]
    path = os.path.join(_dir, f"module-{digest}-{safe}.ptx")
    with _lock:
        os.makedirs(_dir, exist_ok=True)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(text)
        _out().write(f"saved PTX {os.path.basename(path)}\n")
