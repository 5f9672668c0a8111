"""Entry points: streams, events and stream callbacks; their part in stream capture
(capture.py; the capture calls themselves are in capture_api.py)."""

from __future__ import annotations

from typing import Callable

from . import capture, context as ctxs, native
from .api import entry
from ..cdata import addr, ffi, store, store_ptr
from ..curesult import (CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CudaError)
from .handles import HandleTable
from .init_device import require
from .stream import CU_STREAM_NON_BLOCKING, Op, Stream

GREATEST_PRIORITY, LEAST_PRIORITY = -5, 0
CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS = 0x1, 0x2, 0x4
CU_EVENT_WAIT_EXTERNAL = CU_EVENT_RECORD_EXTERNAL = 0x1  # in a capture: an event wait / record node


def _create(pstream, flags: int, priority: int) -> None:
    require(pstream)
    if flags & ~CU_STREAM_NON_BLOCKING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"stream flags {flags:#x}")
    ctx = ctxs.current()
    s = Stream(ctx, flags, min(max(priority, GREATEST_PRIORITY), LEAST_PRIORITY))
    ctxs.streams.add(s)
    native.name_stream(s)
    with ctx.lock:
        ctx.streams.append(s)
    store_ptr(pstream, s.handle)


@entry("cuStreamCreate")
def cuStreamCreate(pstream, flags):
    _create(pstream, flags, 0)


@entry("cuStreamCreateWithPriority")
def cuStreamCreateWithPriority(pstream, flags, priority):
    _create(pstream, flags, priority)


def _stream(h) -> Stream:
    return ctxs.resolve_stream(addr(h))


@entry("cuStreamGetPriority")
def cuStreamGetPriority(h, priority):
    require(priority)
    store(priority, _stream(h).priority)


@entry("cuStreamGetFlags")
def cuStreamGetFlags(h, flags):
    require(flags)
    store(flags, _stream(h).flags)


@entry("cuStreamGetId")
def cuStreamGetId(h, pid):
    require(pid)
    store(pid, _stream(h).id)


@entry("cuStreamGetCtx")
def cuStreamGetCtx(h, pctx):
    require(pctx)
    store_ptr(pctx, _stream(h).ctx.handle)


@entry("cuStreamGetCtx_v2")
def cuStreamGetCtx_v2(h, pctx, pgreen):
    require(pctx)
    store_ptr(pctx, _stream(h).ctx.handle)
    if pgreen:
        store_ptr(pgreen, 0)


@entry("cuStreamGetDevice")
def cuStreamGetDevice(h, pdev):
    require(pdev)
    store(pdev, _stream(h).ctx.device.ordinal)


@entry("cuStreamDestroy_v2")
def cuStreamDestroy(h):
    handle = addr(h)
    if handle in (0, ctxs.CU_STREAM_LEGACY, ctxs.CU_STREAM_PER_THREAD):
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the default streams cannot be destroyed")
    s = ctxs.streams.remove(handle)
    native.forget_stream(s)
    with s.ctx.lock:
        s.ctx.streams.remove(s)
    # queued work still completes (NVIDIA's documented behaviour); the worker then idles


@entry("cuStreamSynchronize")
def cuStreamSynchronize(h):
    s = _stream(h)
    capture.check_not_capturing(s, "cuStreamSynchronize")
    s.synchronize()


@entry("cuStreamQuery")
def cuStreamQuery(h):
    s = _stream(h)
    capture.check_not_capturing(s, "cuStreamQuery")
    if not s.idle():
        raise CudaError(CUDA_ERROR_NOT_READY)
    s.raise_error()


@entry("cuStreamWaitEvent")
def cuStreamWaitEvent(h, hevent, flags):
    s = _stream(h)
    ev = events.get(addr(hevent))
    if flags & ~CU_EVENT_WAIT_EXTERNAL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"wait flags {flags:#x}")
    if s.capture is not None and flags & CU_EVENT_WAIT_EXTERNAL:
        from .graphs import EventWait
        capture.record_node(s, EventWait(ev))
        return
    if capture.wait_event(s, ev):
        return
    if ev.op is not None:
        s.ctx.submit(s, lambda: None, [ev.op])


