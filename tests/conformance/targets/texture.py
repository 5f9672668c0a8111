"""Textures and surfaces: tex (every geometry, .base/.level/.grad), tld4, txq, suld.b, sust.b and
suq on texture and surface objects registered with the CPU target's runtime (for an emulated
AMDGPU target, as descriptor blocks: emulator/textures.py, `_objects`), checked lane by lane
against models/texture.py (the programming guide's texture-fetching rules, exact fractions).
Each lane reads its coordinates (and data) from a 64-byte row of `inp` and writes
its results, zero-extended to 64 bits, to a 32-byte row of `out`.

Textures without mipmap levels sample level 0 for .level and .grad; the f32 forms of tex on
1-D, 2-D, 3-D and layered geometries are also used on mipmapped textures (`texmip_*`: a float
chain halving to 1, point or linear mip filtering, a bias and clamps), checked with the model's
level selection (models/texture.py mip_lod, mip_gradient_lod, mip_levels). The grammar
lines with a separate sampler operand ([a, b, c]) share their modifiers with the unified
[a, c] lines; the lowering refuses that operand form by name, so their instances use [a, c].
"""

from __future__ import annotations

import ctypes
import zlib
from types import ModuleType

import numpy as np

from conformance.models import texture as model
from conformance.target_forms import ABSENT, TargetForm
from conformance.targets import Instance
from zluda_py.compiler.cpu import texture as runtime
from zluda_py.compiler.cpu.mipmap import Mipmap
from zluda_py.compiler.errors import CUDA_ERROR_ILLEGAL_ADDRESS
from zluda_py.ptx.checks import NVIDIA_ABSENT_TXQ, NVIDIA_REFUSED_SUQ

OPCODES = {"tex", "tld4", "txq", "suld", "sust", "sured", "suq", "istypep"}
WARP = 32
MODES = ("wrap", "clamp", "mirror", "border")
# geometry -> (width, height, depth, layers, cube)
SHAPES = {"1d": (5, 0, 0, 0, False), "2d": (5, 4, 0, 0, False), "3d": (5, 4, 3, 0, False), "a1d": (5, 0, 0, 3, False),
          "a2d": (5, 4, 0, 3, False), "cube": (4, 4, 0, 6, True), "acube": (4, 4, 0, 12, True),
          "2dms": (5, 4, 0, 0, False), "a2dms": (5, 4, 0, 3, False)}
