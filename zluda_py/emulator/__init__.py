"""An AMD GPU ISA emulator (issue 17): runs the HSA code objects our AMDGPU target produces, so
the ROCm path executes without AMD hardware. See docs/amdgpu.md, "Emulator".

    launch(code_object, "kernel", grid, block, kernarg, memory, arch="gfx1100")
    run_ptx(ptx, "kernel", grid, block, [np arrays and scalars], arch="gfx1100")
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Sequence

import numpy as np

from zluda_py.emulator.errors import EmulatorError
from zluda_py.emulator.launch import launch
from zluda_py.emulator.memory import Memory

__all__ = ["EmulatorError", "Memory", "launch", "run_ptx", "compile_ptx"]


@lru_cache(maxsize=64)
def compile_ptx(ptx: str, arch: str) -> tuple[bytes, dict]:
    """(code object, metadata) from our AMDGPU pipeline, cached per text and arch."""
    from zluda_py.compiler import pipeline
    from zluda_py.compiler.target import get

    _, code_object, metadata = pipeline.compile_object(ptx, get(arch))
    return code_object, metadata


def run_ptx(ptx: str, kernel: str, grid: "int | Sequence[int]", block: "int | Sequence[int]",
            args: Sequence["np.ndarray | np.generic | int"], arch: str = "gfx1100",
            dynamic_lds: int = 0) -> list["np.ndarray | None"]:
    """Compile `ptx` for `arch`, copy each numpy array argument to device memory (its pointer is
    the parameter), launch, and return the arrays' contents afterwards (None for scalars).
    Scalars are numpy scalars (their dtype gives the parameter's size) or ints for 64-bit."""
    code_object, metadata = compile_ptx(ptx, arch)
    params = metadata["kernels"][kernel]["params"]
    if len(params) != len(args):
        raise ValueError(f"{kernel} takes {len(params)} parameters, {len(args)} given")
    memory = Memory()
    kernarg = bytearray(metadata["kernels"][kernel]["param_size"])
    buffers: list[tuple[int, np.ndarray] | None] = []
    for p, a in zip(params, args):
        if isinstance(a, np.ndarray):
            addr = memory.upload(a)
            raw = struct.pack("<Q", addr)
            buffers.append((addr, a))
        else:
            raw = (a.tobytes() if isinstance(a, np.generic) else struct.pack("<q", a))
            buffers.append(None)
        if len(raw) != p["size"]:
            raise ValueError(f"parameter {p['name']} is {p['size']} bytes, the argument {len(raw)}")
        kernarg[p["offset"]:p["offset"] + p["size"]] = raw
    symbol = metadata["kernels"][kernel]["symbol"].removesuffix(".kd")
    launch(code_object, symbol, grid, block, bytes(kernarg), memory, arch, dynamic_lds)
    return [None if b is None else memory.view(b[0])[: b[1].nbytes].view(b[1].dtype).reshape(b[1].shape).copy()
            for b in buffers]
