"""Half-float texels through linear filtering against an NVIDIA H200 (driver 580.159.04, nvcc
13.0; golden/texture_probe.txt's `half.` lines): texels of nonzero weight aligned to the largest
one's exponent and truncated 14 bits below it, the blend rounded to a half with ties away from
zero. Runs `texture.sample` directly, no GPU or kernel."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler.cpu import texture

TEXELS = np.array([2048, 2050, -2048, -2050, 1, 1.0009765625, -1, -1.0009765625, 3, 6, -3, -6,
                   0.000061035156, 0.00006109476, 65504, 65472, 1, 2.0**-14 * 1.5], dtype=np.float16)


@pytest.mark.parametrize("x, want", [
    (1.0, 2050.0),  # 2049, halfway between 2048 and 2050: away from zero
    (3.0, -2050.0),  # -2049: away from zero
    (2.0, 1.0),  # 2050 and -2048 half each: exact
    (12.49609375, -0.0234375),  # -6 * 1/256 + 2^-14 * 255/256: 2^-14 is 16 binades below 6, dropped
    (13.0, 6.109476089477539e-05),  # 2^-14 + 2^-25, a tie: away from zero
    (13.50390625, 255.875),
    (17.49609375, 0.00396728515625),  # 1 next to 1.5 * 2^-14, which is cut to 2^-14 (14 bits below 1)
])
def test_half_blend_matches_h200(x, want):
    image = texture.Image(TEXELS.ctypes.data, 0x10, 1, len(TEXELS))
    sampler = texture.Sampler((texture.CLAMP,) * 3, linear=True, normalized=False)
    got = texture.sample(image, sampler, [np.array([x], dtype=np.float32)], np.zeros(1, dtype=np.int64), False)
    assert float(np.float32(got[0, 0])) == np.float32(want)
