"""cuda.h's texture structs as ctypes, and the few driver calls the texture tests repeat:
loading hand-written PTX, launching one block, copying host data into a CUDA array."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_float, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

import numpy as np

CU_AD_FORMAT_UNSIGNED_INT32, CU_AD_FORMAT_SIGNED_INT32, CU_AD_FORMAT_FLOAT = 0x03, 0x0A, 0x20
CU_RESOURCE_TYPE_MIPMAPPED_ARRAY = 1
WRAP, CLAMP = 0, 1
CU_TRSF_NORMALIZED_COORDINATES = 0x02
CUDA_ARRAY3D_LAYERED, CUDA_ARRAY3D_SURFACE_LDST, CUDA_ARRAY3D_CUBEMAP = 0x01, 0x02, 0x04
CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_ARRAY = 1, 3


class ARRAY_DESCRIPTOR(ctypes.Structure):
    _fields_ = [("Width", c_size_t), ("Height", c_size_t), ("Format", c_int), ("NumChannels", c_uint)]


class ARRAY3D_DESCRIPTOR(ctypes.Structure):
    _fields_ = [("Width", c_size_t), ("Height", c_size_t), ("Depth", c_size_t), ("Format", c_int),
                ("NumChannels", c_uint), ("Flags", c_uint)]


class _Res(ctypes.Union):
    _fields_ = [("hArray", c_void_p), ("hMipmappedArray", c_void_p), ("reserved", c_int * 32)]


class RESOURCE_DESC(ctypes.Structure):
    _fields_ = [("resType", c_int), ("res", _Res), ("flags", c_uint)]


class TEXTURE_DESC(ctypes.Structure):
    _fields_ = [("addressMode", c_int * 3), ("filterMode", c_int), ("flags", c_uint), ("maxAnisotropy", c_uint),
                ("mipmapFilterMode", c_int), ("mipmapLevelBias", c_float), ("minMipmapLevelClamp", c_float),
                ("maxMipmapLevelClamp", c_float), ("borderColor", c_float * 4), ("reserved", c_int * 12)]


def _side(prefix: str) -> list[tuple[str, type]]:
    return [(f"{prefix}XInBytes", c_size_t), (f"{prefix}Y", c_size_t), (f"{prefix}Z", c_size_t),
            (f"{prefix}LOD", c_size_t), (f"{prefix}MemoryType", c_int), (f"{prefix}Host", c_void_p),
            (f"{prefix}Device", c_ulonglong), (f"{prefix}Array", c_void_p), (f"reserved_{prefix}", c_void_p),
            (f"{prefix}Pitch", c_size_t), (f"{prefix}Height", c_size_t)]


class MEMCPY3D(ctypes.Structure):
    _fields_ = _side("src") + _side("dst") + [("WidthInBytes", c_size_t), ("Height", c_size_t), ("Depth", c_size_t)]


def to_array(cu, array: c_void_p, data: np.ndarray, height: int = 1, depth: int = 1) -> None:
    """Copy host data, `depth` slices of `height` rows, into the whole array (cuMemcpy3D)."""
    data = np.ascontiguousarray(data)
    c = MEMCPY3D()
    c.srcMemoryType, c.srcHost = CU_MEMORYTYPE_HOST, data.ctypes.data
    c.dstMemoryType, c.dstArray = CU_MEMORYTYPE_ARRAY, array
    c.WidthInBytes, c.Height, c.Depth = data.nbytes // (height * depth), height, depth
    c.srcPitch, c.srcHeight = c.WidthInBytes, height
    cu.ok(cu.cuMemcpy3D_v2(byref(c)))


def load(cu, ptx: str) -> c_void_p:
    module = c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(module), ptx.encode() + b"\0"))
    return module


def launch(cu, module: c_void_p, name: str, threads: int, *args: int) -> None:
    """Run kernel `name` as one block of `threads`, with 64-bit arguments."""
    fn = c_void_p()
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, name.encode()))
    values = [c_ulonglong(a) for a in args]
    params = (c_void_p * len(values))(*[ctypes.cast(byref(v), c_void_p) for v in values])
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())


def device_buffer(cu, data: np.ndarray) -> int:
    ptr = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(ptr), c_size_t(data.nbytes)))
    cu.ok(cu.cuMemcpyHtoD_v2(ptr, c_void_p(data.ctypes.data), c_size_t(data.nbytes)))
    return ptr.value


def from_device(cu, ptr: int, like: np.ndarray) -> np.ndarray:
    out = np.empty_like(like)
    cu.ok(cu.cuMemcpyDtoH_v2(c_void_p(out.ctypes.data), c_ulonglong(ptr), c_size_t(out.nbytes)))
    return out


def set_arg_types(cu) -> None:
    """Prototypes of the calls that take floats or 64-bit values by value."""
    cu.cuTexRefSetMipmapLevelBias.argtypes = [c_void_p, c_float]
    cu.cuTexRefSetMipmapLevelClamp.argtypes = [c_void_p, c_float, c_float]
    cu.cuTexRefSetAddress_v2.argtypes = [POINTER(c_size_t), c_void_p, c_ulonglong, c_size_t]
    cu.cuTexRefSetAddress2D_v3.argtypes = [c_void_p, POINTER(ARRAY_DESCRIPTOR), c_ulonglong, c_size_t]
    cu.cuTexObjectDestroy.argtypes = [c_ulonglong]
