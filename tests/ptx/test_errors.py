"""Bad PTX: each input gives the expected message at the exact line:column."""

from __future__ import annotations

import pytest

from zluda_py import ptx

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n"


def body(*lines: str, head: str = HEAD) -> str:
    decls = ["\t.reg .pred %p<3>;", "\t.reg .b32 %r<5>;", "\t.reg .s32 %s<3>;",
             "\t.reg .f32 %f<3>;", "\t.reg .b64 %rd<3>;"]
    return head + ".visible .entry k()\n{\n" + "\n".join(decls + list(lines)) + "\n}\n"


# body() puts the first statement on line 11.
CASES = [
    ("unknown instruction", body("\tfrob.b32 %r1, %r2;"), 11, 2, "unknown instruction 'frob'"),
    ("missing semicolon", body("\tadd.s32 %r1, %r2, %r3", "\tret;"), 12, 2, "expected ',' or ';'"),
    ("undeclared register", body("\tadd.s32 %r1, %r2, %r9;"), 11, 20, "undeclared register '%r9'"),
    ("undefined label", body("\tbra.uni L_nowhere;"), 11, 10, "undeclared symbol 'L_nowhere'"),
    ("duplicate declaration", body("\t.reg .b32 %r1;"), 11, 12, "duplicate declaration of '%r1'"),
    ("duplicate label", body("L1:", "L1:", "\tret;"), 12, 1, "duplicate declaration of 'L1'"),
    ("operand type", body("\tadd.f32 %f1, %s1, %f2;"), 11, 15,
     "operand '%s1' has type .s32, incompatible with .f32 of 'add'"),
    ("predicate operand", body("\tsetp.eq.s32 %r1, %r2, %r3;"), 11, 14, "incompatible with .pred"),
    ("guard not a predicate", body("\t@%r1 ret;"), 11, 2, "guard '%r1' is not a .pred register"),
    ("unknown modifier", body("\tld.global.v3.f32 %f1, [%rd1];"), 11, 2, "unknown modifier .v3 for 'ld'"),
    ("operand count", body("\tadd.s32 %r1, %r2;"), 11, 2, "'add' takes 3 operands, found 2"),
    ("version gating", body("\tredux.sync.add.u32 %r1, %r2, %r3;",
                            head=".version 6.5\n.target sm_75\n.address_size 64\n"),
     11, 2, "requires PTX ISA 7.0 or later (module has .version 6.5)"),
    ("target gating", body("\tredux.sync.add.u32 %r1, %r2, %r3;",
                           head=".version 9.0\n.target sm_75\n.address_size 64\n"),
     11, 2, "requires sm_80 or later (module targets sm_75)"),
    ("bad octal", body("\tadd.s32 %r1, %r2, 09;"), 11, 20, "invalid octal literal '09'"),
    ("unterminated comment", body("\t/* never closed"), 11, 2, "unterminated comment"),
    ("missing version", ".target sm_80\n", 1, 1, "expected '.version' at the start of the module"),
    ("bad address size", ".version 9.0\n.target sm_80\n.address_size 48\n", 3, 15,
     "address size must be 32 or 64"),
    ("unclosed body", HEAD + ".entry k()\n{\n\tret;\n", 6, 6, "expected '}' to close the block"),
    ("stray character", body("\tadd.s32 %r1, %r2, #3;"), 11, 20, "unexpected character '#'"),
]


@pytest.mark.parametrize("name,text,line,col,message", CASES, ids=[c[0] for c in CASES])
def test_error_position_and_message(name, text, line, col, message):
    with pytest.raises(ptx.PtxError) as info:
        ptx.parse(text, "bad.ptx")
    err = info.value
    assert (err.file, err.line, err.col) == ("bad.ptx", line, col), str(err)
    assert message in err.message
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"bad.ptx:{line}:{col}: error: ")
    assert rendered[1] == text.splitlines()[line - 1]
    assert rendered[2].index("^") == col - 1


def test_all_errors_of_a_module_are_reported():
    text = body("\tadd.s32 %r1, %r2, %r9;", "\tbra L_x;", "\tmov.u32 %r1, %q1;")
    with pytest.raises(ptx.PtxErrors) as info:
        ptx.parse(text, "bad.ptx")
    found = [(e.line, e.col) for e in info.value.errors]
    assert found == [(11, 20), (12, 6), (13, 15)]
    assert str(info.value).count("error:") == 3


def test_parse_errors_in_several_statements_are_all_reported():
    text = body("\tadd.s32 %r1 %r2;", "\tret;", "\tmov.u32 %r1, ];")
    with pytest.raises(ptx.PtxErrors) as info:
        ptx.parse(text, "bad.ptx")
    assert [(e.line, e.col) for e in info.value.errors] == [(11, 14), (13, 15)]


def test_error_carries_invalid_ptx_code():
    with pytest.raises(ptx.PtxError) as info:
        ptx.parse("garbage", "x.ptx")
    assert info.value.cu_result == 218
