"""Entry points: advice and prefetches for managed memory (cuMemAdvise, cuMemPrefetchAsync, both
in their CUdevice and CUmemLocation forms) and the range queries (cuMemRangeGetAttribute; the
plural is in pointer_attrs.py).

Managed memory is host memory here, coherent for host and device, so advice and prefetches move
nothing and change no result; what they do is what cuda.h says the queries then report. The
range of an advice or prefetch is widened to whole CPU pages (cuda.h: "rounded down and rounded
up respectively to be aligned to CPU page size"), clipped to its allocation: small allocations
share pages (backends/regions.py), and one allocation's advice does not reach another. Each
managed allocation keeps a piecewise-constant map from address to `Advice` (`PageAdvice`)."""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import threading
from dataclasses import dataclass, replace
from typing import Callable

from . import context as ctxs, device as devices
from .api import entry
from ..cdata import addr, ffi
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .init_device import require
from .memory import _memory
from .. import hostmem

PAGE = mmap.PAGESIZE  # cuda.h: advice and prefetch ranges are aligned to the CPU page size

(SET_READ_MOSTLY, UNSET_READ_MOSTLY, SET_PREFERRED_LOCATION, UNSET_PREFERRED_LOCATION,
 SET_ACCESSED_BY, UNSET_ACCESSED_BY) = range(1, 7)  # CUmem_advise
(READ_MOSTLY, PREFERRED_LOCATION, ACCESSED_BY, LAST_PREFETCH_LOCATION, PREFERRED_LOCATION_TYPE,
 PREFERRED_LOCATION_ID, LAST_PREFETCH_LOCATION_TYPE, LAST_PREFETCH_LOCATION_ID) = range(1, 9)  # CUmem_range_attribute
LOCATION_INVALID, LOCATION_DEVICE, LOCATION_HOST, LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT = range(5)
CU_DEVICE_CPU, CU_DEVICE_INVALID = -1, -2

# (CUmemLocationType, id); host locations carry CU_DEVICE_CPU as their (ignored) id
Location = tuple[int, int]
HOST: Location = (LOCATION_HOST, CU_DEVICE_CPU)


@dataclass(frozen=True)
class Advice:
    """What cuMemAdvise and cuMemPrefetchAsync left on a page."""
    read_mostly: bool = False
    preferred: Location | None = None
    accessed_by: frozenset[Location] = frozenset()
    prefetched: Location | None = None


class PageAdvice:
    """The advice over one allocation [base, end): piece i covers [starts[i], starts[i + 1])."""

    def __init__(self, base: int, end: int) -> None:
        self.starts, self.values, self.end = [base], [Advice()], end

    def _split(self, at: int) -> int:
        """The index of the piece starting at `at`, splitting the one containing it."""
        if at >= self.end:
            return len(self.starts)
        i = bisect.bisect_right(self.starts, at) - 1
        if self.starts[i] == at:
            return i
        self.starts.insert(i + 1, at)
        self.values.insert(i + 1, self.values[i])
        return i + 1

    def update(self, lo: int, hi: int, change: Callable[[Advice], Advice]) -> None:
        i, j = self._split(lo), self._split(hi)
        self.values[i:j] = [change(v) for v in self.values[i:j]]
        keep = [k for k in range(len(self.starts)) if k == 0 or self.values[k] != self.values[k - 1]]
        self.starts, self.values = [self.starts[k] for k in keep], [self.values[k] for k in keep]

    def pieces(self, lo: int, hi: int) -> list[Advice]:
        return self.values[bisect.bisect_right(self.starts, lo) - 1:bisect.bisect_left(self.starts, hi)]


_lock = threading.Lock()


