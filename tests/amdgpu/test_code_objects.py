"""Structural and disassembly checks of the code objects the AMDGPU target produces.

No AMD GPU is available, so these check what ROCm's loader checks (ELF identity, metadata
note, kernel descriptors, symbols) and what the instructions must contain, against the PTX the
code came from, for every kernel of the corpus on gfx90a, gfx942 (wave64) and gfx1100 (wave32).
"""

from __future__ import annotations

import re
import subprocess

import pytest

from .corpus import CUDA, KNOWN_GAPS, PTX_FILES, RDC, RDC_GROUPS, TARGETS, rdc_name
from zluda_py.compiler.amdgpu import codeobject
from zluda_py.compiler.amdgpu.targets import TARGETS as GFX
from zluda_py.ptx import ast

EXPECTED_MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx1100": 0x41}  # from the AMDGPU ELF spec
WAVE = {"gfx90a": 64, "gfx942": 64, "gfx1100": 32}
WARP_OPS = {"shfl", "vote", "match", "redux", "activemask", "elect"}
# What one SIMD can hold per lane (CDNA: unified VGPR+AGPR file; RDNA 3 in CU mode) and SIMDs per CU.
SIMD_VGPRS = {"gfx90a": (512, 4), "gfx942": (512, 4), "gfx1100": (1536, 2)}


def _names() -> list:
    names = [p.name for p in sorted(CUDA.glob("*.cu")) if p.name not in RDC] + [rdc_name(g) for g in RDC_GROUPS]
    names += [p.name for p in PTX_FILES]
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[n])) if n in KNOWN_GAPS else n
            for n in names]


def _built(corpus, name: str):
    b = corpus[name]
    if b.error is not None:
        raise b.error
    return b


def _instructions(module: ast.Module) -> list[ast.Instruction]:
    out = []

    def walk(stmts):
        for s in stmts:
            if isinstance(s, ast.Block):
                walk(s.body)
            elif isinstance(s, ast.Instruction):
                out.append(s)

    for f in module.functions():
        walk(f.body or [])
    return out


