"""Large modules are split per kernel for parallel code generation (cpu/split.py): the kernels
still share the module's variables, each part's helpers and constants behave as in the whole
module, and modules where copies could be observed stay whole."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from zluda_py.compiler import pipeline
from zluda_py.compiler.cpu import target as cpu_target
from zluda_py.compiler.cpu.runtime import object_files
from zluda_py.compiler.cpu.split import split
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
MODULE = HEAD + r"""
.global .align 4 .u32 total;
.global .align 8 .u64 where = generic(total);
.const .align 4 .u32 table[4] = {3, 5, 7, 11};
.global .align 1 .b8 fmt[12] = {115, 117, 109, 32, 61, 32, 37, 117, 10, 0};

.func (.reg .u32 r) pick(.reg .u32 i)
{
  .reg .u64 %rd<3>;
  and.b32 i, i, 3;
  mul.wide.u32 %rd1, i, 4;
  mov.u64 %rd2, table;
  add.u64 %rd2, %rd2, %rd1;
  ld.const.u32 r, [%rd2];
  ret;
}

.visible .entry add_up(.param .u64 out)
{
  .reg .u32 %r<4>; .reg .u64 %rd<3>;
  mov.u32 %r1, %tid.x;
  call (%r2), pick, (%r1);
  atom.global.add.u32 %r3, [total], %r2;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd1, %rd1, %rd2;
  st.global.u32 [%rd1], %r2;
  ret;
}

.visible .entry read_back(.param .u64 out)
{
  .reg .u32 %r<3>; .reg .u64 %rd<3>;
  ld.global.u64 %rd2, [where];
  ld.u32 %r1, [%rd2];
  mov.u32 %r2, 1;
  call (%r2), pick, (%r2);
  ld.param.u64 %rd1, [out];
  st.global.v2.u32 [%rd1], {%r1, %r2};
  ret;
}

.extern .func (.param .s32 status) vprintf (.param .b64 format, .param .b64 args);
.visible .entry say()
{
  .reg .u32 %r<2>; .reg .u64 %rd<4>; .reg .s32 %s<2>;
  .local .align 8 .b8 buf[8];
  ld.global.u32 %r1, [total];
  mov.u64 %rd1, buf;
  cvta.local.u64 %rd2, %rd1;
  st.local.u32 [%rd1], %r1;
  mov.u64 %rd3, fmt;
  cvta.global.u64 %rd3, %rd3;
  {
  .param .b64 p0; .param .b64 p1; .param .b32 rv;
  st.param.b64 [p0], %rd3;
  st.param.b64 [p1], %rd2;
  call.uni (rv), vprintf, (p0, p1);
  }
  ret;
}
"""


@pytest.fixture
def always_split(monkeypatch):
    monkeypatch.setattr(cpu_target, "SPLIT_IR_LINES", 0)


def test_split_kernels_share_the_modules_variables(always_split, capfd):
    _, object_code, metadata = pipeline.compile_object(MODULE)
    assert len(metadata["objects"]) == 4  # the variables, then one part per kernel
    assert [len(o) for o in object_files(object_code, metadata)] == metadata["objects"]
    m = pipeline.load(object_code, metadata)
    out = np.zeros(64, np.uint32)
    m.launch("add_up", 1, 64, [out])
    table = [3, 5, 7, 11]
    assert out.tolist() == [table[i % 4] for i in range(64)]
    pair = np.zeros(2, np.uint32)
    m.launch("read_back", 1, 1, [pair])
    # the variable add_up added to, read through an address another variable holds
    assert pair.tolist() == [sum(table) * 16, 5]
    m.launch("say", 1, 1, [])
    assert capfd.readouterr().out == f"sum = {sum(table) * 16}\n"
    # generic(total) in an initializer: the address of the one `total`
    assert ctypes.c_uint64.from_address(m.globals["where"].address).value == m.globals["total"].address


def test_each_load_of_a_split_module_has_its_own_variables(always_split):
    _, object_code, metadata = pipeline.compile_object(MODULE)
    first, second = pipeline.load(object_code, metadata), pipeline.load(object_code, metadata)
    out = np.zeros(64, np.uint32)
    first.launch("add_up", 1, 64, [out])
    pair = np.zeros(2, np.uint32)
    second.launch("read_back", 1, 1, [pair])
    assert pair[0] == 0


def test_a_function_whose_address_is_taken_keeps_the_module_whole(always_split):
    taken = MODULE.replace("  mov.u32 %r2, 1;\n", "  mov.u32 %r2, 1;\n  .reg .u64 %fp;\n  mov.u64 %fp, pick;\n")
    lowered = CPU.lower(parse(taken))
    assert split(lowered.module, [k["runner"] for k in lowered.metadata["kernels"].values()]) is None
    _, _, metadata = pipeline.compile_object(taken)
    assert "objects" not in metadata


def test_small_modules_stay_whole():
    _, _, metadata = pipeline.compile_object(MODULE)
    assert "objects" not in metadata


def test_parts_are_built_here_when_no_child_can_start(always_split, monkeypatch, capfd):
    for name in ("executable", "exec_prefix", "base_exec_prefix"):  # no Python to be found
        monkeypatch.setattr(f"sys.{name}", "/nonexistent/python")
    _, object_code, metadata = pipeline.compile_object(MODULE)
    assert len(metadata["objects"]) == 4
    assert "cannot start a child" in capfd.readouterr().err
    out = np.zeros(64, np.uint32)
    pipeline.load(object_code, metadata).launch("add_up", 1, 64, [out])
    assert out.tolist() == [(3, 5, 7, 11)[i % 4] for i in range(64)]


def test_dump_writes_each_part_as_an_object_file(always_split, tmp_path):
    from zluda_py.cache import build
    from zluda_py.cache.settings import Settings
    from zluda_py.cli.compile_cmd import Job, _dump

    built = build([MODULE], CPU, Settings(tmp_path / "cache", 1 << 30, True))
    _dump(Job("m.ptx", 0, CPU, [MODULE], ["m"]), str(tmp_path / "dump"), [(None, built)])  # the whole module
    parts = sorted((tmp_path / "dump").glob("*.part*.o"))
    assert len(parts) == len(built.metadata["objects"]) == 4
    assert all(p.read_bytes()[:4] == b"\x7fELF" for p in parts)
    assert sorted((tmp_path / "dump").glob("*.o")) == parts  # no whole-module object beside them
