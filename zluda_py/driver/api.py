"""The registry of driver entry points and the wrapper every call goes through.

`@entry("cuMemAlloc_v2")` registers a Python function under the exported symbol name. The
wrapper turns a raised CudaError into its CUresult, any other exception into the closest
CUresult (`internal_error`: one line on stderr, once per entry point, the traceback only with
ZLUDA_DEBUG=1; never crashing the host), checks cuInit was called,
returns a context's sticky error, traces the call when asked (ZLUDA_TRACE), and runs the
per-thread-default-stream variants (`_ptds`/`_ptsz`) with NULL meaning the calling thread's
default stream."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Callable

from .. import curesult as errors
from ..curesult import CudaError
from . import trace

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
# set by driver_logs.py: records a failed call in the driver's error log (cuLogs*)
log_error: Callable[[str, CudaError], None] = lambda name, e: None
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
            log_error(name, e)
            if trace.enabled():
                trace.note(name, str(e))
        except Exception as e:  # a driver bug must not take the host program down
            rc = internal_error(name, e)
        finally:
            _state.ptds = previous
        if trace.enabled():
            trace.call(name, args, rc, time.perf_counter() - start)
        return rc

    call.__name__ = name
    return call


def internal_error(name: str, e: BaseException) -> int:
    """The CUresult for an exception that is not a CudaError: the one it carries (backend
    errors), else the closest (no memory; a number too big for the driver's types), else
    CUDA_ERROR_UNKNOWN. Reported once per entry point, in one line: a user sees what failed,
    not the driver's insides, unless ZLUDA_DEBUG=1 asks for the traceback."""
    rc = getattr(e, "cu_result", None)
    if not isinstance(rc, int):
        rc = (errors.CUDA_ERROR_OUT_OF_MEMORY if isinstance(e, MemoryError) else
              errors.CUDA_ERROR_INVALID_VALUE if isinstance(e, OverflowError) else errors.CUDA_ERROR_UNKNOWN)
    if name not in _reported:
        _reported.add(name)
        if debug():
            traceback.print_exception(e)
        sys.stderr.write(f"zluda: {name}: internal error ({type(e).__name__}: {e}); returning "
                         f"{errors.error_name(rc)}\n")
    return rc


def debug() -> bool:
    """ZLUDA_DEBUG=1: internal errors are reported with their Python traceback."""
    return os.environ.get("ZLUDA_DEBUG", "") == "1"


def implemented() -> dict[str, Callable]:
    """{base symbol: python function}, for the shim bridge and tests."""
    return {name: fn for name, (fn, _) in _ENTRIES.items()}


def wrapped(symbol: str) -> Callable[..., int]:
    """The callable attached to an exported symbol (which may be a _ptds/_ptsz variant)."""
    for suffix in ("_ptds", "_ptsz"):
        if symbol.endswith(suffix) and symbol[: -len(suffix)] in _ENTRIES:
            return wrap(symbol, symbol[: -len(suffix)], True)
    return wrap(symbol, symbol, False)
