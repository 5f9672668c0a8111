"""Errors of the PTX front end: every one names file:line:col and shows the source line."""

from __future__ import annotations

# CUDA_ERROR_INVALID_PTX: what the driver returns for a module that does not parse or check.
CUDA_ERROR_INVALID_PTX = 218
# CUDA_ERROR_UNSUPPORTED_PTX_VERSION: a `.version` newer than the driver accepts.
CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
# CUDA_ERROR_NOT_SUPPORTED: valid PTX that NVIDIA's driver nevertheless refuses to load.
CUDA_ERROR_NOT_SUPPORTED = 801


class PtxError(Exception):
    """A problem in PTX text, located at file:line:col (1-based)."""

    cu_result = CUDA_ERROR_INVALID_PTX

    def __init__(self, message: str, file: str = "<ptx>", line: int = 0, col: int = 0,
                 source_line: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.source_line = source_line

    def __str__(self) -> str:
        head = f"{self.file}:{self.line}:{self.col}: error: {self.message}"
        if not self.source_line:
            return head
        # Tabs are kept in the caret's indentation so the caret lines up in a terminal.
        indent = "".join(c if c == "\t" else " " for c in self.source_line[: max(self.col - 1, 0)])
        return f"{head}\n{self.source_line}\n{indent}^"


class PtxErrors(PtxError):
    """Several errors in one module; behaves as the first one and lists all in `.errors`."""

    def __init__(self, errors: list[PtxError]) -> None:
        first = errors[0]
        super().__init__(first.message, first.file, first.line, first.col, first.source_line)
        self.errors = errors
        self.cu_result = first.cu_result

    def __str__(self) -> str:
        return "\n".join(PtxError.__str__(e) for e in self.errors)


def raise_all(errors: list[PtxError]) -> None:
    """Raise nothing, the single error, or PtxErrors holding all of them."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise PtxErrors(errors)
