"""Warp-level matrix instructions: mma.sync, wmma, ldmatrix, stmatrix, movmatrix.

Each instance is one warp. An mma kernel loads every lane's A, B and C registers from global
memory (`[lane, register]` arrays that models/mma.py packs from random matrices), runs the form,
and stores D; the check unpacks D with the model and compares it with D = A*B + C computed
exactly: bit-exact for the integer forms, within `models.mma.error_bound` where PTX leaves the
accumulation order and rounding open. ldmatrix/stmatrix move 8x8 .b16 matrices between
registers and shared memory whose rows lie apart (a 32-byte row pitch: each 16-byte row aligned,
as the manual requires); movmatrix transposes. wmma products use base addresses and strides the
manual allows ("Matrix Storage for WMMA": each row starts at a multiple of the fragment's size).
`fault_instances` break those rules, one kernel each: the launch must fail with 716.
The same instances run on an NVIDIA GPU with `--target cuda` (test_mma.py).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from conformance.models import mma as model
from conformance.target_forms import TargetForm
from conformance.targets import Instance
from zluda_py.compiler.errors import CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS, LaunchError

OPCODES = {"mma", "ldmatrix", "stmatrix", "movmatrix", "wmma.load", "wmma.store", "wmma.mma"}
TARGET = "sm_100"  # every runnable form assembles for it (test_mma.py puts the GPU's own there)
# lowest compute capability each runnable form needs (test_mma.py skips it on older GPUs)
NEEDS: dict[str, tuple[int, int]] = {}


def _mangle(mods: tuple[str, ...]) -> str:
    return "_".join(m.replace("::", "_") for m in mods)


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(name.encode()))


def module_text(inst: Instance) -> str:
    return f".version {inst.version}\n.target {inst.target}\n.address_size 64\n{inst.decls}\n{inst.entry}"


def expect_misaligned(args: Callable[[], list]) -> Callable[[object, str], None]:
    """A check that launches one warp on `args()` and wants it to fail with 716
    (CUDA_ERROR_MISALIGNED_ADDRESS): a LaunchError of our compiler, a CudaError of a CUDA driver.
    AMDGPU code faults with 700 instead (HIP has no misaligned-address error; docs/amdgpu.md)."""
    def check(module, kname: str) -> None:
        from conformance.harness import EMULATED
        from hardware.cudadrv import CudaError

        emulated = getattr(module, "arch", None) in EMULATED
        want = CUDA_ERROR_ILLEGAL_ADDRESS if emulated else CUDA_ERROR_MISALIGNED_ADDRESS
        try:
            module.launch(kname, (1, 1, 1), (32, 1, 1), args())
        except (LaunchError, CudaError) as e:
            code = e.cu_result if isinstance(e, LaunchError) else e.code
            assert code == want, f"{kname}: CUresult {code}, want {want}: {e}"
            return
        raise AssertionError(f"{kname}: the launch succeeded; want CUresult {want}")

    return check


# ---------------------------------------------------------------------- mma
def _types(mods: tuple[str, ...]) -> tuple[str, str, str, str]:
    dtype, atype, btype, ctype = [m for m in mods if m in model.ELEMENT_BITS]
    return dtype, atype, btype, ctype


def _values(rng: np.random.Generator, shape: tuple[int, int], etype: str) -> np.ndarray:
    """Random elements exactly representable in `etype` (float64 or int64)."""
    if etype in ("s8", "u8"):
        lo, hi = (-128, 128) if etype == "s8" else (0, 256)
        return rng.integers(lo, hi, shape).astype(np.int64)
    if etype == "s32":
        return rng.integers(-2**31, 2**31, shape).astype(np.int64)
    x = rng.standard_normal(shape) * 4
    if etype == "f16":
        return x.astype(np.float16).astype(np.float64)
    if etype in ("f32", "f64"):
        return x.astype(np.float32 if etype == "f32" else np.float64).astype(np.float64)
    keep = 0xFFFF0000 if etype == "bf16" else 0xFFFFE000  # bf16 / tf32: the top bits of an f32
    return (x.astype(np.float32).view(np.uint32) & np.uint32(keep)).view(np.float32).astype(np.float64)


def mma_instance(mods: tuple[str, ...], refused: str | None = None, target: str = TARGET,
                 needs: tuple[int, int] = (8, 0)) -> Instance:
    name = "mma_" + _mangle(mods[2:])
    shape = mods[2]
    dtype, atype, btype, ctype = _types(mods)
    regs = {}
    for op, t in (("a", atype), ("b", btype), ("c", ctype), ("d", dtype)):
        count, _ = model.layout(shape, op, t)
        width = 64 if t == "f64" else 32
        regs[op] = (-(-count // (width // model.ELEMENT_BITS[t])), width)
    decl = [f".reg .b{w} %{op}<{n}>;" for op, (n, w) in regs.items()]
    body = [".reg .b32 %lane;", ".reg .b64 %p, %q;", *decl, "mov.u32 %lane, %tid.x;"]
    for op in ("a", "b", "c"):
        n, w = regs[op]
        body += [f"ld.param.u64 %p, [{name}_{op}];", "cvta.to.global.u64 %p, %p;",
                 f"mul.wide.u32 %q, %lane, {n * w // 8};", "add.u64 %p, %p, %q;"]
        body += [f"ld.global.b{w} %{op}{i}, [%p+{i * w // 8}];" for i in range(n)]
    vec = lambda op: "{" + ", ".join(f"%{op}{i}" for i in range(regs[op][0])) + "}"  # noqa: E731
    body.append(f"mma.{'.'.join(mods)} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    n, w = regs["d"]
    body += [f"ld.param.u64 %p, [{name}_d];", "cvta.to.global.u64 %p, %p;",
             f"mul.wide.u32 %q, %lane, {n * w // 8};", "add.u64 %p, %p, %q;"]
    body += [f"st.global.b{w} [%p+{i * w // 8}], %d{i};" for i in range(n)]
    params = ", ".join(f".param .u64 {name}_{op}" for op in "abcd")
    entry = f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(body) + "\n  ret;\n}\n"
    NEEDS[name] = needs

    def check(module, kname: str) -> None:
        m, n_, k = model.dims(shape)
        rng = _rng(kname)
        satfinite = "satfinite" in mods
        for trial in range(3):
            a, b = _values(rng, (m, k), atype), _values(rng, (k, n_), btype)
            c = _values(rng, (m, n_), ctype)
            if satfinite and trial:  # drive sums past the s32 range: up (trial 1) and down (trial 2)
                c = np.full((m, n_), 2**31 - 5 if trial == 1 else -2**31 + 5, np.int64)
                a, b = np.abs(a).clip(0, 127), np.abs(b).clip(0, 127)
                if trial == 2 and "s8" in (atype, btype):
                    a, b = (-a, b) if atype == "s8" else (a, -b)
            out = np.zeros((32, regs["d"][0]), np.uint32 if regs["d"][1] == 32 else np.uint64)
            module.launch(kname, (1, 1, 1), (32, 1, 1), [model.pack(a, shape, "a", atype).ravel(),
                                               model.pack(b, shape, "b", btype).ravel(),
                                               model.pack(c, shape, "c", ctype).ravel(), out.ravel()])
            got = model.unpack(out.reshape(32, -1), shape, dtype)
            if dtype == "s32":
                want = model.reference_int(a, b, c, satfinite)
                assert (got == want).all(), f"trial {trial}: {np.argwhere(got != want)[:4].tolist()} differ"
                continue
            want = a @ b + c
            unit = {"f16": 2.0**-10, "f32": 2.0**-23, "f64": 2.0**-52}[dtype] * 2
            bad = np.abs(got - want) > model.error_bound(a, b, c, unit)
            assert not bad.any(), (f"trial {trial}: at {np.argwhere(bad)[:4].tolist()} got "
                                   f"{got[bad][:4].tolist()}, want {want[bad][:4].tolist()}")

    return Instance(mods, name, entry, check, target=target, refused=refused)


def quad_instance(mods: tuple[str, ...]) -> Instance:
    """mma.m8n8k4 .f16: four 8x8x4 products per warp, each checked against numpy."""
    name = "mma_" + _mangle(mods[2:])
    alayout, blayout = mods[3], mods[4]
    dtype, _, _, ctype = _types(mods)
    regs = {"a": 2, "b": 2, "c": 4 if ctype == "f16" else 8, "d": 4 if dtype == "f16" else 8}
    body = [".reg .b32 %lane;", ".reg .b64 %p, %q;", *[f".reg .b32 %{op}<{n}>;" for op, n in regs.items()],
            "mov.u32 %lane, %tid.x;"]
    for op in "abc":
        body += [f"ld.param.u64 %p, [{name}_{op}];", "cvta.to.global.u64 %p, %p;",
                 f"mul.wide.u32 %q, %lane, {4 * regs[op]};", "add.u64 %p, %p, %q;"]
        body += [f"ld.global.b32 %{op}{i}, [%p+{4 * i}];" for i in range(regs[op])]
    vec = lambda op: "{" + ", ".join(f"%{op}{i}" for i in range(regs[op])) + "}"  # noqa: E731
    body.append(f"mma.{'.'.join(mods)} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    body += [f"ld.param.u64 %p, [{name}_d];", "cvta.to.global.u64 %p, %p;", f"mul.wide.u32 %q, %lane, {4 * regs['d']};",
             "add.u64 %p, %p, %q;", *[f"st.global.b32 [%p+{4 * i}], %d{i};" for i in range(regs["d"])]]
    params = ", ".join(f".param .u64 {name}_{op}" for op in "abcd")
    entry = f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(body) + "\n  ret;\n}\n"
    NEEDS[name] = (7, 0)

    def check(module, kname: str) -> None:
        rng = _rng(kname)
        a, b = _values(rng, (4, 8, 4), "f16"), _values(rng, (4, 4, 8), "f16")
        c = _values(rng, (4, 8, 8), ctype)
        out = np.zeros((32, regs["d"]), np.uint32)
        module.launch(kname, (1, 1, 1), (32, 1, 1), [model.quad_pack(a, "a", alayout, "f16").ravel(),
                                           model.quad_pack(b, "b", blayout, "f16").ravel(),
                                           model.quad_pack(c, "c", ctype, ctype).ravel(), out.ravel()])
        got = model.quad_unpack(out, dtype)
        unit = (2.0**-10 if dtype == "f16" else 2.0**-23) * 2
        for q in range(4):
            want = a[q] @ b[q] + c[q]
            bad = np.abs(got[q] - want) > model.error_bound(a[q], b[q], c[q], unit)
            assert not bad.any(), f"product {q}: at {np.argwhere(bad)[:4].tolist()} got {got[q][bad][:4].tolist()}"

    return Instance(mods, name, entry, check, target=TARGET)


def _mma_instances(tf: TargetForm) -> list[Instance]:
    head = ("sync", "aligned")
    syntax = tf.syntax
    if ".alayout.blayout." in syntax:  # m8n8k4 .f16
        return [quad_instance((*head, "m8n8k4", al, bl, d, "f16", "f16", c))
                for al, bl, d, c in (("row", "col", "f32", "f32"), ("col", "row", "f16", "f16"),
                                     ("row", "row", "f32", "f16"), ("col", "col", "f32", "f32"))]
    if ".f16.f16." in syntax:
        shape = "m16n8k8" if ".m16n8k8." in syntax else "m16n8k16"
        return [mma_instance((*head, shape, "row", "col", t, "f16", "f16", t)) for t in ("f16", "f32")]
    if "tf32.tf32" in syntax:
        return [mma_instance((*head, "m16n8k4", "row", "col", "f32", "tf32", "tf32", "f32"))]
    if "atype16" in syntax:
        return [mma_instance((*head, "m16n8k8", "row", "col", "f32", t, t, "f32")) for t in ("bf16", "tf32")]
    if "bf16.bf16" in syntax:
        return [mma_instance((*head, "m16n8k16", "row", "col", "f32", "bf16", "bf16", "f32"))]
    f64 = ("f64",) * 4
    if ".m8n8k4." in syntax:  # .f64
        return [mma_instance((*head, "m8n8k4", "row", "col", *f64)),
                mma_instance((*head, "m8n8k4", "row", "col", "rn", *f64)),
                *[mma_instance((*head, "m8n8k4", "row", "col", r, *f64), refused=r"directed rounding")
                  for r in ("rz", "rm", "rp")]]
    if "dshape" in syntax:
        out = [mma_instance((*head, s, "row", "col", *extra, *f64), needs=(9, 0))
               for s, extra in (("m16n8k4", ()), ("m16n8k8", ("rn",)), ("m16n8k16", ()))]
        return out + [mma_instance((*head, "m16n8k8", "row", "col", r, *f64), refused=r"directed rounding")
                      for r in ("rz", "rm", "rp")]
    # integer
    combos = [("m8n8k16", (), "s8", "s8"), ("m16n8k16", ("satfinite",), "u8", "s8"),
              ("m16n8k32", (), "s8", "u8"), ("m16n8k32", ("satfinite",), "u8", "u8"),
              ("m16n8k16", (), "s8", "s8"), ("m8n8k16", ("satfinite",), "s8", "s8")]
    return [mma_instance((*head, s, "row", "col", *sat, "s32", a, b, "s32")) for s, sat, a, b in combos]


# ---------------------------------------------------------------------- ldmatrix / stmatrix / movmatrix
# bytes between the rows of a matrix in shared memory: rows need not be contiguous, but each row
# address must be 16-byte aligned (the manual: four threads move each 16-byte row)
PITCH = 32


def _row_address(name: str, generic: bool, pitch: int) -> list[str]:
    """%ra = the address of row (lane % 8) of matrix (lane / 8): the rows ldmatrix/stmatrix take."""
    lines = ["mov.u32 %lane, %tid.x;", "and.b32 %r1, %lane, 7;", "shr.u32 %r2, %lane, 3;",
             f"mul.lo.u32 %r1, %r1, {pitch};", f"mad.lo.u32 %r1, %r2, {8 * pitch}, %r1;",
             f"mov.u32 %r2, {name}_smem;", "add.u32 %ra, %r2, %r1;"]
    if generic:
        lines += ["cvt.u64.u32 %ga, %ra;", "cvta.shared.u64 %ga, %ga;"]
    return lines


def _copy(name: str, to_shared: bool, pitch: int) -> list[str]:
    """The 4 matrices' rows between global `<name>_mem` ([4*8 rows][8 x .b16]) and shared."""
    lines = [f"ld.param.u64 %p, [{name}_mem];", "cvta.to.global.u64 %p, %p;", "mov.u32 %r3, 0;", f"{name}_copy:",
             "shr.u32 %r4, %r3, 4;", f"mul.lo.u32 %r4, %r4, {pitch};", "and.b32 %r5, %r3, 15;", "add.u32 %r4, %r4, %r5;",
             f"mov.u32 %r5, {name}_smem;", "add.u32 %r4, %r4, %r5;", "cvt.u64.u32 %q, %r3;", "add.u64 %q, %p, %q;"]
    lines += ["ld.global.b8 %h, [%q];", "st.shared.b8 [%r4], %h;"] if to_shared else \
             ["ld.shared.b8 %h, [%r4];", "st.global.b8 [%q], %h;"]
    return lines + ["add.u32 %r3, %r3, 1;", "setp.lt.u32 %pr, %r3, 512;", f"@%pr bra {name}_copy;"]


