"""The one exception of the fatbin layer, carrying the CUresult the driver returns for it."""

from __future__ import annotations

CUDA_ERROR_INVALID_IMAGE = 200
CUDA_ERROR_NO_BINARY_FOR_GPU = 209


class FatbinError(Exception):
    """A container that cannot be read (200) or holds no code this device can use (209).

    `offset` is where the problem is: a byte offset in the file or buffer, or a process
    address for images read through a pointer. `origin` names the file or image, if known.
    """

    def __init__(self, message: str, offset: int, cu_result: int = CUDA_ERROR_INVALID_IMAGE,
                 origin: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.cu_result = cu_result
        self.origin = origin
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.origin}: " if self.origin else ""
        return f"{where}offset {self.offset:#x}: {self.message}"

    def with_origin(self, origin: str) -> FatbinError:
        """The same error, naming the file or image it came from (when it did not already)."""
        if self.origin is None:
            self.origin = origin
            self.args = (str(self),)
        return self
