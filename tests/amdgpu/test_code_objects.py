"""Structural and disassembly checks of the code objects the AMDGPU target produces.

No AMD GPU is available, so these check what ROCm's loader checks (ELF identity, metadata
note, kernel descriptors, symbols) and what the instructions must contain, against the PTX the
code came from, for every kernel of the corpus on gfx90a, gfx942 (wave64) and gfx1100 (wave32).
The checks themselves are in checks.py; test_conformance_objects.py applies them to the
conformance kernels.
"""

from __future__ import annotations

import pytest

from .checks import check_disassembly, check_resources, check_structure, disassemble
from .corpus import CPU_ONLY, CUDA, PTX_FILES, RDC, RDC_GROUPS, TARGETS, rdc_name
from zluda_py.compiler.amdgpu import codeobject, lower
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.ptx import parse


def _names() -> list[str]:
    names = [p.name for p in sorted(CUDA.glob("*.cu")) if p.name not in RDC and p.name not in CPU_ONLY]
    return names + [rdc_name(g) for g in RDC_GROUPS] + [p.name for p in PTX_FILES]


def _built(corpus, name: str):
    b = corpus[name]
    if b.error is not None:
        raise b.error
    return b


@pytest.mark.parametrize("name", sorted(CPU_ONLY))
def test_cpu_only_programs_are_refused_by_name(nvcc, name):
    """What the corpus leaves out is refused with its feature's name (218), not by an accident."""
    ptx = nvcc([name], ["-ptx", "-arch=sm_80", "-rdc=true"], ".ptx").read_text()
    with pytest.raises(UnsupportedError) as err:
        lower(parse(ptx, name), "gfx1100")
    assert str(err.value).startswith(f"unsupported: {CPU_ONLY[name]}") and err.value.cu_result == 218


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_structure(corpus, name, gfx):
    b = _built(corpus, name)
    check_structure(b.module, *b.objects[gfx], gfx)


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_resources_within_limits(corpus, name, gfx):
    check_resources(_built(corpus, name).objects[gfx][0], gfx)


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_disassembly(corpus, objdump, tmp_path, name, gfx):
    b = _built(corpus, name)
    check_disassembly(b.module, disassemble(objdump, tmp_path / f"{gfx}.hsaco", b.objects[gfx][0], gfx), gfx)


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