def _matrix_entry(name: str, body: list[str], pitch: int = PITCH) -> tuple[str, str]:
    regs = [".reg .b32 %lane, %ra, %r<8>, %m<4>;", ".reg .b64 %p, %q, %ga;", ".reg .b16 %h;", ".reg .pred %pr;"]
    params = f".param .u64 {name}_mem, .param .u64 {name}_regs"
    entry = f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(regs + body) + "\n  ret;\n}\n"
    return entry, f".shared .align 16 .b8 {name}_smem[{4 * 8 * pitch}];"


def _regs_io(name: str, count: int, load: bool) -> list[str]:
    lines = [f"ld.param.u64 %p, [{name}_regs];", "cvta.to.global.u64 %p, %p;", f"mul.wide.u32 %q, %lane, {4 * count};",
             "add.u64 %p, %p, %q;"]
    return lines + [f"ld.global.b32 %m{i}, [%p+{4 * i}];" if load else f"st.global.b32 [%p+{4 * i}], %m{i};"
                    for i in range(count)]


def _count_trans(mods: tuple[str, ...]) -> tuple[int, bool]:
    return next(int(m[1]) for m in mods if m in ("x1", "x2", "x4")), "trans" in mods


def ldst_instance(opcode: str, mods: tuple[str, ...], refused: str | None = None, target: str = TARGET,
                  pitch: int = PITCH) -> Instance:
    """The form moving 4 matrices whose rows lie `pitch` bytes apart; a pitch the manual forbids
    (rows not 16-byte aligned) makes a fault instance."""
    name = f"{opcode}_" + _mangle(mods[2:]) + ("" if pitch == PITCH else f"_pitch{pitch}")
    count, trans = _count_trans(mods)
    regs_n = 2 * count if "m16n16" in mods else count  # a 16x16 .b8 matrix is two registers per lane
    generic = not any(m.startswith("shared") for m in mods)
    addr = "[%ga]" if generic else "[%ra]"
    vec = "{" + ", ".join(f"%m{i}" for i in range(regs_n)) + "}"
    text = f"{opcode}.{'.'.join(mods)}"
    if opcode == "ldmatrix":
        body = [*_row_address(name, generic, pitch), *_copy(name, True, pitch), "bar.sync 0;", f"{text} {vec}, {addr};",
                *_regs_io(name, count, load=False)]
    else:
        body = [*_row_address(name, generic, pitch), *_regs_io(name, count, load=True), f"{text} {addr}, {vec};",
                "bar.sync 0;", "setp.ne.u32 %pr, %lane, 0;", f"@%pr bra {name}_done;", *_copy(name, False, pitch),
                f"{name}_done:"]
    entry, decls = _matrix_entry(name, body, pitch)
    NEEDS[name] = (9, 0) if opcode == "stmatrix" else (8, 0)

    def check(module, kname: str) -> None:
        rng = _rng(kname)
        mats = rng.integers(0, 1 << 16, (4, 8, 8)).astype(np.uint16)
        mem = mats.reshape(32, 8).view(np.uint8).ravel().copy()
        regs = np.zeros((32, count), np.uint32)
        if opcode == "stmatrix":
            regs = rng.integers(0, 1 << 32, (32, count), dtype=np.uint64).astype(np.uint32)
            mem[:] = 0
        module.launch(kname, (1, 1, 1), (32, 1, 1), [mem, regs.ravel()])
        stored = mem.view(np.uint16).reshape(4, 8, 8)
        for m in range(count):
            layout = (stored if opcode == "stmatrix" else mats)[m]
            frag = model.fragment_8x8(layout.T if trans else layout)
            assert (frag == regs[:, m]).all(), f"matrix {m}: lanes {np.flatnonzero(frag != regs[:, m]).tolist()} differ"

    if pitch % 16:
        check = expect_misaligned(lambda: [np.zeros(512, np.uint8), np.zeros(32 * count, np.uint32)])
    return Instance(mods, name, entry, check, decls, target=target, refused=refused)


