"""Texture and surface objects for kernels run by `EmulatedModule`, with the API of the CPU
target's runtime (cpu/texture.py: `register`, `release`, its `Image` and `Sampler` records) so
that code written against the CPU target creates objects for the emulator unchanged.

As in the HIP backend (backends/hip_textures.py), a handle is the address of the object's
descriptor block (compiler/texdesc.py; a mipmapped texture's, one per level), which the AMDGPU
target's code reads and samples in software. Here a block is host memory; every launch maps the
blocks and the texels they point at. A released block stays mapped, zeroed (a fetch through the
stale handle faults on the magic word), until an object of the same size reuses it, as there.
"""

from __future__ import annotations

import threading

import numpy as np

from zluda_py.compiler import texdesc
from zluda_py.compiler.cpu.mipmap import Mipmap
from zluda_py.compiler.cpu.texture import Image, Sampler

__all__ = ["Image", "Sampler", "register", "release", "spans"]

_live: dict[int, tuple[np.ndarray, Image | Mipmap]] = {}  # handle -> (its blocks, the image they describe)
_released: dict[int, list[np.ndarray]] = {}  # by size: zeroed blocks of released objects
_lock = threading.Lock()


def register(image: Image | Mipmap, sampler: Sampler | None) -> int:
    """A texture object (with a sampler) or a surface object (without): its block's address."""
    packed = np.frombuffer(texdesc.pack(image, sampler), np.uint8)
    with _lock:
        free = _released.get(packed.size)
        block = free.pop() if free else np.empty(packed.size, np.uint8)
        block[:] = packed
        _live[block.ctypes.data] = (block, image)
    return block.ctypes.data


def release(handle: int) -> None:
    with _lock:
        block, _ = _live.pop(handle)
        block[:] = 0
        _released.setdefault(block.size, []).append(block)


def spans() -> list[tuple[int, int]]:
    """(address, bytes) of every block, live or released, and of every live object's texels:
    device memory for a launch (objects may share texels: the spans may overlap)."""
    with _lock:
        out = [(block.ctypes.data, block.size) for block, _ in _live.values()]
        out += [(block.ctypes.data, block.size) for blocks in _released.values() for block in blocks]
        out += [(level.base, level.size) for _, image in _live.values() for level in getattr(image, "levels", (image,))]
    return out
