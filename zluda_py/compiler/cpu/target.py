"""The CPU target: a warp is a 32-lane vector in native code for the host CPU, loaded into this
process by LLVM's JIT linker (runtime.py). Its lowering, optimisation levels and code
generation choices live here; pipeline.py calls them through the `Target` interface."""

from __future__ import annotations

import os

import llvmlite.binding as llvm

from zluda_py.compiler import codegen
from zluda_py.compiler.cpu.module import ModuleLowering
from zluda_py.compiler.cpu.runtime import CompiledModule, object_files, target_machine, worker_count
from zluda_py.compiler.cpu.split import split
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.inline import inline_barrier_calls
from zluda_py.compiler.parts import VARIABLES, declared_kernel, part_module
from zluda_py.compiler.target import Lowered, Target
from zluda_py.ptx import ast

# LLVM IR above this many lines (instructions, about; a few cub/thrust kernels) is optimised
# at O1: O3 takes many minutes.
LARGE_IR_LINES = 45_000
# Modules with several kernels and at least this many lines of IR are split per kernel
# (cpu/split.py) and code-generated in parallel child processes; below it, starting the
# children costs more than it saves. ZLUDA_SPLIT_IR_LINES overrides it (tests take the parallel
# path with a small module).
SPLIT_IR_LINES = int(os.environ.get("ZLUDA_SPLIT_IR_LINES", 20_000))
# Code generation level, picked by measurement (docs/cpu_target.md, "Compile time"): level 1
# leaves out the post-RA scheduler (10-15 % of the back end's time on barrier-heavy kernels)
# and the kernels ran as fast. (The basic register allocator would halve code generation
# time again, but its spills made saxpy and fma64 run 2.5x slower.)
CODEGEN_LEVEL = 1


def opt_level(ir_lines: int) -> int:
    """O3 with the loop and SLP vectorizers; O1 for very large modules."""
    return 3 if ir_lines < LARGE_IR_LINES else 1


def optimise(mod: llvm.ModuleRef, level: int) -> None:
    """The optimiser at `level` for the host CPU (bench/compile.py times it apart from codegen)."""
    tuning = llvm.PipelineTuningOptions(speed_level=level)
    tuning.loop_vectorization = level == 3
    tuning.slp_vectorization = level == 3
    pb = llvm.create_pass_builder(target_machine(level), tuning)
    pb.getModulePassManager().run(mod, pb)


def machine_code(mod: llvm.ModuleRef, level: int) -> bytes:
    """Object code of a module optimised at `level` (the back end runs at CODEGEN_LEVEL at most)."""
    return target_machine(min(level, CODEGEN_LEVEL)).emit_object(mod)


class CpuTarget(Target):
    name = "cpu"
    per_kernel = True

    def description(self) -> str:
        return f"{target_machine().triple} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"

    def lower(self, module: ast.Module) -> Lowered:
        module = inline_barrier_calls(module)  # a warp function can yield at a barrier; a .func cannot
        tm = target_machine()
        lowering = ModuleLowering(module, tm.triple, str(tm.target_data))
        metadata = lowering.lower()
        return Lowered(str(lowering.ir), metadata, lowering.ir)

    def generate(self, lowered: Lowered) -> tuple[bytes, dict]:
        """One object made here, or, for a large module of several kernels, one per part of
        `split`, made in parallel child processes (codegen.py)."""
        lines = lowered.text.count("\n")
        level = opt_level(lines)
        runners = [k["runner"] for k in lowered.metadata["kernels"].values()]
        parts = split(lowered.module, runners) if len(runners) > 1 and lines >= SPLIT_IR_LINES else None
        if parts is None:
            return self.emit(lowered.text, level), lowered.metadata
        objects = codegen.emit_objects([(part, self.name, level) for part in parts], workers=worker_count())
        return b"".join(objects), {**lowered.metadata, "objects": [len(o) for o in objects]}

    def emit(self, ir_text: str, level: int | None = None) -> bytes:
        """Verify, optimise for the host CPU at `level` (by default `opt_level`), emit an object file."""
        level = opt_level(ir_text.count("\n")) if level is None else level
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        optimise(mod, level)
        return machine_code(mod, level)

    def lower_part(self, module: ast.Module, name: str) -> Lowered:
        """The part lowered, then taken apart by `split`, so that a kernel's part only declares
        the module's variables."""
        lowered = self.lower(part_module(module, name))
        pieces = split(lowered.module, [k["runner"] for k in lowered.metadata["kernels"].values()])
        if pieces is None:  # parts.whole_reason should have kept such a module whole
            raise UnsupportedError(f"{name}: this module cannot be compiled per kernel")
        if name == VARIABLES:
            # what the kernels declare, in module order: a cached variables' part loads the module
            # without parsing its PTX
            declared = [[k.name, declared_kernel(k)] for k in module.kernels()]
            metadata = {"kernels": {}, "globals": lowered.metadata["globals"], "part": VARIABLES, "declared": declared}
            return Lowered(pieces[0], metadata)
        metadata = {"kernels": lowered.metadata["kernels"], "globals": {},
                    "reserved_smem": lowered.metadata["reserved_smem"]}
        return Lowered(pieces[1], metadata)

    def generate_parts(self, parts: list[Lowered]) -> list[bytes]:
        """Several parts, or a large one, are code-generated in child processes, in parallel."""
        jobs = [(p.text, self.name, opt_level(p.text.count("\n"))) for p in parts]
        isolate = len(jobs) > 1 or any(text.count("\n") >= SPLIT_IR_LINES for text, _, _ in jobs)
        return codegen.emit_objects(jobs, isolate=isolate, workers=worker_count())

    def load(self, object_code: bytes, metadata: dict) -> CompiledModule:
        return CompiledModule(object_code, metadata)

    def objects(self, object_code: bytes, metadata: dict) -> list[bytes]:
        return object_files(object_code, metadata)


CPU = CpuTarget()