def movmatrix_instance() -> Instance:
    mods = ("sync", "aligned", "m8n8", "trans", "b16")
    name = "movmatrix_" + _mangle(mods[2:])
    body = ["mov.u32 %lane, %tid.x;", *_regs_io(name, 1, load=True), f"movmatrix.{'.'.join(mods)} %m1, %m0;",
            "mov.b32 %m0, %m1;", *_regs_io(name, 1, load=False)]
    entry, _ = _matrix_entry(name, body)
    NEEDS[name] = (8, 0)

    def check(module, kname: str) -> None:
        x = _rng(kname).integers(0, 1 << 16, (8, 8)).astype(np.uint16)
        regs = model.fragment_8x8(x)
        module.launch(kname, (1, 1, 1), (32, 1, 1), [np.zeros(8, np.uint8), regs])
        want = model.fragment_8x8(x.T)
        assert (regs == want).all(), f"lanes {np.flatnonzero(regs != want).tolist()} differ"

    return Instance(mods, name, entry, check, target=TARGET)


def instances(tf: TargetForm) -> list[Instance]:
    if tf.opcode.startswith("wmma"):
        return _wmma_instances(tf)
    if tf.opcode == "mma":
        return _mma_instances(tf)
    if tf.opcode == "movmatrix":
        return [movmatrix_instance()]
    head = ("sync", "aligned", "m8n8")
    out = [ldst_instance(tf.opcode, (*head, num, *trans, *ss, "b16"))
           for num, trans, ss in (("x1", (), ("shared",)), ("x2", ("trans",), ("shared::cta",)), ("x4", (), ()),
                                  ("x4", ("trans",), ("shared",)), ("x1", ("trans",), ()))]
    wide = ("m16n16", "x1", "trans", "shared", "b8") if tf.opcode == "ldmatrix" else ("m16n8", "x1", "trans", "shared", "b8")
    return out + [ldst_instance(tf.opcode, ("sync", "aligned", *wide), refused=r"only the m8n8 \.b16 shape",
                                target="sm_100a")]


