"""Triton (PyPI triton) under `zluda run`, without PyTorch: its ptxas step is our stand-in
(TRITON_PTXAS_PATH, docs/toolchains.md), its launcher a C stub it builds against cuda.h and
loads libcuda with. Buffers are driver allocations behind the `data_ptr()`/`dtype` interface
Triton takes; results are compared with numpy. The script runs twice: the second run loads
every kernel from Triton's disk cache (the PTX cubins our ptxas wrote)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.thirdparty.clients import run_script

XDIST_INDEPENDENT = True

SCRIPT = r'''
import ctypes
import numpy as np
import triton
import triton.language as tl

cuda = ctypes.CDLL("libcuda.so.1")


def ok(rc, what):
    if rc:
        raise SystemExit(f"{what}: CUresult {rc}")


class Device:
    """A device copy of a numpy array, as Triton takes it: data_ptr() and dtype."""

    def __init__(self, host):
        self.dtype, self.shape, self.nbytes = host.dtype, host.shape, host.nbytes
        ptr = ctypes.c_uint64()
        ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), host.nbytes), "cuMemAlloc")
        self.ptr = ptr.value
        ok(cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr), host.ctypes.data_as(ctypes.c_void_p), host.nbytes), "HtoD")

    def data_ptr(self):
        return self.ptr

    def numpy(self):
        out = np.empty(self.shape, self.dtype)
        ok(cuda.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr), self.nbytes), "DtoH")
        return out


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + row, tl.sum(tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0), axis=0))


@triton.jit
def histogram(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + tl.load(x_ptr + offs, mask=offs < n, other=0), 1, mask=offs < n)


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           PRECISION: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


ok(cuda.cuInit(0), "cuInit")
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "retain")
ok(cuda.cuCtxSetCurrent(ctx), "set")
rng = np.random.default_rng(7)

n = 1000
x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
out = Device(np.zeros(n, np.float32))
add[(triton.cdiv(n, 256),)](Device(x), Device(y), out, n, BLOCK=256)
np.testing.assert_array_equal(out.numpy(), x + y)

rows = rng.random((37, 100), dtype=np.float32)
sums = Device(np.zeros(37, np.float32))
row_sum[(37,)](Device(rows), sums, 100, BLOCK=128)
np.testing.assert_allclose(sums.numpy(), rows.sum(axis=1, dtype=np.float64), rtol=1e-5)

values = rng.integers(0, 16, 3000).astype(np.int32)
counts = Device(np.zeros(16, np.int32))
histogram[(triton.cdiv(3000, 512),)](Device(values), counts, 3000, BLOCK=512, num_warps=8)
np.testing.assert_array_equal(counts.numpy(), np.bincount(values, minlength=16))

M, N, K = 40, 48, 72
a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
c = Device(np.zeros((M, N), np.float32))
grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
matmul[grid](Device(a), Device(b), c, M, N, K, BM=32, BN=32, BK=32, PRECISION="ieee")
np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b, rtol=1e-5)

# tensor cores: tf32 (mma m16n8k8 .tf32 with ldmatrix), fp16 and bf16 (mma m16n8k16, ldmatrix
# .trans); mma ignores an f32's low 13 bits as tf32, and the products are exact in f32
def tf32(x):
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


matmul[grid](Device(a), Device(b), c, M, N, K, BM=32, BN=32, BK=32, PRECISION="tf32")
np.testing.assert_allclose(c.numpy(), tf32(a) @ tf32(b), rtol=1e-5)
a16, b16 = a.astype(np.float16), b.astype(np.float16)
matmul[grid](Device(a16), Device(b16), c, M, N, K, BM=32, BN=32, BK=32, PRECISION="ieee")
np.testing.assert_allclose(c.numpy(), a16.astype(np.float64) @ b16.astype(np.float64), rtol=1e-5)


def bf16(x):
    """Triton takes a dtype named bfloat16; the buffer holds the top halves of x's f32 encodings."""
    dev = Device((x.view(np.uint32) >> 16).astype(np.uint16))
    dev.dtype = "bfloat16"
    return dev, (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)


(da, ea), (db, eb) = bf16(a), bf16(b)
matmul[grid](da, db, c, M, N, K, BM=32, BN=32, BK=32, PRECISION="ieee")
np.testing.assert_allclose(c.numpy(), ea @ eb, rtol=1e-5)
print("ok")
'''


def test_kernels_compiled_then_from_the_disk_cache(tmp_path):
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install -e '.[test]')")
    for _ in ("compiled", "from Triton's cache"):
        run_script(SCRIPT, tmp_path)
