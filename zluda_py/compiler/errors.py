"""Errors raised by the compiler and by launches, with NVIDIA's CUresult codes."""

from __future__ import annotations

from zluda_py.ptx import ast

from zluda_py.ptx.errors import PtxError

CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_ASSERT = 710
CUDA_ERROR_MISALIGNED_ADDRESS = 716
CUDA_ERROR_LAUNCH_FAILED = 719
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_OUT_OF_MEMORY = 2


class UnsupportedError(PtxError):
    """Valid PTX that this compiler does not translate: `unsupported: <what> at file:line`."""

    cu_result = CUDA_ERROR_INVALID_PTX

    def __init__(self, what: str, pos: ast.Pos = ast.NOPOS) -> None:
        super().__init__(f"unsupported: {what}", pos.file, pos.line, pos.col)

    def __str__(self) -> str:
        return f"{self.message} at {self.file}:{self.line}"


class CodegenError(UnsupportedError):
    """LLVM rejected or crashed on the IR we generated for a target ("cpu" or a gfx name)."""

    def __init__(self, target: str, detail: str) -> None:
        super().__init__(f"code generation for {target} failed: {detail}")

    def __str__(self) -> str:
        return self.message


def unsupported(inst: ast.Instruction, detail: str = "") -> UnsupportedError:
    """The error for an instruction form we refuse, named as written (`tex.2d.v4.f32.f32`)."""
    name = ".".join((inst.opcode, *inst.mods))
    return UnsupportedError(name + (f" ({detail})" if detail else ""), inst.pos)


class LaunchError(Exception):
    """A kernel stopped with a fault: trap (719), a failed assert (710), a bad address (700),
    a misaligned one (716)."""

    def __init__(self, cu_result: int, message: str) -> None:
        super().__init__(message)
        self.cu_result = cu_result


class ModuleMemoryError(MemoryError):
    """A module's variables need more memory than this process can map (2, OUT_OF_MEMORY)."""

    cu_result = CUDA_ERROR_OUT_OF_MEMORY