# ---------------------------------------------------------------------- wmma (m16n16k16 .f16/.bf16)
# wmma's fragment layout is the implementation's choice, so only load -> mma -> store is observable:
# each instance is a whole 16x16x16 product D = A*B + C with the matrices in memory in the given
# layouts, pitch `stride` elements (the leading dimension when the operand is left out), in
# `space` (global memory copied to and from .shared first for the shared forms), checked against
# numpy. Every row starts at a multiple of its fragment's size in bytes, as the manual requires:
# 32 for .f16 A/B and .f32/.s32 C/D, 16 for .bf16/.tf32 A/B and .f16/.f64 C/D, 8 for .s8/.u8
# and .f64 A/B; the strides are such multiples for every operand, and not the leading dimension.
WMMA_CONFIGS = {  # name: (shape, A type, B type, C type, D type, layouts of A, B, C, D, space (None: generic),
    # stride (None: left out), extra wmma.mma modifiers)
    "w1": ("m16n16k16", "f16", "f16", "f32", "f32", ("row", "col", "row", "row"), "global", None, ()),
    "w2": ("m16n16k16", "f16", "f16", "f16", "f16", ("col", "row", "col", "col"), "shared", 48, ()),
    "w3": ("m16n16k16", "f16", "f16", "f32", "f16", ("row", "row", "row", "col"), "shared::cta", None, ()),
    "w4": ("m16n16k16", "f16", "f16", "f16", "f32", ("col", "col", "row", "row"), None, 32, ()),
    "b1": ("m16n16k16", "bf16", "bf16", "f32", "f32", ("row", "col", "col", "row"), "global", None, ()),
    "b2": ("m16n16k16", "bf16", "bf16", "f32", "f32", ("col", "row", "row", "col"), "shared", 24, ()),
    "b3": ("m16n16k16", "bf16", "bf16", "f32", "f32", ("row", "row", "row", "row"), "shared::cta", 40, ()),
    "b4": ("m16n16k16", "bf16", "bf16", "f32", "f32", ("col", "col", "row", "row"), None, None, ()),
    "t1": ("m16n16k8", "tf32", "tf32", "f32", "f32", ("row", "col", "row", "col"), "global", None, ()),
    "t2": ("m16n16k8", "tf32", "tf32", "f32", "f32", ("col", "row", "col", "row"), "shared", 24, ()),
    "t3": ("m16n16k8", "tf32", "tf32", "f32", "f32", ("row", "row", "row", "row"), "shared::cta", None, ()),
    "t4": ("m16n16k8", "tf32", "tf32", "f32", "f32", ("col", "col", "col", "col"), None, 24, ()),
    "d1": ("m8n8k4", "f64", "f64", "f64", "f64", ("row", "col", "row", "col"), "global", None, ()),
    "d2": ("m8n8k4", "f64", "f64", "f64", "f64", ("col", "row", "col", "row"), "shared", 12, ("rn",)),
    "d3": ("m8n8k4", "f64", "f64", "f64", "f64", ("row", "row", "row", "row"), "shared::cta", None, ()),
    "d4": ("m8n8k4", "f64", "f64", "f64", "f64", ("col", "col", "col", "col"), None, 20, ("rn",)),
    "i1": ("m16n16k16", "s8", "s8", "s32", "s32", ("row", "col", "row", "row"), "global", None, ()),
    "i2": ("m16n16k16", "u8", "u8", "s32", "s32", ("col", "row", "col", "col"), "shared", 24, ("satfinite",)),
    "i3": ("m16n16k16", "s8", "s8", "s32", "s32", ("row", "row", "row", "col"), "shared::cta", None, ("satfinite",)),
    "i4": ("m16n16k16", "u8", "u8", "s32", "s32", ("col", "col", "row", "row"), None, 48, ()),
}
# products with an address the manual forbids, as (configuration, bytes added to the operands'
# base addresses): the launch must fail with 716 at the first misaligned wmma.load/store. Each
# misaligned row start is off even the 4-byte words an NVIDIA GPU moves an .f16/.bf16 pair in.
WMMA_FAULTS = {
    # rows 34 bytes apart: the .bf16 A and B rows start off their 16-byte fragment size
    "stride17": (("m16n16k16", "bf16", "bf16", "f32", "f32", ("row", "row", "row", "row"), "shared::cta", 17, ()), {}),
    # A's base 2 bytes past a 32-byte boundary
    "abase2": (("m16n16k16", "f16", "f16", "f32", "f32", ("row", "col", "row", "row"), "global", None, ()), {"a": 2}),
    # D's base (.f16, row-major) 2 bytes past a 16-byte boundary
    "dbase2": (("m16n16k16", "f16", "f16", "f16", "f16", ("row", "col", "row", "row"), None, None, ()), {"d": 2}),
}
WMMA_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f64": 8, "s8": 1, "u8": 1, "s32": 4}
WMMA_DIMS = {"m16n16k16": (16, 16, 16), "m16n16k8": (16, 16, 8), "m8n8k4": (8, 8, 4)}
# registers per fragment (the manual's "Matrix Fragments for WMMA"): A/B by type, C/D by type
WMMA_REGS_AB = {"f16": 8, "bf16": 4, "tf32": 4, "f64": 1, "s8": 2, "u8": 2}
WMMA_REGS_CD = {"f16": 4, "f32": 8, "f64": 2, "s32": 8}


