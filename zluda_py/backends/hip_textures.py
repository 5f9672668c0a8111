"""Texture and surface objects of the HIP backend (the driver's `backend.textures`): a handle is
the device address of the object's descriptor block (compiler/texdesc.py), which kernels
compiled by the AMDGPU target read and sample in software (compiler/amdgpu/texture.py).

The images and samplers are the CPU target's records (cpu/texture.py: the same driver code
fills them). What the AMDGPU lowering does not implement yet is refused here, when the object
is created, with CUDA_ERROR_NOT_SUPPORTED: mipmapped arrays and sRGB reads.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from ..cdata import ffi
from ..compiler import texdesc
from ..compiler.cpu.texture import Image, Sampler
from ..curesult import CUDA_ERROR_NOT_SUPPORTED, CudaError
from .hip_runtime import Hip

__all__ = ["Image", "Sampler", "float_result", "register", "release", "mipmap"]

def _no_mipmaps(levels: tuple[Image, ...]) -> None:
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "mipmapped textures are not supported on the HIP backend yet")


mipmap = SimpleNamespace(Mipmap=_no_mipmaps)  # driver/mipmaps.py builds its images through this


def float_result(image: Image, sampler: Sampler) -> bool:
    return texdesc.float_result(image.format, sampler.read_integer)


_released: list[int] = []  # blocks of destroyed objects (magic word 0), reused by the next ones
_lock = threading.Lock()


def _write(block_address: int, block: bytes) -> None:
    from .hip import memory  # the backend module imports this one

    buf = ffi.from_buffer(block)
    memory.copy(block_address, int(ffi.cast("uintptr_t", buf)), len(block))  # waits for the copy


def register(image: Image, sampler: Sampler | None) -> int:
    """Write the object's descriptor to device memory; the handle is its address."""
    if sampler is not None and sampler.srgb:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "sRGB textures are not supported on the HIP backend yet")
    block = texdesc.pack(image, sampler)
    with _lock:
        where = _released.pop() if _released else Hip.get().malloc(texdesc.SIZE)
    _write(where, block)
    return where


def release(handle: int) -> None:
    """The driver has checked that `handle` is a live object of its own. Its block stays
    allocated, zeroed, so that a fetch through the stale handle faults on the magic word (as
    NVIDIA's handles name no object until reused) instead of reading freed memory."""
    _write(handle, bytes(texdesc.SIZE))
    with _lock:
        _released.append(handle)
