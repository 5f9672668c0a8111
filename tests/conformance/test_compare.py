"""setp / set with every comparison and combining operation, selp, slct."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.floatvals import operand_sets
from conformance.harness import PtxKernel, compile_module, make_op, ptx_kernel
from conformance.models.compare import (BOOL, FLOAT_OPS, INT_OPS, UNSIGNED_OPS, operands, packed_cmp, scalar_cmp,
                                        set_true, slct_ref)
from conformance.refs import FORMATS
from conformance.values import check_bits, pairs, random_bits
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.semantics import SEMANTICS, supports
from zluda_py.ptx import ast

SETP_INT = [(op, t) for t in ("s16", "s32", "s64", "u16", "u32", "u64") for op in INT_OPS] + \
    [(op, t) for t in ("u16", "u32", "u64") for op in UNSIGNED_OPS] + [(op, t) for t in ("b16", "b32", "b64")
                                                                       for op in ("eq", "ne")]
SETP_FLOAT = [(op, t, ftz) for op in FLOAT_OPS for t, ftz in (("f32", False), ("f32", True), ("f64", False),
                                                              ("f16", False), ("bf16", False), ("f16", True))]


@pytest.fixture(scope="module")
def setp_int(run):
    cases = {(op, t): (f"setp.{op}.{t}", list(pairs(int(t[1:]))), True) for op, t in SETP_INT}
    return cases, run.batch(cases)


@pytest.mark.parametrize("op,t", SETP_INT)
def test_setp_int(setp_int, op, t):
    cases, outs = setp_int
    _, (a, b), _ = cases[(op, t)]
    p, q = outs[(op, t)]
    exp = scalar_cmp(op, t, a, b)
    check_bits(p, exp.astype(np.uint8), [a, b], f"setp.{op}.{t}")
    check_bits(q, (~exp).astype(np.uint8), [a, b], f"setp.{op}.{t} q")


@pytest.fixture(scope="module")
def setp_float(run):
    cases = {(op, t, ftz): (f"setp.{op}{'.ftz' if ftz else ''}.{t}", operand_sets(FORMATS[t], 2, n=1500, seed=9))
             for op, t, ftz in SETP_FLOAT}
    return cases, run.batch(cases)


@pytest.mark.parametrize("op,t,ftz", SETP_FLOAT)
def test_setp_float(setp_float, op, t, ftz):
    cases, outs = setp_float
    text, (a, b) = cases[(op, t, ftz)]
    (p,) = outs[(op, t, ftz)]
    check_bits(p, scalar_cmp(op, t, a, b, ftz).astype(np.uint8), [a, b], text)


@pytest.mark.parametrize("boolop", ["and", "or", "xor"])
@pytest.mark.parametrize("op,t", [("lt", "s32"), ("gtu", "f32"), ("ne", "f64")])
def test_setp_combine(run, boolop, op, t):
    a, b = operands(t, 1500, seed=10)
    c = random_bits(1, len(a), seed=11)
    p, q = run.run(f"setp.{op}.{boolop}.{t}", [a, b, c], pred_out=True)
    base, k = scalar_cmp(op, t, a, b), c.astype(bool)
    check_bits(p, BOOL[boolop](base, k).astype(np.uint8), [a, b, c], "p")
    check_bits(q, BOOL[boolop](~base, k).astype(np.uint8), [a, b, c], "q")


@pytest.mark.parametrize("t", ["f16x2", "bf16x2"])
@pytest.mark.parametrize("op", ["lt", "equ", "nan"])
def test_setp_packed(run, t, op):
    a, b = operands(t, 1500, seed=12)
    p, q = run.run(f"setp.{op}.{t}", [a, b], pred_out=True)
    lo, hi = packed_cmp(op, t, a, b)
    check_bits(p, lo.astype(np.uint8), [a, b], "p (low halves)")
    check_bits(q, hi.astype(np.uint8), [a, b], "q (high halves)")


@pytest.mark.parametrize("dtype", ["u32", "s32", "f32"])
@pytest.mark.parametrize("op,t", [("lt", "s32"), ("hs", "u64"), ("leu", "f32"), ("ge", "f64")])
def test_set(run, dtype, op, t):
    a, b = operands(t, 1500, seed=13)
    (d,) = run.run(f"set.{op}.{dtype}.{t}", [a, b])
    true = 0x3F800000 if dtype == "f32" else 0xFFFFFFFF  # the manual's 1.0f / 0xffffffff
    assert set_true(dtype) == true
    check_bits(d, np.where(scalar_cmp(op, t, a, b), true, 0), [a, b], f"set.{op}.{dtype}.{t}")


# 16-bit destinations (the half-precision set; ptxas-valid combinations) and packed sources.
# True is written as all ones (integer dtype) or 1.0 in the dtype's format, as the manual lists.
TRUE = {"u16": 0xFFFF, "s16": 0xFFFF, "u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f16": 0x3C00, "bf16": 0x3F80}
SET_16 = [("eq", None, False, "f16", "f16"), ("ltu", "and", True, "f16", "f32"), ("hs", None, False, "f16", "u16"),
          ("gt", "xor", False, "bf16", "s64"), ("nan", None, False, "bf16", "bf16"), ("ne", "or", False, "bf16", "f16"),
          ("le", None, True, "u16", "f16"), ("geu", "and", False, "s16", "bf16"), ("equ", None, True, "u32", "f16"),
          ("lt", None, False, "s32", "bf16"), ("lt", "or", True, "f16", "f16"), ("num", None, False, "f16", "f64")]


@pytest.mark.parametrize("op,boolop,ftz,dtype,t", SET_16)
def test_set_16bit(run, op, boolop, ftz, dtype, t):
    text = f"set.{op}{'.' + boolop if boolop else ''}{'.ftz' if ftz else ''}.{dtype}.{t}"
    a, b = operands(t, 1500, seed=14)
    c = random_bits(1, len(a), seed=15)
    (d,) = run.run(text, [a, b] + ([c] if boolop else []))
    r = BOOL[boolop](scalar_cmp(op, t, a, b, ftz), c.astype(bool))
    check_bits(d, np.where(r, TRUE[dtype], 0), [a, b, c], text)
    assert set_true(dtype) == TRUE[dtype]  # the sweep model's value agrees with the manual's


@pytest.mark.parametrize("op,boolop,dtype,t,ftz", [("lt", None, "f16x2", "f16x2", False),
                                                   ("gtu", "or", "f16x2", "f16x2", True),
                                                   ("num", None, "bf16x2", "bf16x2", False),
                                                   ("ne", "xor", "u32", "f16x2", True),
                                                   ("leu", None, "s32", "bf16x2", False)])
def test_set_packed(run, op, boolop, dtype, t, ftz):
    """Each half of d: 0xffff (.u32/.s32) or 1.0 (.f16x2/.bf16x2) where that half's compare holds."""
    text = f"set.{op}{'.' + boolop if boolop else ''}{'.ftz' if ftz else ''}.{dtype}.{t}"
    a, b = operands(t, 1500, seed=16)
    c = random_bits(1, len(a), seed=17)
    (d,) = run.run(text, [a, b] + ([c] if boolop else []))
    true = {"u32": 0xFFFF, "s32": 0xFFFF, "f16x2": 0x3C00, "bf16x2": 0x3F80}[dtype]
    lo, hi = (np.where(BOOL[boolop](r, c.astype(bool)), true, 0).astype(np.uint32)
              for r in packed_cmp(op, t, a, b, ftz))
    check_bits(d, lo | (hi << 16), [a, b, c], text)