def _wmma_copy(name: str, op: str, nbytes: int, to_shared: bool) -> list[str]:
    """The 32 lanes copy operand `op`'s bytes between global memory (%g{op}) and `<name>_s{op}`."""
    loop, done = f"{name}_{op}_copy", f"{name}_{op}_copied"
    move = ["ld.global.b8 %h, [%q];", "st.shared.b8 [%r2], %h;"] if to_shared else \
           ["ld.shared.b8 %h, [%r2];", "st.global.b8 [%q], %h;"]
    return ["mov.u32 %r1, %lane;", f"{loop}:", f"setp.ge.u32 %pr, %r1, {nbytes};", f"@%pr bra {done};",
            "cvt.u64.u32 %q, %r1;", f"add.u64 %q, %g{op}, %q;", f"mov.u32 %r2, {name}_s{op};", "add.u32 %r2, %r2, %r1;",
            *move, "add.u32 %r1, %r1, 32;", f"bra.uni {loop};", f"{done}:"]


def _wmma_regs(op: str, etype: str) -> int:
    return WMMA_REGS_AB[etype] if op in "ab" else WMMA_REGS_CD[etype]


def _aligned(a: np.ndarray) -> np.ndarray:
    """`a` copied to a 256-byte boundary, as cuMemAlloc places buffers (numpy may place them at
    16 bytes, short of an .f16 A fragment's 32)."""
    raw = np.zeros(a.nbytes + 256, np.uint8)
    start = -raw.ctypes.data % 256
    out = raw[start:start + a.nbytes].view(a.dtype)
    out[:] = a
    return out


