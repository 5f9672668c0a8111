"""Conformance suite options: `--target cpu` (default) runs real PTX kernels through the
compiler; `--target semantics` / `semantics1` run the instruction definitions alone at lane
width 32 / 1; `--target gfx1100` / `gfx950` (and `gfx942`, `gfx90a`, `gfx1200`) run the kernels
compiled for AMDGPU on the ISA emulator; `--target cuda` runs them on the CUDA driver
libcuda.so.1 resolves to (NVIDIA's on a GPU machine: tests/hardware/README.md)."""

from __future__ import annotations

import pytest

from conformance.harness import EMULATED, Runner

TARGETS = ("cpu", "semantics", "semantics1", "cuda", *EMULATED)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--target", action="store", default="cpu", choices=TARGETS,
                     help="where conformance kernels run (default: cpu)")


@pytest.fixture(scope="session")
def run(request: pytest.FixtureRequest) -> Runner:
    return Runner(request.config.getoption("--target"))
