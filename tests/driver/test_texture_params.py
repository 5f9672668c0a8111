"""Kernel parameters of type .texref, .surfref and .samplerref (PTX "texture parameters",
unified mode): each holds the 64-bit handle of the object the host passes, and tex, txq,
suld and sust naming the parameter read that handle (ctypes on libcuda.so.1, hand-written PTX,
CPU target). Expected values from a host model of the programming guide's rules: point
sampling with unnormalized coordinates reads texel (floor(x), floor(y)) clamped to the array,
txq.width is the array's width, suld/sust address texels by byte x and row y; istypep of a
parameter is false, as an NVIDIA H100 answers for the handles it holds (golden/programs.txt)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, c_uint, c_ulonglong, c_void_p

import numpy as np
import pytest

from tests.driver.texture_abi import (ARRAY3D_DESCRIPTOR, CLAMP, CU_AD_FORMAT_FLOAT, CU_AD_FORMAT_SIGNED_INT32,
                                      CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_HOST, CUDA_ARRAY3D_SURFACE_LDST, MEMCPY3D,
                                      RESOURCE_DESC, TEXTURE_DESC, from_device, load, to_array)

INVALID_PTX = 218
CU_RESOURCE_TYPE_ARRAY = 0
W, H = 8, 4
THREADS = W * H

PTX = """
.version 6.0
.target sm_70
.address_size 64
.visible .entry params(.param .texref t, .param .u64 outp, .param .surfref s, .param .samplerref unused)
{
  .reg .pred %p<5>; .reg .b32 %r<12>; .reg .f32 %f<8>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [outp];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 7;
  shr.u32 %r3, %r1, 3;
  cvt.rn.f32.u32 %f1, %r2;
  cvt.rn.f32.u32 %f2, %r3;
  add.f32 %f1, %f1, 0f3F400000;
  add.f32 %f2, %f2, 0f3F000000;
  tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [t, {%f1, %f2}];
  txq.width.b32 %r4, [t];
  shl.b32 %r5, %r2, 2;
  suld.b.2d.b32.trap {%r6}, [s, {%r5, %r3}];
  add.s32 %r7, %r6, %r1;
  sust.b.2d.b32.trap [s, {%r5, %r3}], {%r7};
  istypep.texref %p1, t;
  istypep.surfref %p2, t;
  istypep.surfref %p3, s;
  istypep.samplerref %p4, unused;
  or.pred %p1, %p1, %p2;
  or.pred %p3, %p3, %p4;
  or.pred %p1, %p1, %p3;
  selp.u32 %r8, 1, 0, %p1;
  mul.wide.u32 %rd2, %r1, 16;
  add.u64 %rd3, %rd1, %rd2;
  st.global.f32 [%rd3], %f3;
  st.global.u32 [%rd3+4], %r4;
  st.global.u32 [%rd3+8], %r6;
  st.global.u32 [%rd3+12], %r8;
  ret;
}
"""


def _array(cu, fmt: int, flags: int = 0) -> c_void_p:
    array = c_void_p()
    cu.ok(cu.cuArray3DCreate_v2(byref(array), byref(ARRAY3D_DESCRIPTOR(W, H, 0, fmt, 1, flags))))
    return array


def test_reference_parameters_carry_object_handles(cu):
    module = load(cu, PTX)
    image = np.arange(W * H, dtype=np.float32).reshape(H, W) * 1.5 + 0.25
    tex_array = _array(cu, CU_AD_FORMAT_FLOAT)
    to_array(cu, tex_array, image, height=H)
    res = RESOURCE_DESC(resType=CU_RESOURCE_TYPE_ARRAY)
    res.res.hArray = tex_array.value
    desc = TEXTURE_DESC(filterMode=0, flags=0)
    desc.addressMode[:] = [CLAMP] * 3
    tex = c_ulonglong()
    cu.ok(cu.cuTexObjectCreate(byref(tex), byref(res), byref(desc), None))

    words = (np.arange(W * H, dtype=np.int32).reshape(H, W) * 7 - 50)
    surf_array = _array(cu, CU_AD_FORMAT_SIGNED_INT32, CUDA_ARRAY3D_SURFACE_LDST)
    to_array(cu, surf_array, words, height=H)
    res.res.hArray = surf_array.value
    surf = c_ulonglong()
    cu.ok(cu.cuSurfObjectCreate(byref(surf), byref(res)))

    out = np.zeros((THREADS, 4), np.uint32)
    dout = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(dout), out.nbytes))
    fn = c_void_p()
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"params"))
    args = [c_ulonglong(tex.value), c_ulonglong(dout.value), c_ulonglong(surf.value), c_ulonglong(0)]
    params = (c_void_p * 4)(*[ctypes.cast(byref(a), c_void_p) for a in args])
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, THREADS, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())
    got = from_device(cu, dout.value, out)

    x, y = np.arange(THREADS) % W, np.arange(THREADS) // W
    assert (got[:, 0].view(np.float32) == image[y, x]).all()  # texel (floor(x + 0.75), floor(y + 0.5))
    assert (got[:, 1] == W).all()
    assert (got[:, 2].view(np.int32) == words[y, x]).all()
    assert (got[:, 3] == 0).all()  # istypep: false for objects of every kind, as on an NVIDIA H100
    copy = np.empty_like(words)
    c = MEMCPY3D()
    c.srcMemoryType, c.srcArray = CU_MEMORYTYPE_ARRAY, surf_array
    c.dstMemoryType, c.dstHost = CU_MEMORYTYPE_HOST, copy.ctypes.data
    c.WidthInBytes, c.Height, c.Depth, c.dstPitch, c.dstHeight = W * 4, H, 1, W * 4, H
    cu.ok(cu.cuMemcpy3D_v2(byref(c)))
    assert (copy[y, x] == words[y, x] + np.arange(THREADS)).all()  # sust wrote through the surface parameter

    cu.ok(cu.cuTexObjectDestroy(tex))
    cu.ok(cu.cuSurfObjectDestroy(surf))
    cu.ok(cu.cuMemFree_v2(dout))
    cu.ok(cu.cuModuleUnload(module))


def _last_logged(cu, since: c_uint) -> str:
    """The latest message of the driver's error log (cuLogs*) after iterator `since`."""
    buf, n = ctypes.create_string_buffer(8192), c_size_t(8192)
    cu.ok(cu.cuLogsDumpToMemory(byref(since), buf, byref(n), 0))
    return buf.value.decode().splitlines()[-1]


