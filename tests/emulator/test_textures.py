"""Texture fetches of the AMDGPU target (software sampling from the descriptor block,
compiler/texdesc.py) against the CPU target, bit for bit, on the emulated gfx1100 and gfx950.

The CPU target's sampling model (cpu/texture.py) is the reference: it follows the programming
guide's texture-fetching rules with the fixed-point details measured on an NVIDIA H200, and the
conformance family (tests/conformance/targets/texture.py) checks it against an independent model.
Here every format the driver stores (8/16/32-bit integers read as integers or as normalized
floats, half and single floats; 1, 2 and 4 channels), every address mode, point and linear
filtering, normalized coordinates, border colours and out-of-range layers go through the same
kernels on both targets; the lanes' coordinates reach past the edges on every axis. Mipmapped
textures (their descriptors one block per level) go through tex, tex.level and tex.grad the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

from zluda_py.compiler import UnsupportedError, compile as compile_cpu, texdesc  # noqa: E402
from zluda_py.compiler.cpu import texture as cpu_textures  # noqa: E402
from zluda_py.emulator.module import EmulatedModule  # noqa: E402

ARCHS = ["gfx1100", "gfx950"]
LANES = 64  # two CUDA warps: on gfx950 one wave
GEOMS = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True),
         "cube": (3, False), "acube": (3, True)}  # a cube's coordinates: a direction
# CUarray_format -> numpy type of the texels
FORMATS = {0x01: np.uint8, 0x02: np.uint16, 0x03: np.uint32, 0x08: np.int8, 0x09: np.int16, 0x0A: np.int32,
           0x10: np.float16, 0x20: np.float32}


pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


def _kernel(name: str, geom: str, ctype: str) -> str:
    """Each thread: coordinate words from inp[tid * 4 ..], the fetch, its 4 words to out[tid * 4 ..]."""
    dims, layered = GEOMS[geom]
    count = {1: 1, 2: 2, 3: 4, 4: 4}[dims + layered]
    regs = ["%r1", "%r2", "%r3", "%r4"] if ctype == "s32" else ["%f1", "%f2", "%f3", "%f4"]
    if layered:
        regs[0] = "%r1"
    coords = "{" + ", ".join(regs[:count]) + "}"
    return f""".visible .entry {name}(.param .u64 obj, .param .u64 inp, .param .u64 outp)
{{
  .reg .b32 %r<9>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [obj];
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd4, %r0, 16;
  add.u64 %rd5, %rd2, %rd4;
  add.u64 %rd6, %rd3, %rd4;
  ld.global.v4.b32 {{%r1, %r2, %r3, %r4}}, [%rd5];
  mov.b32 %f1, %r1;
  mov.b32 %f2, %r2;
  mov.b32 %f3, %r3;
  mov.b32 %f4, %r4;
  tex.{geom}.v4.f32.{ctype} {{%r5, %r6, %r7, %r8}}, [%rd1, {coords}];
  st.global.v4.b32 [%rd6], {{%r5, %r6, %r7, %r8}};
  ret;
}}
"""


PTX = ".version 7.8\n.target sm_80\n.address_size 64\n" + "\n".join(
    _kernel(f"tex_{geom}_{ctype}", geom, ctype) for geom in GEOMS for ctype in ("f32", "s32")
    if not (geom.endswith("cube") and ctype == "s32"))


@pytest.fixture(scope="module")
def modules() -> dict:
    return {"cpu": compile_cpu(PTX), **{arch: EmulatedModule.from_ptx(PTX, arch) for arch in ARCHS}}


def _image(rng: np.random.Generator, geom: str, fmt: int, channels: int) -> tuple[np.ndarray, cpu_textures.Image]:
    dims, layered = GEOMS[geom]
    w, h, d, layers = 5, (4 if dims > 1 else 0), (3 if dims > 2 else 0), (3 if layered else 0)
    cube = geom in ("cube", "acube")
    if cube:  # square faces, 6 a cube
        w, h, d, layers = 4, 4, 0, 12 if layered else 6
    shape = (max(layers, 1), max(d, 1), max(h, 1), w, channels)
    dtype = np.dtype(FORMATS[fmt])
    if dtype.kind == "f":
        data = (rng.integers(-400, 400, shape) / 16.0).astype(dtype)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(dtype)
        data.flat[:2] = (info.min, info.max)  # the normalized reads' corners: -1 (clamped) and 1
    return data, cpu_textures.Image(data.ctypes.data, fmt, channels, w, h, d, layers, cubemap=cube)


def _coords(rng: np.random.Generator, geom: str, image: cpu_textures.Image, normalized: bool, integer: bool) -> np.ndarray:
    """Per lane 4 words: [layer,] x[, y[, z]], past every edge; a few texel centres and edges."""
    dims, layered = GEOMS[geom]
    words = np.zeros((LANES, 4), np.uint32)
    if layered:
        cubes = image.layers // 6 if image.cubemap else image.layers
        words[:, 0] = rng.integers(-1, cubes + 2, LANES).astype(np.int32).view(np.uint32)
    if image.cubemap:  # directions, a few on the faces' edges and corners (ties between axes)
        xyz = rng.uniform(-1.5, 1.5, (LANES, 3))
        xyz[:8] = [[1, 1, 1], [-1, 1, 0.5], [0.5, -1, -1], [-2, 0, 0], [0, -0.25, 0.25], [0, 0, -3], [1, -1, 0], [0, 0, 0]]
        words[:, layered:layered + 3] = xyz.astype(np.float32).view(np.uint32)
        return words
    for axis, n in enumerate((image.width, image.height, image.depth)[:dims]):
        if integer:
            words[:, layered + axis] = rng.integers(-3, n + 3, LANES).astype(np.int32).view(np.uint32)
            continue
        span = 1.0 if normalized else float(n)
        values = rng.uniform(-0.6 * span, 1.6 * span, LANES)
        values[:8] = np.array([0, 0.5, 1, n - 0.5, n, -0.5, 2.25, n + 0.75]) / (n if normalized else 1)
        words[:, layered + axis] = values.astype(np.float32).view(np.uint32)
    return words


def _fetch(module, kernel: str, handle: int, coords: np.ndarray, keep: list[np.ndarray]) -> np.ndarray:
    out = np.full((LANES, 4), 0xDEADBEEF, np.uint32)
    if isinstance(module, EmulatedModule):  # the descriptor and the texels are device memory
        for block in keep:
            module.memory.add(block.ctypes.data & ~3, (block.nbytes + 3) & ~3)
    try:
        module.launch(kernel, 1, LANES, [np.uint64(handle), coords, out])
    finally:
        if isinstance(module, EmulatedModule):
            for block in keep:
                module.memory.remove(block.ctypes.data & ~3)
    return out


CASES = [(geom, fmt, channels, read_integer)
         for geom in GEOMS for fmt in FORMATS for channels in (1, 2, 4) for read_integer in (False, True)
         if not (read_integer and np.dtype(FORMATS[fmt]).kind == "f")]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("geom", list(GEOMS))
def test_fetches_match_the_cpu_target(modules: dict, arch: str, geom: str) -> None:
    """Every format, channel count and read mode of one geometry; for each texture a sampler of
    each address mode, filter, normalization and coordinate type (linear filtering where
    fetches return floats)."""
    rng = np.random.default_rng(sum(map(ord, geom)))
    failures = []
    checked = 0
    for g, fmt, channels, read_integer in CASES:
        if g != geom:
            continue
        data, image = _image(rng, geom, fmt, channels)
        floats = texdesc.float_result(fmt, read_integer)
        for k, mode in enumerate((texdesc.WRAP, texdesc.CLAMP, texdesc.MIRROR, texdesc.BORDER_MODE)):
            linear = floats and k % 2 == 0
            normalized = k != 1
            sampler = cpu_textures.Sampler((mode, (mode + k) % 4, (mode + 2) % 4), linear, normalized, read_integer,
                                           border=(0.25, -0.5, 1.0, 2.0) if floats else (7.0, -3.0, 2.0, 100000.0))
            for ctype in ("f32",) if image.cubemap else ("f32", "s32"):
                checked += 1
                bad = _compare(modules, arch, geom, ctype, rng, data, image, sampler)
                if bad:
                    failures.append(f"format {fmt:#x} x{channels} integer={read_integer} mode {mode} linear={linear} "
                                    f"normalized={normalized} {ctype}: {bad}")
    assert checked > 40
    assert not failures, "\n".join(failures[:20])


def _compare(modules: dict, arch: str, geom: str, ctype: str, rng: np.random.Generator, data: np.ndarray,
             image: cpu_textures.Image, sampler: cpu_textures.Sampler) -> str:
    """One kernel's fetches at coordinates past every edge on the CPU target (the object
    registered there) and on `arch` (its descriptor block): the first differing lane, or ""."""
    desc = np.frombuffer(texdesc.pack(image, sampler), np.uint8).copy()
    coords = _coords(rng, geom, image, sampler.normalized, ctype == "s32")
    kernel = f"tex_{geom}_{ctype}"
    handle = cpu_textures.register(image, sampler)
    try:
        want = _fetch(modules["cpu"], kernel, handle, coords, [])
    finally:
        cpu_textures.release(handle)
    got = _fetch(modules[arch], kernel, desc.ctypes.data, coords, [desc, data])
    bad = np.nonzero((got != want).any(axis=1))[0]
    if not len(bad):
        return ""
    lane = bad[0]
    return f"{len(bad)} lanes, lane {lane} coords {coords[lane]} got {got[lane]} want {want[lane]}"


@pytest.mark.parametrize("form", ["tex.2d.v4.f32.f32 {%r5, %r6, %r7, %r8}, [%rd1, %rd1, {%f1, %f2}]"])
def test_forms_outside_the_slice_are_refused_by_name(form: str) -> None:
    ptx = (".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 obj)\n{\n"
           "  .reg .b16 %h<5>;\n  .reg .b32 %r<9>;\n  .reg .f32 %f<5>;\n  .reg .b64 %rd<2>;\n  .reg .pred %p<2>;\n"
           f"  ld.param.u64 %rd1, [obj];\n  {form};\n  ret;\n}}\n")
    opcode = form.split()[0]
    with pytest.raises(UnsupportedError, match=rf"{opcode.replace('.', '[.]')}.*textures.*at <ptx>:12"):
        EmulatedModule.from_ptx(ptx, "gfx1100")


@pytest.mark.parametrize("arch", ARCHS)
def test_srgb_fetches_match_the_cpu_target(modules: dict, arch: str) -> None:
    """sRGB textures (compiler/srgb.py): 8-bit unorm red, green and blue converted before point
    and linear filtering, alpha as is; 8-bit integer reads and other formats unconverted; 2-D
    and 3-D (eight-corner) filtering, bit for bit against the CPU target."""
    rng = np.random.default_rng(15)
    failures, checked = [], 0
    for geom in ("2d", "3d"):
        for fmt, channels, read_integer in ((0x01, 1, False), (0x01, 2, False), (0x01, 4, False), (0x01, 4, True),
                                            (0x02, 4, False), (0x08, 2, False)):
            data, image = _image(rng, geom, fmt, channels)
            for linear in (False, True) if not read_integer else (False,):
                sampler = cpu_textures.Sampler((texdesc.CLAMP, texdesc.WRAP, texdesc.BORDER_MODE), linear, True,
                                               read_integer, srgb=True, border=(0.25, 0.5, 0.75, 0.125))
                checked += 1
                bad = _compare(modules, arch, geom, "f32", rng, data, image, sampler)
                if bad:
                    failures.append(f"{geom} format {fmt:#x} x{channels} integer={read_integer} linear={linear}: {bad}")
    assert checked == 22
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------- mipmapped textures
MIP_GEOMS = {"1d": 1, "2d": 2, "3d": 4, "a2d": 2, "cube": 4, "acube": 4}  # gradient vector length
MIP_FORMS = ("base", "level", "grad")


def _mip_kernel(name: str, geom: str, form: str) -> str:
    """Each thread: 16 words from inp[tid * 16 ..]: coordinates (words 0-3), the LOD (4),
    dPdx (8-11), dPdy (12-15); the fetch's 4 words to out[tid * 4 ..]."""
    dims, layered = GEOMS[geom]
    count = {1: 1, 2: 2, 3: 4, 4: 4}[dims + layered]
    regs = ["%f1", "%f2", "%f3", "%f4"]
    if layered:
        regs[0] = "%r1"
    grads = MIP_GEOMS[geom]
    vec = lambda first: "{" + ", ".join(f"%f{first + k}" for k in range(grads)) + "}"  # noqa: E731
    extra = {"base": "", "level": ", %f5", "grad": f", {vec(9)}, {vec(13)}"}[form]
    return f""".visible .entry {name}(.param .u64 obj, .param .u64 inp, .param .u64 outp)
{{
  .reg .b32 %r<9>;
  .reg .f32 %f<17>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [obj];
  ld.param.u64 %rd2, [inp];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd4, %r0, 64;
  add.u64 %rd5, %rd2, %rd4;
  mul.wide.u32 %rd4, %r0, 16;
  add.u64 %rd6, %rd3, %rd4;
  ld.global.v4.f32 {{%f1, %f2, %f3, %f4}}, [%rd5];
  ld.global.v4.f32 {{%f5, %f6, %f7, %f8}}, [%rd5+16];
  ld.global.v4.f32 {{%f9, %f10, %f11, %f12}}, [%rd5+32];
  ld.global.v4.f32 {{%f13, %f14, %f15, %f16}}, [%rd5+48];
  mov.b32 %r1, %f1;
  tex.{form}.{geom}.v4.f32.f32 {{%r5, %r6, %r7, %r8}}, [%rd1, {{{", ".join(regs[:count])}}}]{extra};
  st.global.v4.b32 [%rd6], {{%r5, %r6, %r7, %r8}};
  ret;
}}
"""


