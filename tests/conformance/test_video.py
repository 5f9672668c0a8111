"""Video instructions, SIMD (vadd2 ... vset4) and scalar (vadd ... vset, vmad): large random samples
against the exact reference of models/video.py, hand-computed rows at the saturation limits,
shift limits and across signed/unsigned mixes (which also pin the reference itself), and the
forms refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.harness import DTYPES
from conformance.models import video as ref
from conformance.values import check_bits
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.semantics import SEMANTICS, supports
from zluda_py.ptx import ast

OPCODES = [f"{op}{n}" for n in (2, 4) for op in ref.ARITH]
TYPES = ["u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32"]


def _forms() -> list[str]:
    arith = [f"{op}.{t}{mode}" for op in OPCODES for t in TYPES for mode in ("", ".sat", ".add")]
    sets = [f"vset{n}.{t}.{cmp}{mode}" for n in (2, 4) for t in ("u32.s32", "s32.u32")
            for cmp in ref.CMP for mode in ("", ".add")]
    return arith + sets


def test_random_samples(run):
    """Every opcode, in every mode, with mixed-signedness types: 3,000 random rows each."""
    forms = _forms()
    a, b, c = ref.words(4, seed=5, count=3000)
    outs = run.batch({f: (f, [a, b, c]) for f in forms}, group=32)
    for f in forms:
        opcode, *mods = f.split(".")
        check_bits(outs[f][0], ref.expected(opcode, tuple(mods), a, b, c), [a, b, c], f)


def _scalar_forms() -> list[str]:
    arith = [f"{op}.{t}{m}" for op in ref.SCALAR[:5] for t in ("s32.u32.s32", "u32.s32.u32")
             for m in ("", ".sat", ".sat.add", ".min", ".max")]
    shifts = [f"{op}.{t}.u32.{mode}{m}" for op in ("vshl", "vshr") for t in ("u32.u32", "s32.s32")
              for mode in ("clamp", "wrap") for m in (("", ".add") if op == "vshl" else ("", ".sat", ".max"))]
    sets = [f"vset.{t}.{cmp}{m}" for t in ("u32.s32", "s32.u32") for cmp in ref.CMP for m in ("", ".add", ".min")]
    return arith + shifts + sets


def test_scalar_random_samples(run):
    """Each scalar opcode with every secondary operation and mixed-signedness types."""
    forms = _scalar_forms()
    a, b, c = ref.scalar_inputs(seed=9, count=3000)
    cases = {f: (f, [a, b, c] if any(m in f.split(".") for m in ref.SECONDARY) else [a, b]) for f in forms}
    outs = run.batch(cases, group=32)
    for f in forms:
        opcode, *mods = f.split(".")
        exp = [ref.scalar(opcode, tuple(mods), int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
        check_bits(outs[f][0], exp, [a, b, c], f)


# (form, a, b, c, d) worked out by hand from the rules of models/video.py (the manual's definition,
# and the NVIDIA H200's measured behaviour where it departs from it).
EDGES = [
    # sum of absolute differences (__vsadu4): bytes 0x80/0x80, 0x00/0x01, 0xff/0x00, 0x00/0xff
    ("vabsdiff4.u32.u32.u32.add", 0x00FF0080, 0xFF000180, 10, 10 + 0 + 1 + 255 + 255),
    ("vabsdiff4.s32.s32.s32", 0x00FF0080, 0xFF000180, 0, 0x01010100),
    # s8 saturation: 127+1, 127-1, -128-128, -128-1
    ("vadd4.s32.s32.s32.sat", 0x7F7F8080, 0x01FF80FF, 0, 0x7F7E8080),
    ("vadd4.u32.s32.s32.sat", 0x7F7F8080, 0x01FF80FF, 0, 0x807E0000),
    ("vadd4.u32.u32.u32", 0xFF01FF01, 0x01FF0101, 0, 0x00000002),
    ("vadd4.u32.u32.u32.add", 0xFFFFFFFF, 0xFFFFFFFF, 0, 4 * 510),
    # accumulate of negative results: c + (0-1) + (0-65535)
    ("vsub2.s32.u32.u32.add", 0x00000000, 0xFFFF0001, 0, 0xFFFF0000),
    ("vsub2.u32.u32.u32.sat", 0x00010000, 0x0000FFFF, 0, 0x00010000),
    ("vsub2.s32.s32.s32.sat", 0x80007FFF, 0x0001FFFF, 0, 0x80007FFF),
    # averages round halves away from zero
    ("vavrg2.s32.s32.s32", 0xFFFD0003, 0x00000000, 0, 0xFFFE0002),
    ("vavrg2.s32.s32.s32", 0xFFFF0001, 0x00000000, 0, 0xFFFF0001),
    ("vavrg2.u32.u32.u32", 0xFFFFFFFF, 0xFFFF0000, 0, 0xFFFF8000),
    ("vavrg4.s32.s32.s32", 0x80807F7F, 0x80FF7F01, 0, 0x80BF7F40),
    # unsigned 255 against signed -1
    ("vmin4.s32.u32.s32.sat", 0x000000FF, 0x000000FF, 0, 0x000000FF),
    ("vmax4.s32.u32.s32.sat", 0x000000FF, 0x000000FF, 0, 0x0000007F),
    ("vmin4.u32.u32.s32.sat", 0x000000FF, 0x000000FF, 0, 0x00000000),
    ("vmax4.u32.u32.s32.sat", 0x000000FF, 0x000000FF, 0, 0x000000FF),
    ("vmax2.u32.s32.u32.add", 0x8000FFFF, 0x00000001, 5, 5 + 1 + 0),
    # signed byte 3 = -128 and byte 0 = 1 against unsigned 127 and 255
    ("vset4.s32.u32.lt", 0x80000001, 0x7F0000FF, 0xABCDEF12, 0x01000001),
    ("vset4.s32.u32.lt.add", 0x80000001, 0x7F0000FF, 0xFFFFFFFF, 0x00000001),
    ("vset4.u32.s32.ge", 0x80000001, 0x7F0000FF, 0, 0x01010101),
    ("vset2.s32.s32.eq.add", 0x12345678, 0x12345678, 40, 42),
    # scalar: 32-bit saturation with 33-bit signed/unsigned inputs; into .u32 it clamps only
    # below, a result above 2^32 - 1 wraps (H200)
    ("vadd.u32.u32.u32.sat", 0xFFFFFFFF, 1, 0, 0),
    ("vadd.s32.s32.s32.sat", 0x7FFFFFFF, 1, 0, 0x7FFFFFFF),
    ("vadd.s32.s32.s32.sat", 0x80000000, 0xFFFFFFFF, 0, 0x80000000),
    ("vadd.u32.s32.s32.sat", 0xFFFFFFFF, 0xFFFFFFFF, 0, 0),
    ("vadd.s32.u32.u32.sat", 0xFFFFFFFF, 0, 0, 0x7FFFFFFF),
    ("vsub.u32.u32.u32", 0, 1, 0, 0xFFFFFFFF),
    ("vabsdiff.u32.u32.s32", 0xFFFFFFFF, 0xFFFFFFFF, 0, 0),  # |(2^32 - 1) - (-1)| = 2^32
    ("vabsdiff.u32.u32.s32.sat", 0xFFFFFFFF, 0xFFFFFFFF, 0, 0),
    ("vmin.s32.u32.s32", 0x80000000, 0xFFFFFFFF, 0, 0xFFFFFFFF),
    ("vmax.s32.u32.s32", 0x80000000, 0xFFFFFFFF, 0, 0x80000000),
    # saturation comes before the secondary operation; c is signed as .dtype
    ("vadd.u32.u32.u32.sat.add", 0xFFFFFFFF, 0xFFFFFFFF, 2, 0),
    ("vadd.s32.s32.s32.min", 5, 6, 0xFFFFFFF0, 0xFFFFFFF0),
    ("vadd.u32.u32.u32.min", 5, 6, 0xFFFFFFF0, 11),
    ("vadd.u32.u32.u32.max", 0xFFFFFFFF, 0xFFFFFFFF, 5, 0xFFFFFFFE),
    # shifts: .clamp limits the amount to 32, .wrap takes it mod 32
    ("vshr.s32.s32.u32.clamp", 0x80000000, 40, 0, 0xFFFFFFFF),
    ("vshr.s32.s32.u32.wrap", 0x80000000, 40, 0, 0xFF800000),
    ("vshr.u32.u32.u32.clamp", 0x80000000, 32, 0, 0),
    ("vshr.s32.u32.u32.clamp", 0x80000000, 1, 0, 0x40000000),
    ("vshr.u32.s32.u32.sat.clamp", 0xFFFFFFF0, 2, 0, 0),
    ("vshl.u32.u32.u32.clamp", 1, 32, 0, 0),
    ("vshl.u32.u32.u32.clamp", 1, 31, 0, 0x80000000),
    ("vshl.u32.u32.u32.wrap", 1, 33, 0, 2),
    ("vshl.u32.u32.u32.clamp.add", 3, 31, 0x80000000, 0),
    # vshl (H200): .sat clamps the result modulo 2^34 (as signed) both ways; .min/.max compare
    # the result modulo 2^64 (sign-extended from 32 bits with .sat into .u32)
    ("vshl.u32.u32.u32.clamp.sat", 1, 32, 0, 0xFFFFFFFF),
    ("vshl.s32.s32.u32.clamp.sat", 2, 32, 0, 0x80000000),
    ("vshl.s32.s32.u32.wrap.sat", 1, 31, 0, 0x7FFFFFFF),
    ("vshl.u32.u32.u32.clamp.max", 0x18, 31, 0xB9BC4946, 0),
    ("vshl.s32.u32.u32.clamp.max", 0x80000000, 32, 0x49276A1C, 0x49276A1C),
    ("vshl.u32.u32.u32.clamp.sat.max", 0xAA, 24, 0xFB3016DC, 0xAA000000),
    ("vshl.u32.u32.u32.wrap.max", 1, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
    # vset: 2^32 - 1 (unsigned) against -1 (signed); c is read as .atype (H200)
    ("vset.u32.s32.lt", 0xFFFFFFFF, 0xFFFFFFFF, 0, 0),
    ("vset.s32.u32.lt", 0xFFFFFFFF, 0xFFFFFFFF, 0, 1),
    ("vset.u32.u32.eq.add", 7, 7, 0xFFFFFFFF, 0),
    ("vset.s32.s32.gt.max", 1, 0, 0xFFFFFFFE, 1),
    ("vset.s32.s32.gt.min", 1, 0, 0xFFFFFFFE, 0xFFFFFFFE),
    ("vset.u32.s32.gt.max", 1, 0, 0xFFFFFFFE, 0xFFFFFFFE),
    # vmad (H200): a, b, c read as signed whatever their types: (-1)(-1) + (-1) = 0
    ("vmad.u32.u32.u32", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0),
    ("vmad.u32.u32.u32.sat", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0),
    ("vmad.u32.u32.u32.shr15", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0),
    ("vmad.u32.u32.u32.sat.shr15", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0),
    ("vmad.u32.u32.u32.sat", 0xFFFFFFFF, 0xFFFFFFFE, 0, 2),
    ("vmad.s32.s32.s32.sat", 0x80000000, 0x80000000, 0, 0x7FFFFFFF),  # 2^62
    ("vmad.s32.s32.u32.sat", 0xFFFFFFFF, 0xFFFFFFFF, 0, 1),  # b read as signed: (-1)(-1)
    ("vmad.s32.s32.u32.sat", 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000000),
    ("vmad.u32.u32.s32.shr7", 1, 0xFFFFFFFF, 0, 0xFFFFFFFF),  # -1 >> 7 floors to -1
    ("vmad.u32.u32.u32.po.shr7", 1, 127, 0, 1),
    ("vmad.s32.s32.s32", 2, 3, 0xFFFFFFFE, 4),
    ("vmad.u32.u32.u32.shr15", 0, 0, 0xFFFFFFFF, 0xFFFFFFFF),  # c sign-extended even when unsigned
    ("vmad.s32.s32.s32.shr15", 0, 0, 0xFFFFFFFF, 0xFFFFFFFF),
    # unsigned final: the 64-bit pattern shifted logically, then clamped (H200)
    ("vmad.u32.u32.u32.shr7", 0, 0, 0x80000000, 0xFF000000),
    ("vmad.u32.u32.u32.sat.shr7", 0, 0, 0x80000000, 0xFFFFFFFF),
    ("vmad.u32.u32.u32.sat", 0, 0, 0x80000000, 0),
    # .min/.max compare a key: vadd's result wrapped to 32 bits and sign-extended (H200)
    ("vadd.s32.s32.s32.max", 1, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF),
    ("vadd.u32.u32.u32.max", 7, 0x7FFFFFFF, 0xA073AD41, 0x80000006),
    ("vadd.u32.u32.u32.max", 1, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
    ("vsub.u32.u32.u32.max", 0, 1, 1, 0xFFFFFFFF),
    # ... vabsdiff's exact one (2^32 + 1 is above every c)
    ("vabsdiff.u32.s32.u32.sat.max", 0x80000000, 0x80000001, 0xFFFFFFFF, 1),
    ("vabsdiff.s32.s32.u32.max", 0, 0x80000000, 0x7FFFFFFF, 0x80000000),
    # ... vmin's exact one: negative, above every c as .u32
    ("vmin.u32.s32.s32.max", 7, 0x80000000, 0xA02300C8, 0x80000000),
    # ... vshr's exact one, but wrapped with .sat into .u32
    ("vshr.u32.u32.u32.clamp.max", 0x80000000, 0, 0xD797DDFD, 0xD797DDFD),
    ("vshr.u32.u32.u32.sat.clamp.max", 0x80000000, 0, 0xD797DDFD, 0x80000000),
    ("vshr.s32.u32.u32.clamp.max", 0x80000000, 0, 0xD797DDFD, 0x80000000),
]


@pytest.mark.parametrize("form,a,b,c,d", EDGES, ids=[f"{e[0]}-{i}" for i, e in enumerate(EDGES)])
def test_reference_by_hand(form, a, b, c, d):
    assert ref.form_result(form, a, b, c) == d


def test_edges_on_target(run):
    # every row passes c: the scalar forms without a secondary operation then leave it unused
    cases = {f"{i}": (form, [np.array([x], DTYPES[32]) for x in (a, b, c)])
             for i, (form, a, b, c, _) in enumerate(EDGES)}
    outs = run.batch(cases, group=32)
    for i, (form, a, b, c, d) in enumerate(EDGES):
        check_bits(outs[f"{i}"][0], [d], [np.array([a, b, c], DTYPES[32])], form)


def _refusal(text: str, operands: list[ast.Operand] | None = None) -> str:
    opcode, *mods = text.split(".")
    inst = ast.Instruction(opcode, tuple(mods), operands or [], pos=ast.Pos("k.ptx", 7, 1))
    with pytest.raises(UnsupportedError) as err:
        SEMANTICS[opcode].operands(inst)
    assert err.value.cu_result == 218
    return str(err.value)


@pytest.mark.parametrize("text,detail", [
    ("vadd4.u32.u32.u32.sat.add", ".sat cannot be used with the .add accumulate"),
    ("vset4.u32.u32", "needs one comparison"),
    ("vset2.u32.u32.lt.gt", "needs one comparison"),
    ("vset4.u32.u32.ne.max", "modifier .max"),
    ("vadd4.b32.u32.u32", "operand type"),
    ("vmin2.u32.u32", "expected 3 type modifier(s)"),
    ("vshl.u32.u32.s32.wrap", "a shift needs .u32 amounts"),
    ("vshr.u32.u32.u32", "one of .clamp .wrap"),
    ("vadd.u32.u32.u32.add.min", "more than one secondary operation"),
    ("vset.u32.u32.lt.sat", "modifier .sat"),
    ("vset.u32.u32.lt.ge", "needs one comparison"),
])
def test_refused_forms(text, detail):
    msg = _refusal(text)
    assert msg.startswith(f"unsupported: {text}") and detail in msg and msg.endswith("at k.ptx:7")


@pytest.mark.parametrize("text,names,selector", [
    ("vsub4.s32.s32.s32.sat", ["%r1.b0", "%r2.b3210", "%r3", "%r4"], ".b0 on %r1"),
    ("vmax2.u32.u32.u32", ["%r1", "%r2", "%r3.h32", "%r4"], ".h32 on %r3"),
    ("vadd.s32.u32.s32.sat", ["%r1", "%r2.b0", "%r3.h1"], ".b0 on %r2"),
    ("vabsdiff.s32.s32.s32", ["%r1.h0", "%r2", "%r3", "%r4"], ".h0 on %r1"),
])
def test_operand_selectors_refused_by_name(text, names, selector):
    msg = _refusal(text, [ast.Reg(n) for n in names])
    assert f"operand selector {selector}" in msg


def test_scalar_c_without_secondary_is_unused(run):
    """`vadd d, a, b, c` (ptxas accepts c with no secondary operation or merge): d = a + b."""
    a, b, c = (np.array(v, DTYPES[32]) for v in ([1, 0xFFFFFFFF], [2, 1], [100, 5]))
    check_bits(run.run("vadd.u32.u32.u32", [a, b, c])[0], [3, 0], [a, b, c], "vadd with c")


def test_vmad_random_samples(run):
    forms = [f"vmad.{t}{m}" for t in ("u32.u32.u32", "s32.s32.s32", "u32.u32.s32", "s32.s32.u32")
             for m in ("", ".sat", ".po.shr7", ".sat.shr15", ".po.sat")]
    a, b, c = ref.scalar_inputs(seed=11, count=3000)
    outs = run.batch({f: (f, [a, b, c]) for f in forms}, group=32)
    for f in forms:
        mods = tuple(f.split(".")[1:])
        check_bits(outs[f][0], [ref.vmad(mods, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)], [a, b, c], f)


def test_vmad_refuses_two_scales():
    assert "more than one scale" in _refusal("vmad.u32.u32.u32.shr7.shr15")
    assert not supports("vmad", ("u32", "u32", "u32", "shr7", "shr15"))


def test_vshl_samples(run):
    """Every vshl form: both .dtype/.atype signednesses, .clamp and .wrap, with .sat and each
    secondary operation (recorded on the H200: tests/hardware/golden/video.npz). Amounts: the
    edges (0..65 among them), small random ones and random words."""
    forms = [f"vshl.{d}.{a}.u32.{mode}{m}" for d in ("u32", "s32") for a in ("u32", "s32")
             for mode in ("clamp", "wrap")
             for m in ("", ".sat", ".add", ".sat.add", ".min", ".max", ".sat.min", ".sat.max")]
    a, b, c = ref.scalar_inputs(seed=13, count=1500)
    b = b.copy()
    b[-1000:] %= 41  # amounts around the word size
    cases = {f: (f, [a, b, c] if any(m in f.split(".") for m in ref.SECONDARY) else [a, b]) for f in forms}
    outs = run.batch(cases, group=32)
    for f in forms:
        opcode, *mods = f.split(".")
        exp = [ref.scalar(opcode, tuple(mods), int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
        check_bits(outs[f][0], exp, [a, b, c], f)
