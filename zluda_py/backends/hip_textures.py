"""Texture and surface objects of the HIP backend (the driver's `backend.textures`): a handle is
the device address of the object's descriptor block (compiler/texdesc.py), which kernels
compiled by the AMDGPU target read and sample in software (compiler/amdgpu/texture.py).

The images, mipmaps and samplers are the CPU target's records (cpu/texture.py, cpu/mipmap.py:
the same driver code fills them); a mipmapped texture's levels are CUDA arrays in device memory
like any other (driver/mipmaps.py), and its descriptor is one block per level.
"""

from __future__ import annotations

import threading

from ..cdata import ffi
from ..compiler import texdesc
from ..compiler.cpu import mipmap
from ..compiler.cpu.texture import Image, Sampler
from .hip_runtime import Hip

__all__ = ["Image", "Sampler", "float_result", "register", "release", "mipmap"]

def float_result(image: Image | mipmap.Mipmap, sampler: Sampler) -> bool:
    return texdesc.float_result(image.format, sampler.read_integer)


_released: dict[int, list[int]] = {}  # by size: blocks of destroyed objects (magic word 0), reused by the next ones
_sizes: dict[int, int] = {}  # a live object's handle -> the bytes of its blocks
_lock = threading.Lock()


def _write(block_address: int, block: bytes) -> None:
    from .hip import memory  # the backend module imports this one

    buf = ffi.from_buffer(block)
    memory.copy(block_address, int(ffi.cast("uintptr_t", buf)), len(block))  # waits for the copy


def register(image: Image | mipmap.Mipmap, sampler: Sampler | None) -> int:
    """Write the object's descriptor to device memory; the handle is its address."""
    block = texdesc.pack(image, sampler)
    with _lock:
        free = _released.get(len(block))
        where = free.pop() if free else Hip.get().malloc(len(block))
        _sizes[where] = len(block)
    _write(where, block)
    return where


def release(handle: int) -> None:
    """The driver has checked that `handle` is a live object of its own. Its block stays
    allocated, zeroed, so that a fetch through the stale handle faults on the magic word (as
    NVIDIA's handles name no object until reused) instead of reading freed memory."""
    with _lock:
        size = _sizes.pop(handle)
    _write(handle, bytes(size))
    with _lock:
        _released.setdefault(size, []).append(handle)
