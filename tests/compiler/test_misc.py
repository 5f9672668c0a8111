"""Special registers with 3-D blocks and grids, module globals, generic .local/.shared pointers."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from zluda_py.compiler import compile


@pytest.mark.parametrize("grid, block", [((3, 2, 2), (5, 3, 2)), ((2, 1, 1), (40, 1, 1)), ((1, 2, 3), (1, 7, 9))])
def test_thread_and_block_indices(cuda_module, grid, block):
    m = cuda_module("compiler_misc.cu")
    nb, nt = int(np.prod(grid)), int(np.prod(block))
    out = np.zeros((nb * nt, 8), np.uint32)
    m.launch("_Z3idsPj", grid, block, [out])
    for b in range(nb):
        bx, by, bz = b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])
        for t in range(nt):
            tx, ty, tz = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
            row = out[b * nt + t]
            assert tuple(row[:6]) == (tx, ty, tz, bx, by, bz)
            assert row[6] == t % 32
            assert row[7] == grid[0] * 1000000 + block[2] * 10000 + block[1] * 100 + block[0]


def test_generic_pointers_globals_and_constants(cuda_module):
    m = cuda_module("compiler_misc.cu")
    g = m.globals["scale_factor"]
    assert g.size == 4
    factor = ctypes.c_int32.from_address(g.address)
    factor.value = 5
    x = np.arange(64, dtype=np.int32) * 3 - 50
    out = np.zeros((64, 3), np.int32)
    fout = np.zeros(64, np.float32)
    m.launch("_Z6spacesPKiPiPf", (1,), (64,), [x, out, fout])
    t = np.arange(64)
    expect_val = np.where(t & 1, x[t ^ 1] + 1, x * ((t & 7) + 1))
    np.testing.assert_array_equal(out[:, 0], expect_val)
    np.testing.assert_array_equal(out[:, 1], np.where(t & 1, 2, 1))  # isShared*2 + isLocal
    np.testing.assert_array_equal(out[:, 2], 5 * t)
    np.testing.assert_array_equal(fout, np.array([1.5, -2.0, 0.25, 8.0], np.float32)[t & 3] * t)
    assert factor.value == 6  # the kernel's store is visible to the host


LIB = """.version 8.0
.target sm_80
.address_size 64
.visible .global .align 4 .u32 bias = 40;
.visible .func (.param .b32 r) add_bias(.param .b32 x)
{
  .reg .b32 %r<4>;
  ld.param.b32 %r1, [x];
  ld.global.u32 %r2, [bias];
  add.s32 %r3, %r1, %r2;
  st.param.b32 [r], %r3;
  ret;
}
"""

APP = """.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 r) add_bias(.param .b32 x);
.extern .global .align 4 .u32 bias;
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  {
    .param .b32 a;
    .param .b32 ret;
    st.param.b32 [a], %r1;
    call (ret), add_bias, (a);
    ld.param.b32 %r2, [ret];
  }
  ld.global.u32 %r3, [bias];
  add.s32 %r2, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


def test_linking_resolves_extern_functions_and_variables():
    from zluda_py.compiler import compile

    m = compile([APP, LIB])
    out = np.zeros(50, np.int32)
    m.launch("k", (1,), (50,), [out])
    np.testing.assert_array_equal(out, np.arange(50) + 80)


COMMON_HEAD = ".version 7.0\n.target sm_80\n.address_size 64\n"
COMMON_KERNEL = COMMON_HEAD + """.common .global .align 4 .u32 c[1];
.extern .func (.param .b32 r) f();
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.global.u32 %r1, [c+12];
  { .param .b32 r; call (r), f, (); ld.param.b32 %r2, [r]; }
  add.u32 %r1, %r1, %r2;
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
COMMON_LIB = COMMON_HEAD + """.common .global .align 4 .u32 c[4] = {1, 2, 3, 40};
.weak .func (.param .b32 r) f()
{
  .reg .b32 %r<2>;
  ld.global.u32 %r1, [c];
  st.param.b32 [r], %r1;
  ret;
}
"""


def test_linking_merges_common_variables():
    """Modules may each define a `.common` variable (numba's NumbaEnv per device function, so a
    function linked twice defines it twice); the link keeps one, the largest, the initialised one."""
    out = np.zeros(1, np.uint32)
    compile([COMMON_KERNEL, COMMON_LIB, COMMON_LIB.replace("= {1, 2, 3, 40}", "")]).launch("k", (1,), (1,), [out])
    assert out[0] == 41


def test_linking_refuses_common_variables_initialised_twice():
    from zluda_py.ptx import PtxError

    with pytest.raises(PtxError, match="initialised in more than one module"):
        compile([COMMON_KERNEL, COMMON_LIB, COMMON_LIB])

WARP_SZ_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry warp_sz(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, WARP_SZ;
  mov.u32 %r2, %tid.x;
  mad.lo.u32 %r3, %r2, WARP_SZ, %r1;
  add.u32 %r4, WARP_SZ, %r3;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r2, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r4;
  ret;
}
"""


def test_warp_sz_is_the_constant_32():
    """nvcc emits WARP_SZ for warpSize: a predefined identifier, not a declared symbol."""
    out = np.zeros(40, np.uint32)
    compile(WARP_SZ_PTX).launch("warp_sz", (1,), (40,), [out])
    np.testing.assert_array_equal(out, np.arange(40) * 32 + 64)