def _pages(ptr: int, count: int) -> tuple[PageAdvice, int, int]:
    """The advice map of the managed allocation holding [ptr, ptr + count) and the range widened
    to CPU pages within it; anything but managed memory is CUDA_ERROR_INVALID_VALUE."""
    a = _memory().find(ptr)
    if a is None or a.kind != "managed" or ptr + count > a.base + a.size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{count} is not managed memory")
    with _lock:
        if getattr(a, "advice", None) is None:
            a.advice = PageAdvice(a.base, a.base + a.size)  # goes with the allocation when it is freed
    lo = max(a.base, ptr // PAGE * PAGE)
    hi = min(a.base + a.size, -(-(ptr + count) // PAGE) * PAGE)
    return a.advice, lo, hi


def _numa_nodes() -> set[int]:
    """The host's NUMA nodes (sysfs); a kernel without NUMA support has the one node 0."""
    try:
        names = os.listdir("/sys/devices/system/node")
    except OSError:
        return {0}
    return {int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit()} or {0}


def _current_numa_node() -> int:
    """The node of the CPU the calling thread runs on (field 39 of /proc/thread-self/stat)."""
    try:
        with open("/proc/thread-self/stat") as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])
        names = os.listdir(f"/sys/devices/system/cpu/cpu{cpu}")
    except (OSError, IndexError, ValueError):
        return 0
    return next((int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit()), 0)


def device_location(dev: int) -> Location:
    """A CUdevice argument: a device ordinal or CU_DEVICE_CPU (else CUDA_ERROR_INVALID_DEVICE)."""
    if dev == CU_DEVICE_CPU:
        return HOST
    devices.get(dev)
    return (LOCATION_DEVICE, dev)


def memory_location(kind: int, ident: int, numa: bool = True) -> Location:
    """A CUmemLocation argument; `numa`: host NUMA nodes may be named (not for ACCESSED_BY)."""
    if kind == LOCATION_DEVICE:
        devices.get(ident)
        return (kind, ident)
    if kind == LOCATION_HOST:
        return HOST
    if numa and kind == LOCATION_HOST_NUMA:
        if ident not in _numa_nodes():
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"host NUMA node {ident} does not exist")
        return (kind, ident)
    if numa and kind == LOCATION_HOST_NUMA_CURRENT:
        return (LOCATION_HOST_NUMA, _current_numa_node())
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory location type {kind}")


def _advise(ptr: int, count: int, advice: int, location: Callable[[bool], Location]) -> None:
    """Record `advice` over the range; `location(numa)` parses the location argument, read only
    for the advice that takes one (cuda.h: the others ignore it)."""
    if not SET_READ_MOSTLY <= advice <= UNSET_ACCESSED_BY:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"advice {advice}")
    pages, lo, hi = _pages(ptr, count)
    change: Callable[[Advice], Advice]
    if advice in (SET_READ_MOSTLY, UNSET_READ_MOSTLY):
        change = lambda v: replace(v, read_mostly=advice == SET_READ_MOSTLY)  # noqa: E731
    elif advice == SET_PREFERRED_LOCATION:
        where = location(True)
        change = lambda v: replace(v, preferred=where)  # noqa: E731
    elif advice == UNSET_PREFERRED_LOCATION:
        change = lambda v: replace(v, preferred=None)  # noqa: E731
    else:
        by = location(False)  # cuda.h: a device or the host, "all other location types are invalid"
        change = lambda v: replace(v, accessed_by=v.accessed_by | {by} if advice == SET_ACCESSED_BY  # noqa: E731
                                   else v.accessed_by - {by})
    with _lock:
        pages.update(lo, hi, change)


def prefetch(ptr: int, count: int, where: Location) -> None:
    """Record `where` as the last prefetch location of the range (cuda.h: the location asked
    for, whether or not the prefetch has run)."""
    pages, lo, hi = _pages(ptr, count)
    with _lock:
        pages.update(lo, hi, lambda v: replace(v, prefetched=where))


def check_managed(ptr: int, count: int) -> None:
    """The range must lie inside one managed allocation (CUDA_ERROR_INVALID_VALUE)."""
    _pages(ptr, count)


@entry("cuMemAdvise")
def cuMemAdvise(ptr, count, advice, dev):
    _advise(ptr, count, advice, lambda numa: device_location(dev))


@entry("cuMemAdvise_v2")
def cuMemAdvise_v2(ptr, count, advice, location):
    _advise(ptr, count, advice, lambda numa: memory_location(location.type, location.id, numa))


@entry("cuMemPrefetchAsync")
def cuMemPrefetchAsync(ptr, count, dev, stream):
    ctxs.resolve_stream(addr(stream))
    prefetch(ptr, count, device_location(dev))


@entry("cuMemPrefetchAsync_v2")
def cuMemPrefetchAsync_v2(ptr, count, location, flags, stream):
    ctxs.resolve_stream(addr(stream))
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"prefetch flags {flags:#x} (must be 0)")
    prefetch(ptr, count, memory_location(location.type, location.id))


