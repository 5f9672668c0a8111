"""Where the CPU backend puts device memory: mapped regions laid out the way NVIDIA's driver
maps it, so that the default bounds check (compiler/cpu/bounds.py, mode `mapped`) faults
where a GPU would and nowhere else.

NVIDIA's cuMemAlloc maps device memory in 2 MiB pages: a large allocation gets pages of its
own, small ones are carved (512-byte aligned) out of shared pages, and the pages around an
allocation are usually mapped too (other allocations, the runtime's own). So a kernel that
reads a little before or after an array (Rodinia srad_v2 reads one row before its first and
after its last) works on the GPU. The model here, precisely:
* a *region* is one mmap: a `GRANULE` (2 MiB) guard, then the payload, whole granules, then
  another guard. Guards are mapped read-write but never populated by us (reading them costs
  nothing; writing them only touches memory we own);
* an allocation of more than `SMALL` bytes gets a region of its own, at the payload's start;
  smaller ones share one-granule payloads, `ALIGN`-byte aligned, first fit;
* the whole region counts as mapped (`register_region`): an access outside an allocation
  but inside its region (at least 2 MiB either side) never faults, one farther out faults
  unless it lands in another region or allocation. Every byte a region makes valid was
  mapped here, never the host program's, so a stray write cannot corrupt the host.
Payloads are 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE; the host's
THP setting may say "madvise"), as NVIDIA's pages are 2 MiB: with 4 KiB pages a kernel
streaming through device memory spent its time on TLB misses (saxpy over 2x64 MiB, gcc -O3 C on
this VM: 18-25 GB/s on 4 KiB pages, 45-48 GB/s on huge pages). Regions of populated kinds (device
and pinned host memory) have their allocations' pages (a shared payload: all of it) populated at
once (MADV_POPULATE_WRITE, else MAP_POPULATE, which does not wait for the advice: the first copy
then runs at memory bandwidth instead of faulting a page at a time); managed memory stays
demand-paged, as on NVIDIA's driver.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

from ..compiler.cpu.bounds import register_region, unregister_region
from ..cdata import addr, ffi, libc

GRANULE = 2 << 20
SMALL = 1 << 20
ALIGN = 512
PAGE = 4096
_PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, _MAP_FIXED, _MAP_POPULATE = 0x3, 0x22, 0x10, 0x8000
_MADV_HUGEPAGE, _MADV_POPULATE_WRITE = 14, 23
_MAP_FAILED = (1 << 64) - 1


@dataclass(eq=False)
class _Region:
    base: int  # the mapping, guards included
    length: int
    populated: bool
    small: bool = False  # shared by allocations of at most SMALL bytes
    free: list[tuple[int, int]] = field(default_factory=list)  # small regions: (start, size) by start
    used: int = 0  # small regions: allocations in it

    @property
    def payload(self) -> int:
        return self.base + GRANULE


class Regions:
    """Allocations inside mapped regions (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._small: list[_Region] = []
        self._owner: dict[int, tuple[_Region, int]] = {}  # allocation base -> (region, rounded size)

    def allocate(self, size: int, populate: bool) -> int:
        """The base of `size` new bytes (MemoryError when the system has no memory for them)."""
        size = -(-max(size, 1) // ALIGN) * ALIGN
        with self._lock:
            if size > SMALL:
                region = self._map(-(-size // GRANULE) * GRANULE, populate, size)
                self._owner[region.payload] = (region, size)
                return region.payload
            for region in self._small:
                if region.populated == populate and (base := _take(region, size)) is not None:
                    break
            else:
                region = self._map(GRANULE, populate, GRANULE)
                region.small = True
                region.free.append((region.payload, GRANULE))
                self._small.append(region)
                base = _take(region, size)
            region.used += 1
            self._owner[base] = (region, size)
            return base

    def release(self, base: int) -> None:
        with self._lock:
            region, size = self._owner.pop(base)
            if not region.small:
                self._unmap(region)
                return
            _give(region, base, size)
            region.used -= 1
            if region.used == 0:
                self._small.remove(region)
                self._unmap(region)

    def _map(self, payload: int, populate: bool, used: int) -> _Region:
        """A region with `payload` bytes between its guards, the first `used` of them populated
        when `populate`."""
        length = payload + 2 * GRANULE
        region = _Region(_map_aligned(length), length, populate)
        libc.madvise(ffi.cast("void *", region.payload), payload, _MADV_HUGEPAGE)  # a hint: no THP is no error
        if populate:  # the used pages populated (the rest stays empty until touched)
            pages = -(-used // PAGE) * PAGE
            start = ffi.cast("void *", region.payload)
            if libc.madvise(start, pages, _MADV_POPULATE_WRITE) != 0:  # before Linux 5.14: mapped again, populated
                fixed = _MAP_PRIVATE_ANONYMOUS | _MAP_FIXED | _MAP_POPULATE
                if addr(libc.mmap(start, pages, _PROT_READ_WRITE, fixed, -1, 0)) == _MAP_FAILED:
                    libc.munmap(ffi.cast("void *", region.base), length)
                    raise MemoryError(length)
        register_region(region.base, length)
        return region

    def _unmap(self, region: _Region) -> None:
        unregister_region(region.base)
        libc.munmap(ffi.cast("void *", region.base), region.length)


def _map_aligned(length: int) -> int:
    """A fresh mapping of `length` bytes (whole granules) that starts on a granule: one granule
    more is mapped and the ends trimmed off, so that payloads can be huge pages."""
    base = addr(libc.mmap(ffi.NULL, length + GRANULE, _PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, -1, 0))
    if base == _MAP_FAILED:
        raise MemoryError(length)
    start = -(-base // GRANULE) * GRANULE
    if start > base:
        libc.munmap(ffi.cast("void *", base), start - base)
    if base + GRANULE > start:
        libc.munmap(ffi.cast("void *", start + length), base + GRANULE - start)
    return start


def _take(region: _Region, size: int) -> int | None:
    """First fit in a small region's free list."""
    for i, (start, length) in enumerate(region.free):
        if length >= size:
            if length == size:
                del region.free[i]
            else:
                region.free[i] = (start + size, length - size)
            return start
    return None


def _give(region: _Region, base: int, size: int) -> None:
    """Return [base, base+size) to a small region's free list, merging with its neighbours."""
    free = region.free
    i = bisect.bisect_left(free, (base, 0))
    if i < len(free) and base + size == free[i][0]:
        size += free.pop(i)[1]
    if i > 0 and free[i - 1][0] + free[i - 1][1] == base:
        base, size = free[i - 1][0], free[i - 1][1] + size
        i -= 1
        del free[i]
    free.insert(i, (base, size))
