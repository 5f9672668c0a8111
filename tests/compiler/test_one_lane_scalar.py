"""Lane-wise instructions of which a side run in place reads one lane (lane_demand) are computed
as scalars from their sources' lane (FunctionLowering._one_lane): the warp reduction's last add
and its NaN select. The IR check fails before (a 32-lane add and compare); values against
numpy's float32 sums taken in the shuffle tree's order (NaNs canonical), at n not a multiple
of 32 (partial last warps and blocks) and blocks whose size is not a multiple of 32, and against
the reference interpreter at aligned blocks and rows ending inside warps."""

from __future__ import annotations

import numpy as np
import pytest

from tests.compiler.test_aligned_lanes import WARP_REDUCE
from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse
from zluda_py.reference import run as reference

# the warp reduction, each warp's sum stored at its own slot: ctaid * warps per block + warp
PER_WARP = WARP_REDUCE.replace("warp_reduce", "per_warp").replace(
    "shr.s32 %r24, %r2, 5;",
    "add.s32 %r25, %r4, 31; shr.u32 %r25, %r25, 5; shr.u32 %r24, %r1, 5; mad.lo.s32 %r24, %r5, %r25, %r24;")

# lane K's values through float, integer, compare/select and f64 instructions, read only by
# the side of lane K (tid & 31 == K), which stores them
CHAIN = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry chain(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .f32 %f<16>;
    .reg .f64 %fd<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd4, [in];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r12, %tid.y;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r13, %ntid.y;
    mov.u32 %r5, %ctaid.x;
    mad.lo.s32 %r14, %r12, %r3, %r1;
    mul.lo.s32 %r16, %r3, %r13;
    mad.lo.s32 %r8, %r5, %r16, %r14;
    mul.wide.u32 %rd5, %r8, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f1, [%rd6];
    mov.b32 %r2, %f1;
    shfl.sync.down.b32 %r4, %r2, 3, 31, -1;
    mov.b32 %f2, %r4;
    add.f32 %f3, %f1, %f2;
    mul.f32 %f4, %f3, %f1;
    fma.rn.f32 %f5, %f4, %f2, %f1;
    max.f32 %f6, %f5, %f2;
    min.f32 %f7, %f6, %f3;
    sub.f32 %f8, %f7, %f4;
    abs.f32 %f9, %f8;
    neg.f32 %f10, %f9;
    cvt.rni.s32.f32 %r6, %f10;
    setp.gt.f32 %p2, %f3, %f4;
    selp.b32 %r7, %r6, %r4, %p2;
    xor.b32 %r9, %r7, %r2;
    shl.b32 %r10, %r9, 3;
    shr.s32 %r11, %r10, 1;
    cvt.f64.f32 %fd1, %f5;
    mul.f64 %fd2, %fd1, %fd1;
    and.b32 %r15, %r1, 31;
    setp.ne.s32 %p1, %r15, LANE;
    @%p1 bra END;
    mul.wide.u32 %rd2, %r8, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f3;
    st.global.u32 [%rd3+4], %r11;
    st.global.f64 [%rd3+8], %fd2;
END:
    ret;
}
"""

NANS = np.array([0x7FA00001, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)


def tree_sums(lanes: np.ndarray) -> np.ndarray:
    """Lane 0 of `shfl.down` by 16, 8, 4, 2, 1 (clamp 31: a lane past 31 reads its own value)
    and `add.f32`, in float32, per row of 32 lanes; a NaN is 0x7fffffff, as add.f32 gives it."""
    v = lanes.astype(np.float32).copy()
    with np.errstate(invalid="ignore", over="ignore"):
        for o in (16, 8, 4, 2, 1):
            shifted = np.concatenate([v[:, o:], v[:, 32 - o:]], axis=1)
            v = v + shifted
            v[np.isnan(v)] = np.uint32(0x7FFFFFFF).view(np.float32)
    return v[:, 0]


def inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    x[rng.choice(n, 6, replace=False)] = np.concatenate([NANS, np.float32([np.inf, -np.inf])])
    return x


def test_one_lane_is_computed_as_scalars():
    """The aligned copy adds lane 0's pair as one float and canonicalises its NaN as one
    (fails before: a `<32 x float>` add of two zero-filled shuffles and a 32-lane compare);
    CHAIN's instructions for lane 7 are scalar too."""
    text = CPU.lower_part(parse(WARP_REDUCE), "warp_reduce").text
    aligned = text.split("lanes.aligned", 2)[2].split("lanes.any")[0]
    assert "fadd float" in aligned and "fcmp uno float" in aligned
    general = text.split("lanes.any", 2)[2]
    assert "fadd float" not in general  # every lane of the general copy is read
    chain = CPU.lower_part(parse(CHAIN.replace("LANE", "7")), "chain").text
    for op in ("fmul float", 'call float @"llvm.fma.f32"', "fcmp ogt float", "fmul double"):
        assert op in chain, op


@pytest.mark.parametrize("threads,n", [(256, 4096), (256, 5000), (96, 999), (100, 1000), (48, 77), (200, 3001),
                                       (40, 640)])
def test_per_warp_sums_against_numpy(threads, n):
    """Whole warps against the tree's float32 sums (lanes past n read 0). A block whose size is
    not a multiple of 32 ends in a partial warp, whose shuffles read lanes that do not take part
    (undefined: the reference interpreter refuses them), so only its whole warps are compared."""
    text = PER_WARP
    x = inputs(n, threads + n)
    blocks = (n + threads - 1) // threads
    warps = (threads + 31) // 32
    got = np.full(blocks * warps, 0xDEAD, np.uint32)
    compile(text).launch("per_warp", (blocks,), (threads,), [np.int32(n), x, got])
    i = np.arange(blocks)[:, None, None] * threads + np.arange(warps)[None, :, None] * 32 + np.arange(32)
    whole = np.broadcast_to((np.arange(warps) * 32 + 32 <= threads)[None, :], (blocks, warps)).ravel()
    lanes = np.where(i < n, x[np.minimum(i, n - 1)], np.float32(0)).reshape(-1, 32)
    want = tree_sums(lanes).view(np.uint32)
    np.testing.assert_array_equal(got[whole], want[whole])


@pytest.mark.parametrize("lane", [0, 7, 31])
@pytest.mark.parametrize("block", [(256, 1), (96, 1), (64, 2), (48, 2), (40, 4), (80, 2)])
def test_one_lane_of_each_instruction_against_the_reference(lane, block):
    """Float (NaN, infinities), integer, compare/select, conversions and f64 for lane 0, 7 or 31
    only, at aligned blocks and at rows ending inside warps (whole warps: the reference
    interpreter refuses shuffles of lanes that do not take part)."""
    text = CHAIN.replace("LANE", str(lane))
    grid = 3
    n = grid * block[0] * block[1]
    x = inputs(n, lane + block[0])
    got, want = (np.full(4 * n, 0xDEAD, np.uint32) for _ in range(2))
    compile(text).launch("chain", (grid,), block, [x, got])
    reference(text, "chain", (grid,), block, [x, want])
    np.testing.assert_array_equal(got, want)
    assert (got[::4] != 0xDEAD).any()
