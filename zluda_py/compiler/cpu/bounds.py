"""The table of valid device memory that native code checks accesses against (error 700).

The driver registers every allocation (device, pinned, managed and host-registered memory,
module globals) with `register_memory(address, size)` and forgets it with
`unregister_memory(address)`; `CompiledModule` registers its own globals. The CPU backend
also registers the *mapped regions* its device memory is carved from (`register_region`,
backends/regions.py). A launch passes an immutable snapshot (sorted, merged [start, end)
pairs of u64) in its launch record; generated code keeps the last range each access site hit
and binary-searches the snapshot only when an access leaves it. Memory registered during a
launch (device-side malloc) is found through the host callback.

`ZLUDA_CHECK_BOUNDS` picks what the table holds:
* unset (or `1`): `mapped`, like the GPU: an access faults when it leaves mapped memory, i.e.
  the allocations and the regions around device memory; so a read a little before or after a
  cudaMalloc'ed array works, as it does on NVIDIA hardware (Rodinia srad_v2).
* `exact`: the allocations only, like compute-sanitizer's memcheck.
* `0`: one range covering everything (no checks).
In `mapped` mode a driver launch's miss may still be pageable host memory (hostcalls.py).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

EVERYTHING = np.array([[0, (1 << 64) - 1]], np.uint64)
MODES = ("mapped", "exact", "off")


def mode_from_environment() -> str:
    """The checking mode ZLUDA_CHECK_BOUNDS names (see the module's docstring)."""
    return {"0": "off", "exact": "exact"}.get(os.environ.get("ZLUDA_CHECK_BOUNDS", ""), "mapped")


class AddressRanges:
    """Registered [start, start+size) allocations and mapped regions; a range registered twice
    needs two unregisters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: dict[int, list[int]] = {}  # allocations: start -> [end, count]
        self._regions: dict[int, list[int]] = {}  # mapped regions, the same way
        self._table: np.ndarray | None = None
        self._mode = mode_from_environment()
        self.version = 1  # counts changes of the table (native launches copy it: driver/native.py)
        self.listeners: list[Callable[[int], None]] = []  # called with the new version on each change

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"bounds-checking mode {mode!r} (one of {', '.join(MODES)})")
        with self._lock:
            self._mode, self._table = mode, None
            self._changed()

    def register(self, start: int, size: int, region: bool = False) -> None:
        with self._lock:
            ranges = self._regions if region else self._ranges
            entry = ranges.get(start)
            if entry is None:
                ranges[start] = [start + max(size, 1), 1]
            else:
                entry[0] = max(entry[0], start + max(size, 1))
                entry[1] += 1
            self._table = None
            self._changed()

    def unregister(self, start: int, region: bool = False) -> None:
        with self._lock:
            ranges = self._regions if region else self._ranges
            entry = ranges.get(start)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del ranges[start]
            self._table = None
            self._changed()

    def _changed(self) -> None:
        self.version += 1
        for listener in self.listeners:
            listener(self.version)

    def table(self) -> np.ndarray:
        """(n, 2) u64 array of disjoint [start, end) ranges sorted by start (n >= 1: row 0 is the
        empty sentinel [0, 0)); never modified once returned."""
        return self.snapshot()[0]

    def snapshot(self) -> tuple[np.ndarray, int]:
        """The table and the version it is of."""
        with self._lock:
            if self._mode == "off":
                return EVERYTHING, self.version
            if self._table is None:
                ranges = [(start, end) for start, (end, _) in self._ranges.items()]
                if self._mode == "mapped":
                    ranges += [(start, end) for start, (end, _) in self._regions.items()]
                merged: list[list[int]] = [[0, 0]]  # a sentinel: the table is never empty
                for start, end in sorted(ranges):
                    if start <= merged[-1][1]:  # overlapping or adjacent ranges merge
                        merged[-1][1] = max(merged[-1][1], end)
                    else:
                        merged.append([start, end])
                self._table = np.array(merged, np.uint64).reshape(-1, 2)
            return self._table, self.version

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


def register_region(address: int, size: int) -> None:
    """[address, address+size) is mapped device memory: valid in the default (`mapped`) mode
    only. The caller owns every byte of it, so a stray write there cannot reach the host's data."""
    RANGES.register(int(address), int(size), region=True)


def unregister_region(address: int) -> None:
    RANGES.unregister(int(address), region=True)


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
