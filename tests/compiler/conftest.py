"""Fixtures: CUDA sources under tests/cuda built to PTX by nvcc, compiled once per session."""

from __future__ import annotations

import pytest

from zluda_py.compiler import compile


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
