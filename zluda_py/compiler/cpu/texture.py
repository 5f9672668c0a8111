"""Texture and surface objects on the CPU target: what `tex`, `tld4`, `txq`, `suld`, `sust`,
`sured` and `suq` do, run on the host for one warp at a time (`istypep` reads no object: false,
cpu/texops.py).

The driver registers each CUtexObject/CUsurfObject here (`register`); its handle is what kernels
receive. Generated code (cpu/texops.py) fills a request record with the lanes' handles and
operands and calls `zluda_host(HOST_TEXTURE, ctx, request, mask, form)`; `run` answers it by
filling the results, or returns the CUresult that stops the launch.

Sampling follows the CUDA programming guide's texture-fetching appendix, with the fixed-point
details measured on an NVIDIA H200 (docs/semantics.md): normalized coordinates are truncated
to COORD_BITS fractional bits and scaled by the size; point sampling takes texel floor(x);
linear filtering holds x - 0.5 with 8 fractional bits (lower texel and weight; with clamp
addressing the coordinate is first clamped to the edge texels' centres), rounds the corner
weights' products to 1/256 and blends the 2, 4 or 8 neighbouring texels. Address modes
act on texel indices (wrap and mirror need normalized coordinates; otherwise they clamp),
border texels read the border colour.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from zluda_py.compiler import srgb
from zluda_py.compiler.cpu import mipmap
from zluda_py.compiler.errors import CUDA_ERROR_ILLEGAL_ADDRESS

WARP = 32
ARG_SLOTS = 12  # per lane: 4 coordinates, then data (sust), the level (tex.level, txq.level) or dPdx, dPdy (tex.grad)
RESULT_SLOTS = 4
REQUEST_WORDS = WARP * (1 + ARG_SLOTS + RESULT_SLOTS)  # i64 words: handles, arguments, results

WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3  # CUaddress_mode
SRGB_TO_LINEAR = np.array(srgb.TO_LINEAR)
# CUarray_format -> numpy element type; 8/16-bit integers read as normalized floats unless
# the texture reads integers (32-bit integers always do)
FORMATS = {0x01: np.uint8, 0x02: np.uint16, 0x03: np.uint32, 0x08: np.int8, 0x09: np.int16, 0x0A: np.int32,
           0x10: np.float16, 0x20: np.float32}


@dataclass(frozen=True)
class Image:
    """Texels in memory: a CUDA array, pitch-linear or linear memory. Sizes as CUDA's
    descriptors give them (0: the dimension is unused); `layers` 2-D slices of a layered
    array or cubemap (6 per cube) follow each other."""

    base: int
    format: int
    channels: int
    width: int
    height: int = 0
    depth: int = 0
    layers: int = 0
    pitch: int = 0  # bytes between rows; 0: packed
    cubemap: bool = False
    linear_memory: bool = False  # tex1Dfetch of linear memory: out-of-range reads 0

    @property
    def element(self) -> int:
        return np.dtype(FORMATS[self.format]).itemsize * self.channels

    @property
    def row(self) -> int:
        return self.pitch or self.width * self.element

    @property
    def slice(self) -> int:
        return self.row * max(self.height, 1)

    @property
    def layer_stride(self) -> int:
        return self.slice * max(self.depth, 1)

    @property
    def size(self) -> int:
        return self.layer_stride * max(self.layers, 1)


@dataclass(frozen=True)
class Sampler:
    """A texture's sampling state (CUDA_TEXTURE_DESC)."""

    address: tuple[int, int, int] = (CLAMP, CLAMP, CLAMP)
    linear: bool = False
    normalized: bool = False
    read_integer: bool = False  # CU_TRSF_READ_AS_INTEGER
    srgb: bool = False
    border: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


_objects: dict[int, tuple[Image, Sampler | None]] = {}
_lock = threading.Lock()
_next = [1]


