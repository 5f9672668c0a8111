"""Synchronous copies run at memory bandwidth: no hand-off to a stream thread when the stream
is idle, and device memory is resident from cuMemAlloc on (no page fault per 4 KiB during the
first copy). Bounds are loose (a loaded 2-core CI machine) yet far below what the old path
took: 15-50 ms for 4 MiB into a fresh allocation, 0.3 ms warm."""

from __future__ import annotations

import ctypes
import statistics
import time

import numpy as np

c_void_p, byref, c_size_t, c_ulonglong = ctypes.c_void_p, ctypes.byref, ctypes.c_size_t, ctypes.c_ulonglong
SIZE = 4 << 20


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def test_4mib_host_to_device_copy_runs_at_memory_speed(cu):
    host = np.arange(SIZE // 4, dtype=np.uint32)
    back = np.zeros_like(host)
    fresh, warm = [], []
    pointers = []
    for _ in range(5):
        d = c_ulonglong()
        cu.ok(cu.cuMemAlloc_v2(byref(d), c_size_t(SIZE)))
        pointers.append(d)
        copy = lambda: cu.ok(cu.cuMemcpyHtoD_v2(d, host.ctypes.data_as(c_void_p), c_size_t(SIZE)))  # noqa: E731
        fresh.append(_ms(copy))
        warm.extend(_ms(copy) for _ in range(5))
    cu.ok(cu.cuMemcpyDtoH_v2(back.ctypes.data_as(c_void_p), pointers[-1], c_size_t(SIZE)))
    assert np.array_equal(back, host)
    for d in pointers:
        cu.ok(cu.cuMemFree_v2(d))
    # 4 MiB in 4 ms is 1 GB/s: an order of magnitude of slack on memcpy speed
    assert statistics.median(fresh) < 4.0, fresh
    assert statistics.median(warm) < 2.0, warm
