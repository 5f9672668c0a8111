"""The compile pipeline, top to bottom: parse -> link -> lower to LLVM IR -> optimise -> object -> load."""

from __future__ import annotations

import llvmlite.binding as llvm

from zluda_py.compiler.cpu.module import ModuleLowering
from zluda_py.compiler.cpu.runtime import CompiledModule, target_machine
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.inline import inline_barrier_calls
from zluda_py.compiler.linker import link
from zluda_py.ptx import ast


def compile(ptx: "str | ast.Module | list[str | ast.Module]", target: str = "cpu") -> CompiledModule:
    """Translate PTX (one module, or several to link as with -rdc) to native code and load it."""
    if target != "cpu":
        raise UnsupportedError(f"target {target!r}")
    modules = ptx if isinstance(ptx, list) else [ptx]
    module = link([_parse(m) for m in modules])
    ir_text, metadata = lower(module)
    return load(emit_object(ir_text), metadata)


def compile_object(ptx: "str | ast.Module | list[str | ast.Module]", target: str = "cpu") -> tuple[str, bytes, dict]:
    """`compile` without the final `load`: (LLVM IR text, object code, metadata), for the
    compiled-code cache and `zluda-compile --dump`."""
    modules = ptx if isinstance(ptx, list) else [ptx]
    if target.startswith("gfx"):  # AMDGPU: the object is a linked HSA code object
        from zluda_py.compiler import amdgpu

        return amdgpu.compile_object(link([_parse(m) for m in modules]), target)
    if target != "cpu":
        raise UnsupportedError(f"target {target!r}")
    ir_text, metadata = lower(link([_parse(m) for m in modules]))
    return ir_text, emit_object(ir_text), metadata


def _parse(m: "str | ast.Module") -> ast.Module:
    if isinstance(m, ast.Module):
        return m
    from zluda_py.ptx import parse  # the front end; imported here so the AST path works without it

    return parse(m)


def lower(module: ast.Module) -> tuple[str, dict]:
    """LLVM IR text and the metadata `load` needs (kernels, parameters, globals)."""
    module = inline_barrier_calls(module)  # a warp function can yield at a barrier; a .func cannot
    tm = target_machine()
    lowering = ModuleLowering(module, tm.triple, str(tm.target_data))
    metadata = lowering.lower()
    return str(lowering.ir), metadata


# LLVM IR above this many lines (instructions, about; a few cub/thrust kernels) is optimised
# at O1: O3 takes many minutes.
LARGE_IR_LINES = 45_000


def emit_object(ir_text: str) -> bytes:
    """Verify, optimise for the host CPU (O3 with the loop and SLP vectorizers; O1 for very large
    modules), emit an object file."""
    level = 3 if ir_text.count("\n") < LARGE_IR_LINES else 1
    tm = target_machine(level)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    tuning = llvm.PipelineTuningOptions(speed_level=level)
    tuning.loop_vectorization = level == 3
    tuning.slp_vectorization = level == 3
    pb = llvm.create_pass_builder(tm, tuning)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


def load(object_code: bytes, metadata: dict) -> CompiledModule:
    """Load an object built by `emit_object` (e.g. from a cache) without re-optimising."""
    return CompiledModule(object_code, metadata)
