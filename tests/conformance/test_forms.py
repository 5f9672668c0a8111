"""Form coverage: unsupported forms are refused precisely, and `supports` agrees."""

from __future__ import annotations

import pytest

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.semantics import SEMANTICS, supports
from zluda_py.ptx import ast

REFUSED = ["add.sat.u32", "mul.wide.u64", "div.approx.f64", "cvt.s32.f32", "shf.l.b32", "prmt.f4e.b4e.b32",
           "bfind.b32", "sin.f32", "add.ftz.f64", "fma.relu.f32", "setp.lo.s32", "testp.finite.normal.f32",
           "cvt.rn.satfinite.e4m3x2.f16", "cvt.rn.e4m3x2.f32", "mad24.lo.sat.u32", "addc.cc.u16", "max.relu.u32",
           "add.foo.s32", "add.rz.f16", "ex2.approx.bf16", "cvt.rm.f16x2.f32", "cvt.sat.u16.u8", "cvt.ftz.u8.u16",
           "cvt.rni.u8.u16", "cvt.rn.f32.f16", "cvt.rzi.u8.bf16", "cvt.rz.sat.bf16.f32", "setp.lt.b32", "setp.hi.s32",
           "set.eq.f32.f16", "mad.f32", "max.relu.u16x2", "add.sat.s16x2", "selp.f16", "cvt.pack.sat.u4.s32"]


@pytest.mark.parametrize("form", REFUSED)
def test_refused_with_position(form):
    opcode, *mods = form.split(".")
    inst = ast.Instruction(opcode, tuple(mods), pos=ast.Pos("k.ptx", 12, 3))
    with pytest.raises(UnsupportedError) as err:
        SEMANTICS[opcode].operands(inst)
    assert str(err.value).startswith(f"unsupported: {form}") and str(err.value).endswith("at k.ptx:12")
    assert err.value.cu_result == 218
    assert not supports(opcode, mods)


@pytest.mark.parametrize("form", ["add.rz.ftz.sat.f32", "mad.hi.sat.s32", "madc.lo.cc.u64", "cvt.rna.satfinite.tf32.f32",
                                  "setp.gtu.or.ftz.f16x2", "prmt.b32.rc16", "max.NaN.xorsign.abs.bf16x2",
                                  "cvt.pack.sat.s8.s32.b32", "ex2.approx.ftz.bf16", "add.u16x2", "max.relu.s16x2",
                                  "min.NaN.abs.f32", "cvt.pack.sat.u2.s32.b32", "cvt.rn.f16.bf16", "setp.hs.u16"])
def test_supported(form):
    opcode, *mods = form.split(".")
    assert supports(opcode, mods)


def test_unknown_opcode():
    assert not supports("tex", ("2d", "v4", "f32", "f32"))
