"""The texture/surface descriptor of targets whose kernels sample in software (AMDGPU): a
CUtexObject/CUsurfObject handle is the device address of this block, which the driver writes
when the object is created (backends/hip_textures.py) and kernels read (amdgpu/texture.py).

The sampling rules are the CPU target's (cpu/texture.py, docs/semantics.md); the block holds
what they need, resolved on the host where that is cheaper than in every fetch: the strides,
the effective address modes (wrap and mirror act only with normalized coordinates, linear
memory reads 0 outside), and the scale of a normalized-float read.

A mipmapped texture is one block per level, level 0's first (the handle), each describing its
level's texels as a texture without levels would, and all holding the texture descriptor's
mipmap fields: the level count, the bias, the clamps, linear mip filtering and the shape of its
blend under anisotropy (compiler/miplod.py). Other textures are a single level: their LOD is
clamped to 0.
"""

from __future__ import annotations

import struct
from typing import Protocol

from zluda_py.compiler import miplod
from zluda_py.compiler.cpu.texture import CHANNEL_ORDER as CHANNEL_ORDERS, CHANNEL_TYPE as CHANNEL_TYPES

# layout (little endian): offsets of the fields the kernel reads
BASE, ROW, SLICE, LAYER_STRIDE = 0, 8, 16, 24  # u64: texel address, bytes per row / slice / layer
WIDTH, HEIGHT, DEPTH, LAYERS = 32, 36, 40, 44  # u32, as CUDA's descriptors give them (0: unused)
ELEMENT, CHANNELS, ITEM, FLAGS = 48, 52, 56, 60  # u32: bytes per texel, channels, bytes per channel
MODES = 64  # u32 x3: CUaddress_mode per axis, effective
MAGIC = 76  # u32: TEXTURE_MAGIC or SURFACE_MAGIC
BORDER = 80  # f64 x4: the border colour
SCALE = 112  # f64: divisor of a normalized-float read (the format's largest value), 0: read as is
CHANNEL_ORDER, CHANNEL_DATA_TYPE = 120, 124  # u32: txq/suq's answers (the PTX manual's enumeration)
ADDRESS_MODES = 128  # u8 x3: the sampler's address modes as given (txq .addr_mode_N)
LEVELS_COUNT, ANISOTROPY = 136, 140  # u32: mipmap levels (1 without), maxAnisotropy as it applies
BIAS, MIN_CLAMP, MAX_CLAMP = 144, 152, 160  # f64: mipmapLevelBias, min/maxMipmapLevelClamp
BLEND_SLOPE, BLEND_START = 168, 176  # f64: linear mip filtering's blend (miplod.blend_shape) in grad's LOD
SIZE = 184

# FLAGS bits
LINEAR_FILTER, NORMALIZED_COORDS, FLOAT_RESULT, LINEAR_MEMORY, SIGNED, FLOAT_FORMAT, PITCH_LINEAR = 1, 2, 4, 8, 16, 32, 64
CUBEMAP = 128  # LAYERS counts 2-D faces, 6 per cube
MIP_LINEAR = 256  # mipmapFilterMode linear (of a texture returning floats): blend two levels
SRGB = 512  # the first channels of 8-bit unorm texels read as floats go through compiler/srgb.py's table
TEXTURE_MAGIC, SURFACE_MAGIC = 0x54584F42, 0x53555246  # which kind of object the block describes
WRAP, CLAMP, MIRROR, BORDER_MODE = 0, 1, 2, 3  # CUaddress_mode

_FORMATS = {0x01: (1, False, False), 0x02: (2, False, False), 0x03: (4, False, False), 0x08: (1, True, False),
            0x09: (2, True, False), 0x0A: (4, True, False), 0x10: (2, True, True), 0x20: (4, True, True)}


class ImageLike(Protocol):
    base: int
    format: int
    channels: int
    width: int
    height: int
    depth: int
    layers: int
    pitch: int
    cubemap: bool
    linear_memory: bool


class MipmapLike(Protocol):
    levels: tuple[ImageLike, ...]
    linear: bool
    bias: float
    min_clamp: float
    max_clamp: float
    anisotropy: int


