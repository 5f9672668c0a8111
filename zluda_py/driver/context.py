"""Contexts: primary and explicit ones, the per-thread current-context stack, limits, cache
config, and the streams each context owns (legacy default, per-thread default, user)."""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Callable

from . import api, device as devices
from .. import devinfo
from ..cdata import addr
from ..curesult import (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                     CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_UNSUPPORTED_LIMIT, CudaError)
from . import native
from .handles import HandleTable
from .stream import Op, Stream

CU_STREAM_LEGACY = 0x1
CU_STREAM_PER_THREAD = 0x2
_ids = itertools.count(1)

CU_LIMIT_STACK_SIZE = 0
# CUlimit -> default value
DEFAULT_LIMITS = {0: 1024, 1: 1 << 20, 2: 8 << 20, 3: 2, 4: 2048, 5: 32, 6: 0}


_refused: set[int] = set()  # devices whose refusal was printed


class Context:
    def __init__(self, dev: devinfo.Device, flags: int, primary: bool) -> None:
        if dev.refusal:  # a device the backend describes but cannot run work on: say so (once)
            message = f"device {dev.ordinal} ({dev.name}): {dev.refusal}"
            if dev.ordinal not in _refused:
                _refused.add(dev.ordinal)
                sys.stderr.write(f"zluda: {message}; returning CUDA_ERROR_NOT_SUPPORTED\n")
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, message)
        self.device = dev
        self.flags = flags
        self.primary = primary
        self.id = next(_ids)
        self.handle = 0
        self.limits = dict(DEFAULT_LIMITS)
        self.cache_config = 0
        self.shared_mem_config = 0
        self.native = native.context()  # its twin in the shim's native launch path
        self._sticky_error = 0
        self.lock = threading.Lock()
        self._capturing = 0  # streams in a stream capture (capture.py)
        self.waits: list[Op] = []  # cuCtxWaitEvent: what all later work of the context waits for
        self.attachments = 0  # cuCtxAttach calls not yet detached (ctx_usage.py)
        self.legacy = Stream(self, kind="legacy")
        self.streams: list[Stream] = []  # user streams
        self._per_thread: dict[int, Stream] = {}

    # what makes the native launch path leave every launch to Python, mirrored there
    @property
    def sticky_error(self) -> int:
        return self._sticky_error

    @sticky_error.setter
    def sticky_error(self, code: int) -> None:
        self._sticky_error = code
        self._mirror()

    @property
    def capturing(self) -> int:
        return self._capturing

    @capturing.setter
    def capturing(self, count: int) -> None:
        self._capturing = count
        self._mirror()

    def _mirror(self) -> None:
        native.context_state(self.native, self._sticky_error, self._capturing > 0 or bool(self.waits))

    def per_thread_stream(self) -> Stream:
        tid = threading.get_ident()
        with self.lock:
            s = self._per_thread.get(tid)
            if s is None:
                s = self._per_thread[tid] = Stream(self, kind="per-thread")
        return s

    def all_streams(self) -> list[Stream]:
        with self.lock:
            return [self.legacy, *self.streams, *self._per_thread.values()]

    def submit(self, stream: Stream, fn: Callable[[], None], extra_deps: list[Op] = (), inline: bool = False) -> Op | None:
        """Queue fn on stream after the work it must wait for: the legacy stream waits for
        every blocking stream, and a blocking stream waits for the legacy stream. `inline`:
        see Stream.submit. None: a stream capture recorded fn as a graph node instead."""
        if self.capturing and (stream.capture is not None or stream.kind == "legacy"):
            from . import capture
            if capture.record(stream, fn, list(extra_deps)):
                return None
        with self.lock:
            # the op's place first: the native path then queues no launch this op would miss
            before = native.reserve(stream)
            if self.waits:
                self.waits = [op for op in self.waits if not op.done.is_set()]
                if not self.waits:
                    self._mirror()
            deps = [op for op in [*extra_deps, *self.waits, before] if op is not None and not op.done.is_set()]
            if stream.kind == "legacy":
                others = [*self.streams, *self._per_thread.values()]
                deps += [last for s in others if s.blocking and (last := s.last) is not None and not last.done.is_set()]
            elif stream.blocking and (last := self.legacy.last) is not None and not last.done.is_set():
                deps.append(last)
            return stream.submit(fn, deps, inline, reserved=True)

    def wait_for(self, op: Op) -> None:
        """Make all work submitted to the context from now on wait for op (cuCtxWaitEvent)."""
        with self.lock:
            self.waits.append(op)
        self._mirror()

    def synchronize(self) -> None:
        for s in self.all_streams():
            if s.last is not None:
                s.last.done.wait()
        for s in self.all_streams():
            s.raise_error()


contexts: HandleTable[Context] = HandleTable("context", CUDA_ERROR_INVALID_CONTEXT)
_primary: dict[int, Context] = {}
_primary_refs: dict[int, int] = {}
_primary_lock = threading.Lock()
_primary_flags: dict[int, int] = {}


