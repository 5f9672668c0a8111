"""Compile-time settings of the CPU target (cpu/target.py): lowering pauses Python's cyclic
garbage collector and must hand it back as the host program left it; a kernel's part, lowered
without printing the whole module, is the piece `split` makes of the whole module's IR; the
back-end options reach LLVM at the first code generation."""

from __future__ import annotations

import gc

import pytest

from zluda_py.compiler.cpu import target
from zluda_py.compiler.cpu.split import split
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.compiler.parts import VARIABLES, part_module
from zluda_py.ptx import parse

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry copy(.param .u64 p)
{
  .reg .u32 %r<2>; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r1;
  ret;
}
"""


@pytest.mark.parametrize("enabled", [True, False])
def test_lowering_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    module = link([parse(PTX)])
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        part = CPU.lower_part(module, "copy")
        whole = CPU.lower(module)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert "zluda_run.copy" in part.text and "zluda_run.copy" in whole.text


def test_a_part_is_the_split_of_the_whole_lowering() -> None:
    module = link([parse(PTX)])
    whole = CPU.lower(part_module(module, "copy"))
    variables, kernel = split(whole.module, ["zluda_run.copy"])
    assert CPU.lower_part(module, "copy").text == kernel
    assert CPU.lower_part(module, VARIABLES).text == split(CPU.lower(part_module(module, VARIABLES)).module, [])[0]


def test_the_back_end_caps_the_schedulers_memory_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # the machine scheduler's window of pending memory instructions, 400 not LLVM's 1000
    # (docs/cpu_target.md, "The scheduler's memory window"), handed to LLVM with the others
    seen: list[str] = []
    monkeypatch.setattr(target, "_options_set", False)
    monkeypatch.setattr(target.llvm, "set_option", lambda _name, option: seen.append(option))
    target.set_backend_options()
    assert "-dag-maps-huge-region=400" in seen
    assert seen == list(target.BACKEND_OPTIONS)
