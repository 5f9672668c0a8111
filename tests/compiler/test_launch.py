"""End to end: nvcc-built PTX compiled for the CPU and launched with numpy buffers or a raw blob."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from zluda_py.compiler import LaunchError
from zluda_py.compiler.cpu.bounds import registered

VADD = "_Z10vector_addPKfS0_Pfi"


def test_vector_add_matches_numpy(cuda_module):
    m = cuda_module("vector_add.cu")
    n = (1 << 16) + 77  # partial last block and partial last warp
    a = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    m.launch(VADD, ((n + 255) // 256,), (256,), [a, b, c, np.int32(n)])
    np.testing.assert_array_equal(c, a + b)


def test_kernel_metadata(cuda_module):
    k = cuda_module("vector_add.cu").kernels[VADD]
    assert [(p.offset, p.size) for p in k.params] == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert k.param_size == 28 and k.max_threads == 1024


def test_launch_raw_with_param_blob_and_odd_block_shapes(cuda_module):
    m = cuda_module("vector_add.cu")
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.25, np.float32)
    c = np.zeros(n, np.float32)
    blob = struct.pack("<QQQi", a.ctypes.data, b.ctypes.data, c.ctypes.data, n - 10)
    with registered(a, b, c):
        m.launch_raw(VADD, (8, 1, 1), (125, 1, 1), blob)  # 125 threads: 3 full warps + 29 lanes
    np.testing.assert_array_equal(c[:n - 10], a[:n - 10] + 0.25)
    assert not c[n - 10:].any()  # threads with i >= n did not store


def test_bad_launch_configuration_is_refused(cuda_module):
    m = cuda_module("vector_add.cu")
    with pytest.raises(LaunchError) as e:
        m.launch_raw(VADD, (1, 1, 1), (2048, 1, 1), bytes(28))
    assert e.value.cu_result == 1
