"""LLVM IR -> AMDGPU relocatable object: optimise with the target machine, emit, optionally in a child process.

LLVM aborts (rather than raising) on some code generation failures, and an abort would kill
the host program, so `emit_objects` runs code generation in a child Python process by default.
Each job is parsed afresh: code generation rewrites a module in place and must not see it twice.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
import msgpack

from zluda_py.compiler.amdgpu.targets import target
from zluda_py.compiler.errors import UnsupportedError

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


class CodegenError(UnsupportedError):
    """LLVM rejected or crashed on the IR we generated for a target."""

    def __init__(self, gfx: str, detail: str) -> None:
        super().__init__(f"AMDGPU code generation for {gfx} failed: {detail}")

    def __str__(self) -> str:
        return self.message


def emit_objects(jobs: list[tuple[str, str]], isolate: bool = True, workers: int = 1) -> list[bytes]:
    """Objects for (ir_text, gfx) jobs, in order. With `isolate`, child processes (up to
    `workers` at once, each taking every workers-th job) run them; if one dies, each of its jobs
    is retried alone so the error names the job that killed it."""
    if not isolate:
        return [emit_object(text, gfx) for text, gfx in jobs]
    n = max(1, min(workers, len(jobs)))
    shares = [list(range(i, len(jobs), n)) for i in range(n)]
    with ThreadPoolExecutor(n) as pool:  # threads only wait for the children
        results = list(pool.map(lambda idx: _run_child([jobs[i] for i in idx]), shares))
    out: list[bytes | None] = [None] * len(jobs)
    for idx, res in zip(shares, results):
        if res is None:
            if len(idx) == 1:
                raise CodegenError(jobs[idx[0]][1], "LLVM aborted (see stderr)")
            res = [emit_objects([jobs[i]])[0] for i in idx]
        for i, r in zip(idx, res):
            if isinstance(r, str):
                raise CodegenError(jobs[i][1], r)
            out[i] = r
    return out  # type: ignore[return-value]


def _run_child(jobs: list[tuple[str, str]]) -> list[bytes | str] | None:
    res = subprocess.run([sys.executable, "-m", "zluda_py.compiler.amdgpu.codegen"],
                         input=msgpack.packb([list(j) for j in jobs]), capture_output=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace")[-4000:])
        return None
    return msgpack.unpackb(res.stdout)


def _child() -> None:
    jobs = msgpack.unpackb(sys.stdin.buffer.read())
    out: list[bytes | str] = []
    for text, gfx in jobs:
        try:
            out.append(emit_object(text, gfx))
        except Exception as exc:  # reported to the parent, which raises CodegenError
            out.append(f"{type(exc).__name__}: {exc}")
    sys.stdout.buffer.write(msgpack.packb(out))


if __name__ == "__main__":
    _child()
