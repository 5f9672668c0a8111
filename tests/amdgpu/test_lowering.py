"""AMDGPU lowering checks that need only llvmlite: refusals, wave-size specific IR, printf
records, ld.lld discovery, and that an LLVM failure in the child process becomes an error."""

from __future__ import annotations

import re
import struct

import pytest

from zluda_py.compiler import amdgpu_link
from zluda_py.compiler.amdgpu import lower
from zluda_py.compiler.amdgpu.codegen import CodegenError, emit_objects
from zluda_py.compiler.amdgpu.printf import drain
from zluda_py.compiler.printf import argument_layout
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.ptx import parse

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str, regs: str = ".reg .b32 %r<8>;\n.reg .f32 %f<8>;\n.reg .b64 %rd<4>;\n.reg .pred %p<4>;") -> str:
    return HEADER + ".visible .entry k(.param .u64 out)\n{\n" + regs + "\n" + body + "\nret;\n}\n"


@pytest.mark.parametrize("line, name", [
    # a texture form AMDGPU refuses (docs/amdgpu.md): a separate sampler operand
    ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, %rd2, {%f5, %f6}];", "tex.2d.v4.f32.f32"),
    # an mma form neither target translates (directed rounding of .f64)
    ("mma.sync.aligned.m8n8k4.row.col.rz.f64.f64.f64.f64 {%rd0,%rd1}, {%rd2}, {%rd3}, {%rd0,%rd1};",
     "mma.sync.aligned.m8n8k4.row.col.rz.f64.f64.f64.f64"),
])
def test_textures_surfaces_and_mma_are_refused_with_position(line, name):
    text = kernel(line)
    with pytest.raises(UnsupportedError) as err:
        lower(parse(text, "refused.ptx"), "gfx942")
    line_no = text.splitlines().index(line) + 1
    assert str(err.value).startswith(f"unsupported: {name}")
    assert str(err.value).endswith(f"at refused.ptx:{line_no}")
    assert err.value.cu_result == 218


def test_dynamic_parallelism_is_refused_by_name():
    """A device-side launch (nvcc's -rdc code calls the CDP2 device runtime) runs on the CPU
    target only; the AMDGPU target names it instead of asking for a module that defines it."""
    text = HEADER + (".extern .func (.param .b32 r) __cudaCDP2LaunchDeviceV2(.param .b64 p0, .param .b64 p1);\n"
                     ".visible .entry k() { .param .b64 a; .param .b64 b; .param .b32 r;\n"
                     "call.uni (r), __cudaCDP2LaunchDeviceV2, (a, b); ret; }\n")
    with pytest.raises(UnsupportedError) as err:
        lower(parse(text, "cdp.ptx"), "gfx942")
    assert str(err.value).startswith("unsupported: dynamic parallelism (__cudaCDP2LaunchDeviceV2)")
    assert str(err.value).endswith("at cdp.ptx:4")
    assert err.value.cu_result == 218


TEXREF_READ = ("ld.param.u64 %rd1, [out];\ntex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {%r1}];\n"
               "st.global.f32 [%rd1], %f1;")


def test_texture_and_surface_references_are_exported_words():
    """A .texref/.surfref is a global u64 the driver finds by name (hipModuleGetGlobal) and
    fills with the bound object's descriptor address (driver/texrefs.py); tex reads it."""
    text = HEADER + ".global .texref t;\n.global .surfref s;\n" + kernel(TEXREF_READ)[len(HEADER):]
    ir_text, meta = lower(parse(text, "refs.ptx"), "gfx1100")
    assert meta["globals"]["t"] == {"symbol": "t", "size": 8, "space": "texref"}
    assert meta["globals"]["s"] == {"symbol": "s", "size": 8, "space": "surfref"}
    assert re.search(r'@"t" = .*addrspace\(1\) global i64 0, align 8', ir_text), ir_text
    assert re.search(r'load i64, ptr addrspace\(1\) @"t"', ir_text)


