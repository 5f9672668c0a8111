"""The front end's checker records, per function, why its module stays whole and whether it
makes an absent query (`Function.facts`, ptx/facts.py); `parts.whole_reason` and
`linker.absent_kernels` read those instead of walking the bodies again. Each answer here is
written by hand and must also be what the walk of the bodies finds (facts cleared)."""

from __future__ import annotations

import pytest

from zluda_py.compiler import linker, parts
from zluda_py.compiler.linker import absent_kernels, link
from zluda_py.compiler.parts import whole_reason
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
CALLEE = ".func (.reg .u64 r) ident(.reg .u64 a)\n{\n  mov.u64 r, a;\n  ret;\n}\n"


def kernel(name: str, body: str, decls: str = "") -> str:
    return (f".visible .entry {name}(.param .u64 buf)\n{{\n  .reg .b64 %p, %q;\n  .reg .pred %c;\n{decls}"
            f"  ld.param.u64 %p, [buf];\n{body}\n  st.global.u64 [%p], %q;\n  ret;\n}}\n")


MODULES = {
    "calls only": (CALLEE + kernel("k", "  call (%q), ident, (%p);"), None),
    "functions calling each other": (
        CALLEE + ".func (.reg .u64 r) twice(.reg .u64 a)\n{\n  call (r), ident, (a);\n  add.u64 r, r, a;\n  ret;\n}\n"
        + kernel("k", "  call (%q), twice, (%p);"), None),
    "an address in a second kernel": (
        CALLEE + kernel("first", "  call (%q), ident, (%p);") + kernel("second", "  mov.u64 %q, ident;"),
        "the address of ident is taken in second"),
    "an address under a guard, in a nested block": (
        CALLEE + kernel("k", "  setp.eq.u64 %c, %p, 0;\n  {\n  @%c mov.u64 %q, ident;\n  }"),
        "the address of ident is taken in k"),
    "an address in an address operand": (
        CALLEE + kernel("k", "  ld.global.u64 %q, [ident+8];"), "the address of ident is taken in k"),
    "the callee passed to itself": (
        CALLEE + kernel("k", "  call (%q), ident, (ident);"), "the address of ident is taken in k"),
    "an address in an initializer": (
        CALLEE + ".global .u64 table[1] = {ident};\n" + kernel("k", "  call (%q), ident, (%p);"),
        "the address of ident is taken (initializer of table)"),
    "a kernel declared, not defined": (
        ".visible .entry elsewhere(.param .u64 buf);\n" + kernel("k", "  mov.u64 %q, %p;"), None),
    "a declared kernel's address": (
        ".visible .entry elsewhere(.param .u64 buf);\n" + kernel("k", "  mov.u64 %q, elsewhere;"),
        "the address of elsewhere is taken in k"),
    "an alias": (
        CALLEE + ".func (.reg .u64 r) same(.reg .u64 a);\n.alias same, ident;\n"
        + kernel("k", "  call (%q), same, (%p);"), None),
    "a .global variable in a body": (
        kernel("k", "  mov.u64 %q, %p;", decls="  .global .u32 inside;\n"), ".global variable inside declared inside k"),
    "the first reason in source order": (
        CALLEE + kernel("k", "  mov.u64 %q, ident;", decls="  .const .u32 first;\n"),
        ".const variable first declared inside k"),
    "calltargets": (
        CALLEE + kernel("k", "  mov.u64 %q, %p;", decls="  targets: .calltargets ident;\n"),
        "k has .calltargets (an indirect call)"),
}


def _walked(module) -> None:
    for f in module.functions():
        f.facts = None


@pytest.mark.parametrize("name", MODULES)
def test_whole_reason_from_the_checkers_facts(name: str, monkeypatch) -> None:
    text, expected = MODULES[name]
    module = parse(HEAD + text)
    assert all(f.facts is not None for f in module.functions() if f.body is not None)
    with monkeypatch.context() as m:  # the facts answer: no body is walked
        m.setattr(parts, "statement_reason", lambda *a: pytest.fail("a body was walked"))
        assert whole_reason(module) == expected
    _walked(module)
    assert whole_reason(module) == expected


def test_a_linked_module_walks_functions_whose_facts_know_other_names() -> None:
    """In its own module `helper` is a variable; linked, a function whose address k takes."""
    user = parse(HEAD + ".extern .global .u64 helper;\n" + kernel("k", "  mov.u64 %q, helper;"))
    assert whole_reason(user) is None
    provider = parse(HEAD + ".visible .func helper()\n{\n  ret;\n}\n")
    assert whole_reason(link([user, provider])) == "the address of helper is taken in k"


ABSENT = HEAD + """.func (.reg .b32 mode) address_mode(.reg .u64 tex)
{
  txq.addr_mode_0.b32 mode, [tex];
  ret;
}
.visible .entry queries_a_handle(.param .u64 tex)
{
  .reg .u64 %t; .reg .b32 %r;
  ld.param.u64 %t, [tex];
  txq.filter_mode.b32 %r, [%t];
  ret;
}
.visible .entry calls_a_query(.param .u64 tex)
{
  .reg .u64 %t; .reg .b32 %r;
  ld.param.u64 %t, [tex];
  call (%r), address_mode, (%t);
  ret;
}
.global .texref ref;
.visible .entry queries_a_reference()
{
  .reg .b32 %r;
  txq.filter_mode.b32 %r, [ref];
  txq.width.b32 %r, [ref];
  ret;
}
.visible .entry queries_a_size(.param .u64 tex)
{
  .reg .u64 %t; .reg .b32 %r;
  ld.param.u64 %t, [tex];
  txq.width.b32 %r, [%t];
  ret;
}
"""


def test_absent_kernels_from_the_checkers_facts(monkeypatch) -> None:
    module = parse(ABSENT)
    expected = {"queries_a_handle", "calls_a_query"}
    assert {f.name for f in module.functions() if f.facts.absent_query} == {"address_mode", "queries_a_handle"}
    with monkeypatch.context() as m:
        m.setattr(linker, "absent_query", lambda s: pytest.fail("a body was walked"))
        assert absent_kernels(module) == expected
    _walked(module)
    assert absent_kernels(module) == expected


class CountingNames(frozenset):
    compared = 0

    def __eq__(self, other):
        CountingNames.compared += 1
        return frozenset.__eq__(self, other)

    def __ne__(self, other):
        CountingNames.compared += 1
        return frozenset.__ne__(self, other)

    __hash__ = frozenset.__hash__


def test_the_name_sets_are_compared_once_per_module_not_per_function():
    # one comparison per function made whole_reason quadratic: 0.68 s for 6000 kernels
    m = parse(HEAD + "".join(kernel(f"k{i}", "  mov.u64 %q, %p;") for i in range(50)))
    functions = list(m.functions())
    names = CountingNames(functions[0].facts.functions)
    for f in functions:
        f.facts.functions = names
    CountingNames.compared = 0
    assert whole_reason(m) is None
    assert CountingNames.compared == 1
