"""Trilinear filtering's corner weights against an NVIDIA H200 (driver 580.159.04, nvcc 13.0):
the fetches tests/cuda/e2e_textures.cu `textures` got at line 285 that our earlier model (x-z
plane rounded once, split by y per corner) missed, and corner weights read off the probe's
parity textures (tests/hardware/texture_probe.cu, `tri.parity` lines of
golden/texture_probe.txt). Runs `texture.sample` directly, no GPU or kernel."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from zluda_py.compiler.cpu import texture

W, H, D = 6, 5, 4
# e2e_textures.cu ramp(w * h * d, 0.5f)
RAMP = np.array([(i * 37 + 11) % 101 * 0.5 for i in range(W * H * D)], dtype=np.float32)

# (x, y, z) -> the H200's result bits: every one of the 300 3-D fetches that differed from the
# old model (28; the first ten are the ones the e2e program printed), clamp, unnormalized
H200 = """
1.74899995 4.44700003 1.43099999 41897c00
2.69400024 3.78200006 1.88600016 41dd8c00
3.45000029 3.25 2.25 4210be00
4.0710001 2.81299996 2.54900002 4208f000
4.71900034 2.35700011 2.86100006 421d8000
4.96200037 2.18600011 2.97799993 41ef1800
5.50200033 1.80600023 3.23799992 410ad800
5.61000013 1.73000002 3.28999996 40fd2000
5.69100046 1.67299986 3.329 40e9c000
5.88000011 1.53999996 3.42000008 40bdc000
5.98800039 1.46400023 3.47200012 40de0000
6.06900024 1.40700006 3.51099992 4114c000
6.09600019 1.38800001 3.52399993 41216800
6.12300014 1.36899996 3.53699994 412e1000
6.20400047 1.31200027 3.57599998 41518000
6.36600018 1.19799995 3.65400004 418d7400
6.42000008 1.15999985 3.68000007 419a1c00
6.77100039 0.913000107 3.84899998 41e9d800
6.82500029 0.875 3.875 41f68000
6.96000051 0.78000021 3.94000006 420a7000
7.04100037 0.72300005 3.97900009 4213ee00
7.06800032 0.703999996 3.9920001 42171800
7.09500027 0.684999943 4.00500011 421a4200
7.20300007 0.609000206 4.05700016 42264800
7.2300005 0.590000153 4.07000017 42297200
7.25700045 0.571000099 4.08300018 422c9c00
7.31100035 0.532999992 4.10900021 4232f000
7.3380003 0.513999939 4.12200022 42357800
"""


def _bits(v: float) -> str:
    return f"{struct.unpack('<I', struct.pack('<f', v))[0]:08x}"


def test_e2e_3d_fetches_match_h200():
    rows = [ln.split() for ln in H200.strip().splitlines()]
    xs = [np.array([float(r[k]) for r in rows], dtype=np.float32) for k in range(3)]
    image = texture.Image(RAMP.ctypes.data, 0x20, 1, W, H, D)
    sampler = texture.Sampler((texture.CLAMP,) * 3, linear=True, normalized=False)
    got = texture.sample(image, sampler, xs, np.zeros(len(rows), dtype=np.int64), False)
    assert [_bits(float(np.float32(v))) for v in got[:, 0]] == [r[3] for r in rows]


@pytest.mark.parametrize("alphas, weights", [
    # (x, y, z weights in 1/256) -> corners (x, y, z) = 000 001 010 011 100 101 110 111, from the
    # H200's tri.parity lines: e2e point 87, then designed points with a tie in each split
    ((64, 242, 238), (1, 10, 12, 168, 0, 3, 5, 57)),
    ((1, 128, 0), (128, 0, 127, 0, 0, 0, 1, 0)),
    ((1, 128, 1), (127, 1, 127, 0, 0, 0, 1, 0)),
    ((1, 128, 64), (96, 32, 95, 32, 0, 0, 1, 0)),
    ((1, 128, 77), (89, 39, 89, 38, 0, 0, 1, 0)),
])
def test_corner_weights_match_h200(alphas, weights):
    got = texture._corner_weights([np.array([a]) for a in alphas])
    # corner key: bit 0 x, bit 1 y, bit 2 z
    order = [x | y << 1 | z << 2 for x in (0, 1) for y in (0, 1) for z in (0, 1)]
    assert tuple(int(got[k][0]) for k in order) == weights
