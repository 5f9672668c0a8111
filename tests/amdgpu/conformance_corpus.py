"""The conformance kernels for the AMDGPU suite, built once per session.

The form sweep (tests/conformance/test_sweep.py) runs every supported instruction form in
kernels of up to 32 forms of one opcode (`CHUNKS`), built by `harness.ptx_kernel` from the
forms' reference models. The same kernels, one per chunk (named `<opcode>_<chunk>`), are
compiled here for gfx90a, gfx942 and gfx1100, `MODULE_KERNELS` to a module, so that a
module's code object, LLVM child process, ld.lld and llvm-objdump runs serve many kernels.
Forms without a model yet are left out (they join when their model does).

Cost: models, parsing and lowering run in this process while two worker threads drive the LLVM
child processes and ld.lld, a module at a time. For 6,463 forms (246 kernels, 36 modules, 3
targets) the whole test file took 134 s of wall time on this project's 2-core machine when it
was otherwise idle (build 98 s; 220 s of CPU, lowering ~60 s of it, LLVM the most).
Bigger kernels cost more (LLVM's scheduling grows faster than linearly: 128 forms a kernel took
2.4x the codegen time of 4 x 32), smaller modules more process starts.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

from zluda_py.compiler.amdgpu.codegen import CodegenError
from zluda_py.compiler.errors import PtxError
from zluda_py.ptx import ast, parse

from .corpus import TARGETS

MODULE_KERNELS = 8  # sweep chunks (kernels) per compiled module
WORKERS = 2


@dataclass
class Kernel:
    name: str
    forms: list[str]  # instruction texts, e.g. "add.sat.s32"


@dataclass
class Module:
    """One compiled module: its kernels, and per target (code object, metadata) or the error."""

    name: str
    kernels: list[Kernel]
    ast: ast.Module | None = None
    objects: dict[str, tuple[bytes, dict]] = field(default_factory=dict)
    error: Exception | None = None
    unmodelled: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def plan() -> list[Module]:
    """The modules (without their code), from the sweep's chunks; cheap enough for collection."""
    from conformance.test_sweep import CHUNKS

    modules: list[Module] = []
    pending: list[Kernel] = []
    for i, (opcode, forms) in enumerate(CHUNKS):
        pending.append(Kernel(f"{opcode}_{i}", [".".join((opcode, *mods)) for mods in forms]))
        if len(pending) == MODULE_KERNELS or i == len(CHUNKS) - 1:
            modules.append(Module(f"{pending[0].name}..{pending[-1].name}", pending))
            pending = []
    return modules


def _source(module: Module) -> str:
    """The module's PTX: harness.ptx_kernel's kernel for each chunk, renamed."""
    from conformance.harness import make_op, ptx_kernel, split
    from conformance.models import case_for

    parts = []
    for k in module.kernels:
        ops = []
        for text in k.forms:
            case = case_for(*split(text))
            if case is None:
                module.unmodelled.append(text)
            else:
                ops.append(make_op(text, case.srcs, case.pred_out))
        k.forms = [op.text for op in ops]
        if ops:
            header, body = re.split(r"(?=^\.visible \.entry k\()", ptx_kernel(ops), maxsplit=1, flags=re.M)
            parts.append(body.replace(".entry k(", f".entry {k.name}(", 1))
    module.kernels = [k for k in module.kernels if k.forms]
    return header + "\n".join(parts) if parts else ""


def _compile(jobs: list[tuple[str, str]]) -> list[bytes]:
    """Linked code objects for (LLVM IR, gfx) jobs, LLVM in one child process."""
    from zluda_py.compiler.amdgpu.codegen import emit_objects
    from zluda_py.compiler.amdgpu_link import link

    return [link([obj]) for obj in emit_objects(jobs)]


def build() -> tuple[list[Module], float]:
    """Every module compiled for TARGETS; returns the modules and the wall time taken."""
    from zluda_py.compiler.amdgpu import lower_many

    start = time.perf_counter()
    modules = plan()
    with ThreadPoolExecutor(WORKERS) as pool:  # threads wait for LLVM children and ld.lld
        running = []
        for m in modules:
            try:
                text = _source(m)
                if not text:
                    continue
                m.ast = parse(text, m.name)
                lowered = lower_many(m.ast, TARGETS)
            except PtxError as exc:
                m.error = exc
                continue
            running.append((m, lowered, pool.submit(_compile, [(ir, gfx) for gfx, (ir, _) in lowered.items()])))
        for m, lowered, future in running:
            try:
                m.objects = {gfx: (co, lowered[gfx][1]) for gfx, co in zip(lowered, future.result())}
            except CodegenError as exc:
                m.error = exc
    return modules, time.perf_counter() - start
