"""`.align N` on .shared and .local variables holds for their generic addresses (numba-cuda's
`cuda.local.array(..., alignment=256)` / `cuda.shared.array`): the launch aligns the shared
arena and the stack windows, and every .local frame of a module is a multiple of its largest
.local alignment, so a callee's frame is aligned too."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import UnsupportedError, compile

PTX = r"""
.version 7.8
.target sm_80
.address_size 64

.shared .align 4 .b8 s_small[3];
.shared .align 1024 .b8 s_big[8];

// out[0] = generic address of the callee's .local .align 512 array
.func (.param .b64 r) deep()
{
    .local .align 512 .b8 f_big[8];
    .reg .b64 %rd<2>;
    mov.u64 %rd1, f_big;
    cvta.local.u64 %rd1, %rd1;
    st.local.u8 [f_big], 1;
    st.param.b64 [r], %rd1;
    ret;
}

// per thread: s_small, s_big, its own .local .align 256 array, the callee's
.visible .entry addrs(.param .u64 out)
{
    .local .align 4 .b8 l_small[4];
    .local .align 256 .b8 l_big[8];
    .reg .b32 %r<2>;
    .reg .b64 %rd<9>;
    st.local.u32 [l_small], 7;
    st.local.u8 [l_big], 1;
    st.shared.u8 [s_small], 1;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 32;
    add.u64 %rd1, %rd1, %rd2;
    mov.u64 %rd3, s_small;
    cvta.shared.u64 %rd3, %rd3;
    mov.u64 %rd4, s_big;
    cvta.shared.u64 %rd4, %rd4;
    mov.u64 %rd5, l_big;
    cvta.local.u64 %rd5, %rd5;
    { .param .b64 r; call (r), deep, (); ld.param.b64 %rd6, [r]; }
    st.global.v2.u64 [%rd1], {%rd3, %rd4};
    st.global.v2.u64 [%rd1+16], {%rd5, %rd6};
    ret;
}
"""


@pytest.mark.parametrize("block", [1, 40])
def test_shared_and_local_addresses_have_their_declared_alignment(block):
    out = np.zeros((block, 4), np.uint64)
    compile(PTX).launch("addrs", (3,), (block,), [out])
    assert (out % np.array([4, 1024, 256, 512], np.uint64) == 0).all(), [[hex(a) for a in row] for row in out]
    assert len(set(out[:, 2])) == block and len(set(out[:, 3])) == block  # each thread its own window


def test_alignment_beyond_the_launch_base_alignment_is_refused():
    with pytest.raises(UnsupportedError, match=r"\.align 8192"):
        compile(PTX.replace(".align 1024", ".align 8192"))
