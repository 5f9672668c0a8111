"""The AMDGPU test corpus, built once per session: every CUDA test source (nvcc -ptx, sm_80) and the
hand-written PTX (here and in tests/compiler/ptx), for gfx90a, gfx942 and gfx1100. LLVM code generation for all of it runs
in one child process, so an LLVM abort fails the build instead of killing pytest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zluda_py.compiler.errors import PtxError
from zluda_py.compiler.linker import link as link_ptx
from zluda_py.ptx import ast, parse

TARGETS = ["gfx90a", "gfx942", "gfx1100"]
HERE = Path(__file__).parent
CUDA = HERE.parent / "cuda"
# hand-written PTX: this suite's and the CPU compiler tests'
PTX_FILES = sorted([*(HERE / "ptx").glob("*.ptx"), *(HERE.parent / "compiler" / "ptx").glob("*.ptx")])
# -rdc programs: each group is built separately and linked, as the driver links them
RDC_GROUPS = [("fatbin_rdc_a.cu", "fatbin_rdc_b.cu"), ("e2e_rdc_main.cu", "e2e_rdc_lib.cu")]
RDC = {n for group in RDC_GROUPS for n in group}
# programs the AMDGPU target refuses by design (each built -rdc, as it needs): not in the corpus;
# test_code_objects checks that each is refused by name
CPU_ONLY = {"e2e_device_launch.cu": "dynamic parallelism"}


def rdc_name(group: tuple[str, ...]) -> str:
    return f"{group[0]} (linked)"


@dataclass
class Built:
    module: ast.Module
    objects: dict[str, tuple[bytes, dict]]  # gfx -> (code object, metadata)
    error: Exception | None = None


def _sources(nvcc) -> dict[str, "ast.Module | Exception"]:
    out: dict[str, ast.Module | Exception] = {}
    for cu in sorted(CUDA.glob("*.cu")):
        if cu.name in RDC or cu.name in CPU_ONLY:
            continue
        try:
            # linked as the driver's pipeline links every load (the device runtime joins when declared)
            out[cu.name] = link_ptx([parse(nvcc([cu.name], ["-ptx", "-arch=sm_80"], ".ptx").read_text(), cu.name)])
        except PtxError as exc:
            out[cu.name] = exc
    for group in RDC_GROUPS:
        parts = [parse(nvcc([n], ["-ptx", "-arch=sm_80", "-rdc=true"], ".ptx").read_text(), n) for n in group]
        out[rdc_name(group)] = link_ptx(parts)
    for p in PTX_FILES:
        out[p.name] = parse(p.read_text(), p.name)
    return out
