"""The constants of mipmap level selection, shared by the targets that sample mipmapped
textures: the CPU target's model (cpu/mipmap.py, in numpy) and the AMDGPU lowering
(amdgpu/texture.py, in LLVM IR), whose results must agree bit for bit. The rules themselves are
described in cpu/mipmap.py and docs/semantics.md ("Mipmap level selection"), as an NVIDIA H100
follows them."""

from __future__ import annotations

import math

LOD_STEPS = 256  # the LOD's fixed point: 8 fractional bits
GRADIENT_BITS = 9  # fractional mantissa bits a gradient component keeps (truncated)
# log2(1 + i/256) in 1/256 for the mantissa interval [i, i + 1)/256: the value at its middle,
# rounded (fractions up to 17/32 down), at most 255; interval 0 gives 0, so a power of two has
# an integer LOD
LOG2_TABLE = tuple([0] + [min(math.floor(LOD_STEPS * math.log2(1 + (i + 0.5) / 256) + 15 / 32), 255)
                          for i in range(1, 256)])
AXIS_WEIGHTS = (1.0, 11 / 32, 1 / 4)  # a vector's length: its components, longest first, weighted
DIAGONAL = 11 / 16  # weight of |dx + dy| and |dx - dy| against |dx| and |dy|
MAX_ANISOTROPY = 16


def anisotropy(requested: int) -> int:
    """The maxAnisotropy that applies (0 and 1: isotropic)."""
    return min(requested, MAX_ANISOTROPY)


def blend_shape(anisotropy: int) -> tuple[float, int]:
    """(slope, start) of linear mip filtering's sharpened blend with anisotropy > 1: the upper
    level's weight is clip(floor((256 f - start) * slope), 0, 256) / 256 for the LOD's fraction f.
    Slope 1.5 for maxAnisotropy 2, 1.75 for 4, 2 for 16 measured (2 - 1/A up to 4 and 2 past it),
    starting s/256 steps after floor(128 (1 - 1/s)). Isotropic: slope 1, start 0 (the fraction)."""
    if anisotropy <= 1:
        return 1.0, 0
    slope = 2 - 1 / anisotropy if anisotropy <= 4 else 2.0
    return slope, math.floor(LOD_STEPS / 2 * (1 - 1 / slope))