class SamplerLike(Protocol):
    address: tuple[int, int, int]
    linear: bool
    normalized: bool
    read_integer: bool
    srgb: bool
    border: tuple[float, float, float, float]


def float_result(fmt: int, read_integer: bool) -> bool:
    """Whether fetches return floats: float formats, and 8/16-bit integers unless read as integers."""
    item, _, is_float = _FORMATS[fmt]
    return is_float or (not read_integer and item < 4)


def effective_modes(image: ImageLike, sampler: SamplerLike) -> tuple[int, int, int]:
    """The address modes fetches apply (the CPU target's rule): linear memory reads 0 outside,
    wrap and mirror need normalized coordinates and otherwise clamp; a cubemap's faces clamp."""
    if image.cubemap:
        return (CLAMP,) * 3
    if image.linear_memory:
        return (BORDER_MODE,) * 3
    if sampler.normalized:
        return tuple(sampler.address)
    return tuple(m if m in (CLAMP, BORDER_MODE) else CLAMP for m in sampler.address)


def pack(image: ImageLike | MipmapLike, sampler: SamplerLike | None) -> bytes:
    """The descriptor of a texture object (with a sampler) or a surface object (without); of a
    mipmapped texture, its levels' blocks one after another."""
    if not hasattr(image, "levels"):
        return _pack_level(image, sampler, _ONE_LEVEL)
    aniso = miplod.anisotropy(image.anisotropy)
    linear = image.linear and float_result(image.levels[0].format, sampler.read_integer)
    mip = struct.pack("<2I5d", len(image.levels), aniso, image.bias, image.min_clamp, image.max_clamp,
                      *miplod.blend_shape(aniso))
    return b"".join(_pack_level(level, sampler, mip, MIP_LINEAR if linear else 0) for level in image.levels)


# the mipmap fields of a texture without levels: LOD clamped to [0, 0]
_ONE_LEVEL = struct.pack("<2I5d", 1, 0, 0.0, 0.0, 0.0, *miplod.blend_shape(0))


def _pack_level(image: ImageLike, sampler: SamplerLike | None, mip: bytes, mip_flags: int = 0) -> bytes:
    """One level's block, `mip` its mipmap fields."""
    item, signed, is_float = _FORMATS[image.format]
    element = item * image.channels
    row = image.pitch or image.width * element
    slice_ = row * max(image.height, 1)
    layer_stride = slice_ * max(image.depth, 1)
    flags = (SIGNED if signed else 0) | (FLOAT_FORMAT if is_float else 0) | (LINEAR_MEMORY if image.linear_memory else 0)
    flags |= PITCH_LINEAR if image.linear_memory or image.pitch else 0
    flags |= (CUBEMAP if image.cubemap else 0) | mip_flags
    modes, border, scale, given = (CLAMP,) * 3, (0.0,) * 4, 0.0, (0, 0, 0)
    integer_type = True  # txq/suq's channel data type: a surface reads integers
    if sampler is not None:
        floats = float_result(image.format, sampler.read_integer)
        flags |= (LINEAR_FILTER if sampler.linear else 0) | (NORMALIZED_COORDS if sampler.normalized else 0)
        flags |= FLOAT_RESULT if floats else 0
        modes, border = effective_modes(image, sampler), tuple(float(v) for v in sampler.border)
        given, integer_type = tuple(sampler.address), not floats
        if floats and not is_float:
            scale = float((1 << (8 * item - signed)) - 1)
        flags |= SRGB if sampler.srgb and floats and image.format == 0x01 else 0
    block = struct.pack("<4Q8I3II4dd2I3B5x", image.base, row, slice_, layer_stride, image.width, image.height,
                        image.depth, image.layers, element, image.channels, item, flags, *modes,
                        TEXTURE_MAGIC if sampler is not None else SURFACE_MAGIC, *border, scale,
                        CHANNEL_ORDERS[image.channels], CHANNEL_TYPES[image.format][integer_type], *given)
    block += mip
    assert len(block) == SIZE
    return block
