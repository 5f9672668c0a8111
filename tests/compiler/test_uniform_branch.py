"""A whole warp at a branch on a warp-uniform predicate (function.py `branch`): every lane goes
the same way, so the converged clone branches once on the scalar instead of testing the lane
mask for none, all and some (the tree reduction's `stride > 0`, sgemm's tile loop). Partial
warps still go through the dispatcher. Values must match numpy."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

# out[tid] = sum over k < n of in[k*ntid + tid], tripled when flag != 0 (`@!%p3 bra`: the
# negated guard skips the tripling when flag == 0); the counter and both predicates are uniform
PTX = r"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry uniform_loop(.param .u64 in, .param .u64 out, .param .u32 n, .param .u32 flag)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [flag];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, 0;
    mov.u32 %r6, 0;
LOOP:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra AFTER;
    mad.lo.s32 %r7, %r5, %r4, %r3;
    mul.wide.u32 %rd3, %r7, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r8, [%rd4];
    add.s32 %r6, %r6, %r8;
    add.s32 %r5, %r5, 1;
    bra.uni LOOP;
AFTER:
    setp.ne.u32 %p3, %r2, 0;
    @!%p3 bra STORE;
    mul.lo.s32 %r6, %r6, 3;
STORE:
    mul.wide.u32 %rd5, %r3, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r6;
    ret;
}
"""


def test_one_scalar_branch_per_uniform_predicate():
    """No lane-mask split is left in the kernel: its guarded branches are all uniform."""
    text = CPU.lower_part(parse(PTX), "uniform_loop").text
    assert "diverge" not in text and '"some' not in text
    assert "uniform_loop.warp" in text  # the kernel was lowered with converged clones


@pytest.mark.parametrize("block", [32, 64, 48, 7])
@pytest.mark.parametrize("n,flag", [(0, 0), (1, 1), (5, 0), (9, 2)])
def test_uniform_loop(block, n, flag):
    m = compile(PTX)
    rng = np.random.default_rng(block * 31 + n)
    x = rng.integers(0, 1 << 20, max(n, 1) * block, dtype=np.uint32)
    out = np.full(block, 7, np.uint32)
    m.launch("uniform_loop", 1, block, [x, out, np.uint32(n), np.uint32(flag)])
    want = x[:n * block].reshape(n, block).astype(np.uint64).sum(0) if n else np.zeros(block, np.uint64)
    want = want * (3 if flag else 1) % (1 << 32)
    np.testing.assert_array_equal(out, want.astype(np.uint32))
