"""Entry points: stream attributes (cuStreamGetAttribute/SetAttribute/CopyAttributes) and
context-wide events (cuCtxRecordEvent/cuCtxWaitEvent).

Stream attributes are the CUlaunchAttributeValue members cuda.h marks valid for streams. The
priority is the stream's own (clamped to the range cuCtxGetStreamPriorityRange reports, as
cuStreamCreateWithPriority does); the others are kept and handed back, and change nothing here:
there is no L2 cache to partition (MAX_ACCESS_POLICY_WINDOW_SIZE is 0, so a window must be
empty), one memory synchronization domain (MEM_SYNC_DOMAIN_COUNT 1), and host threads waiting for
a stream always block (every CUsynchronizationPolicy behaves as BLOCKING_SYNC)."""

from __future__ import annotations

import struct
import threading
import weakref

from . import capture, context as ctxs
from .api import entry
from ..cdata import addr, ffi, read_bytes
from ..curesult import (CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                        CudaError)
from .init_device import require
from .stream import CU_STREAM_NON_BLOCKING, Stream
from .stream_api import GREATEST_PRIORITY, LEAST_PRIORITY, events, record

ACCESS_POLICY_WINDOW, SYNCHRONIZATION_POLICY, PRIORITY, MEM_SYNC_DOMAIN_MAP, MEM_SYNC_DOMAIN = 1, 3, 8, 9, 10
NVLINK_UTIL_CENTRIC_SCHEDULING = 16
SYNC_POLICY_AUTO, SYNC_POLICY_BLOCKING_SYNC = 1, 4
ACCESS_NORMAL, ACCESS_STREAMING, ACCESS_PERSISTING = 0, 1, 2
VALUE_SIZE = 64  # sizeof(CUlaunchAttributeValue)
MAX_ACCESS_POLICY_WINDOW_SIZE, MEM_SYNC_DOMAIN_COUNT = 109, 126  # device attributes
_DEFAULTS = {ACCESS_POLICY_WINDOW: bytes(VALUE_SIZE),
             SYNCHRONIZATION_POLICY: struct.pack("<i", SYNC_POLICY_AUTO).ljust(VALUE_SIZE, b"\0"),
             MEM_SYNC_DOMAIN_MAP: bytes(VALUE_SIZE), MEM_SYNC_DOMAIN: bytes(VALUE_SIZE),
             NVLINK_UTIL_CENTRIC_SCHEDULING: bytes(VALUE_SIZE)}

_values: weakref.WeakKeyDictionary[Stream, dict[int, bytes]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _checked(stream: Stream, attr: int, value: bytes) -> bytes:
    """The value to keep for attr, or CUDA_ERROR_INVALID_VALUE for one cuda.h does not allow."""
    dev = stream.ctx.device
    if attr == ACCESS_POLICY_WINDOW:
        _base, num_bytes, hit_ratio, hit_prop, miss_prop = struct.unpack_from("<QQfii", value)
        if not 0.0 <= hit_ratio <= 1.0 or hit_prop not in (ACCESS_NORMAL, ACCESS_STREAMING, ACCESS_PERSISTING) \
                or miss_prop not in (ACCESS_NORMAL, ACCESS_STREAMING):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"access policy window: hitRatio {hit_ratio}, "
                                                      f"hitProp {hit_prop}, missProp {miss_prop}")
        limit = dev.attribute(MAX_ACCESS_POLICY_WINDOW_SIZE)
        if num_bytes > limit:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"access policy window of {num_bytes} bytes "
                                                      f"(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE is {limit})")
    elif attr == SYNCHRONIZATION_POLICY:
        policy = struct.unpack_from("<i", value)[0]
        if not SYNC_POLICY_AUTO <= policy <= SYNC_POLICY_BLOCKING_SYNC:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"synchronization policy {policy}")
    elif attr == MEM_SYNC_DOMAIN_MAP:
        domains = dev.attribute(MEM_SYNC_DOMAIN_COUNT)
        if max(value[0], value[1]) >= domains:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory sync domain map {value[0]}/{value[1]} "
                                                      f"({domains} domain)")
    elif attr == MEM_SYNC_DOMAIN:
        if struct.unpack_from("<i", value)[0] not in (0, 1):  # CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT, _REMOTE
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory sync domain {struct.unpack_from('<i', value)[0]}")
    elif attr != NVLINK_UTIL_CENTRIC_SCHEDULING:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"launch attribute {attr} is not a stream attribute")
    return value


