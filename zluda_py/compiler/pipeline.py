"""The compile pipeline, top to bottom: parse -> link -> lower to LLVM IR -> optimise -> object -> load."""

from __future__ import annotations

import os

import llvmlite.binding as llvm
from llvmlite import ir

from zluda_py.compiler import codegen
from zluda_py.compiler.cpu.module import ModuleLowering
from zluda_py.compiler.cpu.runtime import CompiledModule, target_machine, worker_count
from zluda_py.compiler.cpu.split import split
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.inline import inline_barrier_calls
from zluda_py.compiler.linker import link
from zluda_py.compiler.parts import VARIABLES, declared_kernel, part_module
from zluda_py.ptx import ast


def compile(ptx: "str | ast.Module | list[str | ast.Module]", target: str = "cpu") -> CompiledModule:
    """Translate PTX (one module, or several to link as with -rdc) to native code and load it."""
    if target != "cpu":
        raise UnsupportedError(f"target {target!r}")
    _, object_code, metadata = compile_object(ptx, target)
    return load(object_code, metadata)


def compile_object(ptx: "str | ast.Module | list[str | ast.Module]", target: str = "cpu") -> tuple[str, bytes, dict]:
    """`compile` without the final `load`: (LLVM IR text, object code, metadata), for the
    compiled-code cache and `zluda-compile --dump`."""
    modules = ptx if isinstance(ptx, list) else [ptx]
    if target.startswith("gfx"):  # AMDGPU: the object is a linked HSA code object
        from zluda_py.compiler import amdgpu

        return amdgpu.compile_object(link([_parse(m) for m in modules]), target)
    if target != "cpu":
        raise UnsupportedError(f"target {target!r}")
    ir_module, ir_text, metadata = _lower(link([_parse(m) for m in modules]))
    object_code, metadata = _generate_code(ir_module, ir_text, metadata)
    return ir_text, object_code, metadata


def _parse(m: "str | ast.Module") -> ast.Module:
    if isinstance(m, ast.Module):
        return m
    from zluda_py.ptx import parse  # the front end; imported here so the AST path works without it

    return parse(m)


def _lower(module: ast.Module) -> tuple[ir.Module, str, dict]:
    module = inline_barrier_calls(module)  # a warp function can yield at a barrier; a .func cannot
    tm = target_machine()
    lowering = ModuleLowering(module, tm.triple, str(tm.target_data))
    metadata = lowering.lower()
    return lowering.ir, str(lowering.ir), metadata


def lower(module: ast.Module) -> tuple[str, dict]:
    """LLVM IR text and the metadata `load` needs (kernels, parameters, globals)."""
    _, ir_text, metadata = _lower(module)
    return ir_text, metadata


# LLVM IR above this many lines (instructions, about; a few cub/thrust kernels) is optimised
# at O1: O3 takes many minutes.
LARGE_IR_LINES = 45_000
# Modules with several kernels and at least this many lines of IR are split per kernel
# (cpu/split.py) and code-generated in parallel child processes; below it, starting the
# children costs more than it saves. ZLUDA_SPLIT_IR_LINES overrides it (tests take the parallel
# path with a small module).
SPLIT_IR_LINES = int(os.environ.get("ZLUDA_SPLIT_IR_LINES", 20_000))


def opt_level(ir_lines: int) -> int:
    """O3 with the loop and SLP vectorizers; O1 for very large modules."""
    return 3 if ir_lines < LARGE_IR_LINES else 1


def _generate_code(ir_module: ir.Module, ir_text: str, metadata: dict) -> tuple[bytes, dict]:
    """Object code and metadata: one object made here, or, for a large module of several
    kernels, one per part of `split`, made in parallel child processes (codegen.py)."""
    lines = ir_text.count("\n")
    level = opt_level(lines)
    runners = [k["runner"] for k in metadata["kernels"].values()]
    parts = split(ir_module, runners) if len(runners) > 1 and lines >= SPLIT_IR_LINES else None
    if parts is None:
        return emit_object(ir_text, level), metadata
    objects = codegen.emit_objects([(part, "cpu", level) for part in parts], workers=worker_count())
    return b"".join(objects), {**metadata, "objects": [len(o) for o in objects]}


def compile_parts(module: ast.Module, names: list[str], target: str = "cpu") -> list[tuple[str, bytes, dict]]:
    """(LLVM IR text, object code, metadata) of parts of a linked module (`compiler/parts.py`):
    each is pruned to what it reaches, lowered, and taken apart by `split`, so that a kernel's
    part only declares the module's variables. Several parts, or a large one, are
    code-generated in child processes (codegen.py), in parallel."""
    if target != "cpu":
        raise UnsupportedError(f"target {target!r} per kernel")
    lowered = [lower_part(module, name) for name in names]
    jobs = [(text, "cpu", opt_level(text.count("\n"))) for text, _ in lowered]
    isolate = len(jobs) > 1 or any(text.count("\n") >= SPLIT_IR_LINES for text, _, _ in jobs)
    objects = codegen.emit_objects(jobs, isolate=isolate, workers=worker_count())
    return [(text, obj, meta) for (text, meta), obj in zip(lowered, objects)]


def lower_part(module: ast.Module, name: str) -> tuple[str, dict]:
    ir_module, _, metadata = _lower(part_module(module, name))
    pieces = split(ir_module, [k["runner"] for k in metadata["kernels"].values()])
    if pieces is None:  # parts.whole_reason should have kept such a module whole
        raise UnsupportedError(f"{name}: this module cannot be compiled per kernel")
    if name == VARIABLES:
        # what the kernels declare, in module order: a cached variables' part loads the module
        # without parsing its PTX
        declared = [[k.name, declared_kernel(k)] for k in module.kernels()]
        return pieces[0], {"kernels": {}, "globals": metadata["globals"], "part": VARIABLES, "declared": declared}
    return pieces[1], {"kernels": metadata["kernels"], "globals": {}, "reserved_smem": metadata["reserved_smem"]}


def emit_object(ir_text: str, level: int | None = None) -> bytes:
    """Verify, optimise for the host CPU at `level` (by default `opt_level`), emit an object file."""
    level = opt_level(ir_text.count("\n")) if level is None else level
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    optimise(mod, level)
    return generate(mod, level)


def optimise(mod: llvm.ModuleRef, level: int) -> None:
    """The optimiser at `level` for the host CPU (bench/compile.py times it apart from codegen)."""
    tuning = llvm.PipelineTuningOptions(speed_level=level)
    tuning.loop_vectorization = level == 3
    tuning.slp_vectorization = level == 3
    pb = llvm.create_pass_builder(target_machine(level), tuning)
    pb.getModulePassManager().run(mod, pb)


# Code generation level, picked by measurement (docs/cpu_target.md, "Compile time"): level 1
# leaves out the post-RA scheduler (10-15 % of the back end's time on barrier-heavy kernels)
# and the kernels ran as fast. (The basic register allocator would halve code generation
# time again, but its spills made saxpy and fma64 run 2.5x slower.)
CODEGEN_LEVEL = 1


def generate(mod: llvm.ModuleRef, level: int) -> bytes:
    """Object code of a module optimised at `level` (the back end runs at CODEGEN_LEVEL at most)."""
    return target_machine(min(level, CODEGEN_LEVEL)).emit_object(mod)


def load(object_code: bytes, metadata: dict) -> CompiledModule:
    """Load what `compile_object` built (e.g. from a cache) without re-optimising."""
    return CompiledModule(object_code, metadata)
