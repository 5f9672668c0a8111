"""Names without `%`: a name declared by `.reg` in scope is a register operand (Reg); any
other name (variables, parameters, labels, functions) stays a symbol (Sym)."""

from __future__ import annotations

import pytest

from zluda_py import ptx
from zluda_py.ptx.ast import Addr, Block, Instruction, PredOut, Reg, Sym

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

MODULE = HEAD + """
.global .u32 x;
.visible .entry k(.param .u64 out)
{
	.reg .b32 r1;
	.reg .b64 rd;
	.reg .b32 %r<4>;
	ld.param.u64 rd, [out];
	mov.u32 r1, x;
	{
	.reg .b32 x;
	.reg .pred p;
	mov.b32 x, 1;
	shfl.sync.up.b32 x|p, r1, 1, 0, -1;
	@p add.s32 x, x, r1;
	st.global.u32 [rd], x;
	}
	st.global.u32 [rd+4], r1;
	bra.uni L1;
L1:
	ret;
}
"""


def _insns(body):
    for s in body:
        if isinstance(s, Block):
            yield from _insns(s.body)
        elif isinstance(s, Instruction):
            yield s


def test_names_declared_by_reg_are_registers():
    m = ptx.parse(MODULE)
    ld, mov_x, mov_b, shfl, add, st_in, st_out, bra, ret = _insns(m.kernels()[0].body)
    # ld.param: the destination is a register, the parameter stays a symbol
    assert ld.operands == [Reg("rd"), Addr(Sym("out"))]
    # outside the block `x` is the global variable, inside it is the block's register
    assert mov_x.operands == [Reg("r1"), Sym("x")]
    assert mov_b.operands[0] == Reg("x")
    assert shfl.operands[0] == PredOut(Reg("x"), Reg("p")) and shfl.operands[1] == Reg("r1")
    assert add.guard.reg == "p" and add.operands == [Reg("x"), Reg("x"), Reg("r1")]
    assert st_in.operands == [Addr(Reg("rd")), Reg("x")]
    assert st_out.operands == [Addr(Reg("rd"), 4), Reg("r1")]
    assert bra.operands == [Sym("L1")]
    # positions are kept
    assert (ld.operands[0].pos.line, ld.operands[0].pos.col) == (11, 15)


def test_round_trip_keeps_registers():
    m = ptx.parse(MODULE)
    assert ptx.parse(ptx.format(m)) == m


def test_registers_without_percent_are_type_checked():
    bad = MODULE.replace(".reg .b32 r1;", ".reg .f64 r1;")
    with pytest.raises(ptx.PtxError) as e:
        ptx.parse(bad)
    messages = [x.message for x in getattr(e.value, "errors", [e.value])]
    assert "operand 'r1' has type .f64, incompatible with .u32 of 'mov'" in messages
