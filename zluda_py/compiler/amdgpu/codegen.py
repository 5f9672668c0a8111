"""LLVM IR -> AMDGPU relocatable object: optimise with the target machine and emit, by
default in a child process (`zluda_py.compiler.codegen`: an LLVM abort must not kill the host).
"""

from __future__ import annotations

import llvmlite.binding as llvm

from zluda_py.compiler import codegen
from zluda_py.compiler.amdgpu.targets import target
from zluda_py.compiler.errors import CodegenError

__all__ = ["CodegenError", "data_layout", "emit_object", "emit_objects", "target_machine"]

_initialized = False
# Pin code object v5: LLVM 22 defaults to v6, which ROCm releases before 7 cannot load.
CODE_OBJECT_FLAG = '\n!llvm.module.flags = !{!0}\n!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}\n'


def _init() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True


def target_machine(gfx: str) -> llvm.TargetMachine:
    _init()
    t = target(gfx)
    return llvm.Target.from_triple(t.triple).create_target_machine(
        cpu=t.name, features=t.features, opt=3, reloc="pic", codemodel="default")


def data_layout(gfx: str) -> str:
    return str(target_machine(gfx).target_data)


def emit_object(ir_text: str, gfx: str) -> bytes:
    """Verify, optimise at O3 with the target machine (so the AMDGPU attributor prunes unused
    implicit arguments), and emit a relocatable object. Runs in this process."""
    tm = target_machine(gfx)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.PipelineTuningOptions(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


def emit_objects(jobs: list[tuple[str, str]], isolate: bool = True, workers: int = 1) -> list[bytes]:
    """Objects for (ir_text, gfx) jobs, in order, in child processes with `isolate`
    (`zluda_py.compiler.codegen`)."""
    return codegen.emit_objects([(text, gfx, 3) for text, gfx in jobs], isolate, workers)
