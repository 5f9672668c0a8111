"""The CPU backend: device memory is host memory (a device pointer is a host pointer), modules
are compiled by zluda_py.compiler for the host, and a launch runs the grid through the compiled
module, releasing the GIL."""

from __future__ import annotations

import bisect
import hashlib
import threading
from dataclasses import dataclass

from ..compiler.cpu.bounds import register_memory, unregister_memory
from ..driver.cdata import addr, ffi, libc

ALIGNMENT = 256  # cudaMalloc's documented minimum alignment
# Device and pinned host memory is resident from the moment it is allocated, as on NVIDIA's
# driver; large blocks are mapped with MAP_POPULATE, so that the first copy into them runs at
# memory bandwidth instead of taking a page fault per 4 KiB (~10 us each in a VM). Managed
# memory stays demand-paged, as it is on NVIDIA's driver.
POPULATE_MIN = 1 << 20
_PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, _MAP_POPULATE = 0x3, 0x22, 0x8000
_MAP_FAILED = (1 << 64) - 1


@dataclass
class Allocation:
    base: int
    size: int
    kind: str  # "device", "host", "managed" or "registered"
    flags: int
    owner: object  # the context it belongs to
    buffer_id: int
    mapped: bool = False  # mmap'ed (released with munmap) rather than from the C heap


class Memory:
    """Allocations by address, for frees, address-range and pointer-attribute queries."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, Allocation] = {}
        self._lock = threading.Lock()
        self._next_id = 1

    def allocate(self, size: int, kind: str, flags: int, owner: object) -> Allocation:
        if size >= POPULATE_MIN and kind in ("device", "host"):
            base = addr(libc.mmap(ffi.NULL, size, _PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS | _MAP_POPULATE, -1, 0))
            if base == _MAP_FAILED:
                raise MemoryError(size)
            return self._track(base, size, kind, flags, owner, mapped=True)
        out = ffi.new("void **")
        if libc.posix_memalign(out, ALIGNMENT, max(size, 1)) != 0:
            raise MemoryError(size)
        return self._track(addr(out[0]), size, kind, flags, owner)

    def register(self, base: int, size: int, flags: int, owner: object) -> Allocation:
        return self._track(base, size, "registered", flags, owner)

    def _track(self, base: int, size: int, kind: str, flags: int, owner: object, mapped: bool = False) -> Allocation:
        with self._lock:
            a = Allocation(base, size, kind, flags, owner, self._next_id, mapped)
            self._next_id += 1
            bisect.insort(self._bases, base)
            self._by_base[base] = a
        register_memory(base, size)  # valid for device accesses (bounds checks, error 700)
        return a

    def release(self, base: int) -> Allocation | None:
        """Forget the allocation starting at base (freeing its memory unless registered)."""
        with self._lock:
            a = self._by_base.pop(base, None)
            if a is None:
                return None
            del self._bases[bisect.bisect_left(self._bases, base)]
        unregister_memory(base)
        if a.mapped:
            libc.munmap(ffi.cast("void *", base), a.size)
        elif a.kind != "registered":
            libc.free(ffi.cast("void *", base))
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


memory = Memory()


def available() -> bool:
    """The host CPU is always there."""
    return True

_compiled: dict[str, object] = {}
_compile_lock = threading.Lock()


def load(ptx_texts: list[str]):
    """Compile PTX (several texts are linked into one module) for the host CPU; one compile per
    distinct input in this process (zluda_py.compiler keeps the persistent cache)."""
    from ..cache import compile_cached

    key = hashlib.sha256("\0".join(ptx_texts).encode()).hexdigest()
    with _compile_lock:
        module = _compiled.get(key)
        if module is None:
            module = compile_cached(ptx_texts if len(ptx_texts) > 1 else ptx_texts[0], target="cpu")
            _compiled[key] = module
    return module


def launch(module, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
           shared_mem: int) -> None:
    module.launch_raw(kernel, grid, block, params, shared_mem)