@entry("cuStreamAddCallback")
def cuStreamAddCallback(h, callback, user_data, flags):
    if flags != 0 or callback == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "callback must be non-NULL and flags 0")
    s = _stream(h)
    fn = ffi.cast("void (*)(void *, int, void *)", callback)
    handle = ffi.cast("void *", addr(h))
    data = ffi.cast("void *", user_data)
    s.ctx.submit(s, lambda: fn(handle, s.ctx.sticky_error or s.error, data))


@entry("cuStreamAttachMemAsync")
def cuStreamAttachMemAsync(h, dptr, length, flags):
    _stream(h)
    if flags not in (0x1, 0x2, 0x4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"attach flags {flags:#x}")


# ---- events ----
class Event:
    def __init__(self, flags: int, ctx=None) -> None:
        self.flags = flags
        self.ctx = ctx  # the context it was made in (None: opened from another process)
        self.op: Op | None = None
        self.captured = None  # (capture, its nodes) while last recorded in a stream capture
        self.handle = 0

    @property
    def timing(self) -> bool:
        return not self.flags & CU_EVENT_DISABLE_TIMING


events: HandleTable[Event] = HandleTable("event", CUDA_ERROR_INVALID_HANDLE)


@entry("cuEventCreate")
def cuEventCreate(pevent, flags):
    require(pevent)
    ctx = ctxs.current()
    if flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"event flags {flags:#x}")
    if flags & CU_EVENT_INTERPROCESS and not flags & CU_EVENT_DISABLE_TIMING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "interprocess events must disable timing")
    ev = Event(flags, ctx)
    events.add(ev)
    store_ptr(pevent, ev.handle)


@entry("cuEventRecord")
def cuEventRecord(hevent, h):
    ev = events.get(addr(hevent))
    s = _stream(h)
    if capture.record_event(s, ev):
        return
    record(ev, lambda fn: s.ctx.submit(s, fn))


def record(ev: Event, submit: Callable[[Callable[[], None]], Op | None]) -> None:
    """Make ev stand for a new op that `submit` queues. An interprocess event's counters, shared
    with other processes (ipc.py), count the record as made now and as completed when it runs."""
    counters = getattr(ev, "counters", None)
    if counters is None:
        ev.op = submit(lambda: None)
    else:
        counters.bump(0)
        ev.op = submit(lambda: counters.bump(1))


@entry("cuEventRecordWithFlags")
def cuEventRecordWithFlags(hevent, h, flags):
    if flags & ~CU_EVENT_RECORD_EXTERNAL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"record flags {flags:#x}")
    s = _stream(h)
    if s.capture is not None and flags & CU_EVENT_RECORD_EXTERNAL:
        from .graphs import EventRecord
        capture.record_node(s, EventRecord(events.get(addr(hevent))))
        return
    cuEventRecord(hevent, h)


@entry("cuEventQuery")
def cuEventQuery(hevent):
    ev = events.get(addr(hevent))
    capture.check_event(ev, "cuEventQuery")
    if ev.op is not None and not ev.op.done.is_set():
        raise CudaError(CUDA_ERROR_NOT_READY)


@entry("cuEventSynchronize")
def cuEventSynchronize(hevent):
    ev = events.get(addr(hevent))
    capture.check_event(ev, "cuEventSynchronize")
    if ev.op is not None:
        ev.op.done.wait()


@entry("cuEventDestroy_v2")
def cuEventDestroy(hevent):
    events.remove(addr(hevent))


@entry("cuEventElapsedTime", "cuEventElapsedTime_v2")
def cuEventElapsedTime(pms, hstart, hend):
    require(pms)
    start, end = events.get(addr(hstart)), events.get(addr(hend))
    if not (start.timing and end.timing) or start.op is None or end.op is None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "both events must be recorded, with timing enabled")
    if not (start.op.done.is_set() and end.op.done.is_set()):
        raise CudaError(CUDA_ERROR_NOT_READY)
    store(pms, (end.op.finished_at - start.op.finished_at) * 1000.0)


