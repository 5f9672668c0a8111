"""Texture fetching and surface access, one lane at a time, written from the CUDA programming
guide's texture-fetching appendix and the PTX manual's tex/tld4/suld/sust pages (independent of
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


def fetch(tex: dict, layer: int, coords: list[float]) -> tuple:
    """tex(x[, y[, z]]) with float coordinates: point sampling takes floor(x); linear filtering
    blends T[i] and T[i+1] by alpha = frac(x - 0.5) held with 8 fractional bits."""
    scaled = [f32(c * n) if tex["normalized"] else c for c, n in zip(coords, tex["size"])]
    if not tex["linear"]:
        return texel(tex, layer, [math.floor(s) for s in scaled])
    lows, alphas = [], []
    for s in scaled:
        xb = Fraction(f32(s - 0.5))
        i = math.floor(xb)
        lows.append(i)
        alphas.append(Fraction(math.floor((xb - i) * 256 + Fraction(1, 2)), 256))
    total = [Fraction(0)] * 4
    for corner in range(1 << len(scaled)):
        weight = Fraction(1)
        idx = []
        for axis in range(len(scaled)):
            up = corner >> axis & 1
            weight *= alphas[axis] if up else 1 - alphas[axis]
            idx.append(lows[axis] + up)
        total = [t + weight * Fraction(v) for t, v in zip(total, texel(tex, layer, idx))]
    return tuple(float(t) for t in total)


def gather(tex: dict, layer: int, coords: list[float], comp: int) -> tuple:
    """tld4: component `comp` of the 2x2 footprint, ordered (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
    scaled = [f32(c * n) if tex["normalized"] else c for c, n in zip(coords, tex["size"])]
    i, j = (math.floor(f32(s - 0.5)) for s in scaled)
    return tuple(texel(tex, layer, [i + dx, j + dy])[comp] for dx, dy in ((0, 1), (1, 1), (1, 0), (0, 0)))


def cube(x: float, y: float, z: float) -> tuple[int, float, float]:
    """(face, s, t) from the guide's cubemap table: the major axis picks the face."""
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax >= ay and ax >= az:
        face, sc, tc, ma = (0, -z, -y, ax) if x >= 0 else (1, z, -y, ax)
    elif ay >= az:
        face, sc, tc, ma = (2, x, z, ay) if y >= 0 else (3, x, -z, ay)
    else:
        face, sc, tc, ma = (4, x, -y, az) if z >= 0 else (5, -x, -y, az)
    return face, f32(f32(f32(sc / ma) + 1) / 2), f32(f32(f32(tc / ma) + 1) / 2)


def surface_access(memory: bytearray, row: int, slice_: int, layer_bytes: int, limits: tuple[int, int, int, int],
                   coords: list[int], size: int, mode: str) -> int | None:
    """The byte offset suld.b/sust.b touch (x in bytes, then y, z, layer), None when a .zero
    access falls outside, or raises IndexError for .trap."""
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
