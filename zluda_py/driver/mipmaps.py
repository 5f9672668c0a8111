"""Entry points: CUDA mipmapped arrays, and texture objects over them.

A mipmapped array is a chain of ordinary CUDA arrays (textures.Array), level 0 the size of
the descriptor and each level half the one before along every spatial axis (at least 1;
layered arrays and cubemaps keep their layer count). cuMipmappedArrayGetLevel hands out the
level arrays themselves, so copies, surfaces and texture objects take them like any array;
they are freed with the mipmapped array, never alone."""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import context as ctxs, device as devices, textures
from .api import entry
from ..cdata import addr, ffi, store_ptr
from ..curesult import CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CudaError
from .handles import HandleTable
from .init_device import require

CUDA_ARRAY3D_DEFERRED_MAPPING = 0x80


@dataclass
class MipmappedArray:
    levels: list[textures.Array]
    handle: int = 0


mipmapped_arrays: HandleTable[MipmappedArray] = HandleTable("CUDA mipmapped array", CUDA_ERROR_INVALID_HANDLE)


def level_count(width: int, height: int, depth: int, requested: int) -> int:
    """cuMipmappedArrayCreate's numMipmapLevels clamped to [1, 1 + floor(log2(max(w, h, d)))]."""
    return max(1, min(requested, max(width, height, depth).bit_length()))


def level_extent(width: int, height: int, depth: int, flags: int, level: int) -> tuple[int, int, int]:
    """Width, height and depth of a level (0 stays 0: an unused dimension; layers stay)."""
    layered = flags & (textures.CUDA_ARRAY3D_LAYERED | textures.CUDA_ARRAY3D_CUBEMAP)
    halve = lambda n: n and max(1, n >> level)  # noqa: E731
    return halve(width), halve(height), depth if layered else halve(depth)


@entry("cuMipmappedArrayCreate")
def cuMipmappedArrayCreate(handle_out, desc, num_levels):
    require(handle_out, desc)
    d = ffi.cast("CUDA_ARRAY3D_DESCRIPTOR *", desc)
    shape = (d.Width, d.Height, d.Depth)
    textures.check_descriptor(*shape, d.Format, d.NumChannels, d.Flags)
    mip = MipmappedArray([])
    mipmapped_arrays.add(mip)
    try:
        for level in range(level_count(*shape, num_levels)):
            mip.levels.append(textures.new_array(*level_extent(*shape, d.Flags, level), d.Format, d.NumChannels,
                                                 d.Flags, mipmapped=mip.handle))
    except BaseException:
        _free(mip)
        raise
    store_ptr(handle_out, mip.handle)


def _free(mip: MipmappedArray) -> None:
    mipmapped_arrays.remove(mip.handle)
    for a in mip.levels:
        textures.free_array(a)


@entry("cuMipmappedArrayGetLevel")
def cuMipmappedArrayGetLevel(level_out, handle, level):
    require(level_out)
    mip = mipmapped_arrays.get(addr(handle))
    if level >= len(mip.levels):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"level {level} of a mipmapped array of {len(mip.levels)}")
    store_ptr(level_out, mip.levels[level].handle)


@entry("cuMipmappedArrayDestroy")
def cuMipmappedArrayDestroy(handle):
    mip = mipmapped_arrays.get(addr(handle))
    ctxs.current().synchronize()  # kernels and copies still queued may use it
    _free(mip)


def _memory_requirements(out, device: int) -> None:
    """cuda.h: the requirements of an array made with CUDA_ARRAY3D_DEFERRED_MAPPING, which
    cuArray3DCreate and cuMipmappedArrayCreate refuse here; any other array is INVALID_VALUE."""
    require(out)
    devices.get(device)
    raise CudaError(CUDA_ERROR_INVALID_VALUE, "the array was not created with CUDA_ARRAY3D_DEFERRED_MAPPING")


@entry("cuMipmappedArrayGetMemoryRequirements")
def cuMipmappedArrayGetMemoryRequirements(out, handle, device):
    mipmapped_arrays.get(addr(handle))
    _memory_requirements(out, device)


@entry("cuArrayGetMemoryRequirements")
def cuArrayGetMemoryRequirements(out, handle, device):
    textures.arrays.get(addr(handle))
    _memory_requirements(out, device)


def image(runtime, handle: int):
    """(the texture runtime's Mipmap of a mipmapped array's levels, whether its format reads
    only as normalized floats), for a texture object or reference."""
    mip = mipmapped_arrays.get(handle)
    levels = tuple(a.image(runtime) for a in mip.levels)
    first = mip.levels[0]
    return runtime.mipmap.Mipmap(levels), textures._element(first.format, first.channels)[2]


def filtered(runtime, mipmap, sampler, t):
    """The Mipmap with the texture descriptor's mipmap fields, checked as cuTexObjectCreate
    checks the filter mode (linear only of textures that return floats)."""
    if t.mipmapFilterMode not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"mipmap filter mode {t.mipmapFilterMode}")
    if t.mipmapFilterMode == 1 and not runtime.float_result(mipmap, sampler):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "linear mipmap filtering of a texture that returns integers")
    return replace(mipmap, linear=t.mipmapFilterMode == 1, bias=t.mipmapLevelBias,
                   min_clamp=t.minMipmapLevelClamp, max_clamp=t.maxMipmapLevelClamp, anisotropy=t.maxAnisotropy)
