"""The grammar data: loads, covers the manual's instruction families, drives validation."""

from __future__ import annotations

import pytest

from zluda_py import ptx
from zluda_py.ptx import grammar

HEAD = ".version 9.0\n.target sm_100a\n.address_size 64\n"


def kernel(*lines: str) -> str:
    return (HEAD + ".visible .entry k(.param .u64 p)\n{\n\t.reg .pred %p<3>;\n\t.reg .b32 %r<9>;\n"
            "\t.reg .f32 %f<5>;\n\t.reg .b64 %rd<5>;\n" + "\n".join("\t" + l for l in lines) + "\n\tret;\n}\n")


def test_every_manual_family_is_described():
    ops = grammar.opcodes()
    for name in ["add", "ld", "st", "cvt", "tex", "tld4", "txq", "suld", "sust", "sured", "mma",
                 "wmma.load", "wgmma.mma_async", "ldmatrix", "stmatrix", "cp.async",
                 "cp.async.bulk", "cp.async.bulk.tensor", "mbarrier.try_wait", "tensormap.replace",
                 "griddepcontrol", "tcgen05.mma", "redux.sync", "elect.sync", "vadd4", "alloca"]:
        assert name in ops and ops[name].forms, name
    assert sum(len(o.forms) for o in ops.values()) > 400
    assert "maxntid" in grammar.load().directives


def test_multiword_opcodes_split_on_the_longest_name():
    assert grammar.split_opcode("cp.async.bulk.tensor.2d.shared::cluster.global.tile") == (
        "cp.async.bulk.tensor", ("2d", "shared::cluster", "global", "tile"))
    assert grammar.split_opcode("ld.global.nc.v4.f32") == ("ld", ("global", "nc", "v4", "f32"))
    assert grammar.split_opcode("nonsense.b32") == (None, ())


@pytest.mark.parametrize("line", [
    "ld.f32.global %f1, [%rd1];",                 # type before state space
    "atom.add.release.gpu.u32 %r1, [%rd1], 1;",    # what cooperative groups emit
    "cvt.f32.rn.s32 %f1, %r1;",
    "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%rd1], %r1;",
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%rd2, {%r1, %r2}], [%rd3];",
    "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}];",
    "wgmma.fence.sync.aligned;",
    "griddepcontrol.wait;",
    "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;",
])
def test_valid_forms_and_tolerated_modifier_order(line):
    module = ptx.parse(kernel(line), "ok.ptx")
    assert ptx.parse(ptx.format(module)) == module


@pytest.mark.parametrize("line,message", [
    ("ld.global.shared.f32 %f1, [%rd1];", "matches no form of 'ld'"),
    ("add.s32.rn %r1, %r2, %r3;", "matches no form of 'add'"),
    ("shfl.sync.left.b32 %r1, %r2, 1, 31, -1;", "unknown modifier .left"),
])
def test_invalid_modifiers_are_rejected(line, message):
    with pytest.raises(ptx.PtxError) as info:
        ptx.parse(kernel(line), "bad.ptx")
    assert message in info.value.message and info.value.line == 10


def test_literal_forms_round_trip_exactly():
    text = kernel("mov.b32 %r1, 0x7fffffff;", "mov.b32 %r2, 017;", "mov.b32 %r3, 0b1011;",
                  "mov.f32 %f1, 0f3F800000;", "mov.f32 %f2, 1.5e-3;", "mov.b64 %rd1, 0d4009000000000000;",
                  "mov.s32 %r4, -42;", "add.f32 %f3, %f1, -0f3F800000;")
    body = ptx.parse(text).functions()[0].body
    values = [(i.operands[-1].value, i.operands[-1].kind) for i in body[4:12]]
    assert values == [(0x7FFFFFFF, "int"), (15, "int"), (11, "int"), (0x3F800000, "f32"),
                      (1.5e-3, "float"), (0x4009000000000000, "f64"), (-42, "int"), (0xBF800000, "f32")]


def test_managed_variable_attribute_round_trips():
    """PTX ISA 5.4.8: `.attribute(.managed)` marks a .global variable as managed memory."""
    module = ptx.parse(HEAD + ".global .attribute(.managed) .align 4 .b8 arr[64];\n"
                       ".global .attribute(.managed) .f32 scale = 0f40200000;\n.global .u32 plain;\n")
    assert [v.managed for v in module.variables()] == [True, True, False]
    assert ptx.parse(ptx.format(module)) == module