def register(image: Image, sampler: Sampler | None) -> int:
    """A new handle: a texture object with a sampler, a surface object without. Handles are
    never reused, so a destroyed object's handle faults instead of reading another's texels."""
    with _lock:
        handle = _next[0]
        _next[0] += 1
        _objects[handle] = (image, sampler)
    return handle


def release(handle: int) -> None:
    with _lock:
        del _objects[handle]


def lookup(handle: int) -> tuple[Image, Sampler | None] | None:
    return _objects.get(handle)


# ---------------------------------------------------------------- texel access
def _texel_view(image: Image) -> np.ndarray:
    dtype = FORMATS[image.format]
    count = image.size // np.dtype(dtype).itemsize
    return np.ctypeslib.as_array((ctypes.c_byte * image.size).from_address(image.base)).view(dtype)[:count]


def float_result(image: Image, sampler: Sampler) -> bool:
    """Whether fetches return floats (float formats, and 8/16-bit integers read normalized)."""
    kind = np.dtype(FORMATS[image.format]).kind
    return kind == "f" or (not sampler.read_integer and np.dtype(FORMATS[image.format]).itemsize < 4)


def _address(i: np.ndarray, n: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """(index in [0, n), inside) for texel indices i under an address mode."""
    n = max(n, 1)
    if mode == WRAP:
        return i % n, np.ones(i.shape, bool)
    if mode == MIRROR:
        m = i % (2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m), np.ones(i.shape, bool)
    inside = (i >= 0) & (i < n)
    return np.clip(i, 0, n - 1), inside if mode == BORDER else np.ones(i.shape, bool)


def _texels(image: Image, sampler: Sampler, idx: list[np.ndarray], layer: np.ndarray, modes: list[int]) -> np.ndarray:
    """(lanes, 4) channel values of the texels at integer indices `idx` (x[, y[, z]]) of `layer`:
    float64 for float results, int64 for integer ones; absent channels 0, alpha 1."""
    sizes = (image.width, image.height, image.depth)
    offset = layer.astype(np.int64) * image.layer_stride
    inside = np.ones(layer.shape, bool)
    for axis, (i, mode) in enumerate(zip(idx, modes)):
        j, ok = _address(i, sizes[axis], mode)
        inside &= ok
        offset = offset + j * (image.element, image.row, image.slice)[axis]
    view = _texel_view(image)
    item = view.itemsize
    raw = np.stack([view[(offset + c * item) // item] for c in range(image.channels)], axis=1)
    is_float = float_result(image, sampler)
    if is_float and raw.dtype.kind in "iu":
        top = float(np.iinfo(raw.dtype).max)
        values = np.maximum(raw.astype(np.float64) / top, -1.0)
        if sampler.srgb and raw.dtype == np.uint8:  # compiler/srgb.py: before filtering, alpha as is
            values[:, :srgb.CHANNELS] = SRGB_TO_LINEAR[raw[:, :srgb.CHANNELS]]
    else:
        values = raw.astype(np.float64 if is_float else np.int64)
    out = np.zeros((len(layer), 4), values.dtype)
    out[:, 3] = 1
    out[:, :image.channels] = values[:, :4]
    if not inside.all():
        border = np.array(sampler.border, np.float64).astype(out.dtype)
        out[~inside] = border
    return out


# Measured on NVIDIA H200 (tests/hardware/golden/texture_probe.txt): a normalized coordinate is
# truncated (toward -inf) to fixed point before it is scaled by the size, so 0.2f * 5 reads
# texel 0; the probe fits 19 to 24 fractional bits, 24 keeps 8 weight bits on 2^16 texels.
COORD_BITS = 24
WEIGHT_ONE = 256  # filtering weights are integers in units of 1/256


def _round(v: np.ndarray) -> np.ndarray:
    return np.floor(v + 0.5).astype(np.int64)  # to nearest, ties up


def _texel_space(image: Image, xs: list[np.ndarray], normalized: bool) -> list[np.ndarray]:
    """Coordinates in texel units (float64, exact)."""
    if not normalized:
        return [x.astype(np.float64) for x in xs]
    sizes = (image.width, max(image.height, 1), image.depth)
    scale = float(1 << COORD_BITS)
    return [np.floor(x.astype(np.float64) * scale) / scale * sizes[axis] for axis, x in enumerate(xs)]


def _footprint(image: Image, xs: list[np.ndarray], normalized: bool,
               clamp: list[bool] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per axis the lower texel of linear filtering and the upper one's weight (of WEIGHT_ONE):
    x - 0.5 held with 8 fractional bits, so a weight that rounds up to 1 moves the footprint
    (tld4's too) up a texel. Axes marked in `clamp` first clamp the coordinate to the centres
    of the edge texels, [0.5, n - 0.5] (measured on NVIDIA H200 for filtering with clamp
    addressing: an axis outside gets weight 0 rather than two copies of the edge texel, which
    changes the rounding of 3-D weights; tld4 keeps the unclamped footprint)."""
    sizes = (image.width, max(image.height, 1), max(image.depth, 1))
    out = []
    for axis, u in enumerate(_texel_space(image, xs, normalized)):
        if clamp is not None and clamp[axis]:
            u = np.clip(u, 0.5, sizes[axis] - 0.5)
        fixed = _round((u - 0.5) * WEIGHT_ONE)
        out.append((fixed // WEIGHT_ONE, fixed % WEIGHT_ONE))
    return out


def _corner_weights(alphas: list[np.ndarray]) -> dict[int, np.ndarray]:
    """Footprint corner (bit k: the upper texel on axis k) -> weight in 1/256, measured on NVIDIA
    H200 (golden/texture_probe.txt, whose `tri.parity` lines read each corner's weight off
    directly): the z weights split 1 exactly into two slices; in each slice the x split of the
    slice's weight is rounded (ties up, as every rounding here), then the upper-x row's upper-y
    corner and the lower-x row's lower-y corner are rounded products of their row's weight and
    the y weight, the other two corners differences. So z's weights sum exactly, x's and y's
    may miss by a few 1/256. With one slice of weight 1 this is the 2-D rule: the product
    alpha * beta rounded once, the others differences."""
    if len(alphas) == 1:
        return {0: WEIGHT_ONE - alphas[0], 1: alphas[0]}
    a, b = alphas[0], alphas[1]
    slices = [(0, np.full_like(a, WEIGHT_ONE))] if len(alphas) == 2 else [(0, WEIGHT_ONE - alphas[2]), (4, alphas[2])]
    weights = {}
    for z, s in slices:
        upper_x = _round(s * a / WEIGHT_ONE)
        lower_x = s - upper_x
        weights[z | 3] = _round(upper_x * b / WEIGHT_ONE)
        weights[z | 1] = upper_x - weights[z | 3]
        weights[z] = _round(lower_x * (WEIGHT_ONE - b) / WEIGHT_ONE)
        weights[z | 2] = lower_x - weights[z]
    return weights


def _modes(sampler: Sampler, normalized: bool, image: Image) -> list[int]:
    if image.linear_memory:
        return [BORDER] * 3
    if normalized:
        return list(sampler.address)
    return [m if m in (CLAMP, BORDER) else CLAMP for m in sampler.address]  # wrap/mirror need normalized coordinates


def sample(image: Image, sampler: Sampler, xs: list[np.ndarray], layer: np.ndarray, integer_coords: bool,
           normalized: bool | None = None, modes: list[int] | None = None) -> np.ndarray:
    """(lanes, 4) fetched values at coordinates xs (float32 arrays, or int64 with integer_coords)."""
    normalized = sampler.normalized if normalized is None else normalized
    modes = _modes(sampler, normalized, image) if modes is None else modes
    if integer_coords:
        return _texels(image, sampler, [x.astype(np.int64) for x in xs], layer, modes)
    if not (sampler.linear and float_result(image, sampler)):
        idx = [np.floor(u).astype(np.int64) for u in _texel_space(image, xs, normalized)]
        return _texels(image, sampler, idx, layer, modes)
    if image.height == 0 and not image.linear_memory:
        xs = [xs[0], np.zeros_like(xs[0])]  # measured on NVIDIA H200: 1-D filters as 2-D at y = 0, half border
    # measured on NVIDIA H200: 8-bit unorm texels blend as 16-bit unorm (t / 255 = 257 t / 65535),
    # the result rounded to that grid; blending the integers keeps its ties exact
    unorm8 = FORMATS[image.format] == np.uint8
    lows = _footprint(image, xs, normalized, [m == CLAMP for m in modes])
    corners = []
    for corner, weight in _corner_weights([alpha for _, alpha in lows]).items():
        idx = [i + (corner >> axis & 1) for axis, (i, _) in enumerate(lows)]
        values = _texels(image, sampler, idx, layer, modes)
        corners.append((weight[:, None], np.round(values * 65535) if unorm8 else values))
    if FORMATS[image.format] == np.float16:
        return _half_blend(corners)
    total = sum(weight * values for weight, values in corners)
    return _round(total / WEIGHT_ONE) / 65535 if unorm8 else total / WEIGHT_ONE


HALF_ALIGN_BITS = 14


def _half_blend(corners: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Half texels through the filter, measured on NVIDIA H200 (golden/texture_probe.txt, the
    `half.` lines): the texels of nonzero weight are aligned to the largest one's exponent E,
    truncated toward 0 to multiples of 2^(E - 14), blended exactly, and the result is a half:
    rounded to nearest, ties away from zero."""
    def exponent(v: np.ndarray) -> np.ndarray:
        return np.where(v != 0, np.frexp(v)[1] - 1, -1000)

    top = np.full(corners[0][1].shape, -1000)
    for weight, values in corners:
        top = np.maximum(top, np.where(weight != 0, exponent(values), -1000))
    quantum = np.ldexp(1.0, top - HALF_ALIGN_BITS)
    total = sum(weight * np.trunc(values / quantum) * quantum for weight, values in corners) / WEIGHT_ONE
    ulp = np.ldexp(1.0, np.maximum(exponent(total) - 10, -24))
    return np.sign(total) * np.floor(np.abs(total) / ulp + 0.5) * ulp


def gather(image: Image, sampler: Sampler, xs: list[np.ndarray], layer: np.ndarray, comp: int,
           normalized: bool | None = None, modes: list[int] | None = None) -> np.ndarray:
    """tld4: channel `comp` of the four texels bilinear filtering would blend, in the order
    (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
    normalized = sampler.normalized if normalized is None else normalized
    modes = _modes(sampler, normalized, image) if modes is None else modes
    (i, _), (j, _) = _footprint(image, xs, normalized)
    corners = ((0, 1), (1, 1), (1, 0), (0, 0))
    return np.stack([_texels(image, sampler, [i + dx, j + dy], layer, modes)[:, comp] for dx, dy in corners], axis=1)


def cube_face(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(face, s, t): the face of the major axis and normalized coordinates on it (the guide's
    cubemap table); on ties z wins over y, y over x (measured on NVIDIA H200)."""
    ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
    on_z = (az >= ax) & (az >= ay)
    on_y = ~on_z & (ay >= ax)
    on_x = ~on_z & ~on_y
    face = np.where(on_x, np.where(x >= 0, 0, 1), np.where(on_y, np.where(y >= 0, 2, 3), np.where(z >= 0, 4, 5)))
    sc = np.where(on_x, np.where(x >= 0, -z, z), np.where(on_y, x, np.where(z >= 0, x, -x)))
    tc = np.where(on_x, -y, np.where(on_y, np.where(y >= 0, z, -z), -y))
    ma = np.where(on_x, ax, np.where(on_y, ay, az))
    s = ((sc / ma + np.float32(1)) / np.float32(2)).astype(np.float32)
    t = ((tc / ma + np.float32(1)) / np.float32(2)).astype(np.float32)
    return face.astype(np.int64), s, t


# ---------------------------------------------------------------- the host call
GEOMETRY = {  # geometry -> (spatial dimensions, coordinate vector: index of the layer or None)
    "1d": (1, None), "2d": (2, None), "3d": (3, None), "a1d": (1, 0), "a2d": (2, 0), "cube": (3, None),
    "acube": (3, 0), "2dms": (2, None), "a2dms": (2, 0),
}


@lru_cache(maxsize=None)
def _form(text: bytes) -> tuple[str, tuple[str, ...]]:
    opcode, *mods = text.decode().split(".")
    return opcode, tuple(mods)


def _geometry(mods: tuple[str, ...]) -> str:
    return next(m for m in mods if m in GEOMETRY)


def _spatial(mods: tuple[str, ...], args: np.ndarray, integer_coords: bool) -> tuple[list[np.ndarray], np.ndarray]:
    """(coordinate arrays, layer index) of a tex/tld4/suld/sust request."""
    geom = _geometry(mods)
    dims, layer_at = GEOMETRY[geom]
    # multisample: the sample number follows the layer (the manual's example {idx, sample, x, y});
    # the driver's textures hold one sample, which every sample number reads
    first = (0 if layer_at is None else 1) + geom.endswith("ms")
    layer = args[0].astype(np.int64) if layer_at is not None else np.zeros(args.shape[1], np.int64)
    words = args[first:first + dims].astype(np.uint32)
    xs = [w.view(np.int32).astype(np.int64) if integer_coords else w.view(np.float32) for w in words]
    return xs, layer


def _fetch(opcode: str, mods: tuple[str, ...], image: Image, sampler: Sampler, args: np.ndarray) -> np.ndarray:
    integer_coords = opcode == "tex" and mods[-1] == "s32"
    xs, layer = _spatial(mods, args, integer_coords)
    layers = max(image.layers // 6 if image.cubemap else image.layers, 1)
    layer = np.clip(layer, 0, layers - 1)
    normalized, modes = None, None
    if image.cubemap:  # a face of the cube, always addressed with normalized, clamped coordinates
        face, s, t = cube_face(*xs)
        xs, layer, normalized, modes = [s, t], layer * 6 + face, True, [CLAMP] * 3
    if opcode == "tld4":
        values = gather(image, sampler, xs, layer, "rgba".index(mods[0]), normalized, modes)
    else:
        values = sample(image, sampler, xs, layer, integer_coords, normalized, modes)
    if float_result(image, sampler):
        return values.astype(np.float32).view(np.uint32).astype(np.int64)
    return values.astype(np.int32).view(np.uint32).astype(np.int64)


def half_words(words: np.ndarray, is_float: bool, dtype: str) -> np.ndarray:
    """(lanes, 4) tex results for a .f16 or .f16x2 destination from the f32 or 32-bit integer
    words: floats rounded to nearest even, integers' low 16 bits; .f16x2 packs two channels a
    word, the first in the low half (the manual gives no order)."""
    low = words.astype(np.uint32)
    halves = (low.view(np.float32).astype(np.float16).view(np.uint16) if is_float else low.astype(np.uint16)).astype(np.int64)
    if dtype == "f16":
        return halves
    out = np.zeros_like(halves)
    out[:, :2] = halves[:, 0::2] | halves[:, 1::2] << 16
    return out


# txq/suq .channel_order and .channel_data_type: the PTX manual's table of these fields (the
# OpenCL enumeration, CL_R... and CL_SNORM_INT8...). Per format (normalized or float, integer):
# a texture reads 8/16-bit integers as one or the other, a surface as integers.
CHANNEL_ORDER = {1: 0x10B0, 2: 0x10B2, 4: 0x10B5}  # CL_R, CL_RG, CL_RGBA
CHANNEL_TYPE = {0x01: (0x10D2, 0x10DA), 0x02: (0x10D3, 0x10DB), 0x03: (0x10DC, 0x10DC), 0x08: (0x10D0, 0x10D7),
                0x09: (0x10D1, 0x10D8), 0x0A: (0x10D9, 0x10D9), 0x10: (0x10DD, 0x10DD), 0x20: (0x10DE, 0x10DE)}


def _query(mods: tuple[str, ...], image: Image, sampler: Sampler | None, lod: np.ndarray) -> np.ndarray:
    what = mods[-2]
    layers = image.layers // 6 if image.cubemap else image.layers
    sizes = {"width": image.width, "height": image.height, "depth": image.depth}
    if what in sizes:
        if mods[0] != "level":
            return np.full(lod.shape, sizes[what])
        return np.maximum(sizes[what] >> np.clip(lod, 0, 63), min(sizes[what], 1))  # a level's size, at least 1
    value = {"array_size": layers, "num_mipmap_levels": 1, "normalized_coords": int(bool(sampler and sampler.normalized)),
             "filter_mode": int(bool(sampler and sampler.linear)), "num_samples": 1, "force_unnormalized_coords": 0,
             "memory_layout": int(image.linear_memory or image.pitch != 0), "channel_order": CHANNEL_ORDER[image.channels],
             "channel_data_type": CHANNEL_TYPE[image.format][sampler is None or not float_result(image, sampler)]}.get(what)
    if value is None:
        value = sampler.address[int(what[-1])] if sampler else 0  # addr_mode_0/1/2
    return np.full(lod.shape, value)


SURED_OPS = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or}


def _surface(opcode: str, mods: tuple[str, ...], image: Image, args: np.ndarray, results: np.ndarray,
             lanes: np.ndarray) -> int:
    """suld.b, sust.b/.p and sured.b/.p for `lanes`: x in bytes (.b) or texels (.p), element y
    and z, with the boundary mode."""
    xs, layer = _spatial(mods, args, True)
    formatted = mods[0] == "p"
    bits = int(next(m for m in mods if m[0] in "bsu" and m[1:].isdigit())[1:])
    count = int(next((m[1:] for m in mods if m in ("v2", "v4")), 1))
    size = image.element if formatted and opcode == "sust" else bits // 8 * count
    if formatted:  # the texel's first bytes: the access is whole inside when the texel is
        xs[0] = xs[0] * image.element
    limits = [image.width * image.element - (max(image.element, size) if formatted else size) + 1, max(image.height, 1),
              max(image.depth, 1)]  # x: whole access inside
    inside = (layer >= 0) & (layer < max(image.layers, 1))
    for axis, x in enumerate(xs):
        inside &= (x >= 0) & (x < limits[axis])
    mode = mods[-1]
    if mode == "trap" and not inside.all():
        return CUDA_ERROR_ILLEGAL_ADDRESS  # what the H200 reports
    xs = [np.clip(x, 0, max(limits[axis] - 1, 0)) for axis, x in enumerate(xs)]
    layer = np.clip(layer, 0, max(image.layers - 1, 0))
    offset = layer * image.layer_stride
    for axis, x in enumerate(xs):
        offset = offset + x * (1, image.row, image.slice)[axis]
    memory = np.ctypeslib.as_array((ctypes.c_uint8 * image.size).from_address(image.base))
    keep = inside if mode == "zero" else np.ones(inside.shape, bool)
    at = offset[:, None] + np.arange(size)
    if opcode == "sured":
        _reduce(mods, image, memory, offset[keep], args[4, keep], bits)
    elif opcode == "suld":
        data = memory[at].copy().view(f"<u{bits // 8}").astype(np.uint64).astype(np.int64)  # (lanes, count)
        data[~keep] = 0
        results[:count, lanes] = data.T
    else:
        words = args[4:4 + count].T.astype(np.uint64)  # (lanes, count)
        data = _format(image, words, memory[at]) if formatted else words.astype(f"<u{bits // 8}")
        memory[at[keep]] = np.ascontiguousarray(data[keep]).view(np.uint8).reshape(-1, size)
    return 0


def _format(image: Image, words: np.ndarray, texels: np.ndarray) -> np.ndarray:
    """sust.p: the (lanes, element bytes) texels with the source words stored in their first
    channels, R, G, B, A in order (the manual: f32 data for float formats, u32/s32 for unsigned
    and signed integer ones, converted to the format: floats rounded to nearest even, integers
    saturated as OpenCL's write_image does; the manual leaves both open). Words past the
    texel's channels are ignored; channels past the words keep their value (the manual: they
    become unpredictable)."""
    dtype = np.dtype(FORMATS[image.format])
    out = np.ascontiguousarray(texels).view(dtype).copy()  # (lanes, channels)
    low = words.astype(np.uint32)
    for c in range(min(words.shape[1], image.channels)):
        if dtype.kind == "f":
            with np.errstate(over="ignore"):  # past the half range: infinity
                out[:, c] = low[:, c].view(np.float32).astype(dtype)
        else:
            wide = low[:, c].view(np.int32 if dtype.kind == "i" else np.uint32).astype(np.int64)
            out[:, c] = np.clip(wide, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)
    return out.view(np.uint8)


def _reduce(mods: tuple[str, ...], image: Image, memory: np.ndarray, offset: np.ndarray, data: np.ndarray,
            bits: int) -> None:
    """sured: the reduction of each lane's operand into the value at its byte offset, lanes in
    order, atomic with other warps' reductions. .b takes the instruction's type, .p an unsigned
    or signed integer as the surface format is (the manual); an offset that is not a multiple
    of the access size drops its low bits (one of the manual's outcomes for misalignment)."""
    kind = mods[-2][0]
    if mods[0] == "p":
        kind = "s" if np.dtype(FORMATS[image.format]).kind == "i" else "u"
    dtype = np.dtype(f"<{'i' if kind == 's' else 'u'}{bits // 8}")
    values = data.astype(np.uint64).astype(f"<u{bits // 8}").view(dtype)
    cells = memory[:image.size - image.size % dtype.itemsize].view(dtype)
    with _lock:
        SURED_OPS[mods[1]].at(cells, offset // dtype.itemsize, values)


def run(form: bytes, request: int, mask: int) -> int:
    """Answer one warp's request (see the module docstring): 0, or the CUresult of a fault."""
    words = np.ctypeslib.as_array((ctypes.c_int64 * REQUEST_WORDS).from_address(request)).reshape(-1, WARP)
    handles, args, results = words[0], words[1:1 + ARG_SLOTS], words[1 + ARG_SLOTS:]
    opcode, mods = _form(form)
    active = np.array([(mask >> lane) & 1 for lane in range(WARP)], bool)
    for handle in np.unique(handles[active]):
        lanes = np.nonzero(active & (handles == handle))[0]
        obj = _objects.get(int(handle))
        is_texture = opcode in ("tex", "tld4", "txq")
        if obj is None or (obj[1] is None) == is_texture:
            return CUDA_ERROR_ILLEGAL_ADDRESS  # not a live object of the kind the instruction reads
        image, sampler = obj
        if isinstance(image, mipmap.Mipmap):
            mipmap.answer(opcode, mods, image, sampler, args[:, lanes], results, lanes)
        elif opcode in ("txq", "suq"):
            results[0, lanes] = _query(mods, image, sampler, args[4, lanes])
        elif is_texture:
            results[:, lanes] = _fetch(opcode, mods, image, sampler, args[:, lanes]).T
        else:
            status = _surface(opcode, mods, image, args[:, lanes], results, lanes)
            if status:
                return status
        if opcode == "tex" and mods[-2] in ("f16", "f16x2"):
            results[:, lanes] = half_words(results[:, lanes].T, float_result(image, sampler), mods[-2]).T
    return 0
