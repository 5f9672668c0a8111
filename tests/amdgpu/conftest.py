"""Session fixtures of the AMDGPU tests: the toolchain (or the reason it is missing) and the corpus."""

from __future__ import annotations

import os
import shutil

import pytest

from zluda_py.compiler.errors import PtxError

from .corpus import TARGETS, Built, _sources


@pytest.fixture(scope="session")
def objdump():
    tool = shutil.which("llvm-objdump-19")
    if tool is None:
        pytest.skip("llvm-objdump-19 (Debian llvm-19) is needed to disassemble gfx942/gfx1100; not installed")
    return tool


def _emit_into(built: dict[str, Built], items: list[tuple[str, str, dict, str]], workers: int) -> None:
    """Code objects for (source, gfx, metadata, LLVM IR) items into `built`. When LLVM fails on a
    batch of several sources, each is retried alone, so the error lands on its own source."""
    from zluda_py.compiler.amdgpu.codegen import CodegenError, emit_objects
    from zluda_py.compiler.amdgpu_link import link

    try:
        objects = emit_objects([(text, gfx) for _, gfx, _, text in items], workers=workers)
    except CodegenError as exc:
        names = list(dict.fromkeys(name for name, *_ in items))
        if len(names) == 1:
            built[names[0]].error = exc
            return
        for name in names:
            _emit_into(built, [it for it in items if it[0] == name], 1)
        return
    for (name, gfx, meta, _), obj in zip(items, objects):
        built[name].objects[gfx] = (link([obj]), meta)


@pytest.fixture(scope="session")
def corpus(nvcc, lld) -> dict[str, Built]:
    from zluda_py.compiler.amdgpu import lower_many

    built: dict[str, Built] = {}
    items: list[tuple[str, str, dict, str]] = []
    for name, module in _sources(nvcc).items():
        if isinstance(module, Exception):
            built[name] = Built(None, {}, module)
            continue
        built[name] = Built(module, {})
        try:
            lowered = lower_many(module, TARGETS)
        except PtxError as exc:
            built[name].error = exc
            continue
        items += [(name, gfx, meta, text) for gfx, (text, meta) in lowered.items()]
    _emit_into(built, items, os.cpu_count() or 1)
    return built


@pytest.fixture(scope="session")
def conformance_corpus(lld):
    """{module name: conformance_corpus.Module}, compiled for TARGETS (see conformance_corpus.py)."""
    from .conformance_corpus import build

    modules, seconds = build()
    kernels = sum(len(m.kernels) for m in modules)
    forms = sum(len(k.forms) for m in modules for k in m.kernels)
    print(f"\nAMDGPU conformance corpus: {forms} forms in {kernels} kernels, {len(modules)} modules x "
          f"{len(TARGETS)} targets, built in {seconds:.1f} s")
    return {m.name: m for m in modules}
