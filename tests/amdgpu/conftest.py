"""Session fixtures of the AMDGPU tests: the toolchain (or the reason it is missing) and the corpus."""

from __future__ import annotations

import os
import shutil

import pytest

from zluda_py.compiler.errors import PtxError

from .corpus import TARGETS, Built, _sources


@pytest.fixture(scope="session")
def lld():
    from zluda_py.compiler.amdgpu_link import LinkerError, find_lld

    try:
        return find_lld()
    except LinkerError as exc:
        pytest.skip(f"AMDGPU code objects need ld.lld: {exc}")


@pytest.fixture(scope="session")
def objdump():
    tool = shutil.which("llvm-objdump-19")
    if tool is None:
        pytest.skip("llvm-objdump-19 (Debian llvm-19) is needed to disassemble gfx942/gfx1100; not installed")
    return tool


@pytest.fixture(scope="session")
def corpus(nvcc, lld) -> dict[str, Built]:
    from zluda_py.compiler.amdgpu import lower_many
    from zluda_py.compiler.amdgpu.codegen import emit_objects
    from zluda_py.compiler.amdgpu_link import link

    built: dict[str, Built] = {}
    jobs: list[tuple[str, str]] = []
    owners: list[tuple[str, str, dict]] = []
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
        for gfx, (text, meta) in lowered.items():
            jobs.append((text, gfx))
            owners.append((name, gfx, meta))
    for (name, gfx, meta), obj in zip(owners, emit_objects(jobs, workers=os.cpu_count() or 1)):
        built[name].objects[gfx] = (link([obj]), meta)
    return built
