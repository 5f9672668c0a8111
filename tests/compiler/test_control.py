"""Divergence (per-lane loop trip counts, if/else chains, early return) and calls (recursion, .local)."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler.cpu.bounds import registered


def collatz_steps(x: int) -> int:
    if x <= 0:
        return -1
    s = 0
    while x != 1:
        x = 3 * x + 1 if x & 1 else x // 2
        s += 1
    return s


def test_loops_with_per_lane_trip_counts(cuda_module):
    m = cuda_module("compiler_control.cu")
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.integers(-5, 100000, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    m.launch("_Z7collatzPKiPii", ((n + 95) // 96,), (96,), [x, out, np.int32(n)])
    np.testing.assert_array_equal(out, [collatz_steps(int(v)) for v in x])


def test_if_else_chain(cuda_module):
    m = cuda_module("compiler_control.cu")
    n = 777
    x = np.random.default_rng(3).integers(-1000, 1000, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    m.launch("_Z8branchesPKiPii", (7,), (113,), [x, out, np.int32(n)])
    r = np.fmod(x, 3)  # C's % truncates toward zero
    expect = np.where(r == 0, x * 2, np.where(r == 1, -x, x + 100))
    np.testing.assert_array_equal(out, expect)


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def sum_local(n: int) -> int:
    buf = [k * n for k in range(16)]
    return sum(buf[k] for k in range(0, 16, n % 3 + 1))


def test_recursive_and_local_memory_calls(cuda_module):
    m = cuda_module("compiler_control.cu")
    n = 200
    out = np.zeros(n, np.int32)
    m.launch("_Z5callsPii", (4,), (64,), [out, np.int32(n)])
    expect = [(fib(i % 12) * 1000 + sum_local(i)) & 0xFFFFFFFF for i in range(n)]
    np.testing.assert_array_equal(out.view(np.uint32), expect)


def test_indirect_calls_through_a_function_table(cuda_module):
    m = cuda_module("compiler_control.cu")
    n = 100
    x = np.arange(-50, 50, dtype=np.int32)
    out = np.zeros(n, np.int32)
    m.launch("_Z8indirectPKiPii", (2,), (64,), [x, out, np.int32(n)])
    i = np.arange(n)
    expect = np.select([i % 3 == 0, i % 3 == 1], [2 * x, x * x], -x) + 7
    np.testing.assert_array_equal(out, expect)


def deep(d: int) -> int:
    return d + 3 if d == 0 else deep(d - 1) + d + (d & 15)


def test_recursion_with_local_frames_and_the_stack_limit(cuda_module):
    import struct

    from zluda_py.compiler import LaunchError

    m = cuda_module("compiler_control.cu")
    out = np.zeros(40, np.int32)
    blob = struct.pack("<Qi", out.ctypes.data, 100)
    with registered(out):
        m.launch_raw("_Z7recursePii", (1, 1, 1), (40, 1, 1), blob, stack_size=64 * 1024)
    np.testing.assert_array_equal(out, [deep(100 + t % 4) for t in range(40)])
    with pytest.raises(LaunchError) as e, registered(out):  # 100 frames of 64+ bytes do not fit in 1 KiB
        m.launch_raw("_Z7recursePii", (1, 1, 1), (40, 1, 1), blob)
    assert e.value.cu_result == 719
