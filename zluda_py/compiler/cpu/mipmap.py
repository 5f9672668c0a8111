"""Mipmapped textures on the CPU target: the level of detail of `tex`, `tex.level` and
`tex.grad`, the level(s) it selects and the blend between them; `txq` on a mipmapped texture.

A mipmapped texture object is registered with the texture runtime (cpu/texture.py) as a
`Mipmap`: its levels, each an ordinary `Image` sampled by texture.py, and the texture
descriptor's mipmap fields. The level of detail (LOD) is NVIDIA's, as recorded on an H100
(tests/hardware/golden/mipmap_probe.txt; docs/semantics.md, "Mipmap level selection"):
* `tex` and `tex.base` use LOD 0 without the bias, then the clamps, whatever the coordinates of
  neighbouring lanes (no implicit derivatives: mipmap_implicit_probe.txt); `tex.level` the given LOD;
* `tex.grad`: each gradient component is scaled by the level-0 extent of its axis (also with
  unnormalized coordinates) and truncated to 9 fractional mantissa bits; a vector's length is
  approximated as max + 11/32 mid + 1/4 min of its absolute components; the footprint's major
  axis is the longest of |dx|, |dy|, 11/16 |dx + dy| and 11/16 |dx - dy|, and the LOD its log2
  through a 256-entry table (8 fractional bits). With maxAnisotropy A > 1 (2-D footprints) the
  LOD is that of max(|det(dx, dy)| / major, major / A), and linear mip filtering sharpens the
  blend between the two levels. On a cubemap the vectors are the gradients of the face
  coordinates s and t (the programming guide's cubemap table) times the face size;
* `tex.level`'s LOD is cut to 1/256 toward zero; the texture's mipmapLevelBias is added and the
  sum cut to 1/256 toward -inf, then clamped to
  [minMipmapLevelClamp, maxMipmapLevelClamp] and to the levels the array has;
* mipmapFilterMode point takes the nearest level (ties up); linear blends the samples of the
  two levels around the LOD by its 8-bit fraction. Each level is sampled as texture.py samples
  an array of that level's size (coordinates scale to it when normalized; unnormalized
  coordinates address the level's own texels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zluda_py.compiler.cpu import texture
from zluda_py.compiler.miplod import (AXIS_WEIGHTS, DIAGONAL, GRADIENT_BITS, LOD_STEPS, LOG2_TABLE, anisotropy,
                                      blend_shape)

LOD_SLOT, DPDX_SLOT, DPDY_SLOT = 4, 4, 8  # argument slots of tex.level's LOD and tex.grad's gradients
LOG2_TABLE = np.array(LOG2_TABLE)


@dataclass(frozen=True)
class Mipmap:
    """A mipmapped texture: level 0 first, and the texture descriptor's mipmap fields."""

    levels: tuple[texture.Image, ...]
    linear: bool = False  # CU_TR_FILTER_MODE_LINEAR between levels
    bias: float = 0.0
    min_clamp: float = 0.0
    max_clamp: float = 0.0
    anisotropy: int = 0  # maxAnisotropy (0 and 1: isotropic)

    @property
    def format(self) -> int:
        return self.levels[0].format


def _f32(words: np.ndarray) -> np.ndarray:
    return words.astype(np.uint32).view(np.float32).astype(np.float64)


def _truncate(x: np.ndarray) -> np.ndarray:
    mantissa, exponent = np.frexp(np.abs(x))
    steps = 2.0 ** (GRADIENT_BITS + 1)
    return np.copysign(np.ldexp(np.floor(mantissa * steps) / steps, exponent), x)


def _gradients(mods: tuple[str, ...], mip: Mipmap, args: np.ndarray, slot: int) -> list[np.ndarray]:
    """The gradient in argument slots slot.. in level-0 texels, one array per axis (float64)."""
    geom = texture._geometry(mods)
    dims = texture.GEOMETRY[geom][0]
    grad = [_f32(args[slot + k]) for k in range(dims)]
    base = mip.levels[0]
    if geom in ("cube", "acube"):  # the gradient of the face coordinates s, t = (sc / ma + 1) / 2
        xs, _ = texture._spatial(mods, args, False)
        sc, tc, ma = _face_terms(xs, [x.astype(np.float64) for x in xs])
        dsc, dtc, dma = _face_terms(xs, grad)
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = [(dsc * ma - sc * dma) / (2 * ma * ma), (dtc * ma - tc * dma) / (2 * ma * ma)]
    # normalized or not, the hardware scales a gradient by the level-0 extent (measured)
    sizes = (base.width, max(base.height, 1), max(base.depth, 1))
    return [_truncate(g * sizes[k]) for k, g in enumerate(grad)]