COORDS = {"1d": 1, "2d": 2, "3d": 4, "a1d": 2, "a2d": 4, "cube": 4, "acube": 4, "2dms": 4, "a2dms": 4}
GRADS = {"1d": 1, "a1d": 1, "2d": 2, "a2d": 2, "2dms": 2, "a2dms": 2, "3d": 4, "cube": 4, "acube": 4}
MIP_GEOMS = ("1d", "2d", "3d", "a1d", "a2d")  # word 3 of a lane is free for the LOD or gradient
FIRST = {"a1d": 1, "a2d": 1, "acube": 1, "2dms": 1, "a2dms": 2}  # coordinate words before x: layer, sample


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _vec(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


def _entry(name: str, inst: str, dests: list[str]) -> str:
    stores = []
    for k, d in enumerate(dests):
        if d.startswith("%rd"):
            stores.append(f"st.global.u64 [%rd10+{8 * k}], {d};")
        else:
            stores += [f"cvt.u64.{'u16' if d.startswith('%h') else 'u32'} %rd11, {d};", f"st.global.u64 [%rd10+{8 * k}], %rd11;"]
    body = ["ld.param.u64 %rd1, [obj];", "ld.param.u64 %rd2, [inp];", "ld.param.u64 %rd3, [outp];",
            "mov.u32 %r0, %tid.x;", "mul.wide.u32 %rd4, %r0, 64;", "add.u64 %rd5, %rd2, %rd4;",
            "ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd5];", "ld.global.v2.b64 {%rd6, %rd7}, [%rd5+16];",
            "ld.global.v2.b64 {%rd8, %rd9}, [%rd5+32];", "ld.global.v4.b32 {%r12, %r13, %r14, %r15}, [%rd5+48];",
            "mul.wide.u32 %rd4, %r0, 32;", "add.u64 %rd10, %rd3, %rd4;",
            "mov.b32 %f1, %r1;", "mov.b32 %f2, %r2;", "mov.b32 %f3, %r3;", "mov.b32 %f4, %r4;",
            "cvt.u16.u32 %h5, %r12;", "cvt.u16.u32 %h6, %r13;", "cvt.u16.u32 %h7, %r14;", "cvt.u16.u32 %h8, %r15;",
            inst, *stores]
    return (f".visible .entry {name}(.param .u64 obj, .param .u64 inp, .param .u64 outp)\n{{\n"
            "  .reg .b16 %h<9>;\n  .reg .b32 %r<16>;\n  .reg .f32 %f<9>;\n  .reg .b64 %rd<12>;\n  .reg .pred %p<2>;\n  "
            + "\n  ".join(body) + "\n  ret;\n}\n")


def _objects(module: object) -> ModuleType:
    """Where `module`'s kernels find texture and surface objects: an EmulatedModule's descriptor
    blocks (emulator/textures.py), the CPU target's runtime otherwise (one API)."""
    return getattr(module, "textures", runtime)


def _launch(module, name: str, handle: int, inp: np.ndarray) -> np.ndarray:
    out = np.zeros((WARP, 4), np.uint64)
    module.launch(name, 1, WARP, [np.uint64(handle), inp, out])
    return out


# ================================================================ textures
def _level(geom: str, size: tuple[int, int, int], integer: bool, rng: np.random.Generator, mode: str, linear: bool,
           normalized: bool):
    """(image, sampler, model texture, backing array) of `size`: float32 RGBA texels, or int16
    pairs read as integers."""
    w, h, d = size
    _, _, _, layers, cube = SHAPES[geom]
    shape = (max(layers, 1), max(d, 1), max(h, 1), w)
    if integer:
        data = rng.integers(-30000, 30000, shape + (2,), dtype=np.int16)
        image = runtime.Image(data.ctypes.data, 0x09, 2, w, h, d, layers, cubemap=cube)
        sampler = runtime.Sampler((MODES.index(mode),) * 3, False, normalized, read_integer=True)
        fill, border = (0, 1), (0, 0, 0, 0)
    else:
        data = (rng.integers(-400, 400, shape + (4,)) / 16.0).astype(np.float32)
        border = (0.25, -0.5, 1.0, 2.0)
        image = runtime.Image(data.ctypes.data, 0x20, 4, w, h, d, layers, cubemap=cube)
        sampler = runtime.Sampler((MODES.index(mode),) * 3, linear, normalized, border=border)
        fill = ()
    texels = [[[[tuple(v.item() for v in data[l, z, y, x]) + fill for x in range(w)] for y in range(shape[2])]
               for z in range(shape[1])] for l in range(shape[0])]
    effective = mode if normalized or mode in ("clamp", "border") else "clamp"  # wrap/mirror need normalized
    tex = {"texels": texels, "size": (w, max(h, 1), max(d, 1)), "mode": effective, "linear": linear,
           "normalized": normalized, "border": border}
    return image, sampler, tex, data


def _texture(objects: ModuleType, geom: str, integer: bool, rng: np.random.Generator, mode: str, linear: bool, normalized: bool):
    """(runtime handle, model texture, backing array)."""
    image, sampler, tex, data = _level(geom, SHAPES[geom][:3], integer, rng, mode, linear, normalized)
    return objects.register(image, sampler), tex, data


# a mipmapped texture's mipmap fields: (linear mip filtering, mipmapLevelBias, min and max level clamps)
MIP_SETTINGS = ((True, 0.0, 0.0, 8.0), (False, -0.375, 0.5, 2.0), (True, 0.75, 1.0, 1.75))


def _mip_texture(objects: ModuleType, geom: str, rng: np.random.Generator, mode: str, linear: bool, normalized: bool,
                 settings: tuple[bool, float, float, float]):
    """(runtime handle, model textures per level, backing arrays): float32 RGBA levels halving
    per axis down to 1 from the geometry's shape."""
    w, h, d, _, _ = SHAPES[geom]
    images, texs, keep = [], [], []
    for k in range(max(w, h, d).bit_length()):
        image, sampler, tex, data = _level(geom, tuple(n and max(1, n >> k) for n in (w, h, d)), False, rng, mode,
                                           linear, normalized)
        images.append(image)
        texs.append(tex)
        keep.append(data)
    return objects.register(Mipmap(tuple(images), *settings), sampler), texs, keep


def _lanes(geom: str, integer_coords: bool, normalized: bool, rng: np.random.Generator) -> np.ndarray:
    """Per lane 4 coordinate words: [layer,] x[, y[, z]] as f32 or s32 bits."""
    w, h, d, layers, cube = SHAPES[geom]
    inp = np.zeros((WARP, 16), np.uint32)
    first = FIRST.get(geom, 0)
    if layers and geom != "cube":
        inp[:, 0] = rng.integers(-1, layers // (6 if cube else 1) + 1, WARP).astype(np.int32).view(np.uint32)
    if geom.endswith("ms"):  # the sample number: every one reads the texel's only sample
        inp[:, first - 1] = rng.integers(0, 4, WARP)
    for axis, n in enumerate((w, h, d)[:3 if cube else len([n for n in (w, h, d) if n])]):
        if cube:
            values = rng.uniform(-2, 2, WARP).astype(np.float32)
        elif integer_coords:
            values = rng.integers(-2, max(n, 1) + 2, WARP).astype(np.int32)
        else:
            span = 1.0 if normalized else max(n, 1)
            values = rng.uniform(-0.4 * span, 1.4 * span, WARP).astype(np.float32)
        inp[:, first + axis] = values.view(np.uint32)
    return inp


def _expect_fetch(tex: dict, geom: str, row: np.ndarray, integer_coords: bool, comp: int | None) -> tuple:
    w, h, d, layers, cube = SHAPES[geom]
    first = FIRST.get(geom, 0)
    # the array index is a .u32 (a negative one is a large index), clamped to the last layer
    layer = min(int(row[0]), max(layers // (6 if cube else 1), 1) - 1) if layers and geom != "cube" else 0
    words = row[first:first + (3 if cube else len([n for n in (w, h, d) if n]))]
    if cube:
        face, s, t = model.cube(*(float(v) for v in words.view(np.float32)))
        tex = dict(tex, mode="clamp", normalized=True)
        coords, layer = [s, t], layer * 6 + face
    elif integer_coords:
        return model.texel(tex, layer, [int(v) for v in words.view(np.int32)][:len([n for n in (w, h, d) if n])])
    else:
        coords = [float(v) for v in words.view(np.float32)][:len([n for n in (w, h, d) if n])]
    return model.gather(tex, layer, coords, comp) if comp is not None else model.fetch(tex, layer, coords)


def _check_fetch(geom: str, integer: bool, integer_coords: bool, mode: str, linear: bool, normalized: bool,
                 comp: int | None = None, dtype: str = "f32"):
    def check(module, name: str) -> None:
        rng = _rng(name)
        objects = _objects(module)
        handle, tex, keep = _texture(objects, geom, integer, rng, mode, linear, normalized)
        try:
            inp = _lanes(geom, integer_coords, normalized, rng)
            out = _launch(module, name, handle, inp)
        finally:
            objects.release(handle)
        for lane in range(WARP):
            want = _expect_fetch(tex, geom, inp[lane], integer_coords, comp)
            got = out[lane]
            if dtype in ("f16", "f16x2"):
                halves = [model.half_bits(v, integer) for v in want]
                if dtype == "f16x2":
                    halves = [halves[0] | halves[1] << 16, halves[2] | halves[3] << 16]
                assert [int(v) for v in got[:len(halves)]] == halves, f"lane {lane}: {got} != {halves}"
                continue
            for k in range(4):
                if integer:
                    assert got[k] == int(want[k]) & 0xFFFFFFFF, f"lane {lane} channel {k}: {got[k]:#x} != {want[k]}"
                else:
                    value = float(np.uint32(got[k]).view(np.float32))
                    assert abs(value - want[k]) <= 1e-6 * max(1.0, abs(want[k])), f"lane {lane} channel {k}: {value} != {want[k]}"
    return check


def _check_mip(geom: str, variant: str | None, mode: str, linear: bool, normalized: bool,
               settings: tuple[bool, float, float, float]):
    """tex on a mipmapped texture: word 3 of each lane is the LOD (.level) or every gradient
    component (.grad, in normalized units: 2^-6 to 2^1.5); the model's LOD, levels and blend."""
    mip_linear, bias, low, high = settings

    def check(module, name: str) -> None:
        rng = _rng(name)
        objects = _objects(module)
        handle, texs, keep = _mip_texture(objects, geom, rng, mode, linear, normalized, settings)
        try:
            inp = _lanes(geom, False, normalized, rng)
            word = rng.uniform(-1.5, len(texs) + 1, WARP) if variant == "level" else 2.0 ** rng.uniform(-6, 1.5, WARP)
            inp[:, 3] = word.astype(np.float32).view(np.uint32)
            out = _launch(module, name, handle, inp)
        finally:
            objects.release(handle)
        dims = len([n for n in SHAPES[geom][:3] if n])
        for lane in range(WARP):
            g = float(inp[lane, 3:4].view(np.float32)[0])
            lod = None  # plain tex: LOD 0 without the bias, then the clamps; no footprint: the bottom clamp
            if variant == "level":
                lod = g
            elif variant == "grad":
                grad = [g * n for n in texs[0]["size"][:dims]]
                lod = model.mip_gradient_lod(grad, grad)
            value = model.mip_lod(lod, bias, low, high, len(texs))
            want = [0.0] * 4
            for level, weight in model.mip_levels(value, mip_linear):
                level = min(level, len(texs) - 1)
                fetched = _expect_fetch(texs[level], geom, inp[lane], False, None)
                want = [acc + float(weight) * model.f32(v) for acc, v in zip(want, fetched)]
            for k in range(4):
                got = float(np.uint32(out[lane][k]).view(np.float32))
                assert abs(got - want[k]) <= 1e-6 * max(1.0, abs(want[k])), f"lane {lane} channel {k}: {got} != {want[k]}"
    return check


def _cycle(tf: TargetForm) -> list[tuple[str, ...]]:
    """Modifier lists of the line in which list k takes value k of every slot (cycling), so each
    value occurs."""
    values = [sorted(slot.values) for slot in tf.form.slots]
    return [tuple(v[k % len(v)] for v in values) for k in range(max(len(v) for v in values))]


def _tex_instances(tf: TargetForm) -> list[Instance]:
    out = []
    for k, mods in enumerate(_cycle(tf)):
        variant = next((m for m in mods if m in ("base", "level", "grad")), None)
        geom = next(m for m in mods if m in SHAPES)
        dtype, ctype = mods[-2], mods[-1]
        name = f"tex_{tf.syntax.count(',')}_{'_'.join(mods)}"
        dests = [f"%h{i}" for i in range(1, 5)] if dtype == "f16" else \
            [f"%r{i}" for i in range(5, 7 if dtype == "f16x2" else 9)]
        coord_regs = (["%r1"] + [f"%f{i}" for i in range(2, 5)]) if geom in ("a1d", "a2d", "acube") else \
            [f"%f{i}" for i in range(1, 5)]
        if ctype == "s32":
            coord_regs = [f"%r{i}" for i in range(1, 5)]
        coords = _vec(coord_regs[:COORDS[geom]])
        extra = {"level": ", %f4" if ctype == "f32" else ", %r4",
                 "grad": f", {_vec(['%f4'] * GRADS[geom])}, {_vec(['%f4'] * GRADS[geom])}"}.get(variant, "")
        inst = f"tex.{'.'.join(mods)} {_vec(dests)}, [%rd1, {coords}]{extra};"
        integer = dtype in ("s32", "u32") or (dtype.startswith("f16") and k % 5 == 3)
        mode = MODES[k % 4]
        check = _check_fetch(geom, integer, ctype == "s32", mode, not integer and k % 3 != 1, k % 2 == 0, dtype=dtype)
        out.append(Instance(mods, name, _entry(name, inst, dests), check))
        if "v4" in mods and ctype == "f32" and geom in MIP_GEOMS:  # the form, with f32 results, on a mipmapped texture
            mip_mods = mods[:-2] + ("f32", "f32")
            mip_name = f"texmip_{tf.syntax.count(',')}_{'_'.join(mip_mods)}"
            mip_dests = [f"%r{i}" for i in range(5, 9)]
            mip_inst = f"tex.{'.'.join(mip_mods)} {_vec(mip_dests)}, [%rd1, {coords}]{extra};"
            check = _check_mip(geom, variant, mode, k % 3 != 1, True, MIP_SETTINGS[k % len(MIP_SETTINGS)])
            out.append(Instance(mip_mods, mip_name, _entry(mip_name, mip_inst, mip_dests), check))
    return out


def _tld4_instances(tf: TargetForm) -> list[Instance]:
    out = []
    geoms = sorted(tf.form.slots[1].values)
    for k, comp in enumerate("rgba"):
        for j, geom in enumerate(geoms):
            dtype = ("f32", "s32", "u32")[(k + j) % 3]
            mods = (comp, geom, "v4", dtype, "f32")
            name = f"tld4_{len(geoms)}_{'_'.join(mods)}"
            regs = (["%r1"] + [f"%f{i}" for i in range(2, 5)]) if geom in ("a2d", "acube") else [f"%f{i}" for i in range(1, 5)]
            dests = [f"%r{i}" for i in range(5, 9)]
            inst = f"tld4.{'.'.join(mods)} {_vec(dests)}, [%rd1, {_vec(regs[:COORDS[geom]])}];"
            integer = dtype != "f32"
            check = _check_fetch(geom, integer, False, MODES[(k + j) % 4], False, (k + j) % 2 == 0, "rgba".index(comp))
            out.append(Instance(mods, name, _entry(name, inst, dests), check))
    return out


# ================================================================ queries
def _query_check(opcode: str, what: str, level: bool):
    def check(module, name: str) -> None:
        rng = _rng(name)
        objects = _objects(module)
        data = np.zeros((3, 2, 4, 5, 4), np.float32)  # 3 layers of 5 x 4 x 2
        # txq: 8-bit unsigned RGBA read as normalized floats; suq: 16-bit signed pairs
        fmt, channels = (0x01, 4) if opcode == "txq" else (0x09, 2)
        image = runtime.Image(data.ctypes.data, fmt, channels, 5, 4, 2, 3)
        sampler = runtime.Sampler((0, 3, 2), True, True) if opcode == "txq" else None
        handle = objects.register(image, sampler)
        inp = np.zeros((WARP, 16), np.uint32)
        inp[:, 3] = rng.integers(0, 4, WARP)  # the level of txq.level
        try:
            out = _launch(module, name, handle, inp)
        finally:
            objects.release(handle)
        sizes = {"width": 5, "height": 4, "depth": 2}
        for lane in range(WARP):
            if what in sizes:
                want = max(sizes[what] >> int(inp[lane, 3]), 1) if level else sizes[what]
            else:
                want = {"array_size": 3, "num_mipmap_levels": 1, "normalized_coords": 1, "filter_mode": 1,
                        "addr_mode_0": 0, "addr_mode_1": 3, "addr_mode_2": 2, "num_samples": 1,
                        "force_unnormalized_coords": 0, "memory_layout": 0,
                        "channel_order": model.CL_CHANNEL_ORDER["RGBA" if opcode == "txq" else "RG"],
                        "channel_data_type": model.CL_CHANNEL_TYPE["UNORM_INT8" if opcode == "txq" else "SIGNED_INT16"]}[what]
            assert out[lane, 0] == want, f"lane {lane}: {out[lane, 0]} != {want}"
    return check


def _query_instances(tf: TargetForm) -> list[Instance]:
    out = []
    level = "level" in tf.form.slots[0].values
    queries = tf.form.slots[1 if level else 0].values
    for what in sorted(queries):
        if what in (NVIDIA_REFUSED_SUQ if tf.opcode == "suq" else NVIDIA_ABSENT_TXQ):
            continue  # suq: modules with these do not load; txq: their kernels are left out (a handle's
            # queries), on NVIDIA's driver and ours (tests/driver/test_nvidia_refusals.py)
        mods = (("level",) if level else ()) + (what, "b32")
        name = f"{tf.opcode}_{'_'.join(mods)}"
        inst = f"{tf.opcode}.{'.'.join(mods)} %r5, [%rd1]{', %r4' if level else ''};"
        out.append(Instance(mods, name, _entry(name, inst, ["%r5"]), _query_check(tf.opcode, what, level)))
    return out


# ================================================================ surfaces
SURFACE = {"1d": (6, 0, 0, 0), "2d": (6, 3, 0, 0), "3d": (6, 3, 2, 0), "a1d": (6, 0, 0, 3), "a2d": (6, 3, 0, 3)}
ELEMENT = 16  # bytes per element: four 32-bit channels


def _surface_check(opcode: str, geom: str, count: int, bits: int, mode: str):
    size = count * bits // 8

    def check(module, name: str) -> None:
        rng = _rng(name)
        objects = _objects(module)
        w, h, d, layers = SURFACE[geom]
        row, slice_ = w * ELEMENT, w * ELEMENT * max(h, 1)
        memory = rng.integers(0, 256, slice_ * max(d, 1) * max(layers, 1), dtype=np.uint8)
        image = runtime.Image(memory.ctypes.data, 0x03, 4, w, h, d, layers)
        inp = np.zeros((WARP, 16), np.uint32)
        spatial = 1 + (h > 0) + (d > 0)
        first = 1 if layers else 0
        lim = (row - size + 1, max(h, 1), max(d, 1), max(layers, 1))
        coords = np.zeros((WARP, 4), np.int64)  # x, y, z, layer
        for axis in range(spatial):
            coords[:, axis] = rng.integers(-2 * size if axis == 0 else -1, lim[axis] + (size if axis == 0 else 1), WARP)
        if layers:
            coords[:, 3] = rng.integers(-1, layers + 1, WARP)
        if mode == "trap":  # the fault is checked below with one lane outside
            coords = np.minimum(np.maximum(coords, 0), np.array(lim) - 1)
        if first:
            inp[:, 0] = coords[:, 3].astype(np.int32).view(np.uint32)
        for axis in range(spatial):
            inp[:, first + axis] = coords[:, axis].astype(np.int32).view(np.uint32)
        data = rng.integers(0, 2**63, (WARP, 4), dtype=np.int64).view(np.uint64)
        inp[:, 4:12] = data.view(np.uint32).reshape(WARP, 8)  # the 64-bit components
        inp[:, 12:16] = (data & 0xFFFFFFFF).astype(np.uint32)  # the narrower ones (and their low halves)
        before = bytearray(memory.tobytes())
        handle = objects.register(image, None)
        try:
            out = _launch(module, name, handle, inp)
            if mode == "trap":
                bad = inp.copy()
                bad[7, first] = np.uint32(row)  # x past the row
                try:
                    _launch(module, name, handle, bad)
                except Exception as err:  # noqa: BLE001 - a LaunchError carries the CUresult
                    assert getattr(err, "cu_result", None) == CUDA_ERROR_ILLEGAL_ADDRESS, err  # as on the H200
                else:
                    raise AssertionError("a .trap access outside the surface did not fault")
        finally:
            objects.release(handle)
        expect = bytearray(before)
        mask = (1 << bits) - 1
        for lane in range(WARP):
            at = model.surface_access(expect, row, slice_, slice_ * max(d, 1), (row, *lim[1:]),
                                      [*(int(c) for c in coords[lane, :3]), int(coords[lane, 3]) & 0xFFFFFFFF], size, mode)
            if opcode == "suld":
                for k in range(count):
                    want = 0 if at is None else int.from_bytes(before[at + k * bits // 8:at + (k + 1) * bits // 8], "little")
                    assert int(out[lane, k]) == want, f"lane {lane} component {k}: {int(out[lane, k]):#x} != {want:#x}"
            elif at is not None:
                for k in range(count):
                    chunk = (int(data[lane, k]) & mask).to_bytes(bits // 8, "little")
                    expect[at + k * bits // 8:at + (k + 1) * bits // 8] = chunk
        if opcode == "sust":
            got = memory.tobytes()
            assert got == bytes(expect), f"surface bytes differ at {next(i for i in range(len(got)) if got[i] != expect[i])}"
    return check


def _surface_instances(tf: TargetForm) -> list[Instance]:
    out = []
    slots = {i: s for i, s in enumerate(tf.form.slots)}
    has_vec = any(s.values == {"v2", "v4"} for s in tf.form.slots)
    head = "p" if "p" in slots[0].values else "b"
    if head == "p":
        return _formatted_instances(tf)
    cops = sorted(next(s.values for s in tf.form.slots if s.optional)) + [ABSENT]
    types = ("b8", "b16", "b32", "b64") if head == "b" else ("b32",)
    for k, geom in enumerate(sorted(SURFACE)):
        for j, dtype in enumerate(types):
            vec = ("v2", "v4")[(k + j) % 2 and dtype != "b64"] if has_vec else None  # ptxas: at most 128 bits
            mode = ("trap", "clamp", "zero")[(k + j) % 3]
            cop = cops[(k + 2 * j) % len(cops)] if head == "b" else ABSENT
            mods = (head, geom) + (() if cop == ABSENT else (cop,)) + ((vec,) if vec else ()) + (dtype, mode)
            name = f"{tf.opcode}_{'_'.join(mods)}"
            count = {"v2": 2, "v4": 4, None: 1}[vec]
            bits = int(dtype[1:])
            regs = [f"%rd{6 + i}" for i in range(count)] if bits == 64 else \
                [f"%h{5 + i}" for i in range(count)] if bits < 32 else [f"%r{12 + i}" for i in range(count)]
            coords = _vec([f"%r{i}" for i in range(1, 5)][:COORDS[geom]])
            inst = (f"suld.{'.'.join(mods)} {_vec(regs)}, [%rd1, {coords}];" if tf.opcode == "suld"
                    else f"sust.{'.'.join(mods)} [%rd1, {coords}], {_vec(regs)};")
            dests = regs if tf.opcode == "suld" else []
            out.append(Instance(mods, name, _entry(name, inst, dests), _surface_check(tf.opcode, geom, count, bits, mode)))
    return out


# sust.p / sured.p surfaces: CUarray_format -> (numpy type, channels)
FORMATTED = {0x20: (np.float32, 4), 0x01: (np.uint8, 4), 0x09: (np.int16, 2), 0x10: (np.float16, 1),
             0x03: (np.uint32, 1), 0x0A: (np.int32, 2)}


def _coords_in(rng: np.random.Generator, geom: str, lim: tuple[int, int, int, int], step: int, trap: bool) -> np.ndarray:
    """(lanes, 4) x, y, z, layer: a few outside each way (none for .trap: that fault is checked
    with one lane moved outside), x a multiple of `step` bytes or not."""
    w, h, d, layers = SURFACE[geom]
    coords = np.zeros((WARP, 4), np.int64)
    coords[:, 0] = rng.integers(-2, lim[0] // step + 2, WARP) * step + rng.choice([0, 0, 0, 1], WARP)
    for axis, n in ((1, h), (2, d)):
        if n:
            coords[:, axis] = rng.integers(-1, n + 1, WARP)
    if layers:
        coords[:, 3] = rng.integers(-1, layers + 1, WARP)
    if trap:
        coords = np.minimum(np.maximum(coords, 0), np.array([lim[0] - step, lim[1] - 1, lim[2] - 1, lim[3] - 1]))
    return coords


def _surface_launch(module, name: str, image, geom: str, coords: np.ndarray, data: np.ndarray, trap: bool,
                    row: int) -> None:
    """Run the kernel on the surface with per-lane coordinates and 64-bit data words; with .trap
    also check that a lane past the row faults with 700, as on the H200."""
    objects = _objects(module)
    first = 1 if SURFACE[geom][3] else 0
    inp = np.zeros((WARP, 16), np.uint32)
    if first:
        inp[:, 0] = coords[:, 3].astype(np.int32).view(np.uint32)
    for axis in range(1 + (SURFACE[geom][1] > 0) + (SURFACE[geom][2] > 0)):
        inp[:, first + axis] = coords[:, axis].astype(np.int32).view(np.uint32)
    inp[:, 4:12] = data.view(np.uint32).reshape(WARP, 8)
    inp[:, 12:16] = (data & 0xFFFFFFFF).astype(np.uint32)
    handle = objects.register(image, None)
    try:
        _launch(module, name, handle, inp)
        if trap:
            saved = bytes(np.ctypeslib.as_array((ctypes.c_uint8 * image.size).from_address(image.base)))
            bad = inp.copy()
            bad[7, first] = np.uint32(row)
            try:
                _launch(module, name, handle, bad)
            except Exception as err:  # noqa: BLE001 - a LaunchError carries the CUresult
                assert getattr(err, "cu_result", None) == CUDA_ERROR_ILLEGAL_ADDRESS, err
            else:
                raise AssertionError("a .trap access outside the surface did not fault")
            after = bytes(np.ctypeslib.as_array((ctypes.c_uint8 * image.size).from_address(image.base)))
            assert after == saved, "a faulting warp changed the surface"
    finally:
        objects.release(handle)


def _formatted_check(geom: str, count: int, mode: str, fmt: int):
    dtype, channels = FORMATTED[fmt]
    element = np.dtype(dtype).itemsize * channels

    def check(module, name: str) -> None:
        rng = _rng(name)
        w, h, d, layers = SURFACE[geom]
        row, slice_ = w * element, w * element * max(h, 1)
        memory = rng.integers(0, 256, slice_ * max(d, 1) * max(layers, 1), dtype=np.uint8)
        image = runtime.Image(memory.ctypes.data, fmt, channels, w, h, d, layers)
        lim = (row, max(h, 1), max(d, 1), max(layers, 1))
        coords = _coords_in(rng, geom, lim, element, mode == "trap")
        coords[:, 0] //= element  # texels
        if np.dtype(dtype).kind == "f":
            floats = rng.uniform(-3, 3, (WARP, 4)) * np.where(rng.random((WARP, 4)) < 0.2, 40000, 1)
            data = floats.astype(np.float32).view(np.uint32).astype(np.uint64)
        else:
            data = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
                               0xFFFFFF80, 0xFFFFFFFF, 12345, 0xFFFF8000], (WARP, 4)).astype(np.uint64)
        expect = bytearray(memory.tobytes())
        _surface_launch(module, name, image, geom, coords, data, mode == "trap", w)
        for lane in range(WARP):
            x, y, z, layer = (int(c) for c in coords[lane])
            at = model.surface_access(expect, row, slice_, slice_ * max(d, 1), (row, *lim[1:]),
                                      [x * element, y, z, layer & 0xFFFFFFFF], element, mode)
            if at is not None:
                words = [int(v) for v in data[lane, :count]]
                expect[at:at + element] = model.formatted_texel(bytes(expect[at:at + element]), np.dtype(dtype), channels, words)
        got = memory.tobytes()
        assert got == bytes(expect), f"surface bytes differ at {next(i for i in range(len(got)) if got[i] != expect[i])}"
    return check


def _formatted_instances(tf: TargetForm) -> list[Instance]:
    out = []
    geoms = sorted(next(s.values for s in tf.form.slots if s.values & set(SURFACE)))
    vecs = sorted(next((s.values for s in tf.form.slots if s.values == {"v2", "v4"}), {None}), key=str)
    for k, geom in enumerate(geoms):
        for j, vec in enumerate(vecs):
            mode = ("trap", "clamp", "zero")[(k + j) % 3]
            fmt = sorted(FORMATTED)[(k + 2 * j) % len(FORMATTED)]
            mods = ("p", geom) + ((vec,) if vec else ()) + ("b32", mode)
            name = f"sust_{'_'.join(mods)}"
            count = {"v2": 2, "v4": 4, None: 1}[vec]
            regs = [f"%r{12 + i}" for i in range(count)]
            inst = f"sust.{'.'.join(mods)} [%rd1, {_vec([f'%r{i}' for i in range(1, 5)][:COORDS[geom]])}], {_vec(regs)};"
            out.append(Instance(mods, name, _entry(name, inst, []), _formatted_check(geom, count, mode, fmt)))
    return out


def _sured_check(mods: tuple[str, ...]):
    head, op, geom, ctype, mode = mods
    bits = int(ctype[1:])
    size = bits // 8
    # .p reads .b32/.b64 as the format's integers, unsigned or signed; .b ignores the format
    fmt = 0x0A if head == "p" and (op in ("min", "max") and geom != "1d") else 0x03
    signed = fmt == 0x0A if head == "p" else ctype[0] == "s"
    channels = 2 if head == "p" and bits == 64 else 1
    element = 4 * channels

    def check(module, name: str) -> None:
        rng = _rng(name)
        w, h, d, layers = SURFACE[geom]
        row, slice_ = w * element, w * element * max(h, 1)
        memory = rng.integers(0, 256, slice_ * max(d, 1), dtype=np.uint8)
        memory[:8] = [0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0x80]  # extremes for wrap and sign
        image = runtime.Image(memory.ctypes.data, fmt, channels, w, h, d, 0)
        lim = (row, max(h, 1), max(d, 1), 1)
        coords = _coords_in(rng, geom, lim, size, mode == "trap")
        coords[:, 1:] //= 2  # lanes meet on the same cells
        if head == "p":
            coords[:, 0] //= element
        data = rng.integers(0, 2**63, (WARP, 4), dtype=np.int64).view(np.uint64)
        data[::5, 0] = np.uint64(2**64 - 3)  # -3 as s64 (or its low half)
        expect = bytearray(memory.tobytes())
        _surface_launch(module, name, image, geom, coords, data, mode == "trap", w if head == "p" else row)
        for lane in range(WARP):
            x, y, z, _ = (int(c) for c in coords[lane])
            at = model.surface_access(expect, row, slice_, slice_ * max(d, 1), lim,
                                      [x * element if head == "p" else x, y, z, 0], size, mode)
            if at is not None:
                model.reduce_cell(expect, at - at % size, op, bits, signed, int(data[lane, 0]))
        got = memory.tobytes()
        assert got == bytes(expect), f"surface bytes differ at {next(i for i in range(len(got)) if got[i] != expect[i])}"
    return check


def _sured_instances(tf: TargetForm) -> list[Instance]:
    out = []
    for mods in _cycle(tf):
        name = f"sured_{'_'.join(mods)}"
        bits = int(mods[3][1:])
        reg = "%rd6" if bits == 64 else "%r12"
        inst = f"sured.{'.'.join(mods)} [%rd1, {_vec([f'%r{i}' for i in range(1, 5)][:COORDS[mods[2]]])}], {reg};"
        out.append(Instance(mods, name, _entry(name, inst, []), _sured_check(mods)))
    return out


def _istypep_check(kind: str):
    def check(module, name: str) -> None:
        rng = _rng(name)
        objects = _objects(module)
        data = np.zeros(64, np.float32)
        texture = objects.register(runtime.Image(data.ctypes.data, 0x20, 4, 4), runtime.Sampler())
        surface = objects.register(runtime.Image(data.ctypes.data, 0x20, 4, 4), None)
        gone = objects.register(runtime.Image(data.ctypes.data, 0x20, 4, 4), None)
        objects.release(gone)
        handles = rng.choice([texture, surface, gone, 0, 2**63 + texture], WARP).astype(np.uint64)
        inp = np.zeros((WARP, 16), np.uint32)
        inp[:, 4:6] = handles.view(np.uint32).reshape(WARP, 2)
        try:
            out = _launch(module, name, texture, inp)
        finally:
            objects.release(texture)
            objects.release(surface)
        # false for objects of every kind, live or destroyed, and any other value: what an NVIDIA
        # H100 answers (golden/programs.txt, texture_forms)
        for lane in range(WARP):
            assert int(out[lane, 0]) == 0, f"lane {lane}: {handles[lane]:#x}"
    return check


def _istypep_instances(tf: TargetForm) -> list[Instance]:
    out = []
    for kind in sorted(tf.form.slots[0].values):
        name = f"istypep_{kind}"
        inst = f"istypep.{kind} %p1, %rd6;\n  selp.u32 %r5, 1, 0, %p1;"
        out.append(Instance((kind,), name, _entry(name, inst, ["%r5"]), _istypep_check(kind)))
    return out


def instances(tf: TargetForm) -> list[Instance]:
    if tf.opcode == "sured":
        return _sured_instances(tf)
    if tf.opcode == "istypep":
        return _istypep_instances(tf)
    if tf.opcode == "tex":
        return _tex_instances(tf)
    if tf.opcode == "tld4":
        return _tld4_instances(tf)
    if tf.opcode in ("txq", "suq"):
        return _query_instances(tf)
    return _surface_instances(tf)
