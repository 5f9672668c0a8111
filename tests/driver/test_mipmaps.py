"""Mipmapped arrays through the driver API (ctypes on libcuda.so.1): cuMipmappedArray*, and
texture objects over them read by hand-written PTX (tex, tex.level, tex.grad, txq), checked
against a model written here from cuda.h and the programming guide (level sizes halve per axis
down to 1; plain tex uses LOD 0) and, for the LOD of tex.level and tex.grad, its bias, clamps
and the levels it blends, the conformance suite's model of what an NVIDIA H100 does
(conformance/models/texture.py, "Mipmap level selection")."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_ulonglong, c_void_p

import numpy as np
import pytest
from conformance.models import texture as hw

from texture_abi import (ARRAY3D_DESCRIPTOR, CLAMP, CU_AD_FORMAT_FLOAT, CU_AD_FORMAT_UNSIGNED_INT32,
                         CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, CU_TRSF_NORMALIZED_COORDINATES, CUDA_ARRAY3D_CUBEMAP,
                         CUDA_ARRAY3D_LAYERED, RESOURCE_DESC, TEXTURE_DESC, device_buffer, from_device, launch, load,
                         set_arg_types, to_array)

INVALID_VALUE, INVALID_HANDLE = 1, 400
W, H, LEVELS = 16, 8, 5  # 1 + floor(log2(16))

PTX = """
.version 7.0
.target sm_80
.address_size 64
.visible .entry mip(.param .u64 tex, .param .u64 inp, .param .u64 outp)
{
  .reg .b32 %r<4>; .reg .f32 %f<24>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 32;
  add.u64 %rd5, %rd2, %rd4;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5];
  ld.global.v4.f32 {%f5, %f6, %f7, %f8}, [%rd5+16];
  tex.level.2d.v4.f32.f32 {%f10, %f11, %f12, %f13}, [%rd1, {%f1, %f2}], %f3;
  tex.grad.2d.v4.f32.f32 {%f14, %f15, %f16, %f17}, [%rd1, {%f1, %f2}], {%f4, %f5}, {%f6, %f7};
  tex.2d.v4.f32.f32 {%f18, %f19, %f20, %f21}, [%rd1, {%f1, %f2}];
  txq.level.width.b32 %r3, [%rd1], %r1;
  mul.wide.u32 %rd4, %r1, 20;
  add.u64 %rd6, %rd3, %rd4;
  st.global.f32 [%rd6], %f10;
  st.global.f32 [%rd6+4], %f14;
  st.global.f32 [%rd6+8], %f18;
  st.global.u32 [%rd6+16], %r3;
  ret;
}
"""


@pytest.fixture(scope="module")
def drv(cu):
    set_arg_types(cu)
    return cu


def _create(cu, levels: int, width: int = W, height: int = H, depth: int = 0, flags: int = 0) -> c_void_p:
    mip = c_void_p()
    desc = ARRAY3D_DESCRIPTOR(width, height, depth, CU_AD_FORMAT_FLOAT, 1, flags)
    cu.ok(cu.cuMipmappedArrayCreate(byref(mip), byref(desc), levels))
    return mip


def _level(cu, mip: c_void_p, level: int) -> c_void_p:
    array = c_void_p()
    cu.ok(cu.cuMipmappedArrayGetLevel(byref(array), mip, level))
    return array


def test_levels_halve_down_to_one_texel_and_their_count_is_clamped(drv):
    cu = drv
    mip = _create(cu, 40)  # clamped to 1 + floor(log2(max(16, 8))) = 5
    sizes = []
    for level in range(LEVELS):
        d = ARRAY3D_DESCRIPTOR()
        cu.ok(cu.cuArray3DGetDescriptor_v2(byref(d), _level(cu, mip, level)))
        sizes.append((d.Width, d.Height, d.Depth, d.Format, d.NumChannels))
    assert sizes == [(16, 8, 0, CU_AD_FORMAT_FLOAT, 1), (8, 4, 0, CU_AD_FORMAT_FLOAT, 1),
                     (4, 2, 0, CU_AD_FORMAT_FLOAT, 1), (2, 1, 0, CU_AD_FORMAT_FLOAT, 1), (1, 1, 0, CU_AD_FORMAT_FLOAT, 1)]
    array = c_void_p()
    assert cu.cuMipmappedArrayGetLevel(byref(array), mip, LEVELS) == INVALID_VALUE
    assert cu.cuArrayDestroy(_level(cu, mip, 1)) == INVALID_VALUE  # levels go with their mipmapped array
    requirements = (ctypes.c_char * 64)()
    # cuda.h: only arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING have requirements to report
    assert cu.cuMipmappedArrayGetMemoryRequirements(requirements, mip, 0) == INVALID_VALUE
    assert cu.cuArrayGetMemoryRequirements(requirements, _level(cu, mip, 0), 0) == INVALID_VALUE
    cu.ok(cu.cuMipmappedArrayDestroy(mip))
    assert cu.cuMipmappedArrayDestroy(mip) == INVALID_HANDLE
    assert cu.cuMipmappedArrayCreate(byref(mip), None, 2) == INVALID_VALUE


def test_layered_and_3d_levels(drv):
    cu = drv
    layered = _create(cu, 0, 8, 0, 5, flags=CUDA_ARRAY3D_LAYERED)  # 1-D layered: 5 layers stay, width halves; 0 levels -> 1
    d = ARRAY3D_DESCRIPTOR()
    cu.ok(cu.cuArray3DGetDescriptor_v2(byref(d), _level(cu, layered, 0)))
    assert (d.Width, d.Height, d.Depth) == (8, 0, 5)
    assert cu.cuMipmappedArrayGetLevel(byref(c_void_p()), layered, 1) == INVALID_VALUE
    cu.ok(cu.cuMipmappedArrayDestroy(layered))
    volume = _create(cu, 3, 8, 4, 2)
    cu.ok(cu.cuArray3DGetDescriptor_v2(byref(d), _level(cu, volume, 2)))
    assert (d.Width, d.Height, d.Depth) == (2, 1, 1)
    cu.ok(cu.cuMipmappedArrayDestroy(volume))


# ---- the model ----
def _model_fetch(levels: list[np.ndarray], u: float, v: float, level: int) -> float:
    """Point sampling of a level with clamp addressing and normalized coordinates."""
    img = levels[level]
    h, w = img.shape
    return float(img[min(max(int(np.floor(v * h)), 0), h - 1), min(max(int(np.floor(u * w)), 0), w - 1)])


def _model(levels, u, v, lod, linear, bias, low, high) -> float:
    lod = hw.mip_lod(lod, bias, low, high, len(levels))
    return sum(float(w) * _model_fetch(levels, u, v, min(level, len(levels) - 1))
               for level, w in hw.mip_levels(lod, linear))


@pytest.mark.parametrize("linear, bias, low, high", [
    (False, 0.0, 0.0, 4.0), (True, 0.0, 0.0, 4.0), (True, 0.625, 0.5, 3.0), (False, -0.25, 1.0, 2.0),
    (True, 0.0, 0.0, 0.0),  # a zero max clamp (a descriptor left zeroed) keeps every fetch on level 0
])
def test_texture_object_lod_selection(drv, linear, bias, low, high):
    cu = drv
    mip = _create(cu, LEVELS)
    levels = []
    for level in range(LEVELS):
        w, h = max(W >> level, 1), max(H >> level, 1)
        data = (100 * level + np.arange(w * h, dtype=np.float32)).reshape(h, w)
        to_array(cu, _level(cu, mip, level), data, height=h)
        levels.append(data)
    res = RESOURCE_DESC(resType=CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
    res.res.hMipmappedArray = mip.value
    tex = TEXTURE_DESC(filterMode=0, flags=CU_TRSF_NORMALIZED_COORDINATES, mipmapFilterMode=int(linear),
                       mipmapLevelBias=bias, minMipmapLevelClamp=low, maxMipmapLevelClamp=high)
    tex.addressMode[:] = [CLAMP] * 3
    obj = c_ulonglong()
    cu.ok(cu.cuTexObjectCreate(byref(obj), byref(res), byref(tex), None))

    rng = np.random.default_rng(15)
    threads = 32
    inp = np.zeros((threads, 8), np.float32)
    inp[:, 0] = (rng.integers(0, W, threads) + 0.37) / W  # never near a texel edge on any level
    inp[:, 1] = (rng.integers(0, H, threads) + 0.61) / H
    inp[:, 2] = [-1.0, 0.0, 0.25, 0.75, 1.0, 1.3, 2.6, 3.1, 3.9, 4.0, 6.0, 0.1] * 2 + list(rng.uniform(-1, 5, 8))
    exponent = rng.uniform(-1.0, 5.0, threads)  # log2 of the x gradient in level-0 texels
    inp[:, 3] = 2.0 ** exponent / W
    inp[:, 4] = rng.uniform(-0.5, 0.5, threads) / H
    inp[:, 5] = rng.uniform(-1, 1, threads) * 2.0 ** exponent / W  # the y-screen gradient, shorter or not
    inp[:, 6] = rng.uniform(-1, 1, threads) * 2.0 ** exponent / H
    out = np.zeros((threads, 5), np.float32)
    d_in, d_out = device_buffer(cu, inp), device_buffer(cu, out)
    module = load(cu, PTX)
    launch(cu, module, "mip", threads, obj.value, d_in, d_out)
    out = from_device(cu, d_out, out)

    args = (linear, bias, low, high)
    for t in range(threads):
        u, v, lod, dx0, dx1, dy0, dy1, _ = (float(x) for x in inp[t])
        grad_lod = hw.mip_gradient_lod([dx0 * W, dx1 * H], [dy0 * W, dy1 * H])
        expected = [_model(levels, u, v, lod, *args), _model(levels, u, v, grad_lod, *args),
                    _model(levels, u, v, None, *args)]  # plain tex: LOD 0, no bias
        np.testing.assert_allclose(out[t, :3], expected, rtol=1e-6, err_msg=f"thread {t}, LOD {lod}, grad {grad_lod}")
    assert list(out[:, 4].view(np.uint32)) == [max(W >> t, 1) for t in range(threads)]
    cu.ok(cu.cuTexObjectDestroy(obj))
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMipmappedArrayDestroy(mip))


def test_texture_object_descriptor_checks(drv):
    cu = drv
    mip = c_void_p()
    desc = ARRAY3D_DESCRIPTOR(8, 8, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1, 0)  # fetches return integers
    cu.ok(cu.cuMipmappedArrayCreate(byref(mip), byref(desc), 2))
    res = RESOURCE_DESC(resType=CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
    res.res.hMipmappedArray = mip.value
    obj = c_ulonglong()
    tex = TEXTURE_DESC(flags=CU_TRSF_NORMALIZED_COORDINATES, mipmapFilterMode=1)
    assert cu.cuTexObjectCreate(byref(obj), byref(res), byref(tex), None) == INVALID_VALUE
    tex.mipmapFilterMode = 7
    assert cu.cuTexObjectCreate(byref(obj), byref(res), byref(tex), None) == INVALID_VALUE
    tex.mipmapFilterMode = 0
    cu.ok(cu.cuTexObjectCreate(byref(obj), byref(res), byref(tex), None))
    back = TEXTURE_DESC()
    cu.ok(cu.cuTexObjectGetResourceDesc(byref(res), obj))
    assert (res.resType, res.res.hMipmappedArray) == (CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, mip.value)
    cu.ok(cu.cuTexObjectGetTextureDesc(byref(back), obj))
    assert back.mipmapFilterMode == 0
    view = (ctypes.c_char * 112)()  # CUDA_RESOURCE_VIEW_DESC
    assert cu.cuTexObjectGetResourceViewDesc(view, obj) == INVALID_VALUE  # made without a view (cuda.h)
    cu.ok(cu.cuTexObjectDestroy(obj))
    assert cu.cuTexObjectGetResourceViewDesc(view, obj) == INVALID_VALUE  # no longer an object
    cu.ok(cu.cuMipmappedArrayDestroy(mip))


CUBE_PTX = """
.version 7.0
.target sm_80
.address_size 64
.visible .entry cube(.param .u64 tex, .param .u64 inp, .param .u64 outp)
{
  .reg .b32 %r<4>; .reg .f32 %f<24>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 48;
  add.u64 %rd5, %rd2, %rd4;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5];
  ld.global.v4.f32 {%f5, %f6, %f7, %f8}, [%rd5+16];
  ld.global.v4.f32 {%f9, %f10, %f11, %f12}, [%rd5+32];
  tex.level.cube.v4.f32.f32 {%f13, %f14, %f15, %f16}, [%rd1, {%f1, %f2, %f3, %f3}], %f4;
  tex.grad.cube.v4.f32.f32 {%f17, %f18, %f19, %f20}, [%rd1, {%f1, %f2, %f3, %f3}], {%f5, %f6, %f7, %f7}, {%f9, %f10, %f11, %f11};
  mul.wide.u32 %rd4, %r1, 8;
  add.u64 %rd6, %rd3, %rd4;
  st.global.v2.f32 [%rd6], {%f13, %f17};
  ret;
}
"""


def _face_st(p: np.ndarray) -> tuple[int, float, float]:
    """The programming guide's cubemap table: face and normalized s, t of direction p."""
    x, y, z = p
    ax, ay, az = abs(x), abs(y), abs(z)
    if az >= ax and az >= ay:  # ties: z over y over x (as measured for cube fetches)
        face, sc, tc, ma = (4 if z >= 0 else 5), (x if z >= 0 else -x), -y, az
    elif ay >= ax:
        face, sc, tc, ma = (2 if y >= 0 else 3), x, (z if y >= 0 else -z), ay
    else:
        face, sc, tc, ma = (0 if x >= 0 else 1), (-z if x >= 0 else z), -y, ax
    return face, (sc / ma + 1) / 2, (tc / ma + 1) / 2


