"""Texture and surface objects of the HIP backend (the driver's `backend.textures`): a handle is
the device address of the object's descriptor block (compiler/texdesc.py), which kernels
compiled by the AMDGPU target read and sample in software (compiler/amdgpu/texture.py).

The images and samplers are the CPU target's records (cpu/texture.py: the same driver code
fills them). What the AMDGPU lowering does not implement yet is refused here, when the object
is created, with CUDA_ERROR_NOT_SUPPORTED: mipmapped arrays, cubemaps, sRGB reads and linear
filtering of half floats.
"""

from __future__ import annotations

from types import SimpleNamespace

from ..cdata import ffi
from ..compiler import texdesc
from ..compiler.cpu.texture import Image, Sampler
from ..curesult import CUDA_ERROR_NOT_SUPPORTED, CudaError
from .hip_runtime import Hip

__all__ = ["Image", "Sampler", "float_result", "register", "release", "mipmap"]
HALF = 0x10  # CU_AD_FORMAT_HALF: the CPU model filters it with its own rounding, not lowered yet

def _no_mipmaps(levels: tuple[Image, ...]) -> None:
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "mipmapped textures are not supported on the HIP backend yet")


mipmap = SimpleNamespace(Mipmap=_no_mipmaps)  # driver/mipmaps.py builds its images through this


def float_result(image: Image, sampler: Sampler) -> bool:
    return texdesc.float_result(image.format, sampler.read_integer)


def register(image: Image, sampler: Sampler | None) -> int:
    """Write the object's descriptor to new device memory; its address is the handle."""
    refused = [what for what, found in (("cubemap", image.cubemap), ("sRGB", sampler is not None and sampler.srgb),
                                        ("linear filtering of half-float", sampler is not None and sampler.linear and image.format == HALF)) if found]
    if refused:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"{refused[0]} textures are not supported on the HIP backend yet")
    from .hip import memory  # the backend module imports this one

    block = texdesc.pack(image, sampler)
    hip = Hip.get()
    handle = hip.malloc(len(block))
    buf = ffi.from_buffer(block)
    memory.copy(handle, int(ffi.cast("uintptr_t", buf)), len(block))  # waits for the copy
    return handle


def release(handle: int) -> None:
    """The driver has checked that `handle` is a live object of its own."""
    Hip.get().free(handle)