def _cuda_param_layout(f: ast.Function) -> list[tuple[str, int, int]]:
    """CUDA's parameter buffer: each parameter at the next multiple of its alignment."""
    out, offset = [], 0
    for p in f.params:
        elem = int(re.match(r"[a-z]+(\d+)", p.type).group(1)) // 8
        size = elem * (p.vector or 1)
        for d in p.array:
            size *= d
        align = max(p.align or 1, elem)
        offset = (offset + align - 1) // align * align
        out.append((p.name, offset, size))
        offset += size
    return out


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_structure(corpus, name, gfx):
    b = _built(corpus, name)
    data, meta = b.objects[gfx]
    co = codeobject.read(data)
    # ELF identity that ROCm checks before loading
    assert co.e_type == "ET_DYN"
    assert co.e_machine == codeobject.EM_AMDGPU
    assert co.osabi == codeobject.ELFOSABI_AMDGPU_HSA
    assert co.abi_version == codeobject.ABI_VERSION_V5
    assert co.e_flags & 0xFF == EXPECTED_MACH[gfx]
    assert co.metadata["amdhsa.version"] == [1, 2]  # code object v5's metadata version
    assert co.metadata["amdhsa.target"].startswith(f"amdgcn-amd-amdhsa--{gfx}")
    # self-contained: nothing for the loader to resolve
    assert co.undefined == [] and co.needed == []
    kernels = {f.name: f for f in b.module.kernels()}
    assert set(co.kernels) == set(kernels)
    for kname, md in co.kernels.items():
        kd = co.descriptors[kname]
        assert md[".symbol"] == f"{kname}.kd"
        sym = co.symbols[f"{kname}.kd"]
        assert sym["type"] == "STT_OBJECT" and sym["size"] == codeobject.KD_SIZE and sym["value"] % 64 == 0
        assert kd.group_segment_fixed_size == md[".group_segment_fixed_size"]
        assert kd.private_segment_fixed_size == md[".private_segment_fixed_size"]
        assert kd.kernarg_size == md[".kernarg_segment_size"]
        assert kd.wave == md[".wavefront_size"] == WAVE[gfx]
        entry = co.entries[kname]
        assert entry % 256 == 0 and co.text_range[0] <= entry < co.text_range[1]
        assert co.symbols[kname]["value"] == entry
        # the explicit kernargs are exactly CUDA's parameter buffer, then the hidden arguments
        args = md[".args"]
        explicit = [(a[".name"], a[".offset"], a[".size"]) for a in args if not a[".value_kind"].startswith("hidden")]
        layout = _cuda_param_layout(kernels[kname])
        assert explicit == layout
        assert all(a[".value_kind"] == "by_value" for a in args[:len(explicit)])
        end = layout[-1][1] + layout[-1][2] if layout else 0
        assert all(a[".offset"] >= end for a in args[len(explicit):])
        assert md[".kernarg_segment_size"] >= end
        assert [(p["name"], p["offset"], p["size"]) for p in meta["kernels"][kname]["params"]] == layout
    # module variables can be found by name (cuModuleGetGlobal)
    for v in b.module.variables():
        if v.space in ("global", "const") and v.linkage != "extern":
            sym = co.symbols[v.name]
            assert sym["defined"] and sym["type"] == "STT_OBJECT" and sym["size"] == meta["globals"][v.name]["size"]


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_resources_within_limits(corpus, name, gfx):
    b = _built(corpus, name)
    co = codeobject.read(b.objects[gfx][0])
    limits = GFX[gfx]
    simd_vgprs, simds = SIMD_VGPRS[gfx]
    for kname, md in co.kernels.items():
        vgprs = md[".vgpr_count"] + md.get(".agpr_count", 0)
        assert vgprs <= limits.vgprs
        assert md[".sgpr_count"] <= 106
        assert md[".group_segment_fixed_size"] <= limits.lds
        assert md[".private_segment_fixed_size"] <= 64 * 1024
        # a block of the largest allowed size fits on one CU at once
        waves = -(-md[".max_flat_workgroup_size"] // WAVE[gfx])
        assert vgprs * -(-waves // simds) <= simd_vgprs, kname


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_disassembly(corpus, objdump, tmp_path, name, gfx):
    b = _built(corpus, name)
    path = tmp_path / f"{gfx}.hsaco"
    path.write_bytes(b.objects[gfx][0])
    res = subprocess.run([objdump, "-d", f"--mcpu={gfx}", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "<unknown>" not in text
    if b.module.kernels():
        assert re.search(r"\bs_endpgm\b", text)
    ops = {i.opcode for i in _instructions(b.module)}
    if ops & WARP_OPS and WAVE[gfx] == 64:
        assert "v_mbcnt_hi_u32_b32" in text  # the lane within the hardware wave, both halves
    if "shfl" in ops:
        assert "ds_bpermute_b32" in text
    barriers = [i for i in _instructions(b.module) if i.opcode in ("bar", "barrier") and not i.has("warp")]
    if barriers:
        assert "s_barrier" in text


# v5 hidden arguments: offsets from the start of the hidden block (AMDGPU code object v5 ABI).
V5_HIDDEN = {"hidden_block_count_x": 0, "hidden_block_count_y": 4, "hidden_block_count_z": 8,
             "hidden_group_size_x": 12, "hidden_group_size_y": 14, "hidden_group_size_z": 16,
             "hidden_remainder_x": 18, "hidden_remainder_y": 20, "hidden_remainder_z": 22,
             "hidden_global_offset_x": 40, "hidden_global_offset_y": 48, "hidden_global_offset_z": 56,
             "hidden_grid_dims": 64, "hidden_dynamic_lds_size": 120}


@pytest.mark.parametrize("name", ["memory_sync.ptx", "warp_ops.ptx", "amdgpu_features.cu"])
@pytest.mark.parametrize("gfx", TARGETS)
def test_hidden_arguments_follow_the_v5_layout(corpus, name, gfx):
    co = codeobject.read(_built(corpus, name).objects[gfx][0])
    for kname, md in co.kernels.items():
        explicit = [a for a in md[".args"] if not a[".value_kind"].startswith("hidden")]
        end = max((a[".offset"] + a[".size"] for a in explicit), default=0)
        base = (end + 7) // 8 * 8
        for a in md[".args"][len(explicit):]:
            if a[".value_kind"] in V5_HIDDEN:
                assert a[".offset"] == base + V5_HIDDEN[a[".value_kind"]], (kname, a)
    if name == "memory_sync.ptx":  # reads %dynamic_smem_size, so the runtime must fill it in
        kinds = [a[".value_kind"] for a in co.kernels["block_sync"][".args"]]
        assert "hidden_dynamic_lds_size" in kinds
    if name == "amdgpu_features.cu":  # printf: the runtime finds the buffer pointer by name
        sym = co.symbols["__zluda_printf_buffer"]
        assert sym["defined"] and sym["size"] == 8
