"""What every AMDGPU code object of the test corpora must satisfy, checked against the PTX module
it came from: structure (what ROCm's loader checks), resource limits and disassembly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from zluda_py.compiler.amdgpu import codeobject
from zluda_py.compiler.amdgpu.targets import TARGETS as GFX
from zluda_py.ptx import ast

EXPECTED_MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx1100": 0x41}  # from the AMDGPU ELF spec
WAVE = {"gfx90a": 64, "gfx942": 64, "gfx1100": 32}
WARP_OPS = {"shfl", "vote", "match", "redux", "activemask", "elect"}
# What one SIMD can hold per lane (CDNA: unified VGPR+AGPR file; RDNA 3 in CU mode) and SIMDs per CU.
SIMD_VGPRS = {"gfx90a": (512, 4), "gfx942": (512, 4), "gfx1100": (1536, 2)}


def instructions(module: ast.Module) -> list[ast.Instruction]:
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


def cuda_param_layout(f: ast.Function) -> list[tuple[str, int, int]]:
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


def check_structure(module: ast.Module, data: bytes, meta: dict, gfx: str) -> None:
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
    kernels = {f.name: f for f in module.kernels()}
    assert set(co.kernels) == set(kernels)
    uses_workspace = any(isinstance(op, ast.Reg) and op.name in ("%envreg1", "%envreg2")
                         for i in instructions(module) for op in i.operands)
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
        # the explicit kernargs are exactly CUDA's parameter buffer (then, where grid.sync() reads
        # %envreg1/%envreg2, the grid workspace pointer at the next multiple of 8), then the hidden arguments
        args = md[".args"]
        explicit = [(a[".name"], a[".offset"], a[".size"]) for a in args if not a[".value_kind"].startswith("hidden")]
        layout = cuda_param_layout(kernels[kname])
        end = layout[-1][1] + layout[-1][2] if layout else 0
        if uses_workspace:
            assert explicit == layout + [("zluda.grid_workspace", (end + 7) // 8 * 8, 8)]
            end = explicit[-1][1] + 8
        else:
            assert explicit == layout
        assert all(a[".value_kind"] == "by_value" for a in args[:len(explicit)])
        assert all(a[".offset"] >= end for a in args[len(explicit):])
        assert md[".kernarg_segment_size"] >= end
        assert [(p["name"], p["offset"], p["size"]) for p in meta["kernels"][kname]["params"]] == layout
    # module variables can be found by name (cuModuleGetGlobal); a managed one's symbol is the
    # 8-byte cell the backend stores its managed allocation's address in
    for v in module.variables():
        if v.space in ("global", "const") and v.linkage != "extern":
            sym = co.symbols[v.name]
            size = 8 if v.managed else meta["globals"][v.name]["size"]
            assert sym["defined"] and sym["type"] == "STT_OBJECT" and sym["size"] == size


def check_resources(data: bytes, gfx: str) -> None:
    co = codeobject.read(data)
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


def disassemble(objdump: str, path: Path, data: bytes, gfx: str) -> str:
    path.write_bytes(data)
    res = subprocess.run([objdump, "-d", f"--mcpu={gfx}", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def check_disassembly(module: ast.Module, text: str, gfx: str) -> None:
    assert "<unknown>" not in text
    if module.kernels():
        assert re.search(r"\bs_endpgm\b", text)
    ops = {i.opcode for i in instructions(module)}
    if ops & WARP_OPS and WAVE[gfx] == 64:
        assert "v_mbcnt_hi_u32_b32" in text  # the lane within the hardware wave, both halves
    if "shfl" in ops:
        assert "ds_bpermute_b32" in text
    barriers = [i for i in instructions(module) if i.opcode in ("bar", "barrier") and not i.has("warp")]
    if barriers:
        assert "s_barrier" in text