@pytest.mark.parametrize("line, what", [  # a texture instruction naming a surface reference and the other way round
    ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [s, {%f1, %f2}];", "tex.2d.v4.f32.f32 (s is not a .texref)"),
    ("suld.b.1d.v4.b32.trap {%r1, %r2, %r3, %r4}, [t, {%r1}];", "suld.b.1d.v4.b32.trap (t is not a .surfref)"),
])
def test_a_reference_of_the_wrong_kind_is_refused_with_position(line, what):
    """As on the CPU target (tests/compiler/test_ptx_forms.py), CUDA_ERROR_INVALID_PTX."""
    text = HEADER + ".global .texref t;\n.global .surfref s;\n" + kernel(line)[len(HEADER):]
    with pytest.raises(UnsupportedError) as err:
        lower(parse(text, "refs.ptx"), "gfx1100")
    line_no = text.splitlines().index(line) + 1
    assert str(err.value) == f"unsupported: {what} at refs.ptx:{line_no}"
    assert err.value.cu_result == 218


WARP = kernel("mov.u32 %r1, %laneid;\nshfl.sync.idx.b32 %r2, %r1, 3, 31, -1;\nvote.sync.ballot.b32 %r3, %p1, -1;\n"
              "add.s32 %r2, %r2, %r3;\nld.param.u64 %rd1, [out];\nst.global.u32 [%rd1], %r2;")


def test_wave64_uses_both_mbcnt_halves_and_the_half_wave_offset():
    ir_text, meta = lower(parse(WARP, "w.ptx"), "gfx942")
    assert meta["wave"] == 64
    assert "llvm.amdgcn.mbcnt.hi" in ir_text and "llvm.amdgcn.ballot.i64" in ir_text
    assert "and i32" in ir_text and ", 32" in ir_text  # hwlane & 32 selects the lane's warp
    assert "llvm.amdgcn.ds.bpermute" in ir_text


def test_wave32_is_one_warp_per_wave():
    ir_text, meta = lower(parse(WARP, "w.ptx"), "gfx1100")
    assert meta["wave"] == 32
    assert "mbcnt.hi" not in ir_text and "llvm.amdgcn.ballot.i32" in ir_text


def test_code_object_version_is_pinned_to_v5():
    ir_text, _ = lower(parse(WARP, "w.ptx"), "gfx90a")
    assert '!{i32 1, !"amdhsa_code_object_version", i32 500}' in ir_text


def test_unknown_target_is_an_error():
    with pytest.raises(UnsupportedError, match="gfx1234"):
        lower(parse(WARP, "w.ptx"), "gfx1234")


def test_llvm_failure_in_the_child_is_reported_not_fatal():
    with pytest.raises(CodegenError, match="gfx942"):
        emit_objects([("this is not LLVM IR", "gfx942")])


def test_printf_argument_layout_follows_vprintf_packing():
    # %d: 4 at 0; %f: double aligned to 8 -> 8; %s: 8 at 16; %lld: 8 at 24; %c: 4 at 32; %*d: 4+4
    size, strings = argument_layout(b"%d %f %s %lld %c %*d %%")
    assert strings == [16]
    assert size == 44


def test_printf_buffer_drains_in_order_and_counts_lost_bytes():
    formats = [b"v=%d %s|", b"x=%f\n"]
    rec1 = struct.pack("<IIiIQ", 24, 0, -7, 0, 0x1000)
    rec2 = struct.pack("<IId", 16, 1, 2.5)
    used = len(rec1) + len(rec2) + 40  # 40 bytes of records that did not fit
    raw = struct.pack("<QQ", used, len(rec1) + len(rec2)) + rec1 + rec2
    seen = []

    def read_string(address: int) -> bytes:
        seen.append(address)
        return b"dev"

    text, lost = drain(raw, formats, read_string)
    assert text == b"v=-7 dev|x=2.500000\n"
    assert lost == 40 and seen == [0x1000]


def test_lld_from_environment_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("ZLUDA_LLD", str(tmp_path / "missing-ld.lld"))
    with pytest.raises(amdgpu_link.LinkerError, match="ZLUDA_LLD"):
        amdgpu_link.find_lld()


