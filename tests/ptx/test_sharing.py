"""Shared operand nodes of the fast path: same AST as the general path, no node mutated through
sharing, and errors that still point at each operand's own line and column."""

from __future__ import annotations

import dataclasses

import pytest

from zluda_py import ptx
from zluda_py.ptx.ast import NOPOS, Addr, Imm, Instruction, Reg

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n"


def kernel(*lines: str) -> str:
    return (HEAD + ".visible .entry k()\n{\n\t.reg .b32 %r<5>;\n\t.reg .f32 %f<3>;\n"
            "\t.reg .b64 %rd<3>;\n" + "\n".join(lines) + "\n}\n")


def insns(m: ptx.ast.Module) -> list[Instruction]:
    return [s for s in m.kernels()[0].body if isinstance(s, Instruction)]


def test_fast_and_general_path_build_the_same_instruction():
    # The same instruction on one line (fast path) and split over lines (general path).
    text = kernel("\t@!%p1 ld.global.u32 %r1, [%rd1+4];", "\t@!%p1 ld.global.u32\n\t%r1,\n\t[%rd1+4];")
    text = text.replace(".reg .b32", ".reg .pred %p<2>;\n\t.reg .b32")
    fast, general = insns(ptx.parse(text))
    assert fast == general
    # every field set (Instruction has __slots__: nothing can be added)
    assert all(hasattr(i, f.name) for i in (fast, general) for f in dataclasses.fields(Instruction))
    assert fast.operands == [Reg("%r1"), Addr(Reg("%rd1"), 4)]


def test_repeated_operands_are_one_node_and_round_trip():
    m = ptx.parse(kernel("\tadd.s32 %r1, %r2, %r2;", "\tadd.s32 %r3, %r2, 7;", "\tadd.s32 %r4, %r1, 7;"))
    a, b, c = insns(m)
    assert a.operands[1] is a.operands[2] is b.operands[1]
    assert b.operands[2] is c.operands[2] and b.operands[2] == Imm(7)
    assert a.operands[1].pos is NOPOS  # the instruction's pos locates it
    assert ptx.parse(ptx.format(m)) == m


def test_each_error_points_at_its_own_operand():
    # %r9 is undeclared twice in one instruction and again on a later line; %f1 is used
    # correctly first and with a wrong type later: every error has its own line and column.
    lines = ["\tadd.s32 %r1, %r9, %r9;", "\tmov.f32 %f1, %f2;", "\tadd.s32 %r2, %r9, %f1;"]
    text = kernel(*lines)
    first = text.splitlines().index(lines[0]) + 1
    with pytest.raises(ptx.PtxErrors) as e:
        ptx.parse(text, "k.ptx")
    got = [(x.line, x.col, x.message) for x in e.value.errors]
    col = lambda line, needle, start=0: line.index(needle, start) + 1  # noqa: E731
    assert got == [
        (first, col(lines[0], "%r9"), "undeclared register '%r9'"),
        (first, col(lines[0], "%r9", col(lines[0], "%r9")), "undeclared register '%r9'"),
        (first + 2, col(lines[2], "%r9"), "undeclared register '%r9'"),
        (first + 2, col(lines[2], "%f1"),
         "operand '%f1' has type .f32, incompatible with .s32 of 'add'"),
    ]