def wmma_instance(opcode: str, config: str, operand: str) -> Instance:
    """The product `config` (WMMA_CONFIGS, or WMMA_FAULTS: a fault instance) as an instance of
    the wmma form line of `opcode` (its `operand`: a, b or c for wmma.load, d for wmma.store, mma
    for wmma.mma)."""
    settings, offsets = WMMA_FAULTS[config] if config in WMMA_FAULTS else (WMMA_CONFIGS[config], {})
    shape, at, bt, ct, dt, (la, lb, lc, ld), space, stride, extra = settings
    name = f"{opcode.replace('.', '_')}_{operand}_{config}"
    m, n, k = WMMA_DIMS[shape]
    dims = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}
    types = {"a": at, "b": bt, "c": ct, "d": dt}
    layouts = {"a": la, "b": lb, "c": lc, "d": ld}
    lead = {op: dims[op][1] if layouts[op] == "row" else dims[op][0] for op in "abcd"}
    pitch = {op: stride or lead[op] for op in "abcd"}
    major = {op: dims[op][0] if layouts[op] == "row" else dims[op][1] for op in "abcd"}
    nregs = {op: _wmma_regs(op, types[op]) for op in "abcd"}
    width = {op: 64 if types[op] == "f64" else 32 for op in "abcd"}
    ss = (space,) if space else ()
    shared = space is not None and space.startswith("shared")
    size = {op: major[op] * pitch[op] * WMMA_BYTES[types[op]] for op in "abcd"}
    stride_arg = f", {stride}" if stride else ""
    vec = lambda op: "{" + ", ".join(f"%f{op}{i}" for i in range(nregs[op])) + "}"  # noqa: E731
    mods = {op: (op, "sync", "aligned", layouts[op], shape, *ss, types[op]) for op in "abcd"}
    mma_types = (dt, ct) if at == "f16" else (dt, at, bt, ct)
    tail = (*mma_types, *extra) if dt == "s32" else (*extra, *mma_types)  # as the grammar lines order them
    mods["mma"] = ("sync", "aligned", la, lb, shape, *tail)
    body = ["mov.u32 %lane, %tid.x;"]
    for op in "abcd":
        body += [f"ld.param.u64 %g{op}, [{name}_{op}];", f"cvta.to.global.u64 %g{op}, %g{op};"]
        if shared:
            body.append(f"mov.u64 %p{op}, {name}_s{op};")
        elif space is None:
            body.append(f"ld.param.u64 %p{op}, [{name}_{op}];")  # a generic address of global memory
        else:
            body.append(f"mov.u64 %p{op}, %g{op};")
        if op in offsets:
            body.append(f"add.u64 %p{op}, %p{op}, {offsets[op]};")
    if shared:
        body += [line for op in "abc" for line in _wmma_copy(name, op, size[op], True)] + ["bar.sync 0;"]
    body += [f"wmma.load.{'.'.join(mods[op])} {vec(op)}, [%p{op}]{stride_arg};" for op in "abc"]
    body.append(f"wmma.mma.{'.'.join(mods['mma'])} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    body.append(f"wmma.store.{'.'.join(mods['d'])} [%pd], {vec('d')}{stride_arg};")
    if shared:
        body += ["bar.sync 0;", *_wmma_copy(name, "d", size["d"], False)]
    regs = [f".reg .b{width[op]} %f{op}<{nregs[op]}>;" for op in "abcd"] + [
        ".reg .b32 %lane, %r1, %r2;", ".reg .b64 %q, %ga, %gb, %gc, %gd, %pa, %pb, %pc, %pd;", ".reg .b16 %h;",
        ".reg .pred %pr;"]
    params = ", ".join(f".param .u64 {name}_{op}" for op in "abcd")
    entry = f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(regs + body) + "\n  ret;\n}\n"
    decls = "\n".join(f".shared .align 32 .b8 {name}_s{op}[{size[op]}];" for op in "abcd") if shared else ""
    NEEDS[name] = (8, 0)
    dtypes = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

    def store(matrix: np.ndarray, op: str) -> np.ndarray:
        flat = np.zeros(major[op] * pitch[op], np.float64 if types[op] not in ("s8", "u8", "s32") else np.int64)
        for r in range(dims[op][0]):
            for c in range(dims[op][1]):
                flat[(r * pitch[op] + c) if layouts[op] == "row" else (c * pitch[op] + r)] = matrix[r, c]
        return model.to_bits(flat, types[op]).astype(dtypes[WMMA_BYTES[types[op]]])

    def check(module, kname: str) -> None:
        rng = _rng(kname)
        a, b = _values(rng, dims["a"], at), _values(rng, dims["b"], bt)
        c = _values(rng, dims["c"], ct)
        if "satfinite" in extra:  # past the top of the s32 range for every element
            c = np.full(dims["c"], 2**31 - 5, np.int64)
            a, b = np.abs(a).clip(0, 127), np.abs(b).clip(0, 127)
        out = _aligned(np.zeros(major["d"] * pitch["d"], dtypes[WMMA_BYTES[dt]]))
        module.launch(kname, (1, 1, 1), (32, 1, 1), [_aligned(store(a, "a")), _aligned(store(b, "b")),
                                                     _aligned(store(c, "c")), out])
        raw = model.from_bits(out.astype(np.uint64), dt).reshape(major["d"], pitch["d"])
        got = raw[:, :dims["d"][1]] if ld == "row" else raw[:, :dims["d"][0]].T
        if dt == "s32":
            want = model.reference_int(a, b, c, "satfinite" in extra)
            assert (got == want).all(), f"{np.argwhere(got != want)[:4].tolist()} differ"
            return
        want = a @ b + c
        unit = {"f16": 2.0**-10, "f32": 2.0**-23, "f64": 2.0**-52}[dt] * 2
        bad = np.abs(got - want) > model.error_bound(a, b, c, unit)
        assert not bad.any(), f"at {np.argwhere(bad)[:4].tolist()} got {got[bad][:4].tolist()}, want {want[bad][:4].tolist()}"

    if config in WMMA_FAULTS:  # each buffer with room for its operand's base offset
        check = expect_misaligned(lambda: [_aligned(np.zeros(size[op] + 16, np.uint8)) for op in "abcd"])
    return Instance(mods[operand], name, entry, check, decls, target=TARGET)


# wmma's integer shapes m8n32k16/m32n8k16 are refused: one instruction each, registers as the
# manual's fragment tables give them (A, B, C/D)
WIDE_INT_REGS = {"m8n32k16": (1, 4, 8), "m32n8k16": (4, 1, 8)}


def wmma_refused_instance(opcode: str, operand: str, shape: str) -> Instance:
    ra, rb, rc = WIDE_INT_REGS[shape]
    count = {"a": ra, "b": rb, "c": rc, "d": rc, "mma": 0}[operand]
    name = f"{opcode.replace('.', '_')}_{operand}_{shape}"
    vec = lambda p, n: "{" + ", ".join(f"%{p}{i}" for i in range(n)) + "}"  # noqa: E731
    if operand == "mma":
        mods = ("sync", "aligned", "row", "col", shape, "s32", "s8", "s8", "s32")
        line = f"wmma.mma.{'.'.join(mods)} {vec('c', rc)}, {vec('a', ra)}, {vec('b', rb)}, {vec('c', rc)};"
    else:
        mods = (operand, "sync", "aligned", "row", shape, "s8" if operand in "ab" else "s32")
        regs = vec({"a": "a", "b": "b"}.get(operand, "c"), count)
        line = f"wmma.store.{'.'.join(mods)} [%p], {regs};" if operand == "d" else \
            f"wmma.load.{'.'.join(mods)} {regs}, [%p];"
    body = [".reg .b32 %a<4>, %b<4>, %c<8>;", ".reg .b64 %p;", f"ld.param.u64 %p, [{name}_p];", line]
    entry = f".visible .entry {name}(.param .u64 {name}_p)\n{{\n  " + "\n  ".join(body) + "\n  ret;\n}\n"
    return Instance(mods, name, entry, lambda module, kname: None, target=TARGET,
                    refused=r"only the wmma shapes")


def _wmma_family(syntax: str) -> str:
    if ".bf16" in syntax:
        return "b"
    if "m16n16k8" in syntax:
        return "t"
    if "m8n8k4" in syntax:
        return "d"
    if "itype" in syntax or ".s32" in syntax:
        return "i"
    return "w"


def _wmma_instances(tf: TargetForm) -> list[Instance]:
    operand = {"wmma.load": tf.syntax.split(".")[2], "wmma.store": "d", "wmma.mma": "mma"}[tf.opcode]
    family = _wmma_family(tf.syntax)
    out = [wmma_instance(tf.opcode, config, operand) for config in WMMA_CONFIGS if config[0] == family]
    if family == "i":
        out += [wmma_refused_instance(tf.opcode, operand, shape) for shape in WIDE_INT_REGS]
    if family == "d" and operand == "mma":
        out += [_rounding_refused(inst, r) for inst, r in zip(out[:3], ("rz", "rm", "rp"))]
    return out


def _rounding_refused(inst: Instance, rnd: str) -> Instance:
    """An .f64 wmma.mma product with a directed rounding modifier, which we refuse."""
    mods = tuple(m for m in inst.mods if m != "rn")
    at = mods.index("m8n8k4") + 1
    mods = (*mods[:at], rnd, *mods[at:])
    text = inst.entry.replace(f"wmma.mma.{'.'.join(inst.mods)}", f"wmma.mma.{'.'.join(mods)}")
    name = f"{inst.name}_{rnd}"
    return Instance(mods, name, text.replace(inst.name, name), inst.check, inst.decls.replace(inst.name, name),
                    target=TARGET, refused=r"directed rounding")


def fault_instances() -> list[Instance]:
    """Addresses the manual forbids, one kernel each, whose launch must fail with 716: ldmatrix
    and stmatrix rows 24 bytes apart (an NVIDIA H100 faults on them: 716), wmma rows 34 bytes
    apart, and wmma.load/wmma.store bases off their fragment's alignment."""
    head = ("sync", "aligned", "m8n8")
    return [ldst_instance("ldmatrix", (*head, "x1", "shared", "b16"), pitch=24),
            ldst_instance("ldmatrix", (*head, "x2", "trans", "shared::cta", "b16"), pitch=24),
            ldst_instance("stmatrix", (*head, "x4", "trans", "shared", "b16"), pitch=24),
            wmma_instance("wmma.load", "stride17", "a"), wmma_instance("wmma.load", "abase2", "a"),
            wmma_instance("wmma.store", "dbase2", "d")]


def run_fault(name: str, target: str) -> None:
    """Fault instance `name` on `target` (test_mma.py runs it in a child process on a CUDA
    driver, where the fault spoils the context for good)."""
    from conformance.harness import compile_module

    inst = next(i for i in fault_instances() if i.name == name)
    inst.check(compile_module(module_text(inst), target), name)
