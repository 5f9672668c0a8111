"""Collective operands in registers that always hold one constant (nvcc moves shuffle offsets,
clamps and member masks into registers) are lowered as immediates: one shufflevector instead of
a per-lane permutation. A register two definitions reach stays a per-lane permutation. Expected
values follow the PTX ISA's shfl.sync pseudocode (c = 31: clamp 31, no segment mask)."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu import collectives

PTX = """.version 7.8
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 sel)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 3;
    mov.u32 %r3, 31;
    mov.u32 %r4, -1;
    shfl.sync.down.b32 %r5, %r1, %r2, %r3, %r4;
    ld.param.u32 %r6, [sel];
    setp.ne.u32 %p1, %r6, 0;
    @%p1 mov.u32 %r2, 5;
    shfl.sync.idx.b32 %r7, %r1, %r2, %r3, %r4;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    st.global.u32 [%rd3+4], %r7;
    ret;
}
"""


def model(tid: np.ndarray, down: int, idx: int) -> tuple[np.ndarray, np.ndarray]:
    """shfl.down (j = lane + b, valid while j <= 31, else the own value) and shfl.idx (j = b)."""
    lane, base = tid % 32, tid - tid % 32
    shifted = np.where(lane + down <= 31, tid + down, tid)
    return shifted, base + idx


@pytest.mark.parametrize("sel", [0, 1])
def test_constant_and_two_definition_shuffle_operands(sel):
    m = compile(PTX)
    out = np.zeros((64, 2), np.uint32)
    m.launch("k", 1, 64, [out, np.uint32(sel)])
    down, idx = model(np.arange(64), 3, 5 if sel else 3)
    np.testing.assert_array_equal(out[:, 0], down)
    np.testing.assert_array_equal(out[:, 1], idx)


def test_only_the_two_definition_operand_is_permuted_per_lane(monkeypatch):
    calls = []
    permute = collectives.WarpMixin.permute
    monkeypatch.setattr(collectives.WarpMixin, "permute", lambda self, v, s: calls.append(1) or permute(self, v, s))
    compile(PTX)
    assert len(calls) == 2  # the idx shuffle, in the divergent and the converged copy of its block
