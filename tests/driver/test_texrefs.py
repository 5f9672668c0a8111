"""Legacy texture and surface references (what pre-CUDA-12 binaries use): hand-written PTX with
module-scope .texref/.surfref declarations, bound through cuModuleGetTexRef/cuTexRef* and
cuModuleGetSurfRef/cuSurfRefSetArray (ctypes on libcuda.so.1). Expected values come from
the programming guide's texture-fetching rules written out here: point sampling reads texel
floor(x) (normalized coordinates scaled by the size first), clamp and wrap act on indices,
tex1Dfetch of linear memory reads element i of the bound range (0 outside), linear filtering
blends the 2x2 texels around x - 0.5 (coordinates chosen so the weights are exact), sRGB reads convert
red, green and blue with the sRGB transfer function."""

from __future__ import annotations

from ctypes import byref, c_float, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

import numpy as np
import pytest

from texture_abi import (ARRAY3D_DESCRIPTOR, ARRAY_DESCRIPTOR, CLAMP, CU_AD_FORMAT_FLOAT, CU_AD_FORMAT_SIGNED_INT32,
                         CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_HOST, CU_TRSF_NORMALIZED_COORDINATES,
                         CUDA_ARRAY3D_SURFACE_LDST, MEMCPY3D, WRAP, device_buffer, from_device, launch, load,
                         set_arg_types, to_array)

INVALID_VALUE, NOT_FOUND = 1, 500

PTX = """
.version 6.0
.target sm_70
.address_size 64
.global .texref tex_arr;
.global .texref tex_lin;
.global .texref tex_pitch;
.global .surfref surf;
.global .samplerref smp;

.visible .entry read(.param .u64 inp, .param .u64 outp)
{
  .reg .b32 %r<12>; .reg .f32 %f<24>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 16;
  add.u64 %rd5, %rd2, %rd4;
  ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd5];
  mov.b32 %f1, %r2;
  mov.b32 %f2, %r3;
  tex.2d.v4.f32.f32 {%f10, %f11, %f12, %f13}, [tex_arr, {%f1, %f2}];
  tex.1d.v4.f32.s32 {%f14, %f15, %f16, %f17}, [tex_lin, {%r4}];
  tex.2d.v4.f32.f32 {%f18, %f19, %f20, %f21}, [tex_pitch, {%f1, %f2}];
  txq.width.b32 %r6, [tex_arr];
  and.b32 %r7, %r1, 7;
  shr.u32 %r8, %r1, 3;
  shl.b32 %r9, %r7, 2;
  suld.b.2d.b32.trap {%r10}, [surf, {%r9, %r8}];
  add.s32 %r11, %r10, %r5;
  sust.b.2d.b32.trap [surf, {%r9, %r8}], {%r11};
  istypep.texref %p1, tex_arr;
  istypep.surfref %p2, surf;
  istypep.samplerref %p3, smp;
  or.pred %p1, %p1, %p2;
  or.pred %p1, %p1, %p3;
  selp.u32 %r7, 1, 0, %p1;
  mul.wide.u32 %rd4, %r1, 24;
  add.u64 %rd6, %rd3, %rd4;
  st.global.f32 [%rd6], %f10;
  st.global.f32 [%rd6+4], %f14;
  st.global.f32 [%rd6+8], %f18;
  st.global.u32 [%rd6+12], %r6;
  st.global.u32 [%rd6+16], %r10;
  st.global.u32 [%rd6+20], %r7;
  ret;
}
"""
THREADS = 32
ARR_W, ARR_H = 8, 4
PITCH_W, PITCH_H, PITCH = 6, 5, 64


@pytest.fixture(scope="module")
def drv(cu):
    set_arg_types(cu)
    return cu


def _ref(cu, module, name: str, surface: bool = False) -> c_void_p:
    ref = c_void_p()
    cu.ok((cu.cuModuleGetSurfRef if surface else cu.cuModuleGetTexRef)(byref(ref), module, name.encode()))
    return ref


def _array(cu, width: int, height: int, fmt: int, flags: int = 0) -> c_void_p:
    array = c_void_p()
    cu.ok(cu.cuArray3DCreate_v2(byref(array), byref(ARRAY3D_DESCRIPTOR(width, height, 0, fmt, 1, flags))))
    return array