def _stream(h) -> Stream:
    return ctxs.resolve_stream(addr(h))


@entry("cuStreamGetAttribute")
def cuStreamGetAttribute(h, attr, value_out):
    require(value_out)
    s = _stream(h)
    if attr == PRIORITY:
        value = struct.pack("<i", s.priority)
    else:
        _checked(s, attr, _DEFAULTS.get(attr, b""))  # refuses what is not a stream attribute
        with _lock:
            value = _values.get(s, {}).get(attr, _DEFAULTS[attr])
    ffi.memmove(value_out, value, len(value))


@entry("cuStreamSetAttribute")
def cuStreamSetAttribute(h, attr, value):
    require(value)
    s = _stream(h)
    raw = read_bytes(addr(value), VALUE_SIZE)
    if attr == PRIORITY:
        s.priority = min(max(struct.unpack_from("<i", raw)[0], GREATEST_PRIORITY), LEAST_PRIORITY)
        return
    kept = _checked(s, attr, raw)
    with _lock:
        _values.setdefault(s, {})[attr] = kept


@entry("cuStreamCopyAttributes")
def cuStreamCopyAttributes(hdst, hsrc):
    dst, src = _stream(hdst), _stream(hsrc)
    if dst.ctx is not src.ctx:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the streams belong to different contexts")
    with _lock:
        _values[dst] = dict(_values.get(src, {}))
    dst.priority = src.priority


# ---- context-wide events ----
_recorders: weakref.WeakKeyDictionary[ctxs.Context, Stream] = weakref.WeakKeyDictionary()


def _refuse_during_capture(ctx: ctxs.Context, what: str) -> None:
    """cuda.h: STREAM_CAPTURE_UNSUPPORTED while a stream of the context captures, and the
    conflicting captures are invalidated."""
    capturing = [s.capture.capture for s in ctx.all_streams() if s.capture is not None]
    if capturing:
        for cap in capturing:
            capture.invalidate(cap)
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, f"{what} while a stream of the context captures")


def _context(h) -> ctxs.Context:
    return ctxs.contexts.get(addr(h)) if addr(h) else ctxs.current()


@entry("cuCtxRecordEvent")
def cuCtxRecordEvent(hctx, hevent):
    ctx = _context(hctx)
    ev = events.get(addr(hevent))
    if ev.ctx is not None and ev.ctx is not ctx:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "the event belongs to another context")
    _refuse_during_capture(ctx, "cuCtxRecordEvent")
    with _lock:  # a stream of no one's, outside the legacy stream's implicit ordering
        recorder = _recorders.get(ctx)
        if recorder is None:
            recorder = _recorders[ctx] = Stream(ctx, CU_STREAM_NON_BLOCKING)
    pending = [s.last for s in ctx.all_streams() if not s.idle()]
    ev.captured = None
    record(ev, lambda fn: recorder.submit(fn, pending))


@entry("cuCtxWaitEvent")
def cuCtxWaitEvent(hctx, hevent):
    ctx = _context(hctx)
    ev = events.get(addr(hevent))
    if ev.captured is not None and capture.is_live(ev.captured[0]):
        capture.invalidate(ev.captured[0])
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the event is part of an ongoing capture")
    _refuse_during_capture(ctx, "cuCtxWaitEvent")
    if ev.op is not None:
        ctx.wait_for(ev.op)
