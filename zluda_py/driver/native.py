"""The Python half of the native launch path (libcuda_shim/native_launch.c; docs/driver.md, "The
native launch path").

cuLaunchKernel of a kernel launched before is checked, packed and queued in C, and run by a C
worker thread of its stream, without the interpreter. Python keeps that path's view right:
* after a launch through Python, `offer` registers the kernel's descriptor for the context
  (backend permitting: the CPU backend's `native_kernel`), and `forget` drops every descriptor
  when what they were made from changes (module unload, context destroy, attributes, limits);
* every Stream has a C twin (`stream`); Python's ops are counted there (`reserve`/`finished`),
  so C queues a launch only while nothing else is pending in the context, and a Python op waits
  for the native launches queued before it (`Mark`, what `Stream.last` may be);
* a context's sticky error, captures and cuCtxWaitEvent are mirrored (`context_state`): C then
  leaves every launch to Python;
* from the C workers: faults (`_fault`, handled as the Python stream worker handles them), the
  bounds table (`_refresh_ranges`), printf output (written by C at the launch's end).

Without the shim (a Python client of zluda_py.driver) every function here does nothing."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .. import backends
from . import trace

if TYPE_CHECKING:
    from .launch import KernelLaunch
    from .stream import Stream

_lib = None
_ffi = None
_callbacks: list = []  # the C callbacks, alive as long as the process
_streams: dict[int, "Stream"] = {}  # C stream -> Stream, for faults (queued work outlives cuStreamDestroy)
_offered: set[int] = set()  # CUfunctions with a descriptor
_backend = None  # the backend once set up, None before; False: it has no native launches
_setup_lock = threading.Lock()
WAIT_SLICE_MS = 50  # a host wait returns to Python this often, so Ctrl-C reaches a Python host


def use_shim(ffi, lib) -> None:
    global _ffi, _lib
    _ffi, _lib = ffi, lib


def _setup() -> bool:
    """Hands C the backend's launch record layout and the callbacks, once."""
    global _backend
    with _setup_lock:
        return _setup_once()


def _setup_once() -> bool:
    global _backend
    if _backend is None:
        backend = backends.select()
        if not hasattr(backend, "native_kernel"):
            _backend = False
            return False
        from .. import devinfo

        ffi, lib = _ffi, _lib
        fault = ffi.callback("void(void *, const char *, int32_t, int64_t *)", _fault)
        refresh = ffi.callback("void(void)", _refresh_ranges)
        started = ffi.callback("void(int64_t *)", _worker_started)
        _callbacks.extend([fault, refresh, started])
        backend.watch_ranges(lib.zluda_native_ranges_changed)
        backend.memory.registered_watch = lambda none_registered: lib.zluda_native_pause(int(not none_registered))
        backend.memory.registered_watch(not backend.memory.has_registered())
        lib.zluda_native_setup(ffi.new("int64_t[]", [int(x) for x in backend.NATIVE_ABI]),
                               ffi.new("uint32_t[3]", list(devinfo.MAX_BLOCK_DIM)),
                               ffi.new("uint32_t[3]", list(devinfo.MAX_GRID_DIM)), fault, refresh, started)
        _backend = backend
    return bool(_backend)


def context():
    """A context's C twin (None without the shim)."""
    return _lib.zluda_native_context() if _lib else None


def context_state(native_ctx, sticky: int, blocked: bool) -> None:
    if native_ctx is not None:
        _lib.zluda_native_context_state(native_ctx, int(bool(sticky)), int(blocked))


def stream(s: "Stream"):
    """A stream's C twin (None without the shim): the legacy stream is its context's."""
    if s.ctx.native is None:
        return None
    native = _lib.zluda_native_stream(s.ctx.native, int(s.kind == "legacy"))
    _streams[int(_ffi.cast("uintptr_t", native))] = s
    return native


def name_stream(s: "Stream") -> None:
    """cuStreamCreate: cuLaunchKernel finds the stream by its handle from now on."""
    if s.native is not None:
        _lib.zluda_native_stream_name(s.native, _ffi.cast("void *", s.handle))


