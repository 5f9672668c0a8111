"""The driver's error log (cuLogs*) through libcuda.so.1, against cuda.h's description: an
iterator from cuLogsCurrent points past the last message and advances as logs are dumped;
cuLogsDumpToMemory writes messages separated by newlines and NUL-terminated, sets *size to the
bytes written without the NUL (0 and CUDA_SUCCESS with nothing to dump, 0 and
CUDA_ERROR_INVALID_VALUE when not even one message fits), and when not all fit puts a message
saying so first and the most recent message last; callbacks receive each message."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_char_p, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

INVALID_VALUE = 1
CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_size_t)


def _fail(cu) -> None:
    assert cu.cuMemAlloc_v2(None, c_size_t(16)) == INVALID_VALUE
    assert cu.cuMemsetD8_v2(c_ulonglong(0x10), 0, c_size_t(8)) == INVALID_VALUE


def _dump(cu, iterator, size: int) -> tuple[int, int, bytes]:
    buf = ctypes.create_string_buffer(size)
    n = c_size_t(size)
    rc = cu.cuLogsDumpToMemory(iterator, buf, byref(n), 0)
    return rc, n.value, buf.raw[:n.value + 1]


def test_iterators_and_dumps(cu, tmp_path):
    it = c_uint()
    cu.ok(cu.cuLogsCurrent(byref(it), 0))
    assert _dump(cu, byref(c_uint(it.value)), 4096)[:2] == (0, 0)  # nothing since
    _fail(cu)
    rc, n, text = _dump(cu, byref(it), 4096)
    assert rc == 0 and text.endswith(b"\n\0") and n == len(text) - 1
    lines = text[:-1].decode().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE")
    assert lines[1].startswith("cuMemsetD8_v2: CUDA_ERROR_INVALID_VALUE")
    assert _dump(cu, byref(it), 4096)[:2] == (0, 0)  # the iterator moved past them
    # too small for the two: a line saying so, then the most recent
    start = c_uint(it.value)
    _fail(cu)
    rc, n, text = _dump(cu, byref(c_uint(start.value)), len(lines[1]) + 60)
    assert rc == 0
    got = text[:-1].decode().splitlines()
    assert got[0].startswith("[") and got[-1] == lines[1] and len(got) == 2
    assert _dump(cu, byref(c_uint(start.value)), 8)[:2] == (INVALID_VALUE, 0)  # not one fits
    assert cu.cuLogsCurrent(byref(it), 1) == INVALID_VALUE
    assert cu.cuLogsCurrent(None, 0) == INVALID_VALUE
    path = tmp_path / "log.txt"
    cu.ok(cu.cuLogsDumpToFile(byref(c_uint(start.value)), str(path).encode(), 0))
    dumped = path.read_text().splitlines()  # the failures, then those of the calls above (logged too)
    assert dumped[:2] == lines
    assert dumped[2].startswith("cuLogsDumpToMemory: CUDA_ERROR_INVALID_VALUE")
    cu.ok(cu.cuLogsDumpToFile(None, str(path).encode(), 0))  # NULL: all that is kept
    assert "\n".join(lines) in path.read_text()


def test_callbacks(cu):
    seen = []
    callback = CALLBACK(lambda data, level, message, length: seen.append((data, level, message[:length])))
    handle = c_void_p()
    cu.ok(cu.cuLogsRegisterCallback(callback, c_void_p(0x1234), byref(handle)))
    _fail(cu)
    assert [(d, lvl) for d, lvl, _ in seen] == [(0x1234, 0), (0x1234, 0)]  # CU_LOG_LEVEL_ERROR
    assert seen[0][2].startswith(b"cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE")
    cu.ok(cu.cuLogsUnregisterCallback(handle))
    _fail(cu)
    assert len(seen) == 2
    assert cu.cuLogsUnregisterCallback(handle) == INVALID_VALUE
    assert cu.cuLogsRegisterCallback(None, None, None) == INVALID_VALUE


def test_the_buffer_keeps_the_most_recent_25600_bytes(cu, tmp_path):
    """cuda.h: 'The maximum size of the buffer is 25600 bytes'; the oldest logs are overwritten
    and a dump says so."""
    it = c_uint()
    cu.ok(cu.cuLogsCurrent(byref(it), 0))
    for _ in range(600):
        _fail(cu)
    path = tmp_path / "log.txt"
    cu.ok(cu.cuLogsDumpToFile(byref(it), str(path).encode(), 0))
    text = path.read_text()
    first, *rest = text.splitlines()
    assert first.startswith("[") and "overwritten" in first
    assert len("".join(line + "\n" for line in rest).encode()) <= 25600
    assert rest[-1].startswith("cuMemsetD8_v2: CUDA_ERROR_INVALID_VALUE")