@pytest.mark.parametrize("form", ["set.eq.f32.f16", "set.eq.u16.f32", "set.eq.f16.bf16", "set.lt.f16x2.f16",
                                  "set.lt.f16x2.bf16x2", "set.eq.ftz.bf16.f32", "set.lt.u16x2.f16x2",
                                  "set.eq.f32.f16x2", "set.lo.f16.s16"])
def test_set_refused(form):
    """Type pairs ptxas rejects (checked with ptxas 13.0) stay unsupported."""
    opcode, *mods = form.split(".")
    assert not supports(opcode, tuple(mods))


class _NegatedC(PtxKernel):
    """The harness kernel with the predicate source written `!c`."""

    def __init__(self, text: str, srcs: list, pred_out: bool, target: str) -> None:
        self.ops = [make_op(text, srcs, pred_out)]
        source = ptx_kernel(self.ops)
        self.source = source.replace(", %s0_2;", ", !%s0_2;")
        assert self.source.count("!%s0_2;") == 1, source
        self.module = compile_module(self.source, target)


@pytest.mark.parametrize("text,pred_out", [("setp.lt.and.s32", True), ("setp.ge.or.f16x2", True),
                                           ("set.gtu.xor.f32.f32", False), ("set.ne.or.f16.f16", False),
                                           ("set.eq.and.u32.f16x2", False)])
