"""A lazily loaded module keeps its text, not its AST: each kernel built after the load is
parsed from the text of the functions it reaches (cache/part_source.py), and lowers exactly
as from the whole module, with the same positions."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.cache import compile as cache_compile
from zluda_py.cache import events, part_source
from zluda_py.cache.lazy import LazyModule, load
from zluda_py.cache.part_source import PartSource
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse


def adder(k: int) -> str:
    return f""".visible .entry k{k}(.param .u64 buf)
{{
  .reg .b32 %v; .reg .b64 %p;
  ld.param.u64 %p, [buf];
  ld.global.u32 %v, [%p];
  add.u32 %v, %v, {1000 + k};
  st.global.u32 [%p], %v;
  ret;
}}
"""


BAD = "tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [r, {%r1}];"  # r is a .surfref: refused when built
MODULE = """.version 8.0
.target sm_80
.address_size 64
.file 1 "m.cu"
.global .align 4 .u32 counter = 5;
.func (.reg .u32 r) twice(.reg .u32 a)
{
  add.u32 r, a, a;
  ret;
}
.func unused(.reg .u32 a) { ret; }
""" + adder(0) + """.visible .entry calls(.param .u64 buf)
{
  .reg .b32 %v, %w; .reg .b64 %p;
  ld.param.u64 %p, [buf];
  ld.global.u32 %v, [%p];
  call (%w), twice, (%v);  // unused is named only here, in a comment
  .loc 1 12 3
  st.global.u32 [%p], %w;
  ret;
}
""" + adder(1) + adder(2) + """.visible .entry bad(.param .surfref r)
{
  .reg .b32 %r<4>; .reg .f32 %f<6>;
  mov.u32 %r1, 0;
  """ + BAD + """
  ret;
}
"""
KERNELS = ["k0", "calls", "k1", "k2", "bad"]


def _lowered(module, kernel: str):
    """The part's IR, or where and why it is refused."""
    try:
        return CPU.lower_part(module, kernel).text
    except UnsupportedError as e:
        return (e.message, e.file, e.line, e.col)


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_part_from_the_text_lowers_as_from_the_whole_module(kernel):
    whole = link([parse(MODULE)])
    source = PartSource.of(whole, MODULE)
    assert _lowered(link([source.module([kernel])]), kernel) == _lowered(whole, kernel)


def test_the_text_of_a_part_keeps_what_it_reaches_on_its_lines():
    source = PartSource.of(link([parse(MODULE)]), MODULE)
    text = source.text_of(["calls"])
    assert text.splitlines()[:11] == MODULE.splitlines()[:11]  # header, variable, both .funcs (a comment names unused)
    assert text.count("\n") == MODULE.count("\n") and len(text) <= len(MODULE)
    kept = [line for line in text.splitlines() if "call (%w)" in line or "add.u32 %v, %v, 10" in line]
    assert kept == ["  call (%w), twice, (%v);  // unused is named only here, in a comment"]
    assert text.splitlines().index("  .loc 1 12 3") == MODULE.splitlines().index("  .loc 1 12 3")


def test_after_the_load_a_kernel_is_parsed_alone(cache_dir, monkeypatch):
    parsed: list[str] = []

    def spy(text, filename="<ptx>"):
        parsed.append(text)
        return parse(text, filename)

    monkeypatch.setattr(part_source, "parse", spy)
    m = load([MODULE])
    assert isinstance(m, LazyModule) and sorted(m.kernels) == sorted(KERNELS)
    assert (MODULE,) not in cache_compile._linked  # the whole AST went with the load
    a = np.array([5], np.uint32)
    m.launch("k1", 1, 1, [a])
    assert a[0] == 5 + 1001
    m.launch("calls", 1, 1, [a])
    assert a[0] == (5 + 1001) * 2
    assert len(parsed) == 2 and events.counts["compiled"] == 3  # the variables, k1, calls
    assert "1001;" in parsed[0] and all(f"{1000 + k};" not in parsed[0] for k in (0, 2))
    assert "call (%w), twice" not in parsed[0] and "call (%w), twice" in parsed[1]
    assert "1001;" not in parsed[1]


def test_an_error_found_when_a_kernel_is_built_points_into_the_module(cache_dir):
    m = load([MODULE])
    with pytest.raises(UnsupportedError) as e:
        m.launch("bad", 1, 1, [np.zeros(1, np.uint64)])
    line = MODULE.splitlines().index("  " + BAD) + 1
    assert (e.value.line, e.value.col) == (line, 3) and "is a .surfref" in e.value.message


# nvcc declares vprintf before the module's variables; a variable's position is its name, so
# blanking the unreached declaration up to that position also took `.const .align 4 .u32 `
DECLARED_THEN_VARIABLES = """.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf
(
.param .b64 vprintf_param_0,
.param .b64 vprintf_param_1
)
;  // a comment after it: }
.const .align 4 .u32 bias = 7;
.global .align 4 .b8 table[8] = {3, 0, 0, 0, 1, 0, 0, 0};
.func (.reg .u32 r) unused(.reg .u32 a) { add.u32 r, a, 1; ret; }  // }; trailing
.global .align 4 .u32 after_func = 11;
.visible .entry add_bias(.param .u64 buf)
{
  .reg .b32 %v<5>; .reg .b64 %p;
  ld.param.u64 %p, [buf];
  ld.global.u32 %v1, [%p];
  ld.const.u32 %v2, [bias];
  ld.global.u32 %v3, [table+4];
  ld.global.u32 %v4, [after_func];
  add.u32 %v1, %v1, %v2;
  add.u32 %v1, %v1, %v3;
  add.u32 %v1, %v1, %v4;
  st.global.u32 [%p], %v1;
  ret;
}
"""


def test_variables_after_an_unreached_declaration_keep_their_directives(cache_dir):
    whole = link([parse(DECLARED_THEN_VARIABLES)])
    text = PartSource.of(whole, DECLARED_THEN_VARIABLES).text_of(["add_bias"])
    assert ".const .align 4 .u32 bias = 7;" in text and ".global .align 4 .u32 after_func = 11;" in text
    assert "vprintf" not in text and "unused" not in text
    assert text.count("\n") == DECLARED_THEN_VARIABLES.count("\n")
    assert _lowered(link([parse(text)]), "add_bias") == _lowered(whole, "add_bias")
    m = load([DECLARED_THEN_VARIABLES])
    a = np.array([100], np.uint32)
    m.launch("add_bias", 1, 1, [a])
    assert a[0] == 100 + 7 + 1 + 11
