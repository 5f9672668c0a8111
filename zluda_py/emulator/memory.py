"""The emulator's global memory: blocks of this process's memory, at their real host addresses, so
that the driver's copies (host pointers in and out) reach what kernels read and write.

LDS and scratch are not here: they are per workgroup / per lane (`launch.py`); flat addresses
reach them through the apertures below, as on the hardware. Host addresses stay below 2^47, far
from the apertures.
"""

from __future__ import annotations

import bisect
import ctypes
import threading

import numpy as np

from zluda_py.emulator.errors import MemoryFault

# Flat address apertures (the high 32 bits), what src_shared_base / src_private_base read.
SHARED_APERTURE = 0x1_0000
PRIVATE_APERTURE = 0x2_0000
_ALIGN = 256


def host_view(address: int, size: int) -> np.ndarray:
    """A writable uint8 view of `size` bytes of this process's memory at `address`."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address)) if size else np.zeros(0, np.uint8)


class Memory:
    """Device memory: `alloc` hands out fresh memory, `add` admits memory someone else owns;
    loads and stores outside every block fault."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._blocks: dict[int, np.ndarray] = {}
        self._owners: dict[int, np.ndarray] = {}  # base -> the array holding an `alloc`ed block
        self._lock = threading.Lock()

    def alloc(self, size: int) -> int:
        """Zeroed memory, 256-byte aligned, with at least 256 bytes of unmapped gap after it
        (the over-allocation is never a block), so that running past the end faults."""
        owner = np.zeros(max(size, 1) + 3 * _ALIGN, np.uint8)
        base = (owner.ctypes.data + _ALIGN - 1) // _ALIGN * _ALIGN
        self._insert(base, owner[base - owner.ctypes.data:][:size])
        self._owners[base] = owner
        return base

    def add(self, base: int, size: int) -> None:
        """Make `size` bytes of host memory at `base` (owned elsewhere) reachable by kernels."""
        self._insert(base, host_view(base, size))

    def _insert(self, base: int, block: np.ndarray) -> None:
        with self._lock:
            if base in self._blocks:
                raise ValueError(f"{base:#x} is already a block")
            bisect.insort(self._bases, base)
            self._blocks[base] = block

    def remove(self, base: int) -> bool:
        """Forget the block at `base` (an `alloc`ed block's memory is given back); False when
        there is none."""
        with self._lock:
            if base not in self._blocks:
                return False
            self._bases.remove(base)
            del self._blocks[base]
            self._owners.pop(base, None)
            return True

    def upload(self, data: "np.ndarray | bytes") -> int:
        raw = np.frombuffer(bytes(data) if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes(), np.uint8)
        base = self.alloc(raw.size)
        self._blocks[base][:] = raw
        return base

    def view(self, address: int) -> np.ndarray:
        """The block's bytes (writable), from the block's start `address`."""
        return self._blocks[address]

    def block(self, address: int, size: int) -> tuple[np.ndarray, int]:
        """(block, offset) holding `size` bytes at `address`; MemoryFault when none does."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            base = self._bases[i]
            block = self._blocks[base]
            if address + size <= base + block.size:
                return block, address - base
        raise MemoryFault(f"memory fault: {size} bytes at {address:#x} are outside every allocation")

    def read(self, address: int, size: int) -> np.ndarray:
        block, off = self.block(address, size)
        return block[off:off + size].copy()

    def write(self, address: int, data: np.ndarray) -> None:
        block, off = self.block(address, data.size)
        block[off:off + data.size] = data

    def gather(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """(n, size) bytes from n addresses; one block lookup when they all fall in one block."""
        block, offsets = self._offsets(addresses, size)
        if block is None:
            return np.stack([self.read(int(a), size) for a in addresses]) if addresses.size else np.zeros((0, size), np.uint8)
        return block[offsets[:, None] + np.arange(size)]

    def scatter(self, addresses: np.ndarray, data: np.ndarray) -> None:
        """Store data[i] (n, size) at addresses[i], in lane order (the last lane wins)."""
        block, offsets = self._offsets(addresses, data.shape[1])
        if block is None:
            for a, row in zip(addresses, data):
                self.write(int(a), row)
        else:
            block[offsets[:, None] + np.arange(data.shape[1])] = data

    def _offsets(self, addresses: np.ndarray, size: int) -> tuple[np.ndarray | None, np.ndarray]:
        if addresses.size == 0:
            return None, addresses
        lo, hi = int(addresses.min()), int(addresses.max())
        block, off = self.block(lo, size)
        if hi + size - lo > block.size - off:
            return None, addresses
        return block, (addresses - np.uint64(lo)).astype(np.int64) + off
