"""The forms the semantics support, enumerated from the grammar (see forms.py)."""

from __future__ import annotations

from conformance.forms import canonical, supported_forms
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast


def test_every_supported_form_has_typed_operands():
    """Each supported form names operand types of a known width (what the framework allocates)."""
    bad = []
    for (opcode, *_), mods in supported_forms().items():
        types = SEMANTICS[opcode].operands(ast.Instruction(opcode, mods))
        try:
            [ptx_bits(t) for t in types.dst + types.src]
        except ValueError as err:
            bad.append(f"{opcode}.{'.'.join(mods)}: {err}")
    assert not bad, bad


def test_enumeration_includes_packed_and_dotted_forms():
    forms = supported_forms()
    for text in ("add.u16x2", "max.relu.s16x2", "min.ftz.NaN.abs.f32", "cvt.pack.sat.u4.s32.b32",
                 "cvt.rn.satfinite.e4m3x2.f32", "setp.geu.or.ftz.f16x2"):
        assert canonical(text) in forms, text
    assert canonical("cvt.sat.u8.u8") not in forms
