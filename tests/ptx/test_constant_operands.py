"""Which constants an instruction operand takes, against ptxas 13.0 (NVIDIA's driver refuses
what it refuses: "Arguments mismatch"): an integer constant for a floating-point operand
(`setp.eq.f32 %p, %f, 0`) and a floating-point one for an integer operand are errors; a .bN
operand takes integers and the floating-point constant of its own size (0f for .b32; decimal
and 0d literals, which are f64, for .b64); f16/bf16 operands take no constant at all."""

from __future__ import annotations

import itertools
import shutil
import subprocess

import pytest

from tests.hardware.record_fuzz import _ptxas
from zluda_py import ptx

pytestmark = pytest.mark.skipif(not (shutil.which("ptxas") or shutil.which("/usr/local/cuda/bin/ptxas")),
                                reason="needs ptxas, the reference")

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
REGS = {"u16": "%h", "s16": "%h", "b16": "%h", "f16": "%h", "u32": "%r", "s32": "%r", "b32": "%r",
        "f32": "%f", "u64": "%d", "s64": "%d", "b64": "%d", "f64": "%g"}
CONSTANTS = ["1", "-1", "(2 + 1)", "1.0", "1.0 / 4.0", "0f3F800000", "(0f3F800000)", "0d3FF0000000000000"]
FORMS = {  # opcode with modifiers -> the operand list, {r} a register of the type, {c} the constant
    "mov": "{r}1, {c}", "add": "{r}1, {r}2, {c}", "setp.eq": "%p1, {r}1, {c}", "selp": "{r}1, {c}, {r}2, %p1",
    "and": "{r}1, {r}2, {c}", "max": "{r}1, {c}, {r}2", "mad.lo": "{r}1, {r}2, {c}, {r}3", "fma.rn": "{r}1, {r}2, {c}, {r}3",
    "neg": "{r}1, {c}", "shl": "{r}1, {c}, 2", "cvt.rn.f32": "%f1, {c}", "cvt.rzi.s32": "%r1, {c}",
}


def kernel(line: str) -> str:
    return (HEAD + ".visible .entry k()\n{\n.reg .b16 %h<4>;\n.reg .b32 %r<4>;\n.reg .f32 %f<4>;\n"
            ".reg .b64 %d<4>;\n.reg .f64 %g<4>;\n.reg .pred %p<2>;\n" + line + "\nret;\n}\n")


def ptxas_takes(text: str) -> bool:
    try:
        _ptxas(text, "sm_80")
    except subprocess.CalledProcessError:
        return False
    return True


def we_take(text: str) -> bool:
    try:
        ptx.parse(text)
    except ptx.PtxError as e:
        assert e.cu_result == 218
        return False
    return True


def lines() -> list[str]:
    """Every form, with every type ptxas has it for (tried with a register in the constant's
    place), and every kind of constant."""
    out = []
    for (op, operands), t in itertools.product(FORMS.items(), REGS):
        line = f"{op}.{t} "
        line += operands.format(r=REGS[t], c="{c}") + ";"
        if ptxas_takes(kernel(line.format(c=REGS[t] + "3"))):
            out += [line.format(c=c) for c in CONSTANTS]
    return out


def test_constants_are_taken_where_ptxas_takes_them():
    taken, refused = [], []
    for line in lines():
        (taken if we_take(kernel(line)) else refused).append(line)
    assert len(taken) > 100 and len(refused) > 100
    # one module with all we take: ptxas must take it
    body = "\n".join(taken)
    if not ptxas_takes(kernel(body)):
        wrong = [line for line in taken if not ptxas_takes(kernel(line))]
        assert wrong == [], "we take what ptxas refuses"
    wrong = [line for line in refused if ptxas_takes(kernel(line))]
    assert wrong == [], "we refuse what ptxas takes"


@pytest.mark.parametrize("unbuilt", [False, True])
def test_the_message_names_the_operand_and_its_type(unbuilt):
    """The same error whether the bodies are built or only checked (the lazy load's fastcheck.py)."""
    with pytest.raises(ptx.PtxError) as e:
        ptx.parse(kernel("setp.eq.f32 %p1, %f1, 0;"), "k.ptx", unbuilt=unbuilt)
    assert (e.value.line, e.value.col) == (12, 23)
    assert e.value.message == "'setp' takes no integer constant for its .f32 operand 3"
    assert ptx.parse(kernel("setp.eq.f32 %p1, %f1, 0f00000000;"), "k.ptx", unbuilt=unbuilt) is not None