def test_cubemap_lod_from_gradients(drv):
    cu = drv
    size, levels = 16, 5
    mip = _create(cu, levels, size, size, 6, flags=CUDA_ARRAY3D_CUBEMAP)
    for level in range(levels):
        n = size >> level
        faces = (100 * level + 10 * np.arange(6, dtype=np.float32))[:, None, None] * np.ones((6, n, n), np.float32)
        to_array(cu, _level(cu, mip, level), faces, height=n, depth=6)
    res = RESOURCE_DESC(resType=CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
    res.res.hMipmappedArray = mip.value
    tex = TEXTURE_DESC(flags=CU_TRSF_NORMALIZED_COORDINATES, mipmapFilterMode=1, maxMipmapLevelClamp=levels - 1)
    obj = c_ulonglong()
    cu.ok(cu.cuTexObjectCreate(byref(obj), byref(res), byref(tex), None))
    rng = np.random.default_rng(6)
    threads = 32
    inp = np.zeros((threads, 12), np.float32)
    inp[:, 0:3] = rng.uniform(-1, 1, (threads, 3))
    inp[:, 3] = rng.uniform(-0.5, 4.5, threads)
    inp[:, 4:7] = rng.uniform(-1, 1, (threads, 3)) * 2.0 ** rng.uniform(-6, 0, (threads, 1))
    inp[:, 8:11] = rng.uniform(-1, 1, (threads, 3)) * 2.0 ** rng.uniform(-6, 0, (threads, 1))
    out = np.zeros((threads, 2), np.float32)
    d_in, d_out = device_buffer(cu, inp), device_buffer(cu, out)
    module = load(cu, CUBE_PTX)
    launch(cu, module, "cube", threads, obj.value, d_in, d_out)
    out = from_device(cu, d_out, out)

    def blend(face: int, lod) -> float:  # every level's face is one value: only the LOD matters
        pairs = hw.mip_levels(hw.mip_lod(lod, 0.0, 0.0, levels - 1.0, levels), True)
        return sum(float(w) * (100 * min(level, levels - 1) + 10 * face) for level, w in pairs)

    eps = 1e-7
    for t in range(threads):
        p = inp[t, 0:3].astype(np.float64)
        face, s, tt = _face_st(p)
        grads = []
        for g in (inp[t, 4:7], inp[t, 8:11]):  # central differences of s, t along the gradient, in texels
            _, s1, t1 = _face_st(p + eps * g)
            _, s0, t0 = _face_st(p - eps * g)
            grads.append([(s1 - s0) / (2 * eps) * size, (t1 - t0) / (2 * eps) * size])
        expected = [blend(face, float(inp[t, 3])), blend(face, hw.mip_gradient_lod(*grads))]
        np.testing.assert_allclose(out[t], expected, rtol=1e-5, err_msg=f"thread {t}")
    cu.ok(cu.cuTexObjectDestroy(obj))
    cu.ok(cu.cuModuleUnload(module))
    cu.ok(cu.cuMipmappedArrayDestroy(mip))