def test_negated_c(run, text, pred_out):
    """BoolOp(t, !c): the negation is the framework's (the semantics see !c), so this runs real PTX."""
    t = text.split(".")[-1]
    a, b = operands(t, 1500, seed=18)
    c = random_bits(1, len(a), seed=19)
    target = "cpu" if run.target.startswith("semantics") else run.target
    outs = _NegatedC(text, [a, b, c], pred_out, target).run([[a, b, c]])[0]
    boolop, nc = text.split(".")[2], ~c.astype(bool)
    if t.endswith("x2"):
        res = [BOOL[boolop](r, nc) for r in packed_cmp(text.split(".")[1], t, a, b)]
    else:
        r = scalar_cmp(text.split(".")[1], t, a, b)
        res = [BOOL[boolop](r, nc), BOOL[boolop](~r, nc)]
    if text.startswith("setp"):
        for k, got in enumerate(outs):
            check_bits(got, res[k].astype(np.uint8), [a, b, c], f"{text} !c d{k}")
        return
    dtype = text.split(".")[3]
    if t.endswith("x2"):
        lo, hi = (np.where(r, 0xFFFF, 0).astype(np.uint32) for r in res)
        exp = lo | (hi << 16)
    else:
        exp = np.where(res[0], set_true(dtype), 0)
    check_bits(outs[0], exp, [a, b, c], f"{text} !c")


def test_setp_scalar_half_has_no_q():
    """The manual gives scalar .f16/.bf16 setp a p destination only (ptxas rejects p|q)."""
    for t in ("f16", "bf16"):
        inst = ast.Instruction("setp", ("lt", t), [ast.PredOut(ast.Reg("%p"), ast.Reg("%q")), ast.Reg("%a"),
                                                     ast.Reg("%b")])
        with pytest.raises(UnsupportedError):
            SEMANTICS["setp"].operands(inst)


@pytest.mark.parametrize("t", ["b16", "b32", "b64", "f32", "f64", "s32"])
def test_selp(run, t):
    n = int(t[1:])
    a, b = random_bits(n, 2000, seed=14), random_bits(n, 2000, seed=15)
    c = random_bits(1, 2000, seed=16)
    (d,) = run.run(f"selp.{t}", [a, b, c])
    check_bits(d, [x if k else y for x, y, k in zip(a.tolist(), b.tolist(), c.tolist())], [a, b, c], f"selp.{t}")


@pytest.mark.parametrize("dt,ct,ftz", [("b32", "s32", False), ("f32", "s32", False), ("u64", "f32", False),
                                       ("s32", "f32", True)])
def test_slct(run, dt, ct, ftz):
    n = int(dt[1:])
    a, b = random_bits(n, 2000, seed=17), random_bits(n, 2000, seed=18)
    (c,) = operand_sets(FORMATS["f32"], 1, n=2000 - len(operand_sets(FORMATS["f32"], 1, n=0)[0]), seed=19)
    (d,) = run.run(f"slct{'.ftz' if ftz else ''}.{dt}.{ct}", [a, b, c])
    check_bits(d, slct_ref(ct, ftz, a, b, c), [a, b, c], f"slct.{dt}.{ct}")
