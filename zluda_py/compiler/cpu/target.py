"""The CPU target: a warp is a 32-lane vector in native code for the host CPU, loaded into this
process by LLVM's JIT linker (runtime.py). Its lowering, optimisation levels and code
generation choices live here; pipeline.py calls them through the `Target` interface."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from zluda_py.compiler import codegen
from zluda_py.compiler.cpu.module import ModuleLowering, helpers_ir
from zluda_py.compiler.cpu.runtime import CompiledModule, object_files, target_machine, use_helpers, worker_count
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
# LLVM back-end options (process-wide), picked by measurement (docs/cpu_target.md, "Compile
# time"). CodeGenPrepare restarts its walk over a function after each change to the dominator
# tree unless the function counts as huge, which made it quadratic in blocks (38 % of LLVM time
# on a 50k-line cub kernel); every function counts as huge here, so it revisits changed blocks
# only. The greedy register allocator's region growing gets a tenth of its default budget: 20-30 %
# less code generation time on large kernels, and the bench kernels ran as fast. The machine
# scheduler's dependency graph compares each memory instruction with every earlier one of its
# region still pending, up to 1000 before it chains off the oldest half: quadratic in the long
# blocks of 64-bit warp vectors (a third of code generation in cub's 64-bit reductions); 400
# cuts that by 30 % with byte-identical objects over bench/compile.py's corpus (200, 300 and
# 500 changed some).
BACKEND_OPTIONS = ("-cgpp-huge-func=0", "-grow-region-complexity-budget=1000", "-dag-maps-huge-region=400")
_options_set = False


def opt_level(ir_lines: int) -> int:
    """O3 with the loop vectorizer; O1 for very large modules."""
    return 3 if ir_lines < LARGE_IR_LINES else 1


def optimise(mod: llvm.ModuleRef, level: int) -> None:
    """The optimiser at `level` for the host CPU (bench/compile.py times it apart from codegen)."""
    tuning = llvm.PipelineTuningOptions(speed_level=level)
    tuning.loop_vectorization = level == 3
    # no SLP vectorizer: warp code is vector code already; it took up to 11 % of the optimiser's
    # time and left every kernel of bench/cuda/suite.cu and cpu_kernels.cu byte-identical
    tuning.slp_vectorization = False
    pb = llvm.create_pass_builder(target_machine(level), tuning)
    pb.getModulePassManager().run(mod, pb)


def set_backend_options() -> None:
    """BACKEND_OPTIONS, once, at the first code generation (not when a host program imports us)."""
    global _options_set
    if not _options_set:
        for option in BACKEND_OPTIONS:
            llvm.set_option("zluda", option)
        _options_set = True


def machine_code(mod: llvm.ModuleRef, level: int) -> bytes:
    """Object code of a module optimised at `level` (the back end runs at CODEGEN_LEVEL at most)."""
    set_backend_options()
    return target_machine(min(level, CODEGEN_LEVEL)).emit_object(mod)


@cache
def host_layout() -> tuple[str, str]:
    """The host's target triple and data layout, for every module lowered in this process (a target
    machine takes about half a millisecond to make: 3 % of a small kernel's lowering)."""
    tm = target_machine()
    return tm.triple, str(tm.target_data)


@contextmanager
def no_collection() -> Iterator[None]:
    """Python's cyclic garbage collector paused: lowering allocates hundreds of thousands of IR
    objects, and each full collection walked them and the module's whole AST again (30 % of a
    cub kernel's lowering time). At the end one young-generation collection frees the IR that is
    garbage by then, walking only what was allocated meanwhile."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
            gc.collect(0)


def unlink(module: ir.Module) -> None:
    """Take apart an IR module that is garbage: its functions, blocks and instructions refer to
    each other, so only a cyclic collection freed them, walking every instruction (a quarter of a
    cub kernel's lowering time). Unlinked, reference counting frees most of them at once."""
    for fn in module.functions:
        for block in fn.blocks:
            block.instructions = []
            block.terminator = None
        fn.blocks = []
    module.globals.clear()


class CpuTarget(Target):
    name = "cpu"
    per_kernel = True

    def description(self) -> str:
        return f"{target_machine().triple} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"

    def lower(self, module: ast.Module) -> Lowered:
        with no_collection():
            ir_module, metadata = self._lower(module)
            return Lowered(str(ir_module), metadata, ir_module)

    def _lower(self, module: ast.Module) -> tuple[ir.Module, dict]:
        """The IR module and its metadata, not yet printed: a part's text is printed by `split`, piece
        by piece (printing the whole module as well took a third of a part's lowering time)."""
        module = inline_barrier_calls(module)  # a warp function can yield at a barrier; a .func cannot
        lowering = ModuleLowering(module, *host_layout())
        return lowering.ir, lowering.lower()

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
        with no_collection():  # the IR module is garbage once this returns
            return self._lower_part(module, name)

    def _lower_part(self, module: ast.Module, name: str) -> Lowered:
        ir_module, whole = self._lower(part_module(module, name))
        pieces = split(ir_module, [k["runner"] for k in whole["kernels"].values()])
        unlink(ir_module)
        if pieces is None:  # parts.whole_reason should have kept such a module whole
            raise UnsupportedError(f"{name}: this module cannot be compiled per kernel")
        if name == VARIABLES:
            # what the kernels declare, in module order: a cached variables' part loads the module
            # without parsing its PTX
            declared = [[k.name, declared_kernel(k)] for k in module.kernels()]
            metadata = {"kernels": {}, "globals": whole["globals"], "part": VARIABLES, "declared": declared}
            return Lowered(pieces[0], metadata)
        metadata = {"kernels": whole["kernels"], "globals": {}, "reserved_smem": whole["reserved_smem"]}
        return Lowered(pieces[1], metadata)

    def generate_parts(self, parts: list[Lowered]) -> list[bytes]:
        """Several parts, or a large one, are code-generated in child processes, in parallel."""
        jobs = [(p.text, self.name, opt_level(p.text.count("\n"))) for p in parts]
        isolate = len(jobs) > 1 or any(text.count("\n") >= SPLIT_IR_LINES for text, _, _ in jobs)
        return codegen.emit_objects(jobs, isolate=isolate, workers=worker_count())

    def helpers_object(self) -> bytes:
        """The helpers every kernel's module declares (`module.helpers_ir`)."""
        return self.emit(helpers_ir(*host_layout()))

    def load(self, object_code: bytes, metadata: dict) -> CompiledModule:
        return CompiledModule(object_code, metadata)

    def objects(self, object_code: bytes, metadata: dict) -> list[bytes]:
        return object_files(object_code, metadata)


CPU = CpuTarget()
use_helpers(CPU.helpers_object)  # compiled in this process unless the cache provides it