def _uniform(values: set) -> object:
    """The one value all pages share, else None."""
    return next(iter(values)) if len(values) == 1 else None


def _device_id(where: Location | None) -> int:
    """A location as the CUdevice-valued attributes give it: an ordinal, CU_DEVICE_CPU for host
    memory (a NUMA node's too), CU_DEVICE_INVALID for none."""
    if where is None:
        return CU_DEVICE_INVALID
    return where[1] if where[0] == LOCATION_DEVICE else CU_DEVICE_CPU


def _answer(attribute: int, size: int, pieces: list[Advice]) -> bytes:
    """The bytes cuMemRangeGetAttribute writes: one 32-bit value (dataSize 4), or for
    ACCESSED_BY an array of them (a non-zero multiple of 4), as cuda.h defines each."""
    if attribute == ACCESSED_BY:
        if size == 0 or size % 4:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"ACCESSED_BY with dataSize {size} (a non-zero multiple of 4)")
        # the processors advised for every page; the rest of the array is CU_DEVICE_INVALID
        common = frozenset.intersection(*(v.accessed_by for v in pieces))
        ids = sorted(_device_id(w) for w in common)[:size // 4]
        return struct.pack(f"{size // 4}i", *ids, *[CU_DEVICE_INVALID] * (size // 4 - len(ids)))
    if not READ_MOSTLY <= attribute <= LAST_PREFETCH_LOCATION_ID:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory range attribute {attribute}")
    if size != 4:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory range attribute {attribute} with dataSize {size} (must be 4)")
    if attribute == READ_MOSTLY:
        return struct.pack("i", all(v.read_mostly for v in pieces))
    prefetched = attribute in (LAST_PREFETCH_LOCATION, LAST_PREFETCH_LOCATION_TYPE, LAST_PREFETCH_LOCATION_ID)
    where = _uniform({v.prefetched if prefetched else v.preferred for v in pieces})
    if attribute in (PREFERRED_LOCATION, LAST_PREFETCH_LOCATION):
        return struct.pack("i", _device_id(where))
    if attribute in (PREFERRED_LOCATION_TYPE, LAST_PREFETCH_LOCATION_TYPE):
        return struct.pack("i", LOCATION_INVALID if where is None else where[0])
    return struct.pack("i", CU_DEVICE_INVALID if where is None else where[1])  # an id to be ignored unless valid


@entry("cuMemRangeGetAttribute")
def cuMemRangeGetAttribute(data, size, attribute, ptr, count):
    require(data)
    if count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "an empty memory range")
    pages, lo, hi = _pages(ptr, count)
    with _lock:
        value = _answer(attribute, size, pages.pieces(lo, hi))
    ffi.memmove(data, value, size)


@entry("cuMemGetLocationInfo")
def cuMemGetLocationInfo(ptr, size, summary, sampling, out):
    """Where each `summary`-sized region of managed or pageable memory lives: its most common
    location over samples every `sampling` bytes (cuda.h, CUDA 13.4). Both are host memory
    here, so a sample is HOST where its page is resident and NONE (type 0) where it is not
    (mincore: managed memory is demand-paged, as pageable memory is); a tie goes to HOST."""
    require(out)
    if not 0 < summary <= size or sampling > summary:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"granularities {summary}, {sampling} for {size} bytes")
    a = _memory().find(ptr)
    if a is not None:
        if a.kind != "managed" or ptr + size > a.base + a.size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size} is not managed memory")
    elif _memory().overlapping(ptr, size) is not None:  # pageable memory running into an allocation
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size} is not pageable memory throughout")
    pages = hostmem.residency(ptr, size)
    if pages is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{ptr:#x}+{size} is not mapped memory")
    step = max(sampling, PAGE)  # 0: "a system dependent value"; samples in one page agree
    first_page = ptr // PAGE
    locations = ffi.cast("int *", out)  # CUmemLocation: int type, int id
    for i, region in enumerate(range(ptr, ptr + size, summary)):
        samples = range(region, min(region + summary, ptr + size), step)
        resident = sum(pages[s // PAGE - first_page] & 1 for s in samples)
        kind, ident = HOST if 2 * resident >= len(samples) else (LOCATION_INVALID, CU_DEVICE_INVALID)
        locations[2 * i], locations[2 * i + 1] = kind, ident
