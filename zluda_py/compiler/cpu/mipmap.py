"""Mipmapped textures on the CPU target: the level of detail of `tex`, `tex.level` and
`tex.grad`, the level(s) it selects and the blend between them; `txq` on a mipmapped texture.

A mipmapped texture object is registered with the texture runtime (cpu/texture.py) as a
`Mipmap`: its levels, each an ordinary `Image` sampled by texture.py, and the texture
descriptor's mipmap fields. The level of detail (LOD), from the CUDA driver API's texture
descriptor and the PTX manual's tex modifiers:
* `tex` and `tex.base` use LOD 0, `tex.level` the given LOD, `tex.grad` log2 of the longer of
  the two screen-axis gradients measured in level-0 texels (the usual isotropic rule: a
  normalized coordinate's gradient is scaled by the level-0 size; on a cubemap, the gradient
  of the face coordinates s and t of the programming guide's cubemap table, on the face the
  coordinate selects, times the face size);
* the texture's mipmapLevelBias is added, the result clamped to [minMipmapLevelClamp,
  maxMipmapLevelClamp], then to the levels the array has;
* mipmapFilterMode point takes the nearest level (ties up); linear blends the samples of the
  two levels around the LOD, weighted by its fraction. Each level is sampled as texture.py
  samples an array of that level's size (coordinates scale to it when normalized; unnormalized
  coordinates address the level's own texels).
The fixed-point precision of the LOD and of the blend weight on NVIDIA hardware is not measured
here; both are exact (f64) and the blend is rounded once to the result type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zluda_py.compiler.cpu import texture

LOD_SLOT, DPDX_SLOT, DPDY_SLOT = 4, 4, 8  # argument slots of tex.level's LOD and tex.grad's gradients


@dataclass(frozen=True)
class Mipmap:
    """A mipmapped texture: level 0 first, and the texture descriptor's mipmap fields."""

    levels: tuple[texture.Image, ...]
    linear: bool = False  # CU_TR_FILTER_MODE_LINEAR between levels
    bias: float = 0.0
    min_clamp: float = 0.0
    max_clamp: float = 0.0

    @property
    def format(self) -> int:
        return self.levels[0].format


def _f32(words: np.ndarray) -> np.ndarray:
    return words.astype(np.uint32).view(np.float32).astype(np.float64)


def _footprint(mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray,
               slot: int) -> np.ndarray:
    """Length in level-0 texels of the gradient in argument slots slot.. (float64 per lane)."""
    geom = texture._geometry(mods)
    dims = texture.GEOMETRY[geom][0]
    grad = [_f32(args[slot + k]) for k in range(dims)]
    base = mip.levels[0]
    if geom in ("cube", "acube"):  # the gradient of the face coordinates s, t = (sc / ma + 1) / 2
        xs, _ = texture._spatial(mods, args, False)
        sc, tc, ma = _face_terms(xs, [x.astype(np.float64) for x in xs])
        dsc, dtc, dma = _face_terms(xs, grad)
        with np.errstate(divide="ignore", invalid="ignore"):
            ds = (dsc * ma - sc * dma) / (2 * ma * ma)
            dt = (dtc * ma - tc * dma) / (2 * ma * ma)
        return np.hypot(ds, dt) * base.width
    sizes = (base.width, max(base.height, 1), max(base.depth, 1))
    return np.sqrt(sum((g * (sizes[k] if sampler.normalized else 1.0)) ** 2 for k, g in enumerate(grad)))


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


def level_of_detail(mods: tuple[str, ...], mip: Mipmap, sampler: texture.Sampler, args: np.ndarray) -> np.ndarray:
    """Each lane's LOD after bias and clamps, in [0, levels - 1] (float64)."""
    lanes = args.shape[1]
    if "level" in mods:
        lod = _f32(args[LOD_SLOT])
    elif "grad" in mods:
        dx, dy = (_footprint(mods, mip, sampler, args, slot) for slot in (DPDX_SLOT, DPDY_SLOT))
        with np.errstate(divide="ignore", invalid="ignore"):
            lod = np.log2(np.maximum(dx, dy))  # no footprint: -inf, clamped below
    else:
        lod = np.zeros(lanes)
    lod = np.clip(lod + mip.bias, mip.min_clamp, mip.max_clamp)
    return np.clip(np.nan_to_num(lod, nan=0.0), 0.0, len(mip.levels) - 1)


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
    weight = (lod - low)[:, None]
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