def _clamped(i: float, n: int) -> int:
    return min(max(int(np.floor(i)), 0), n - 1)


def _bilinear_wrap(img: np.ndarray, u: float, v: float) -> float:
    h, w = img.shape
    x, y = u * w - 0.5, v * h - 0.5
    i, j = int(np.floor(x)), int(np.floor(y))
    a, b = x - i, y - j
    t = lambda ii, jj: float(img[jj % h, ii % w])  # noqa: E731
    return (1 - a) * (1 - b) * t(i, j) + a * (1 - b) * t(i + 1, j) + (1 - a) * b * t(i, j + 1) + a * b * t(i + 1, j + 1)


def test_references_bound_to_arrays_linear_and_pitched_memory(drv):
    cu = drv
    module = load(cu, PTX)
    tex_arr, tex_lin, tex_pitch = (_ref(cu, module, n) for n in ("tex_arr", "tex_lin", "tex_pitch"))
    surf = _ref(cu, module, "surf", surface=True)
    again = c_void_p()
    cu.ok(cu.cuModuleGetTexRef(byref(again), module, b"tex_arr"))
    assert again.value == tex_arr.value  # one reference per name
    assert cu.cuModuleGetTexRef(byref(again), module, b"surf") == NOT_FOUND
    assert cu.cuModuleGetSurfRef(byref(again), module, b"tex_arr") == NOT_FOUND
    assert cu.cuModuleGetTexRef(byref(again), module, b"nothing") == NOT_FOUND
    assert cu.cuModuleGetGlobal_v2(byref(c_ulonglong()), byref(c_size_t()), module, b"tex_arr") == NOT_FOUND

    rng = np.random.default_rng(7)
    img = rng.uniform(-4, 4, (ARR_H, ARR_W)).astype(np.float32)
    array = _array(cu, ARR_W, ARR_H, CU_AD_FORMAT_FLOAT)
    to_array(cu, array, img, height=ARR_H)
    cu.ok(cu.cuTexRefSetArray(tex_arr, array, 1))  # CU_TRSA_OVERRIDE_FORMAT
    for dim in (0, 1):
        cu.ok(cu.cuTexRefSetAddressMode(tex_arr, dim, CLAMP))

    lin = rng.uniform(-8, 8, 256).astype(np.float32)
    d_lin = device_buffer(cu, lin)
    offset = c_size_t()
    cu.ok(cu.cuTexRefSetAddress_v2(byref(offset), tex_lin, d_lin + 64, 40 * 4))  # elements 16 .. 55
    assert offset.value == (d_lin + 64) % 512
    cu.ok(cu.cuTexRefSetFormat(tex_lin, CU_AD_FORMAT_FLOAT, 1))
    first = offset.value // 4  # what a kernel adds to its indices, as cuda.h describes

    pitched = rng.uniform(-2, 2, (PITCH_H, PITCH // 4)).astype(np.float32)
    d_pitch = device_buffer(cu, pitched)
    cu.ok(cu.cuTexRefSetAddress2D_v3(tex_pitch, byref(ARRAY_DESCRIPTOR(PITCH_W, PITCH_H, CU_AD_FORMAT_FLOAT, 1)),
                                     d_pitch, PITCH))
    for dim in (0, 1):
        cu.ok(cu.cuTexRefSetAddressMode(tex_pitch, dim, CLAMP))

    cells = rng.integers(-1000, 1000, (4, 8)).astype(np.int32)
    surface = _array(cu, 8, 4, CU_AD_FORMAT_SIGNED_INT32, CUDA_ARRAY3D_SURFACE_LDST)
    to_array(cu, surface, cells, height=4)
    cu.ok(cu.cuSurfRefSetArray(surf, surface, 0))

    inp = np.zeros((THREADS, 4), np.int32)
    coords = rng.uniform(-1.5, 9.5, (THREADS, 2)).astype(np.float32)
    inp[:, 0:2] = coords.view(np.int32)
    inp[:, 2] = rng.integers(-4, 44, THREADS) + first  # elements before and after the range too
    inp[:, 3] = rng.integers(-50, 50, THREADS)
    out = np.zeros((THREADS, 6), np.int32)
    d_in, d_out = device_buffer(cu, inp), device_buffer(cu, out)
    launch(cu, module, "read", THREADS, d_in, d_out)
    out = from_device(cu, d_out, out)

    for t in range(THREADS):
        u, v = (float(c) for c in coords[t])
        i = int(inp[t, 2])  # from the aligned start: the bound range is [start, dptr + bytes)
        assert out[t, 0].view(np.float32) == img[_clamped(v, ARR_H), _clamped(u, ARR_W)], t
        assert out[t, 1].view(np.float32) == (lin[i] if 0 <= i < first + 40 else 0.0), t
        assert out[t, 2].view(np.float32) == pitched[_clamped(v, PITCH_H), _clamped(u, PITCH_W)], t
    assert (out[:, 3] == ARR_W).all()
    assert (out[:, 4] == cells.reshape(-1)).all()  # thread t read cell (t % 8, t // 8) before adding
    assert (out[:, 5] == 0).all()  # istypep of bound references: false, as for the objects they hold
    back = np.zeros_like(cells)  # the stores: each cell plus its thread's addend
    c = MEMCPY3D(srcMemoryType=CU_MEMORYTYPE_ARRAY, srcArray=surface.value, dstMemoryType=CU_MEMORYTYPE_HOST,
                 dstHost=back.ctypes.data, WidthInBytes=32, Height=4, Depth=1, dstPitch=32, dstHeight=4)
    cu.ok(cu.cuMemcpy3D_v2(byref(c)))
    assert (back == cells + inp[:, 3].reshape(4, 8)).all()

    # rebinding: normalized coordinates, wrap and linear filtering on the same array
    cu.ok(cu.cuTexRefSetFlags(tex_arr, CU_TRSF_NORMALIZED_COORDINATES))
    cu.ok(cu.cuTexRefSetFilterMode(tex_arr, 1))
    for dim in (0, 1):
        cu.ok(cu.cuTexRefSetAddressMode(tex_arr, dim, WRAP))
    steps = rng.integers(-40, 200, (THREADS, 2))  # coordinates on a 1/16-texel grid: exact weights
    coords = ((steps / 16 + 0.5) / [ARR_W, ARR_H]).astype(np.float32)
    inp[:, 0:2] = coords.view(np.int32)
    d_in = device_buffer(cu, inp)
    launch(cu, module, "read", THREADS, d_in, d_out)
    out = from_device(cu, d_out, out)
    expected = [_bilinear_wrap(img, float(c[0]), float(c[1])) for c in coords]
    np.testing.assert_allclose(out[:, 0].view(np.float32), expected, rtol=1e-6, atol=1e-6)
    cu.ok(cu.cuModuleUnload(module))


def test_state_getters_and_errors(drv):
    cu = drv
    module = load(cu, PTX)
    ref = _ref(cu, module, "tex_arr")
    ints = _array(cu, 4, 4, CU_AD_FORMAT_SIGNED_INT32)
    cu.ok(cu.cuTexRefSetArray(ref, ints, 1))
    assert cu.cuTexRefSetArray(ref, ints, 2) == INVALID_VALUE
    assert cu.cuTexRefSetFilterMode(ref, 1) == INVALID_VALUE  # linear filtering of integers
    mode, fmt, channels, flags, aniso = c_int(), c_int(), c_int(), c_uint(), c_int()
    cu.ok(cu.cuTexRefGetFilterMode(byref(mode), ref))
    assert mode.value == 0  # the refused call changed nothing
    cu.ok(cu.cuTexRefGetFormat(byref(fmt), byref(channels), ref))
    assert (fmt.value, channels.value) == (CU_AD_FORMAT_SIGNED_INT32, 1)
    bound = c_void_p()
    cu.ok(cu.cuTexRefGetArray(byref(bound), ref))
    assert bound.value == ints.value
    assert cu.cuTexRefGetAddress_v2(byref(c_ulonglong()), ref) == INVALID_VALUE  # bound to an array
    assert cu.cuTexRefGetMipmappedArray(byref(bound), ref) == INVALID_VALUE
    cu.ok(cu.cuTexRefSetAddressMode(ref, 2, 3))
    cu.ok(cu.cuTexRefGetAddressMode(byref(mode), ref, 2))
    assert mode.value == 3
    assert cu.cuTexRefSetAddressMode(ref, 3, 0) == INVALID_VALUE
    cu.ok(cu.cuTexRefSetFlags(ref, CU_TRSF_NORMALIZED_COORDINATES))
    cu.ok(cu.cuTexRefGetFlags(byref(flags), ref))
    assert flags.value == CU_TRSF_NORMALIZED_COORDINATES
    assert cu.cuTexRefSetFlags(ref, 0x1000) == INVALID_VALUE
    cu.ok(cu.cuTexRefSetMaxAnisotropy(ref, 4))
    cu.ok(cu.cuTexRefGetMaxAnisotropy(byref(aniso), ref))
    assert aniso.value == 4
    border = (c_float * 4)(0.25, 0.5, 0.75, 1.0)
    cu.ok(cu.cuTexRefSetBorderColor(ref, border))
    back = (c_float * 4)()
    cu.ok(cu.cuTexRefGetBorderColor(back, ref))
    assert list(back) == [0.25, 0.5, 0.75, 1.0]
    cu.ok(cu.cuTexRefSetMipmapFilterMode(ref, 1))
    cu.ok(cu.cuTexRefGetMipmapFilterMode(byref(mode), ref))
    assert mode.value == 1
    cu.ok(cu.cuTexRefSetMipmapLevelBias(ref, 0.5))
    bias, low, high = c_float(), c_float(), c_float()
    cu.ok(cu.cuTexRefGetMipmapLevelBias(byref(bias), ref))
    cu.ok(cu.cuTexRefSetMipmapLevelClamp(ref, 1.0, 3.5))
    cu.ok(cu.cuTexRefGetMipmapLevelClamp(byref(low), byref(high), ref))
    assert (bias.value, low.value, high.value) == (0.5, 1.0, 3.5)
    assert cu.cuTexRefSetFormat(ref, 0x33, 1) == INVALID_VALUE
    assert cu.cuTexRefDestroy(ref) == INVALID_VALUE  # a module's reference lives with the module
    own = c_void_p()
    cu.ok(cu.cuTexRefCreate(byref(own)))
    cu.ok(cu.cuTexRefSetFormat(own, CU_AD_FORMAT_FLOAT, 2))
    cu.ok(cu.cuTexRefGetFormat(byref(fmt), byref(channels), own))
    assert (fmt.value, channels.value) == (CU_AD_FORMAT_FLOAT, 2)
    cu.ok(cu.cuTexRefDestroy(own))
    assert cu.cuTexRefGetFormat(byref(fmt), byref(channels), own) == INVALID_VALUE
    surf = _ref(cu, module, "surf", surface=True)
    assert cu.cuSurfRefSetArray(surf, ints, 0) == INVALID_VALUE  # not made with CUDA_ARRAY3D_SURFACE_LDST
    assert cu.cuSurfRefGetArray(byref(bound), surf) == INVALID_VALUE  # unbound
    cu.ok(cu.cuModuleUnload(module))
    assert cu.cuTexRefGetFlags(byref(flags), ref) == INVALID_VALUE  # the references went with the module
    assert cu.cuSurfRefGetArray(byref(bound), surf) == INVALID_VALUE
    cu.ok(cu.cuArrayDestroy(ints))


MIP_PTX = """
.version 6.0
.target sm_70
.address_size 64
.global .texref mt;

.visible .entry lod(.param .u64 inp, .param .u64 outp)
{
  .reg .b32 %r<4>; .reg .f32 %f<8>; .reg .b64 %rd<8>;
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.u64 %rd5, %rd2, %rd4;
  ld.global.f32 %f1, [%rd5];
  mov.f32 %f2, 0f3F000000;
  tex.level.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [mt, {%f2, %f2}], %f1;
  txq.num_mipmap_levels.b32 %r2, [mt];
  mul.wide.u32 %rd4, %r1, 8;
  add.u64 %rd6, %rd3, %rd4;
  st.global.f32 [%rd6], %f3;
  st.global.u32 [%rd6+4], %r2;
  ret;
}
"""


def test_reference_bound_to_a_mipmapped_array(drv):
    """Every level holds one value, 10 * level + 1, so a linear blend between levels reads
    10 * LOD + 1 for the LOD after bias and clamps."""
    cu = drv
    module = load(cu, MIP_PTX)
    ref = _ref(cu, module, "mt")
    mip = c_void_p()
    cu.ok(cu.cuMipmappedArrayCreate(byref(mip), byref(ARRAY3D_DESCRIPTOR(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0)), 3))
    for level in range(3):
        array = c_void_p()
        cu.ok(cu.cuMipmappedArrayGetLevel(byref(array), mip, level))
        n = 4 >> level
        to_array(cu, array, np.full((n, n), 10 * level + 1, np.float32), height=n)
    cu.ok(cu.cuTexRefSetMipmappedArray(ref, mip, 1))
    cu.ok(cu.cuTexRefSetFlags(ref, CU_TRSF_NORMALIZED_COORDINATES))
    cu.ok(cu.cuTexRefSetMipmapFilterMode(ref, 1))
    cu.ok(cu.cuTexRefSetMipmapLevelBias(ref, 0.5))
    cu.ok(cu.cuTexRefSetMipmapLevelClamp(ref, 0.75, 2.0))
    bound = c_void_p()
    cu.ok(cu.cuTexRefGetMipmappedArray(byref(bound), ref))
    assert bound.value == mip.value
    lods = np.array([-1.0, 0.0, 0.125, 0.5, 1.0, 1.25, 1.5, 5.0], np.float32)
    out = np.zeros((len(lods), 2), np.float32)
    d_in, d_out = device_buffer(cu, lods), device_buffer(cu, out)
    launch(cu, module, "lod", len(lods), d_in, d_out)
    out = from_device(cu, d_out, out)
    expected = 10 * np.clip(lods.astype(np.float64) + 0.5, 0.75, 2.0) + 1
    np.testing.assert_allclose(out[:, 0], expected, rtol=1e-6)
    assert (out[:, 1].view(np.uint32) == 3).all()
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMipmappedArrayDestroy(mip))


SRGB_PTX = """
.version 6.0
.target sm_70
.address_size 64
.global .texref colours;

.visible .entry fetch(.param .u64 outp)
{
  .reg .b32 %r<2>; .reg .f32 %f<6>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [outp];
  mov.u32 %r1, %tid.x;
  cvt.rn.f32.u32 %f1, %r1;
  add.f32 %f1, %f1, 0f3F000000;
  tex.1d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [colours, {%f1}];
  mul.wide.u32 %rd2, %r1, 16;
  add.u64 %rd3, %rd1, %rd2;
  st.global.v4.f32 [%rd3], {%f2, %f3, %f4, %f5};
  ret;
}
"""
CU_AD_FORMAT_UNSIGNED_INT8, CU_TRSF_SRGB = 0x01, 0x10


def _srgb_to_linear(c: float) -> float:
    """The sRGB transfer function (IEC 61966-2-1), applied to a normalized channel."""
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def test_srgb_reference_converts_colour_channels(drv):
    """CU_TRSF_SRGB on 8-bit unorm texels: red, green and blue read as the linear value of t / 255,
    alpha as t / 255 (the programming guide: sRGB-to-linear conversion during the fetch); every
    byte value, point sampled."""
    cu = drv
    module = load(cu, SRGB_PTX)
    ref = _ref(cu, module, "colours")
    t = np.arange(256)
    texels = np.stack([t, 255 - t, t * 7 % 256, (t + 100) % 256], axis=1).astype(np.uint8)
    array = c_void_p()
    cu.ok(cu.cuArray3DCreate_v2(byref(array), byref(ARRAY3D_DESCRIPTOR(256, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0))))
    to_array(cu, array, texels)
    cu.ok(cu.cuTexRefSetArray(ref, array, 1))
    cu.ok(cu.cuTexRefSetFlags(ref, CU_TRSF_SRGB))
    out = np.zeros((256, 4), np.float32)
    d_out = device_buffer(cu, out)
    launch(cu, module, "fetch", 256, d_out)
    out = from_device(cu, d_out, out)
    expected = [[_srgb_to_linear(v / 255) for v in row[:3]] + [row[3] / 255] for row in texels.astype(float)]
    np.testing.assert_allclose(out, np.array(expected, np.float32), rtol=1e-6, atol=0)
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuArrayDestroy(array))
