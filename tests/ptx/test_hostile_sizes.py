"""Tiny inputs that declare or nest a lot: bounded memory, precise errors, no RecursionError."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.ptx import PtxError, parse
from zluda_py.ptx.parser import MAX_NESTING

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("depth", [MAX_NESTING + 2, 100_000])  # the body's own braces count once
def test_deep_nesting_is_a_precise_error(depth):
    text = HEADER + ".visible .entry k()\n" + "{" * depth + "ret;" + "}" * depth + "\n"
    with pytest.raises(PtxError) as e:
        parse(text)
    assert f"blocks nested more than {MAX_NESTING} deep" in str(e.value)
    assert str(e.value).startswith(f"<ptx>:5:{MAX_NESTING + 2}:")  # at the first '{' too many


def test_nesting_up_to_the_limit_compiles():
    depth = MAX_NESTING  # blocks inside the body's own braces
    text = (HEADER + ".visible .entry k(.param .u64 out)\n{\n.reg .b64 %p;\n.reg .b32 %r;\n" + "{" * depth
            + "ld.param.u64 %p, [out];\ncvta.to.global.u64 %p, %p;\nmov.u32 %r, 7;\nst.global.u32 [%p], %r;\n"
            + "}" * depth + "ret;\n}\n")
    out = np.zeros(1, np.uint32)
    compile(text).launch("k", (1,), (1,), [out])
    assert out[0] == 7


def test_a_huge_register_declaration_costs_what_is_used():
    text = (HEADER + ".visible .entry k(.param .u64 out)\n{\n.reg .b32 %r<10000000>;\n.reg .b64 %rd<10000000>;\n"
            "ld.param.u64 %rd9999999, [out];\ncvta.to.global.u64 %rd9999999, %rd9999999;\n"
            "mov.u32 %r5, 41;\nadd.u32 %r9999999, %r5, 1;\nst.global.u32 [%rd9999999], %r9999999;\nret;\n}\n")
    out = np.zeros(1, np.uint32)
    # ten million names would take gigabytes; what is used takes a few megabytes
    assert _peak_bytes(lambda: compile(text).launch("k", (1,), (1,), [out])) < 64 << 20
    assert out[0] == 42


@pytest.mark.parametrize("body, message", [
    (".reg .b32 %r<10000000>;\nmov.u32 %r10000000, 1;", "undeclared register '%r10000000'"),
    (".reg .b32 %r<10000000>;\nmov.u32 %r007, 1;", "undeclared register '%r007'"),
    (".reg .b32 %r<10000000>;\n.reg .b32 %r5;", "duplicate declaration of '%r5'"),
])
def test_names_of_a_huge_declaration_are_checked_like_any_other(body, message):
    with pytest.raises(PtxError, match=message):
        parse(HEADER + ".visible .entry k()\n{\n" + body + "\nret;\n}\n")


def test_a_huge_declaration_in_an_inlined_barrier_function():
    """Functions reaching a barrier are inlined at each call: their declarations too."""
    text = (HEADER + ".func f(.param .b32 x)\n{\n.reg .b32 %q<5000000>;\nld.param.b32 %q4999999, [x];\n"
            "bar.sync 0;\nret;\n}\n.visible .entry k()\n{\n.param .b32 a;\nst.param.b32 [a], 1;\n"
            + "call f, (a);\n" * 8 + "ret;\n}\n")
    assert _peak_bytes(lambda: compile(text).launch("k", (1,), (32,), [])) < 64 << 20
