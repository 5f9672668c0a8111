"""What the driver knows of a loaded module's kernels and variables, on every target: the
types a backend hands the driver (each target adds its private launch data in its own runtime)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass
class ParamInfo:
    name: str
    offset: int
    size: int
    align: int


@dataclass
class KernelInfo:
    name: str
    params: list[ParamInfo]
    param_size: int
    static_shared: int
    local_size: int
    max_threads: int
    reqntid: tuple[int, int, int] | None
    # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES where it is not static_shared: the end of the kernel's
    # last static variable, as NVIDIA reports it; static_shared may be padded up to where the
    # dynamic shared memory starts (the CPU target aligns that to 16)
    declared_shared: int | None = None

    @property
    def shared_size_bytes(self) -> int:
        return self.static_shared if self.declared_shared is None else self.declared_shared

    @classmethod
    def declared(cls, name: str, k: dict, static_shared: int = 0, local_size: int = 0, **extra) -> "KernelInfo":
        """From a kernel's metadata entry (`params`, `param_size`, `max_threads`, `reqntid`), with
        the sizes only its compiled code knows (0 until it is built) and a subclass's `extra` fields."""
        return cls(name, [ParamInfo(**p) for p in k["params"]], k["param_size"], static_shared, local_size,
                   k["max_threads"], tuple(k["reqntid"]) if k["reqntid"] else None, **extra)

    def param_buffer(self, args: Sequence) -> bytes:
        """CUDA's parameter buffer for `args`: numpy arrays by address (their memory is the device
        buffer), numpy scalars by their bytes, Python numbers in the parameter's size."""
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        blob = bytearray(self.param_size)
        for p, a in zip(self.params, args):
            blob[p.offset:p.offset + p.size] = _param_bytes(a, p.size)
        return bytes(blob)


@dataclass
class GlobalInfo:
    address: int
    size: int
    space: str  # "global" or "const": CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES sums the module's .const
    managed: bool = False  # `.attribute(.managed)` (a __managed__ variable): managed memory to the driver


def _param_bytes(a, size: int) -> bytes:
    if isinstance(a, np.ndarray):
        return a.ctypes.data.to_bytes(8, "little")[:size]
    if isinstance(a, (bytes, bytearray)):
        return bytes(a)
    if isinstance(a, np.generic):
        raw = a.tobytes()
        if len(raw) != size:
            raise TypeError(f"argument {a!r} is {len(raw)} bytes, the parameter {size}")
        return raw
    if isinstance(a, float):
        return np.array(a, np.float32 if size == 4 else np.float64).tobytes()
    if isinstance(a, (int, bool)):
        return (int(a) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    raise TypeError(f"cannot pass {type(a).__name__} as a kernel argument")