MIP_QUERY = """.visible .entry mip_txq(.param .u64 obj, .param .u64 inp, .param .u64 outp)
{
  .reg .b32 %r<9>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [obj];
  ld.param.u64 %rd3, [outp];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd4, %r0, 16;
  add.u64 %rd6, %rd3, %rd4;
  and.b32 %r1, %r0, 7;
  txq.width.b32 %r5, [%rd1];
  txq.level.width.b32 %r6, [%rd1], %r1;
  txq.level.height.b32 %r7, [%rd1], %r1;
  txq.level.depth.b32 %r8, [%rd1], %r1;
  st.global.v4.b32 [%rd6], {%r5, %r6, %r7, %r8};
  ret;
}
"""
MIP_PTX = ".version 7.8\n.target sm_80\n.address_size 64\n" + "\n".join(
    _mip_kernel(f"mip_{geom}_{form}", geom, form) for geom in MIP_GEOMS for form in MIP_FORMS) + MIP_QUERY


@pytest.fixture(scope="module")
def mip_modules() -> dict:
    return {"cpu": compile_cpu(MIP_PTX), **{arch: EmulatedModule.from_ptx(MIP_PTX, arch) for arch in ARCHS}}


def _mip_inputs(rng: np.random.Generator, geom: str, levels: int) -> np.ndarray:
    """Per lane 16 words: a normalized position (a direction on cubes), an LOD over and past
    the levels (a few NaN and infinite), gradients from 1/8 texel to past the chain (some zero,
    one infinite)."""
    dims, layered = GEOMS[geom]
    words = np.zeros((LANES, 16), np.float32)
    if geom in ("cube", "acube"):
        words[:, layered:layered + 3] = rng.uniform(-1.5, 1.5, (LANES, 3))
    else:
        words[:, layered:layered + dims] = rng.uniform(-0.1, 1.1, (LANES, dims))
    lod = rng.uniform(-2, levels + 1, LANES)
    lod[:6] = [np.nan, np.inf, -np.inf, 0.5, levels - 1, 1 + 1 / 512]
    words[:, 4] = lod
    scale = 2.0 ** rng.uniform(-3, levels + 1, (LANES, 1)) / 16
    words[:, 8:16] = scale * rng.uniform(-1, 1, (LANES, 8))
    words[:4, 8:16] = 0.0
    words[5, 9] = np.inf
    out = words.view(np.uint32)
    if layered:
        out[:, 0] = rng.integers(0, 3, LANES)
    return out


