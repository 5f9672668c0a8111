"""A compiled AMDGPU module with the CPU target's launch interface (`CompiledModule.launch`), so
that code written against the CPU target (the conformance suite, the fuzzer) runs on the emulator
unchanged: numpy arrays are passed by address and kernels read and write them in place, faults
are `LaunchError`s with CUDA's codes."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from zluda_py.compiler.errors import LaunchError
from zluda_py.compiler.kernels import KernelInfo
from zluda_py.emulator import loader, textures
from zluda_py.emulator.errors import MemoryFault, StackOverflow, Trapped
from zluda_py.emulator.launch import launch
from zluda_py.emulator.memory import Memory

LAUNCH_FAILED, ILLEGAL_ADDRESS = 719, 700


class EmulatedModule:
    textures = textures  # where to create the texture and surface objects its kernels read (emulator/textures.py)

    def __init__(self, code_object: bytes, metadata: dict, arch: str) -> None:
        self.arch, self.metadata = arch, metadata
        self.memory = Memory()
        self.image = loader.Image(code_object, self.memory)

    @classmethod
    def from_ptx(cls, ptx: str, arch: str) -> "EmulatedModule":
        """`ptx` through our AMDGPU pipeline for `arch` (LLVM O3, as the HIP backend builds it)."""
        from zluda_py.compiler import pipeline
        from zluda_py.compiler.target import get

        _, code_object, metadata = pipeline.compile_object(ptx, get(arch))
        return cls(code_object, metadata, arch)

    def launch(self, kernel: str, grid: "int | Sequence[int]", block: "int | Sequence[int]", args: Sequence,
               shared_mem: int = 0) -> None:
        """Run `kernel`; arrays in `args` are device memory for the launch (passed by address), as
        are the descriptor blocks and texels of the objects `textures.register` made; other
        arguments are scalars. A memory fault raises LaunchError 700, `trap`
        and a stack overflow 719; an instruction the emulator lacks raises its EmulatorError."""
        info = self.metadata["kernels"][kernel]
        blob = KernelInfo.declared(kernel, info).param_buffer(args)
        arrays = [(a.ctypes.data, a.nbytes) for a in args if isinstance(a, np.ndarray) and a.nbytes]
        blocks = _blocks(arrays + textures.spans())
        for base, size in blocks:
            self.memory.add(base, size)
        try:
            launch(self.image, info["symbol"].removesuffix(".kd"), grid, block, blob, self.memory,
                   self.arch, shared_mem)
        except Trapped as exc:  # what the CPU target reports for `trap`
            raise LaunchError(LAUNCH_FAILED, f"{kernel}: unspecified launch failure (trap): {exc}") from exc
        except StackOverflow as exc:  # and for a call past the per-thread stack
            raise LaunchError(LAUNCH_FAILED, f"{kernel}: unspecified launch failure (stack overflow): {exc}") from exc
        except MemoryFault as exc:
            raise LaunchError(ILLEGAL_ADDRESS, f"{kernel}: an illegal memory access was encountered: {exc}") from exc
        finally:
            for base, _ in blocks:
                self.memory.remove(base)


def _blocks(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """(base, size) memory blocks holding the (address, bytes) spans: whole aligned dwords, as a
    GPU allocation would (LLVM reads the containing dword for 8- and 16-bit atomics), overlapping
    ones merged."""
    dwords = sorted((base & ~3, (base + size + 3) & ~3) for base, size in spans)
    merged: list[list[int]] = []
    for lo, hi in dwords:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi - lo) for lo, hi in merged]
