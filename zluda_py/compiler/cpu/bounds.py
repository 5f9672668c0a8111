"""The table of valid device memory that native code checks accesses against (error 700).

The driver registers every allocation (device, pinned, managed and host-registered memory,
module globals) with `register_memory(address, size)` and forgets it with
`unregister_memory(address)`; `CompiledModule` registers its own globals. A launch passes an
immutable snapshot (sorted, merged [start, end) pairs of u64) in its launch record; generated
code keeps the last range each access site hit and binary-searches the snapshot only when an
access leaves it. Memory registered during a launch (device-side malloc) is found through
the host callback. `ZLUDA_CHECK_BOUNDS=0` makes the table one range covering everything.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

EVERYTHING = np.array([[0, (1 << 64) - 1]], np.uint64)


class AddressRanges:
    """Registered [start, start+size) ranges; a range registered twice needs two unregisters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: dict[int, list[int]] = {}  # start -> [end, count]
        self._table: np.ndarray | None = None
        self.enabled = os.environ.get("ZLUDA_CHECK_BOUNDS", "1") != "0"

    def register(self, start: int, size: int) -> None:
        with self._lock:
            entry = self._ranges.get(start)
            if entry is None:
                self._ranges[start] = [start + max(size, 1), 1]
            else:
                entry[0] = max(entry[0], start + max(size, 1))
                entry[1] += 1
            self._table = None

    def unregister(self, start: int) -> None:
        with self._lock:
            entry = self._ranges.get(start)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._ranges[start]
            self._table = None

    def table(self) -> np.ndarray:
        """(n, 2) u64 array of disjoint [start, end) ranges sorted by start (n >= 1: row 0 is the
        empty sentinel [0, 0)); never modified once returned."""
        if not self.enabled:
            return EVERYTHING
        with self._lock:
            if self._table is None:
                merged: list[list[int]] = [[0, 0]]  # a sentinel: the table is never empty
                for start in sorted(self._ranges):
                    end = self._ranges[start][0]
                    if merged and start <= merged[-1][1]:  # overlapping or adjacent ranges merge
                        merged[-1][1] = max(merged[-1][1], end)
                    else:
                        merged.append([start, end])
                self._table = np.array(merged, np.uint64).reshape(-1, 2)
            return self._table

    def contains(self, lo: int, hi: int) -> bool:
        """[lo, hi) lies inside one registered (merged) range."""
        t = self.table()
        i = int(np.searchsorted(t[:, 0], np.uint64(lo), side="right")) - 1
        return i >= 0 and hi <= int(t[i, 1])


RANGES = AddressRanges()


def register_memory(address: int, size: int) -> None:
    """Make [address, address+size) valid for device accesses (all CPU-target launches)."""
    RANGES.register(int(address), int(size))


def unregister_memory(address: int) -> None:
    """Forget the range registered at `address` (one registration of it)."""
    RANGES.unregister(int(address))


def register_module(owner: object, ranges: list[tuple[int, int]]) -> None:
    """Register a loaded module's globals for as long as `owner` lives."""
    for start, size in ranges:
        register_memory(start, size)
    weakref.finalize(owner, _unregister_all, [start for start, _ in ranges])


def _unregister_all(starts: list[int]) -> None:
    for start in starts:
        unregister_memory(start)


@contextmanager
def registered(*args: object) -> Iterator[None]:
    """The numpy arrays among `args` are valid device memory inside the `with` block."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    for a in arrays:
        register_memory(a.ctypes.data, a.nbytes)
    try:
        yield
    finally:
        for a in arrays:
            unregister_memory(a.ctypes.data)
