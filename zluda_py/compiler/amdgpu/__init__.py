"""The AMDGPU target: PTX -> HSA code objects (v5) for CDNA (wave64) and RDNA (wave32) GPUs.

`compile_code_object(module, "gfx942")` returns the linked code object ROCm loads and the
metadata the runtime needs (kernel parameter layout, globals, printf formats).
"""

from __future__ import annotations

from zluda_py.compiler.amdgpu.codegen import CodegenError, data_layout, emit_objects
from zluda_py.compiler.amdgpu.module import ModuleLowering
from zluda_py.compiler.amdgpu.targets import TARGETS, GfxTarget, target
from zluda_py.ptx import ast

__all__ = ["compile_code_object", "compile_code_objects", "lower", "lower_many", "TARGETS", "GfxTarget", "CodegenError"]


def lower(module: ast.Module, gfx: str) -> tuple[str, dict]:
    """LLVM IR text for `gfx` and the metadata of the module (pure Python, cannot crash LLVM)."""
    t = target(gfx)
    return ModuleLowering(module, t, data_layout(t.name)).lower()


def lower_many(module: ast.Module, gfxs: list[str]) -> dict[str, tuple[str, dict]]:
    """`lower` for several targets; the IR depends only on the wave size, so it is built once
    per wave size and shared (code generation still specialises it per target)."""
    by_wave: dict[int, tuple[str, dict]] = {}
    out = {}
    for gfx in gfxs:
        wave = target(gfx).wave
        if wave not in by_wave:
            by_wave[wave] = lower(module, gfx)
        text, meta = by_wave[wave]
        out[gfx] = (text, {**meta, "target": gfx})
    return out


def compile_code_objects(module: ast.Module, gfxs: list[str], isolate: bool = True) -> dict[str, tuple[bytes, dict]]:
    """Code objects for several targets; LLVM code generation for all of them runs in one child
    process (with `isolate`), so an LLVM abort cannot take the caller down."""
    from zluda_py.compiler.amdgpu_link import link

    lowered = lower_many(module, gfxs)
    objects = emit_objects([(text, gfx) for gfx, (text, _) in lowered.items()], isolate)
    return {gfx: (link([obj]), lowered[gfx][1]) for gfx, obj in zip(lowered, objects)}


def compile_code_object(module: ast.Module, gfx: str, isolate: bool = True) -> tuple[bytes, dict]:
    """The linked code object (ET_DYN, code object v5) for one target, and its metadata."""
    return compile_code_objects(module, [gfx], isolate)[gfx]
