"""Shared memory with barriers (static and dynamic), atomics, and warp collectives."""

from __future__ import annotations

import numpy as np


def test_block_tree_reduction_with_barriers_in_a_loop(cuda_module):
    m = cuda_module("compiler_sync.cu")
    n = 256 * 37 + 100
    x = np.random.default_rng(5).integers(-1000, 1000, n).astype(np.float32)  # exact in f32
    blocks = (n + 255) // 256
    out = np.zeros(blocks, np.float32)
    m.launch("_Z9block_sumPKfPfi", (blocks,), (256,), [x, out, np.int32(n)])
    padded = np.zeros(blocks * 256, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(out, padded.reshape(blocks, 256).sum(axis=1))


def test_dynamic_shared_memory(cuda_module):
    m = cuda_module("compiler_sync.cu")
    for threads in (96, 200):  # several warps; 200 leaves a partial warp
        data = np.arange(threads * 5, dtype=np.int32)
        m.launch("_Z11reverse_dynPi", (5,), (threads,), [data], shared_mem=threads * 4)
        np.testing.assert_array_equal(data, np.arange(threads * 5).reshape(5, threads)[:, ::-1].ravel())


def test_atomics_on_global_and_shared(cuda_module):
    m = cuda_module("compiler_sync.cu")
    n = 5000
    x = np.random.default_rng(9).integers(-10**6, 10**6, n).astype(np.int32)
    counters = np.zeros(3, np.int32)
    counters[1] = np.iinfo(np.int32).min
    fsum = np.zeros(1, np.float32)
    wrap = np.zeros(1, np.uint32)
    m.launch("_Z7atomicsPKiPiPfPji", ((n + 127) // 128,), (128,), [x, counters, fsum, wrap, np.int32(n)])
    assert counters[0] == x.sum(dtype=np.int32)  # wraps like the device's 32-bit adds
    assert counters[1] == x.max()
    assert 1 <= counters[2] <= n  # exactly one CAS from 0 succeeded
    assert fsum[0] == n  # integers below 2**24 add exactly in f32
    assert wrap[0] == n % 10  # atomicInc wraps to 0 after reaching 9


def test_warp_shuffles_and_votes(cuda_module):
    m = cuda_module("compiler_sync.cu")
    warps = 6
    x = np.random.default_rng(11).integers(0, 100, warps * 32).astype(np.int32)
    out = np.zeros((warps * 32, 6), np.int32)
    m.launch("_Z8warp_opsPKiPi", (2,), (96,), [x, out])
    w = x.reshape(warps, 32)
    lane = np.arange(32)
    for k in range(warps):
        v = w[k]
        s = v.copy()
        for o in (16, 8, 4, 2, 1):  # shfl.down keeps the own value where the source is out of range
            src = lane + o
            s = s + np.where(src < 32, s[np.minimum(src, 31)], s)
        rows = out[k * 32:(k + 1) * 32]
        np.testing.assert_array_equal(rows[:, 0], s)
        np.testing.assert_array_equal(rows[:, 1], v[lane ^ 5])
        np.testing.assert_array_equal(rows[:, 2], v[(lane * 7) & 31])
        ballot = sum(1 << i for i in range(32) if v[i] & 1)
        np.testing.assert_array_equal(rows[:, 3].view(np.uint32), ballot)
        np.testing.assert_array_equal(rows[:, 4], int((v > 90).any()))
        np.testing.assert_array_equal(rows[:, 5], 1)


def test_divergent_shuffle_with_partial_member_mask(cuda_module):
    m = cuda_module("compiler_sync.cu")
    x = np.arange(100, 132, dtype=np.int32)
    out = np.zeros(32, np.int32)
    m.launch("_Z12warp_partialPKiPi", (1,), (32,), [x, out])
    lane = np.arange(32)
    expect = np.where(lane % 2 == 0, x[(lane + 2) & 31] + 1000, -1)
    np.testing.assert_array_equal(out, expect)
