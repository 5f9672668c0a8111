"""The allocation tracker every backend's `memory` is: allocations by address, for frees,
address-range and pointer-attribute queries. A backend subclass says how memory is obtained
and given back, and how bytes are copied and filled (`copy`, `fill`)."""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass


@dataclass
class Allocation:
    base: int
    size: int
    kind: str  # "device", "host", "managed", "registered" (host memory pinned by the program) or "global"
    flags: int
    owner: object  # the context it belongs to (None: a module's variable)
    buffer_id: int
    mapped: bool = False  # CPU: from the backend's mapped regions (backends/regions.py), given back there
    pool: int = 0  # the handle of the memory pool it was allocated from (cuMemAllocAsync), 0: none


class Memory:
    """Allocations by address. Subclasses implement `_obtain`, `_give_back`, `copy` and `fill`."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, Allocation] = {}
        self._lock = threading.Lock()
        self._next_id = 1

    # ------------------------------------------------------------------ what backends implement
    def _obtain(self, size: int, kind: str, flags: int) -> tuple[int, bool]:
        """New memory of `kind` ("device", "host" or "managed"): (base, mapped); MemoryError
        when there is not enough."""
        raise NotImplementedError

    def _give_back(self, a: Allocation) -> None:
        """Free (or unpin, for "registered") what `a` describes; "global" is the module's."""
        raise NotImplementedError

    def _pin(self, base: int, size: int, flags: int) -> None:
        """Make program memory usable by the device (cuMemHostRegister); nothing by default."""

    def copy(self, dst: int, src: int, size: int) -> None:
        """Copy `size` bytes between any two addresses the program may name (host or device)."""
        raise NotImplementedError

    def fill(self, dst: int, value: int, element_size: int, count: int) -> None:
        """Store `count` elements of `element_size` (1, 2 or 4) bytes holding `value` at dst."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the tracker
    def allocate(self, size: int, kind: str, flags: int, owner: object) -> Allocation:
        base, mapped = self._obtain(size, kind, flags)
        return self.add(base, size, kind, flags, owner, mapped)

    def register(self, base: int, size: int, flags: int, owner: object) -> Allocation:
        self._pin(base, size, flags)
        return self.add(base, size, "registered", flags, owner)

    def add(self, base: int, size: int, kind: str, flags: int, owner: object, mapped: bool = False) -> Allocation:
        """Track memory obtained elsewhere (a module's variables: kind "global")."""
        with self._lock:
            a = Allocation(base, size, kind, flags, owner, self._next_id, mapped)
            self._next_id += 1
            bisect.insort(self._bases, base)
            self._by_base[base] = a
        return a

    def release(self, base: int) -> Allocation | None:
        """Forget the allocation starting at base and give its memory back."""
        with self._lock:
            a = self._by_base.pop(base, None)
            if a is None:
                return None
            del self._bases[bisect.bisect_left(self._bases, base)]
        self._give_back(a)
        return a

    def find(self, ptr: int) -> Allocation | None:
        """The allocation containing ptr, if any."""
        with self._lock:
            i = bisect.bisect_right(self._bases, ptr) - 1
            if i < 0:
                return None
            a = self._by_base[self._bases[i]]
        return a if a.base <= ptr < a.base + max(a.size, 1) else None

    def overlapping(self, base: int, size: int) -> Allocation | None:
        with self._lock:
            i = bisect.bisect_left(self._bases, base + size) - 1
            if i < 0:
                return None
            a = self._by_base[self._bases[i]]
        return a if a.base + a.size > base else None

    def owned_by(self, owner: object) -> list[Allocation]:
        with self._lock:
            return [a for a in self._by_base.values() if a.owner is owner]
