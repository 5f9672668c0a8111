"""The registry of driver entry points and the wrapper every call goes through.

`@entry("cuMemAlloc_v2")` registers a Python function under the exported symbol name. The
wrapper turns a raised CudaError into its CUresult, any other exception into
CUDA_ERROR_UNKNOWN (printed once, never crashing the host), checks cuInit was called,
returns a context's sticky error, traces the call when asked (ZLUDA_TRACE), and runs the
per-thread-default-stream variants (`_ptds`/`_ptsz`) with NULL meaning the calling thread's
default stream."""

from __future__ import annotations

import threading
import time
import traceback
from typing import Callable

from . import errors, trace
from .errors import CudaError

_ENTRIES: dict[str, tuple[Callable[..., int | None], bool]] = {}
_state = threading.local()
_initialized = False
_reported: set[str] = set()


def entry(*names: str, needs_init: bool = True) -> Callable:
    def register(fn: Callable) -> Callable:
        for name in names:
            _ENTRIES[name] = (fn, needs_init)
        return fn
    return register


def set_initialized() -> None:
    global _initialized
    _initialized = True


def is_initialized() -> bool:
    return _initialized


def per_thread_default_stream() -> bool:
    """True inside a `_ptds`/`_ptsz` entry point: the NULL stream is the per-thread stream."""
    return getattr(_state, "ptds", False)


# set by context.py: returns the sticky error of the calling thread's current context, or 0
sticky_error: Callable[[], int] = lambda: 0
# entry points that still work in a context with a sticky error (querying and tearing down)
_STICKY_EXEMPT = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPopCurrent", "cuCtxPushCurrent", "cuCtxDestroy",
                  "cuDevicePrimaryCtx", "cuGetErrorName", "cuGetErrorString", "cuDriverGetVersion", "cuInit",
                  "cuDeviceGet", "cuCtxGetDevice", "zluda_")


def wrap(name: str, base: str, per_thread: bool) -> Callable[..., int]:
    fn, needs_init = _ENTRIES[base]
    sticky_checked = not base.startswith(_STICKY_EXEMPT)

    def call(*args) -> int:
        previous = getattr(_state, "ptds", False)
        _state.ptds = per_thread
        start = time.perf_counter() if trace.enabled() else 0.0
        try:
            if needs_init and not _initialized:
                rc = errors.CUDA_ERROR_NOT_INITIALIZED
            elif sticky_checked and (rc := sticky_error()):
                pass
            else:
                rc = fn(*args) or 0
        except CudaError as e:
            rc = e.code
            if trace.enabled():
                trace.note(name, str(e))
        except Exception:  # a driver bug must not take the host program down
            rc = errors.CUDA_ERROR_UNKNOWN
            if name not in _reported:
                _reported.add(name)
                traceback.print_exc()
        finally:
            _state.ptds = previous
        if trace.enabled():
            trace.call(name, args, rc, time.perf_counter() - start)
        return rc

    call.__name__ = name
    return call


def implemented() -> dict[str, Callable]:
    """{base symbol: python function}, for the shim bridge and tests."""
    return {name: fn for name, (fn, _) in _ENTRIES.items()}


def wrapped(symbol: str) -> Callable[..., int]:
    """The callable attached to an exported symbol (which may be a _ptds/_ptsz variant)."""
    for suffix in ("_ptds", "_ptsz"):
        if symbol.endswith(suffix) and symbol[: -len(suffix)] in _ENTRIES:
            return wrap(symbol, symbol[: -len(suffix)], True)
    return wrap(symbol, symbol, False)
