"""sRGB reads (CU_TRSF_SRGB), shared by the targets that sample textures: the CPU target's model
(cpu/texture.py) and the AMDGPU lowering (amdgpu/texture.py, a constant in the code object),
whose results must agree bit for bit.

Per the CUDA programming guide (cudaTextureDesc::sRGB: sRGB-to-linear conversion during the
fetch) only 8-bit unsigned texels read as normalized floats are converted: the first three
channels, before filtering; alpha, other formats and integer reads are left as they are. The
conversion is the sRGB transfer function (IEC 61966-2-1) of the normalized value t / 255, so an
8-bit channel has 256 possible results: this table, indexed by the texel's byte.
"""

from __future__ import annotations

import numpy as np

CHANNELS = 3  # red, green, blue; alpha stays linear


def _to_linear(v: np.ndarray) -> np.ndarray:
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


# numpy's f64 arithmetic, as the CPU model computed it per texel before the table
TO_LINEAR: tuple[float, ...] = tuple(float(v) for v in _to_linear(np.arange(256, dtype=np.float64) / 255.0))