class _PyStack(threading.local):
    """The current-context stack when no shim is loaded (Python clients of the driver)."""

    def __init__(self) -> None:
        self.stack: list[int] = []

    def current(self) -> int:
        return self.stack[-1] if self.stack else 0

    def set_current(self, h: int) -> None:
        if self.stack:
            if h:
                self.stack[-1] = h
            else:
                self.stack.pop()
        elif h:
            self.stack.append(h)

    def push(self, h: int) -> bool:
        self.stack.append(h)
        return True

    def pop(self) -> int:
        return self.stack.pop() if self.stack else 0


class _CStack:
    """The stack kept in C by the shim, where the CLS export table reads it."""

    def __init__(self, lib) -> None:
        self.lib = lib

    def current(self) -> int:
        return addr(self.lib.zluda_tls_current())

    def set_current(self, h: int) -> None:
        self.lib.zluda_tls_set_current(_void(h))

    def push(self, h: int) -> bool:
        return bool(self.lib.zluda_tls_push(_void(h)))

    def pop(self) -> int:
        return addr(self.lib.zluda_tls_pop())


def _void(h: int):
    from ..cdata import ffi
    return ffi.cast("void *", h)


tls: _PyStack | _CStack = _PyStack()
_drop_cls: Callable[[int], None] = lambda h: None


def use_shim(lib) -> None:
    """Keep the current-context stack and context-local storage in the shim's C side."""
    global tls, _drop_cls
    tls = _CStack(lib)
    _drop_cls = lambda h: lib.zluda_cls_drop_context(_void(h))


def current(required: bool = True) -> Context | None:
    h = tls.current()
    ctx = contexts.find(h) if h else None
    if ctx is None and required:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "no current context" if not h else f"context {h:#x} was destroyed")
    return ctx


def _current_sticky() -> int:
    h = tls.current()
    ctx = contexts.find(h) if h else None
    return ctx.sticky_error if ctx else 0


api.sticky_error = _current_sticky


def lookup(h: int) -> Context:
    """A context argument: NULL means the current one."""
    return contexts.get(h) if h else current()


def resolve_stream(h: int) -> Stream:
    """A CUstream argument of the current context: NULL is the default stream (per-thread in
    _ptsz entry points), CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are the special handles."""
    if h == 0:
        ctx = current()
        return ctx.per_thread_stream() if api.per_thread_default_stream() else ctx.legacy
    if h == CU_STREAM_LEGACY:
        return current().legacy
    if h == CU_STREAM_PER_THREAD:
        return current().per_thread_stream()
    return streams.get(h)


streams: HandleTable[Stream] = HandleTable("stream", CUDA_ERROR_INVALID_HANDLE)


def primary_retain(ordinal: int) -> Context:
    dev = devices.get(ordinal)
    with _primary_lock:
        ctx = _primary.get(ordinal)
        if ctx is None:
            ctx = _primary[ordinal] = Context(dev, 0, primary=True)
            contexts.add(ctx)
        _primary_refs[ordinal] = _primary_refs.get(ordinal, 0) + 1
        return ctx


def primary_release(ordinal: int) -> None:
    devices.get(ordinal)
    with _primary_lock:
        if _primary_refs.get(ordinal, 0) <= 0:
            raise CudaError(CUDA_ERROR_INVALID_CONTEXT, f"primary context of device {ordinal} is not retained")
        _primary_refs[ordinal] -= 1


def primary_reset(ordinal: int) -> None:
    """Destroy the primary context's state; its handle is reborn empty on the next retain."""
    devices.get(ordinal)
    with _primary_lock:
        ctx = _primary.pop(ordinal, None)
        _primary_refs[ordinal] = 0
    if ctx is not None:
        destroy(ctx)


def primary_state(ordinal: int) -> tuple[int, bool]:
    devices.get(ordinal)
    with _primary_lock:
        ctx = _primary.get(ordinal)
        flags = _primary_flags.get(ordinal, 0)
        return flags, bool(ctx is not None and _primary_refs.get(ordinal, 0) > 0)



def primary_set_flags(ordinal: int, flags: int) -> None:
    devices.get(ordinal)
    if flags & ~0x3F:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"context flags {flags:#x}")
    _primary_flags[ordinal] = flags
    ctx = _primary.get(ordinal)
    if ctx is not None:
        ctx.flags = flags


def destroy(ctx: Context) -> None:
    from . import memory

    try:
        ctx.synchronize()
    except CudaError:
        pass  # the context is going away with its errors
    contexts.remove(ctx.handle)
    native.forget()  # its functions are invalid now
    for s in list(ctx.streams):
        streams.remove(s.handle)
        native.forget_stream(s)
    memory.free_context(ctx)
    _drop_cls(ctx.handle)


def set_limit(ctx: Context, limit: int, value: int) -> None:
    if limit not in ctx.limits:
        raise CudaError(CUDA_ERROR_UNSUPPORTED_LIMIT, f"limit {limit}")
    if limit == CU_LIMIT_STACK_SIZE and ctx.limits[limit] != value:
        native.forget()  # descriptors hold the stack size
    ctx.limits[limit] = value


def get_limit(ctx: Context, limit: int) -> int:
    if limit not in ctx.limits:
        raise CudaError(CUDA_ERROR_UNSUPPORTED_LIMIT, f"limit {limit}")
    return ctx.limits[limit]
