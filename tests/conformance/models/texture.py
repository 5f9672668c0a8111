"""Texture fetching and surface access, one lane at a time, written from the CUDA programming
guide's texture-fetching appendix, the PTX manual's tex/tld4/suld/sust pages and what an NVIDIA
H200 returned where they leave the fixed-point details open (independent of
zluda_py/compiler/cpu/texture.py: scalar Python with exact fractions, no numpy sampling).

A texture here is a dict: `texels[layer][z][y][x]` -> tuple of channel values (already
converted to what a fetch returns: floats, or integers in element read mode), `size` (w, h, d),
`mode` (the address mode name), `linear`, `normalized`, `border`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def f32(x: float) -> float:
    return float(np.float32(x))


def wrap_index(i: int, n: int, mode: str) -> int | None:
    """The texel an integer index addresses; None: the border (appendix: wrap, clamp, mirror, border)."""
    if mode == "wrap":
        return i - n * math.floor(i / n)
    if mode == "mirror":
        period = i - 2 * n * math.floor(i / (2 * n))
        return period if period < n else 2 * n - 1 - period
    if mode == "border" and not 0 <= i < n:
        return None
    return min(max(i, 0), n - 1)


def texel(tex: dict, layer: int, idx: list[int]) -> tuple:
    w, h, d = tex["size"]
    idx = idx + [0] * (3 - len(idx))
    got = [wrap_index(i, n, tex["mode"]) for i, n in zip(idx, (w, h, d))]
    if None in got:
        return tex["border"]
    x, y, z = got
    return tex["texels"][layer][z][y][x]


# Measured on NVIDIA H200 (tests/hardware/golden/texture_probe.txt), where the guide only says
# "fixed point": normalized coordinates keep 24 fractional bits (rounded toward -inf) before
# they are scaled; x - 0.5 is held with 8 fractional bits (ties up), after clamp addressing has
# clamped the coordinate to the edge texels' centres; the corner weights of bilinear filtering
# round the product of the two weights once and take the others as differences; trilinear
# splits the z weight exactly, then in each z slice the x weight (rounded), then each x row's
# weight by the y weight, the upper row rounding its upper corner, the lower its lower one.
COORD_BITS = 24


def _half_up(q: Fraction) -> int:
    return math.floor(q + Fraction(1, 2))


def _texel_coords(tex: dict, coords: list[float]) -> list[Fraction]:
    if not tex["normalized"]:
        return [Fraction(c) for c in coords]
    return [Fraction(math.floor(Fraction(c) * 2**COORD_BITS), 2**COORD_BITS) * n for c, n in zip(coords, tex["size"])]


def _linear_footprint(tex: dict, coords: list[float], clamp: bool = False) -> list[tuple[int, int]]:
    """Per axis (lower texel, upper texel's weight in 1/256); `clamp`: the coordinate clamped to
    [0.5, n - 0.5] first (filtering with clamp addressing; tld4 keeps the unclamped footprint)."""
    texel_coords = _texel_coords(tex, coords)
    if clamp:
        texel_coords = [min(max(s, Fraction(1, 2)), n - Fraction(1, 2)) for s, n in zip(texel_coords, tex["size"])]
    return [divmod(_half_up((s - Fraction(1, 2)) * 256), 256) for s in texel_coords]


def _weights(alphas: list[int]) -> dict[tuple[int, ...], int]:
    """(upper on each axis) -> weight in 1/256."""
    if len(alphas) == 1:
        return {(0,): 256 - alphas[0], (1,): alphas[0]}
    a, b = alphas[0], alphas[1]
    if len(alphas) == 2:
        ab = _half_up(Fraction(a * b, 256))
        return {(1, 1): ab, (1, 0): a - ab, (0, 1): b - ab, (0, 0): 256 - a - b + ab}
    out = {}
    for uz, zw in ((0, 256 - alphas[2]), (1, alphas[2])):
        xw = _half_up(Fraction(zw * a, 256))
        top = _half_up(Fraction(xw * b, 256))  # upper x, upper y
        bottom = _half_up(Fraction((zw - xw) * (256 - b), 256))  # lower x, lower y
        out[(1, 1, uz)], out[(1, 0, uz)] = top, xw - top
        out[(0, 0, uz)], out[(0, 1, uz)] = bottom, zw - xw - bottom
    return out


def fetch(tex: dict, layer: int, coords: list[float]) -> tuple:
    """tex(x[, y[, z]]) with float coordinates: point sampling takes floor(x); linear filtering
    blends the footprint's texels by the weights above. A 1-D texture filters as a 2-D one of
    height 1 at y = 0 (measured on NVIDIA H200: the border colour takes half the weight)."""
    if not tex["linear"]:
        return texel(tex, layer, [math.floor(s) for s in _texel_coords(tex, coords)])
    if len(coords) == 1:
        coords = [coords[0], 0.0]
    footprint = _linear_footprint(tex, coords, tex["mode"] == "clamp")
    total = [Fraction(0)] * 4
    for ups, weight in _weights([alpha for _, alpha in footprint]).items():
        idx = [low + up for (low, _), up in zip(footprint, ups)]
        total = [t + Fraction(weight, 256) * Fraction(v) for t, v in zip(total, texel(tex, layer, idx))]
    return tuple(float(t) for t in total)


def gather(tex: dict, layer: int, coords: list[float], comp: int) -> tuple:
    """tld4: component `comp` of the 2x2 footprint, ordered (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
    (i, _), (j, _) = _linear_footprint(tex, coords)
    return tuple(texel(tex, layer, [i + dx, j + dy])[comp] for dx, dy in ((0, 1), (1, 1), (1, 0), (0, 0)))


def cube(x: float, y: float, z: float) -> tuple[int, float, float]:
    """(face, s, t) from the guide's cubemap table: the major axis picks the face, z before y
    before x on ties (measured on NVIDIA H200)."""
    ax, ay, az = abs(x), abs(y), abs(z)
    if az >= ax and az >= ay:
        face, sc, tc, ma = (4, x, -y, az) if z >= 0 else (5, -x, -y, az)
    elif ay >= ax:
        face, sc, tc, ma = (2, x, z, ay) if y >= 0 else (3, x, -z, ay)
    else:
        face, sc, tc, ma = (0, -z, -y, ax) if x >= 0 else (1, z, -y, ax)
    return face, f32(f32(f32(sc / ma) + 1) / 2), f32(f32(f32(tc / ma) + 1) / 2)



# Mipmap level selection, as recorded on an NVIDIA H100 (tests/hardware/golden/mipmap_probe.txt,
# docs/semantics.md "Mipmap level selection"); scalar, with exact fractions. A gradient arrives
# in level-0 texels (a normalized one times the extent of its axis), one float per axis.
MIP_STEPS = 256  # the LOD keeps 8 fractional bits


def _keep_mantissa_bits(x: float, bits: int = 9) -> Fraction:
    """x with its mantissa cut to `bits` fractional bits, toward zero."""
    if x == 0:
        return Fraction(0)
    exponent = math.floor(math.log2(abs(x)))
    while abs(x) >= 2.0 ** (exponent + 1):  # log2 rounds up just below a power of two
        exponent += 1
    while abs(x) < 2.0 ** exponent:
        exponent -= 1
    ulp = Fraction(2) ** (exponent - bits)
    return math.copysign(1, x) * (Fraction(abs(x)) // ulp) * ulp


def _approx_length(v: list[Fraction]) -> Fraction:
    """max + 11/32 mid + 1/4 min of the absolute components."""
    a = sorted((abs(c) for c in v), reverse=True)
    return sum((w * c for w, c in zip((Fraction(1), Fraction(11, 32), Fraction(1, 4)), a)), Fraction(0))


def mip_log2(x: Fraction) -> Fraction | None:
    """log2 in 1/256 steps: exponent plus, for mantissa interval i = floor((m - 1) 256), the log2
    of the interval's middle rounded to 1/256 (a fraction up to 17/32 rounds down; at most 255/256;
    interval 0 gives 0). None for x <= 0 (no footprint)."""
    if x <= 0:
        return None
    exponent = 0
    while x >= 2:
        x, exponent = x / 2, exponent + 1
    while x < 1:
        x, exponent = x * 2, exponent - 1
    i = math.floor((x - 1) * 256)
    step = 0 if i == 0 else min(math.floor(MIP_STEPS * math.log2(1 + (i + 0.5) / 256) + 15 / 32), 255)
    return exponent + Fraction(step, MIP_STEPS)


def mip_gradient_lod(dx: list[float], dy: list[float], anisotropy: int = 0) -> Fraction | None:
    """The LOD of gradients dx, dy in level-0 texels: log2 of the longest of |dx|, |dy|,
    11/16 |dx + dy| and 11/16 |dx - dy| (lengths approximated as above, components first cut to
    9 mantissa bits); with maxAnisotropy A > 1 on a 2-D footprint, of max(|det| / major,
    major / A)."""
    gx = [_keep_mantissa_bits(c) for c in dx]
    gy = [_keep_mantissa_bits(c) for c in dy]
    major = max(_approx_length(gx), _approx_length(gy),
                Fraction(11, 16) * _approx_length([a + b for a, b in zip(gx, gy)]),
                Fraction(11, 16) * _approx_length([a - b for a, b in zip(gx, gy)]))
    a = min(anisotropy, 16)
    if a > 1 and len(gx) == 2 and major > 0:
        major = max(abs(gx[0] * gy[1] - gx[1] * gy[0]) / major, major / a)
    return mip_log2(major)


def mip_lod(lod: Fraction | float | None, bias: float, low: float, high: float, levels: int) -> Fraction:
    """The LOD cut to 1/256 toward zero, plus the bias (the sum cut to 1/256 toward -inf), then the
    descriptor's clamps and the level range. None (plain tex: LOD 0 without the bias) clamps to
    the bottom."""
    if lod is None:
        value = Fraction(low)
    else:
        lod = Fraction(math.trunc(Fraction(lod) * MIP_STEPS), MIP_STEPS)  # 8 fractional bits, toward zero
        value = Fraction(math.floor((lod + Fraction(bias)) * MIP_STEPS), MIP_STEPS)
    value = min(max(value, Fraction(low)), Fraction(high))
    return min(max(value, Fraction(0)), Fraction(levels - 1))


def mip_levels(lod: Fraction, linear: bool, anisotropy: int = 0) -> list[tuple[int, Fraction]]:
    """(level, weight) pairs a fetch blends. Point: the nearest level, ties up. Linear: the two
    levels around the LOD by its fraction; with maxAnisotropy A > 1 (gradient LODs) the fraction
    f, in 1/256, becomes floor((f - floor(128 (1 - 1/s))) s) clamped to [0, 256], s = 1.5 for
    A = 2, 1.75 for 4, 2 for 16 (recorded; 2 - 1/A up to 4 and 2 past it otherwise)."""
    if not linear:
        return [(math.floor(lod + Fraction(1, 2)), Fraction(1))]
    low = math.floor(lod)
    fraction = (lod - low) * MIP_STEPS
    a = min(anisotropy, 16)
    if a > 1:
        s = 2 - Fraction(1, a) if a <= 4 else Fraction(2)
        fraction = min(max(math.floor((fraction - math.floor(128 * (1 - 1 / s))) * s), 0), MIP_STEPS)
    weight = Fraction(fraction, MIP_STEPS)
    return [(low, 1 - weight), (low + 1, weight)]

# txq/suq .channel_order and .channel_data_type: the PTX manual's "Channel Data Type and Channel
# Order Fields" table (OpenCL's values).
CL_CHANNEL_ORDER = {"R": 0x10B0, "A": 0x10B1, "RG": 0x10B2, "RA": 0x10B3, "RGB": 0x10B4, "RGBA": 0x10B5}
CL_CHANNEL_TYPE = {"SNORM_INT8": 0x10D0, "SNORM_INT16": 0x10D1, "UNORM_INT8": 0x10D2, "UNORM_INT16": 0x10D3,
                   "SIGNED_INT8": 0x10D7, "SIGNED_INT16": 0x10D8, "SIGNED_INT32": 0x10D9, "UNSIGNED_INT8": 0x10DA,
                   "UNSIGNED_INT16": 0x10DB, "UNSIGNED_INT32": 0x10DC, "HALF_FLOAT": 0x10DD, "FLOAT": 0x10DE}


def half_bits(value: float | int, integer: bool) -> int:
    """A .f16 destination's bits: a float result as IEEE half (rounded to nearest even, from
    the f32 result), an integer result's low 16 bits."""
    if integer:
        return int(value) & 0xFFFF
    return int(np.array(f32(value), np.float32).astype(np.float16).view(np.uint16))


def surface_access(memory: bytearray, row: int, slice_: int, layer_bytes: int, limits: tuple[int, int, int, int],
                   coords: list[int], size: int, mode: str) -> int | None:
    """The byte offset suld.b/sust.b touch (x in bytes, then y, z, layer), None when a .zero
    access falls outside, or raises IndexError for .trap (a launch fault with 700 on the H200)."""
    x, y, z, layer = coords
    w_bytes, h, d, layers = limits
    inside = 0 <= x <= w_bytes - size and 0 <= y < h and 0 <= z < d and 0 <= layer < layers
    if not inside:
        if mode == "trap":
            raise IndexError("out of bounds")
        if mode == "zero":
            return None
        x, y, z, layer = (min(max(x, 0), w_bytes - size), min(max(y, 0), h - 1), min(max(z, 0), d - 1),
                          min(max(layer, 0), layers - 1))
    return layer * layer_bytes + z * slice_ + y * row + x


def formatted_texel(old: bytes, dtype: np.dtype, channels: int, words: list[int]) -> bytes:
    """sust.p: the texel with the source words in its first channels (the manual: .f32 data for a
    float format, .u32/.s32 for unsigned/signed integers, converted to the format). Our reading
    of what the manual leaves open: floats rounded to nearest even, integers saturated (OpenCL's
    write_image rule); channels without a word keep their value, extra words are ignored."""
    values = list(np.frombuffer(old, dtype))
    for c, word in enumerate(words[:channels]):
        if dtype.kind == "f":
            with np.errstate(over="ignore"):  # past the half range: infinity
                values[c] = np.array(word & 0xFFFFFFFF, np.uint32).view(np.float32).astype(dtype)
        else:
            v = word & 0xFFFFFFFF
            if dtype.kind == "i" and v >= 2**31:
                v -= 2**32
            info = np.iinfo(dtype)
            values[c] = min(max(v, info.min), info.max)
    return np.array(values, dtype).tobytes()


def reduce_cell(memory: bytearray, at: int, op: str, bits: int, signed: bool, operand: int) -> None:
    """sured: memory[at:at + bits/8] = op(old, operand) as the manual's types: add wraps, min and
    max compare signed or unsigned, and/or are bitwise."""
    size = bits // 8
    mask = (1 << bits) - 1
    old = int.from_bytes(memory[at:at + size], "little")
    new = operand & mask
    if signed:
        old, new = (v - (1 << bits) if v >> (bits - 1) else v for v in (old, new))
    result = {"add": old + new, "min": min(old, new), "max": max(old, new), "and": old & new, "or": old | new}[op]
    memory[at:at + size] = (result & mask).to_bytes(size, "little")
