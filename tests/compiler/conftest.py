"""Fixtures: CUDA sources under tests/cuda built to PTX by nvcc, compiled once per session."""

from __future__ import annotations

import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu import memory


@pytest.fixture(scope="session")
def cuda_module(nvcc):
    """cuda_module("file.cu") -> CompiledModule for the CPU target (sm_80 PTX)."""
    cache = {}

    def build(source: str, arch: str = "sm_80"):
        key = (source, arch)
        if key not in cache:
            ptx = nvcc([source], ["-ptx", f"-arch={arch}"], ".ptx")
            cache[key] = compile(ptx.read_text())
        return cache[key]

    return build


def compile_recording_plans(ptx: str):
    """(module, {(kernel, opcode, address register): set of plans}) of `ptx` compiled for the
    CPU, with the access plan cpu/memory.py chose for every ld/st."""
    seen: dict[tuple[str, str, str], set[str]] = {}
    original = memory.MemoryMixin._plan

    def spy(self, inst, addr, space, nbytes):
        plan = original(self, inst, addr, space, nbytes)
        seen.setdefault((self.fn.name, inst.opcode, addr.base.name), set()).add(plan)
        return plan

    memory.MemoryMixin._plan = spy
    try:
        module = compile(ptx)
    finally:
        memory.MemoryMixin._plan = original
    return module, seen