def forget_stream(s: "Stream") -> None:
    if s.native is not None:
        _lib.zluda_native_stream_forget(_ffi.cast("void *", s.handle))


def reserve(s: "Stream") -> "Mark | None":
    """A Python op is being queued on s: what it must wait for (the native launch before it)."""
    if s.native is None:
        return None
    seq = _lib.zluda_native_py_submit(s.native)
    return Mark(s.native, seq) if seq else None


def finished(s: "Stream") -> None:
    if s.native is not None:
        _lib.zluda_native_py_finish(s.native)


def last(s: "Stream") -> "Mark | None":
    """The stream's last work when that is a native launch."""
    if s.native is None:
        return None
    seq = _lib.zluda_native_last(s.native)
    return Mark(s.native, seq) if seq else None


class Mark:
    """A native launch of a stream, standing where an Op does (`done.is_set()`, `done.wait()`)."""

    __slots__ = ("native", "seq")

    def __init__(self, native, seq: int) -> None:
        self.native, self.seq = native, seq

    @property
    def done(self) -> "Mark":
        return self

    def is_set(self) -> bool:
        return bool(_lib.zluda_native_wait(self.native, self.seq, 0))

    def wait(self) -> None:
        while not _lib.zluda_native_wait(self.native, self.seq, WAIT_SLICE_MS):
            pass


def offer(handle: int, work: "KernelLaunch", with_extra: bool) -> None:
    """After a launch through Python: let C launch this function in its context from now on, when the
    launch was one C can repeat (kernelParams, not cooperative, no CUDA_LAUNCH_BLOCKING, no trace,
    not ZLUDA_NATIVE_LAUNCH=0)."""
    if (_lib is None or handle in _offered or work.cooperative or with_extra or trace.enabled()
            or os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" or os.environ.get("ZLUDA_NATIVE_LAUNCH") == "0"
            or not _setup()):
        return
    ctx, function = work.ctx, work.function
    if getattr(function.info, "device_launches", False):
        return  # the grids it launches run after it from Python (compiler/cpu/device_launch.py)
    k = _backend.native_kernel(function.module.compiled, function.name, work.stack_limit())
    ffi = _ffi
    if _lib.zluda_native_register(
            ffi.cast("void *", handle), ffi.cast("void *", ctx.handle), ctx.native, ffi.cast("void *", k.runner),
            function.name.encode(), len(k.params), ffi.new("uint32_t[]", [o for o, _ in k.params] or [0]),
            ffi.new("uint32_t[]", [s for _, s in k.params] or [0]), k.param_size,
            min(k.max_threads, 0xFFFFFFFF),  # .maxntid may say more than a u32 (and a block ever has)
            ffi.new("uint32_t[3]", list(k.reqntid or (0, 0, 0))), function.max_dynamic_shared, k.static_shared,
            k.frame_bytes, k.stack_size, int(k.reserved_smem), k.workers):
        _offered.add(handle)


def forget() -> None:
    """Something a descriptor was made from changed: every launch goes through Python again first."""
    if _lib is not None:
        _lib.zluda_native_forget_all()
        _offered.clear()


# ---- called by the C workers (cffi takes the GIL) ----
def _fault(native, kernel, status: int, record) -> None:
    s = _streams[int(_ffi.cast("uintptr_t", native))]
    name = _ffi.string(kernel).decode()
    try:
        error = (MemoryError(f"launch of {name}: no memory for the worker's buffers") if record == _ffi.NULL else
                 _backend.native_fault(name, status, int(_ffi.cast("uintptr_t", record))))
    except Exception as e:  # noqa: BLE001 - describing it failed: the launch failed all the same
        error = e
    s.fail(error)


def _refresh_ranges() -> None:
    address, pairs, version = _backend.native_ranges()
    _lib.zluda_native_set_ranges(_ffi.cast("uint64_t *", address), pairs, version)


def _worker_started(record) -> None:
    if record != _ffi.NULL:
        address = int(_ffi.cast("uintptr_t", record))
        _backend.native_output(address, lambda text: _lib.zluda_native_output(record, text, len(text)))
