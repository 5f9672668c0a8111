"""The emulator's flat memory: device allocations are numpy byte arrays at fake 64-bit addresses.

LDS and scratch are not here: they are per workgroup / per lane (`launch.py`); flat addresses
reach them through the apertures below, as on the hardware.
"""

from __future__ import annotations

import bisect

import numpy as np

from zluda_py.emulator.errors import EmulatorError

# Flat address apertures (the high 32 bits), what src_shared_base / src_private_base read.
SHARED_APERTURE = 0x1_0000
PRIVATE_APERTURE = 0x2_0000
_HEAP_BASE = 0x7F00_0000_0000
_ALIGN = 256


class Memory:
    """Device memory: `alloc` hands out addresses; loads and stores outside every allocation fault."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._blocks: dict[int, np.ndarray] = {}
        self._next = _HEAP_BASE

    def alloc(self, size: int) -> int:
        base = self._next
        self._next += (max(size, 1) + _ALIGN - 1) // _ALIGN * _ALIGN + _ALIGN  # a gap catches overruns
        bisect.insort(self._bases, base)
        self._blocks[base] = np.zeros(size, np.uint8)
        return base

    def upload(self, data: "np.ndarray | bytes") -> int:
        raw = np.frombuffer(bytes(data) if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes(), np.uint8)
        base = self.alloc(raw.size)
        self._blocks[base][:] = raw
        return base

    def view(self, address: int) -> np.ndarray:
        """The allocation's bytes (writable), from the allocation's start `address`."""
        return self._blocks[address]

    def _locate(self, address: int, size: int) -> tuple[np.ndarray, int]:
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            base = self._bases[i]
            block = self._blocks[base]
            if address + size <= base + block.size:
                return block, address - base
        raise EmulatorError(f"memory fault: {size} bytes at {address:#x} are outside every allocation")

    def read(self, address: int, size: int) -> np.ndarray:
        block, off = self._locate(address, size)
        return block[off:off + size].copy()

    def write(self, address: int, data: np.ndarray) -> None:
        block, off = self._locate(address, data.size)
        block[off:off + data.size] = data
