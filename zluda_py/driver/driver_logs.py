"""Entry points: the driver's error log (cuLogsRegisterCallback/UnregisterCallback, cuLogsCurrent,
cuLogsDumpToFile, cuLogsDumpToMemory).

Every entry point that fails logs one line, `<entry point>: <CUresult name>: <why>` (api.py calls
`error`), except the NOT_READY answers of queries, which are not failures. The driver keeps the
most recent 25,600 bytes of lines (the buffer size cuda.h states); an iterator is the number of
lines logged before the one it points to, so a dump from an iterator whose lines were overwritten
starts with a line saying how many were lost. Callbacks get each line as it is logged, with
CU_LOG_LEVEL_ERROR."""

from __future__ import annotations

import collections
import threading

from . import api
from .api import entry
from ..cdata import addr, cstr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CudaError, error_name
from .handles import HandleTable
from .init_device import require

CU_LOG_LEVEL_ERROR = 0
BUFFER_BYTES = 25600

_lock = threading.Lock()
_lines: collections.deque[str] = collections.deque()  # each ends with "\n"
_first = 0  # the number of the oldest line kept
_bytes = 0


class _Callback:
    def __init__(self, fn, data) -> None:
        self.fn, self.data, self.handle = fn, data, 0


_callbacks: HandleTable[_Callback] = HandleTable("log callback", CUDA_ERROR_INVALID_VALUE)


def error(entry_point: str, e: CudaError) -> None:
    """Log a failed call (api.py)."""
    if e.code == CUDA_ERROR_NOT_READY:
        return
    global _first, _bytes
    line = f"{entry_point}: {error_name(e.code) or e.code}" + (f": {e.message}" if e.message else "") + "\n"
    with _lock:
        _lines.append(line)
        _bytes += len(line.encode())
        while _bytes > BUFFER_BYTES and len(_lines) > 1:
            _bytes -= len(_lines.popleft().encode())
            _first += 1
        listeners = _callbacks.values()
    message = line.rstrip("\n").encode()
    for cb in listeners:
        cb.fn(cb.data, CU_LOG_LEVEL_ERROR, ffi.new("char[]", message), len(message))


api.log_error = error


def _since(iterator) -> list[str]:
    """The lines from *iterator on (all with NULL), after a line counting those overwritten
    since; the iterator moves past them."""
    with _lock:
        end = _first + len(_lines)
        start = _first if iterator == ffi.NULL else iterator[0]
        lost = max(_first - start, 0)
        lines = list(_lines)[max(start - _first, 0):]
    if iterator != ffi.NULL:
        store(iterator, end)
    return ([f"[{lost} log messages were overwritten]\n"] if lost else []) + lines


@entry("cuLogsRegisterCallback", needs_init=False)
def cuLogsRegisterCallback(fn, data, phandle):
    if fn == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL callback")
    cb = _Callback(ffi.cast("void (*)(void *, int, char *, size_t)", fn), ffi.cast("void *", data))
    _callbacks.add(cb)
    if phandle != ffi.NULL:
        store_ptr(phandle, cb.handle)


@entry("cuLogsUnregisterCallback", needs_init=False)
def cuLogsUnregisterCallback(handle):
    _callbacks.remove(addr(handle))


def _no_flags(flags: int) -> None:
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} (reserved, must be 0)")


@entry("cuLogsCurrent", needs_init=False)
def cuLogsCurrent(piterator, flags):
    require(piterator)
    _no_flags(flags)
    with _lock:
        store(piterator, _first + len(_lines))


@entry("cuLogsDumpToFile", needs_init=False)
def cuLogsDumpToFile(piterator, path, flags):
    require(path)
    _no_flags(flags)
    lines = _since(piterator)
    try:
        with open(cstr(path), "w") as f:
            f.writelines(lines)
    except OSError as e:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cannot write {e.filename}: {e.strerror}") from None


@entry("cuLogsDumpToMemory", needs_init=False)
def cuLogsDumpToMemory(piterator, buffer, psize, flags):
    """The most recent lines that fit in *size bytes with the NUL; when not all fit, a line
    saying so comes first (and counts against the room), as cuda.h describes."""
    require(buffer, psize)
    _no_flags(flags)
    room = psize[0] - 1
    data = [line.encode() for line in _since(piterator)]
    if not data:
        psize[0] = 0
        if room >= 0:
            buffer[0] = b"\0"
        return
    kept: list[bytes] = []
    while data and sum(map(len, kept)) + len(data[-1]) <= room:
        kept.insert(0, data.pop())
    if data:  # not everything fits: a line says so first, in place of older lines if need be
        note = f"[{len(data)} older log messages did not fit]\n".encode()
        trimmed = list(kept)
        while trimmed and sum(map(len, trimmed)) + len(note) > room:
            trimmed.pop(0)
        if trimmed:
            kept = [note, *trimmed]
    if not kept:
        psize[0] = 0
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"a buffer of {room + 1} bytes holds no log message")
    out = b"".join(kept)
    ffi.memmove(buffer, out + b"\0", len(out) + 1)
    psize[0] = len(out)