def test_lld_missing_everywhere_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("ZLUDA_LLD", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(amdgpu_link, "ROCM_LLD", str(tmp_path / "rocm-ld.lld"))
    monkeypatch.setattr(amdgpu_link.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(amdgpu_link.LinkerError) as err:
        amdgpu_link.find_lld()
    assert "apt-get install lld-19" in str(err.value) and "ziglang" in str(err.value)


def test_lld_search_order_prefers_environment(monkeypatch, tmp_path):
    tool = tmp_path / "my-ld.lld"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("ZLUDA_LLD", str(tool))
    assert amdgpu_link.find_lld() == [str(tool)]


def test_acquire_release_and_volatile_accesses_are_atomic():
    from pathlib import Path

    text = (Path(__file__).parent / "ptx" / "memory_order.ptx").read_text()
    ir_text, _ = lower(parse(text, "memory_order.ptx"), "gfx942")
    assert "load atomic i32" in ir_text and " acquire, align 4" in ir_text
    assert " monotonic, align 4" in ir_text  # ld.volatile and st.relaxed
    assert "store atomic i32" in ir_text and " release, align 4" in ir_text


def test_brx_idx_switches_over_the_branch_table_in_order():
    from pathlib import Path

    text = (Path(__file__).parent / "ptx" / "branch_table.ptx").read_text()
    ir_text, _ = lower(parse(text, "branch_table.ptx"), "gfx942")
    switch = next(line for line in ir_text.splitlines() if line.strip().startswith("switch"))
    cases = re.findall(r'i32 (\d+), label %"bb\d+\.(\$L_\w+)"', switch)
    assert cases == [("0", "$L_a"), ("1", "$L_b"), ("2", "$L_c")]


def test_cp_async_ignore_src_is_a_predicate_not_a_byte_count():
    """`cp.async ..., 16, %p` copies nothing of the source when %p is set, all 16 bytes when not."""
    text = kernel(".shared .align 16 .b8 buf[16];\nld.param.u64 %rd1, [out];\nsetp.ne.u64 %p1, %rd1, 0;\n"
                  "cp.async.ca.shared.global [buf], [%rd1], 16, %p1;\ncp.async.wait_all;")
    ir_text, _ = lower(parse(text, "ignore_src.ptx"), "gfx942")
    assert re.search(r"select\s+i1 %\S+, i32 0, i32 16", ir_text), ir_text


def test_warp_sz_is_32_on_both_wave_sizes():
    """A CUDA warp is 32 lanes on wave64 too (two warps per wave), so WARP_SZ stays 32."""
    text = kernel("mov.u32 %r1, WARP_SZ;\nadd.u32 %r2, %r1, WARP_SZ;\nld.param.u64 %rd1, [out];\n"
                  "st.global.u32 [%rd1], %r2;")
    for target in ("gfx942", "gfx1100"):
        ir_text, _ = lower(parse(text, "w.ptx"), target)
        assert "store i32 32, ptr addrspace(5) %\"r1\"" in ir_text
        assert re.search(r"add i32 %\"[.\w]+\", 32", ir_text)


def test_managed_variables_are_a_pointer_cell_and_their_initializer_travels_in_the_metadata():
    """A __managed__ variable is managed memory the backend allocates at load: the code object
    holds an 8-byte cell of its name, which code reads the variable's address from, and the
    initial bytes are in the metadata; address initializers (relocated in the code object only)
    are refused by name, either way round."""
    text = HEADER + ".global .attribute(.managed) .align 4 .u32 v[2] = {7, 9};\n" + kernel(
        "ld.global.u32 %r1, [v+4];\nld.param.u64 %rd1, [out];\nst.global.u32 [%rd1], %r1;")[len(HEADER):]
    ir_text, metadata = lower(parse(text, "managed.ptx"), "gfx1100")
    assert metadata["globals"]["v"] == {"symbol": "v", "size": 8, "space": "global", "managed": True,
                                        "init": struct.pack("<2I", 7, 9).hex()}
    assert re.search(r'^@"v" = addrspace\(1\) global i64 0, align 8$', ir_text, re.M)
    assert re.search(r'= load i64, ptr addrspace\(1\) @"v"$', ir_text, re.M)
    for declarations, refused in ((".global .attribute(.managed) .u32 w;\n.global .u64 p = generic(w);\n", "p"),
                                  (".global .u32 w;\n.global .attribute(.managed) .u64 p = generic(w);\n", "p")):
        with pytest.raises(UnsupportedError, match=f"initializer of {refused}|managed variable {refused}"):
            lower(parse(HEADER + declarations + kernel("ret;")[len(HEADER):], "managed.ptx"), "gfx1100")