MIP_CONFIGS = [  # (format, mip filter linear, bias, min clamp, max clamp, maxAnisotropy)
    (0x20, True, 0.0, 0.0, 20.0, 0),
    (0x20, False, -0.375, 0.5, 3.0, 0),
    (0x01, True, 0.75, 1.0, 2.5, 4),
    (0x10, True, 1.25, 0.0, 20.0, 16),  # plain tex: LOD 0, the bias left out
    (0x09, False, 0.25, 0.0, 20.0, 2),  # s16 read as integers: point mip filtering
]


@pytest.mark.parametrize("arch", ARCHS)
def test_mipmapped_fetches_match_the_cpu_target(mip_modules: dict, arch: str) -> None:
    """tex, tex.level and tex.grad on mipmapped textures (levels halving to 1 per axis) of each
    geometry, and txq's level sizes: the level choice, clamps, bias, point and linear mip filtering with and without
    anisotropy, on point- and linear-filtered levels, bit for bit against the CPU target."""
    from zluda_py.compiler.cpu import mipmap

    rng = np.random.default_rng(17)
    failures, checked = [], 0
    for geom in MIP_GEOMS:
        dims, layered = GEOMS[geom]
        for k, (fmt, linear, bias, low, high, aniso) in enumerate(MIP_CONFIGS):
            read_integer = fmt == 0x09
            base = [16, 8 if dims > 1 else 0, 4 if dims > 2 else 0]
            if geom in ("cube", "acube"):
                base = [8, 8, 0]
            chain = max(base).bit_length()
            blocks, images = [], []
            for level in range(chain):
                w, h, d = (n and max(1, n >> level) for n in base)
                layers = (12 if layered else 6) if geom in ("cube", "acube") else 3 if layered else 0
                shape = (max(layers, 1), max(d, 1), max(h, 1), w, 1)
                dtype = np.dtype(FORMATS[fmt])
                data = ((rng.integers(-400, 400, shape) / 16.0).astype(dtype) if dtype.kind == "f"
                        else rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype))
                blocks.append(data)
                images.append(cpu_textures.Image(data.ctypes.data, fmt, 1, w, h, d, layers,
                                                 cubemap=geom in ("cube", "acube")))
            mip = mipmap.Mipmap(tuple(images), linear, bias, low, high, aniso)
            sampler = cpu_textures.Sampler((texdesc.CLAMP, texdesc.WRAP, texdesc.MIRROR), k % 2 == 0 and not read_integer,
                                           True, read_integer)
            desc = np.frombuffer(texdesc.pack(mip, sampler), np.uint8).copy()
            coords = _mip_inputs(rng, geom, chain)
            for form in (*MIP_FORMS, "txq"):  # and the level sizes txq answers
                kernel = f"mip_{geom}_{form}" if form != "txq" else "mip_txq"
                handle = cpu_textures.register(mip, sampler)
                try:
                    want = _fetch(mip_modules["cpu"], kernel, handle, coords, [])
                finally:
                    cpu_textures.release(handle)
                got = _fetch(mip_modules[arch], kernel, desc.ctypes.data, coords, [desc, *blocks])
                checked += 1
                bad = np.nonzero((got != want).any(axis=1))[0]
                if len(bad):
                    lane = bad[0]
                    failures.append(f"{geom} {form} config {k}: {len(bad)} lanes, lane {lane} inputs "
                                    f"{coords[lane].view(np.float32)} got {got[lane]} want {want[lane]}")
    assert checked == len(MIP_GEOMS) * len(MIP_CONFIGS) * (len(MIP_FORMS) + 1)
    assert not failures, "\n".join(failures[:20])