def _face_terms(at: list[np.ndarray], v: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sc, tc, ma) of the programming guide's cubemap table for vector v, on the face the
    direction `at` selects (texture.cube_face's choice): linear in v, so also their gradients."""
    x, y, z = at
    vx, vy, vz = v
    ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
    on_z = (az >= ax) & (az >= ay)
    on_y = ~on_z & (ay >= ax)
    on_x = ~on_z & ~on_y
    sign = lambda c: np.where(c >= 0, 1.0, -1.0)  # noqa: E731
    sc = np.where(on_x, -sign(x) * vz, np.where(on_y, vx, sign(z) * vx))
    tc = np.where(on_x, -vy, np.where(on_y, sign(y) * vz, -vy))
    ma = np.where(on_x, sign(x) * vx, np.where(on_y, sign(y) * vy, sign(z) * vz))
    return sc, tc, ma


def _length(v: list[np.ndarray]) -> np.ndarray:
    longest_first = -np.sort(-np.abs(np.stack(v)), axis=0)
    return sum(w * c for w, c in zip(AXIS_WEIGHTS, longest_first))


def _log2(x: np.ndarray) -> np.ndarray:
    """log2 in 1/256 through LOG2_TABLE (x <= 0: -inf)."""
    with np.errstate(invalid="ignore"):
        mantissa, exponent = np.frexp(np.where(x > 0, x, 1.0))
    entry = LOG2_TABLE[np.clip(((2 * mantissa - 1) * 256).astype(np.int64), 0, 255)]
    return np.where(x > 0, exponent - 1 + entry / LOD_STEPS, -np.inf)


def _anisotropy(mip: Mipmap) -> int:
    return anisotropy(mip.anisotropy)


def _gradient_lod(mods: tuple[str, ...], mip: Mipmap, args: np.ndarray) -> np.ndarray:
    dx, dy = (_gradients(mods, mip, args, slot) for slot in (DPDX_SLOT, DPDY_SLOT))
    major = np.maximum.reduce([_length(dx), _length(dy), DIAGONAL * _length([a + b for a, b in zip(dx, dy)]),
                               DIAGONAL * _length([a - b for a, b in zip(dx, dy)])])
    if _anisotropy(mip) > 1 and len(dx) == 2:  # the minor axis, at least major / maxAnisotropy
        with np.errstate(divide="ignore", invalid="ignore"):
            minor = np.abs(dx[0] * dy[1] - dx[1] * dy[0]) / major
        major = np.maximum(np.nan_to_num(minor), major / _anisotropy(mip))
    return _log2(major)  # no footprint: -inf, clamped below


def level_of_detail(mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray) -> np.ndarray:
    """Each lane's LOD after bias and clamps: a multiple of 1/256 in [0, levels - 1] (float64)."""
    if "level" in mods:  # cut to 8 fractional bits toward zero before the bias (mipmap_clamp_probe.txt)
        lod = np.trunc(_f32(args[LOD_SLOT]) * LOD_STEPS) / LOD_STEPS
    elif "grad" in mods:
        lod = _gradient_lod(mods, mip, args)
    else:  # LOD 0 without the bias, whatever the lanes' coordinates (mipmap_implicit_probe.txt)
        lod = np.full(args.shape[1], -mip.bias)
    with np.errstate(invalid="ignore"):
        lod = np.floor((lod + mip.bias) * LOD_STEPS) / LOD_STEPS
    lod = np.clip(lod, mip.min_clamp, mip.max_clamp)
    return np.clip(np.nan_to_num(lod, nan=0.0), 0.0, len(mip.levels) - 1)


def blend_weight(fraction: np.ndarray, anisotropy: int) -> np.ndarray:
    """The upper level's weight in linear mip filtering, from the LOD's fraction (with
    anisotropy the blend narrows around the middle: miplod.blend_shape)."""
    if anisotropy <= 1:
        return fraction
    slope, start = blend_shape(anisotropy)
    steps = np.floor((np.round(fraction * LOD_STEPS) - start) * slope)
    return np.clip(steps, 0, LOD_STEPS) / LOD_STEPS


def _sample_levels(opcode: str, mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray,
                   levels: np.ndarray) -> np.ndarray:
    """(lanes, 4) result words of each lane's fetch from its level."""
    out = np.zeros((args.shape[1], texture.RESULT_SLOTS), np.int64)
    for level in np.unique(levels):
        lanes = levels == level
        out[lanes] = texture._fetch(opcode, mods, mip.levels[int(level)], sampler, args[:, lanes])
    return out


def fetch(opcode: str, mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray) -> np.ndarray:
    """(lanes, 4) result words of tex (every LOD form) or tld4 (level 0) on a mipmapped texture."""
    if opcode == "tld4":
        return texture._fetch(opcode, mods, mip.levels[0], sampler, args)
    lod = level_of_detail(mods, mip, sampler, args)
    if not (mip.linear and texture.float_result(mip, sampler)):
        return _sample_levels(opcode, mods, mip, sampler, args, np.floor(lod + 0.5).astype(np.int64))
    low = np.floor(lod).astype(np.int64)
    high = np.minimum(low + 1, len(mip.levels) - 1)
    # the sharpened blend was measured for gradient LODs only
    weight = blend_weight(lod - low, _anisotropy(mip) if "grad" in mods else 0)[:, None]
    a = _f32(_sample_levels(opcode, mods, mip, sampler, args, low))
    b = _f32(_sample_levels(opcode, mods, mip, sampler, args, high))
    return ((1 - weight) * a + weight * b).astype(np.float32).view(np.uint32).astype(np.int64)


def answer(opcode: str, mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray,
           results: np.ndarray, lanes: np.ndarray) -> None:
    """texture.run's work for the lanes that name a mipmapped texture."""
    if opcode == "txq":
        if mods[-2] == "num_mipmap_levels":
            results[0, lanes] = len(mip.levels)
        else:  # sizes (of level 0, or of the queried level: texture.py halves them), sampler state
            results[0, lanes] = texture._query(mods, mip.levels[0], sampler, args[LOD_SLOT])
    else:
        results[:, lanes] = fetch(opcode, mods, mip, sampler, args).T