@pytest.mark.parametrize("param, use, want", [
    (".param .surfref r", "tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [r, {%r1}];", "r is a .surfref, not a .texref"),
    (".param .texref r", "suld.b.1d.b32.trap {%r2}, [r, {%r1}];", "r is a .texref, not a .surfref"),
    (".param .samplerref r", "txq.width.b32 %r2, [r];", "r is a .samplerref, not a .texref"),
    (".param .u64 r", "istypep.texref %p1, r;", "r is not a texture, sampler or surface reference")])
def test_parameter_of_another_reference_type_is_refused(cu, param, use, want):
    """Refused when the kernel is built (its first launch under lazy loading, else its load),
    by parameter and line, with CUDA_ERROR_INVALID_PTX."""
    ptx = (".version 6.0\n.target sm_70\n.address_size 64\n"
           f".visible .entry k({param})\n{{\n.reg .b32 %r<4>; .reg .f32 %f<6>; .reg .pred %p<2>;\nmov.u32 %r1, 0;\n{use}\nret;\n}}\n")
    since = c_uint()
    cu.ok(cu.cuLogsCurrent(byref(since), 0))
    m = c_void_p()
    rc = cu.cuModuleLoadData(byref(m), ptx.encode() + b"\0")
    if rc == 0:
        fn, handle = c_void_p(), c_ulonglong(0)
        cu.ok(cu.cuModuleGetFunction(byref(fn), m, b"k"))
        rc = cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, (c_void_p * 1)(ctypes.cast(byref(handle), c_void_p)), None)
        cu.ok(cu.cuModuleUnload(m))
    assert rc == INVALID_PTX
    message = _last_logged(cu, since)
    assert want in message and message.endswith("<ptx>:8"), message  # the line of the instruction
