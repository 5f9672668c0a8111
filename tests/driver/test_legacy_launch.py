"""The launch API of CUDA < 4.0 through libcuda.so.1: cuFuncSetBlockShape, cuFuncSetSharedSize,
cuParamSetSize/Seti/Setf/Setv, cuParamSetTexRef, cuLaunch, cuLaunchGrid, cuLaunchGridAsync.
The kernel writes a + b + (global thread index) for its parameters (u64 out at byte 0, u32 a at
8, f32 b at 12: the PTX ABI's offsets); expected values are computed with numpy."""

from __future__ import annotations

from ctypes import byref, c_float, c_int, c_size_t, c_ulonglong, c_void_p

import numpy as np

INVALID_VALUE = 1
CU_PARAM_TR_DEFAULT = -1

PTX = b""".version 7.0
.target sm_52
.address_size 64
.visible .entry legacy(.param .u64 out, .param .u32 a, .param .f32 b)
{
  .reg .b32 %r<10>; .reg .f32 %f<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [a];
  ld.param.f32 %f1, [b];
  mov.u32 %r2, %ctaid.y;
  mov.u32 %r3, %nctaid.x;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, %ntid.x;
  mov.u32 %r6, %tid.x;
  mad.lo.u32 %r7, %r2, %r3, %r4;
  mad.lo.u32 %r8, %r7, %r5, %r6;
  add.u32 %r9, %r8, %r1;
  cvt.rn.f32.u32 %f2, %r9;
  add.f32 %f3, %f2, %f1;
  mul.wide.u32 %rd2, %r8, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.f32 [%rd3], %f3;
  ret;
}
\0"""


def _setup(cu):
    cu.cuParamSetf.argtypes = [c_void_p, c_int, c_float]
    module, fn = c_void_p(), c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(module), PTX))
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"legacy"))
    out = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(out), c_size_t(4 * 512)))
    cu.ok(cu.cuMemsetD8_v2(out, 0, c_size_t(4 * 512)))
    return module, fn, out


def _result(cu, out, n: int) -> np.ndarray:
    host = np.zeros(n, dtype=np.float32)
    cu.ok(cu.cuCtxSynchronize())
    cu.ok(cu.cuMemcpyDtoH_v2(c_void_p(host.ctypes.data), out, c_size_t(host.nbytes)))
    return host


def test_legacy_launches(cu):
    module, fn, out = _setup(cu)
    assert cu.cuLaunch(fn) == INVALID_VALUE  # no block shape yet
    cu.ok(cu.cuFuncSetBlockShape(fn, 32, 1, 1))
    cu.ok(cu.cuParamSetSize(fn, 16))
    cu.ok(cu.cuParamSetv(fn, 0, byref(out), 8))
    cu.ok(cu.cuParamSeti(fn, 8, 5))
    cu.ok(cu.cuParamSetf(fn, 12, 0.5))
    cu.ok(cu.cuLaunchGrid(fn, 2, 3))
    expected = np.arange(192, dtype=np.float32) + 5 + 0.5
    assert np.array_equal(_result(cu, out, 192), expected)
    cu.ok(cu.cuParamSeti(fn, 8, 100))  # the other parameters stay as set
    s = c_void_p()
    cu.ok(cu.cuStreamCreate(byref(s), 0))
    cu.ok(cu.cuLaunchGridAsync(fn, 1, 1, s))
    cu.ok(cu.cuStreamSynchronize(s))
    got = _result(cu, out, 192)
    assert np.array_equal(got[:32], np.arange(32, dtype=np.float32) + 100.5)
    assert np.array_equal(got[32:], expected[32:])
    cu.ok(cu.cuFuncSetBlockShape(fn, 8, 1, 1))
    cu.ok(cu.cuParamSeti(fn, 8, 0))
    cu.ok(cu.cuLaunch(fn))  # one block
    assert np.array_equal(_result(cu, out, 8), np.arange(8, dtype=np.float32) + 0.5)
    cu.ok(cu.cuStreamDestroy_v2(s))
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMemFree_v2(out))


def test_legacy_launch_errors(cu):
    module, fn, out = _setup(cu)
    cu.ok(cu.cuFuncSetBlockShape(fn, 32, 1, 1))
    assert cu.cuFuncSetBlockShape(fn, 0, 1, 1) == INVALID_VALUE
    cu.ok(cu.cuParamSetSize(fn, 16))
    assert cu.cuParamSeti(fn, 14, 1) == INVALID_VALUE  # 4 bytes at 14 leave the 16
    assert cu.cuParamSetv(fn, 12, byref(out), 8) == INVALID_VALUE
    assert cu.cuParamSetv(fn, 0, None, 8) == INVALID_VALUE
    cu.ok(cu.cuParamSetv(fn, 0, byref(out), 8))
    assert cu.cuLaunchGrid(fn, 0, 1) == INVALID_VALUE
    cu.ok(cu.cuParamSetSize(fn, 8))
    assert cu.cuLaunchGrid(fn, 1, 1) == INVALID_VALUE  # the kernel takes 16 bytes
    cu.ok(cu.cuParamSetSize(fn, 16))
    cu.ok(cu.cuFuncSetBlockShape(fn, 2048, 1, 1))
    assert cu.cuLaunch(fn) == INVALID_VALUE  # above the block limit
    cu.ok(cu.cuFuncSetBlockShape(fn, 32, 1, 1))
    cu.ok(cu.cuFuncSetSharedSize(fn, 1 << 20))
    assert cu.cuLaunch(fn) == INVALID_VALUE  # more dynamic shared memory than a block may have
    cu.ok(cu.cuFuncSetSharedSize(fn, 0))
    assert cu.cuFuncSetBlockShape(c_void_p(0x1234), 1, 1, 1) == 400  # CUDA_ERROR_INVALID_HANDLE
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMemFree_v2(out))


TEXREF_PTX = b""".version 7.0
.target sm_52
.address_size 64
.global .texref tex;
.visible .entry reads(.param .u64 out)
{
  .reg .f32 %f<5>; .reg .b32 %r<2>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 0;
  tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex, {%r1}];
  st.global.f32 [%rd1], %f1;
  ret;
}
\0"""


def test_param_set_tex_ref(cu):
    """A reference of the function's module, with CU_PARAM_TR_DEFAULT (cuda.h)."""
    module, fn = c_void_p(), c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(module), TEXREF_PTX))
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"reads"))
    ref, made = c_void_p(), c_void_p()
    cu.ok(cu.cuModuleGetTexRef(byref(ref), module, b"tex"))
    cu.ok(cu.cuParamSetTexRef(fn, CU_PARAM_TR_DEFAULT, ref))
    assert cu.cuParamSetTexRef(fn, 0, ref) == INVALID_VALUE
    cu.ok(cu.cuTexRefCreate(byref(made)))
    assert cu.cuParamSetTexRef(fn, CU_PARAM_TR_DEFAULT, made) == INVALID_VALUE
    cu.ok(cu.cuTexRefDestroy(made))
    cu.ok(cu.cuModuleUnload(module))
