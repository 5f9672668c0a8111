"""The CPU backend: device memory is host memory (a device pointer is a host pointer), modules
are compiled by zluda_py.compiler for the host, and a launch runs the grid through the compiled
module, releasing the GIL."""

from __future__ import annotations


import numpy as np

from ..compiler.cpu import texture as textures  # noqa: F401  (the driver's texture and surface objects)
from ..compiler.cpu.bounds import register_memory, unregister_memory
from ..cdata import ffi, memmove, memset
from .. import hostmem
from . import tracking
from .hostshare import HostIpc, HostVmm
from .regions import Regions
from .tracking import Allocation

_ELEMENT = {2: np.uint16, 4: np.uint32}


class Memory(tracking.Memory):
    """Host memory; every tracked range is valid for device accesses (bounds checks, error 700).
    What the backend allocates comes from mapped regions (regions.py: device and pinned host
    memory populated at once, managed memory demand-paged, as on NVIDIA's driver)."""

    def __init__(self) -> None:
        super().__init__()
        self._regions = Regions()
        self._registered: dict[int, Allocation] = {}  # cuMemHostRegister'd ranges still in the bounds table

    def _obtain(self, size: int, kind: str, flags: int) -> tuple[int, bool]:
        return self._regions.allocate(size, populate=kind in ("device", "host")), True

    def add(self, base: int, size: int, kind: str, flags: int, owner: object, mapped: bool = False) -> Allocation:
        a = super().add(base, size, kind, flags, owner, mapped)
        register_memory(base, size)
        if kind == "registered":
            with self._lock:
                self._registered[base] = a
        return a

    def forget_unmapped(self) -> None:
        """Registered memory the program has munmapped since is no device memory any more: a
        kernel's access to it is then 700 (a bounds check), not a segfault of the host."""
        with self._lock:
            gone = [a for a in self._registered.values() if not hostmem.mapped(a.base, a.size)]
            for a in gone:
                del self._registered[a.base]
        for a in gone:
            unregister_memory(a.base)

    def _give_back(self, a: Allocation) -> None:
        with self._lock:
            in_table = a.kind != "registered" or self._registered.pop(a.base, None) is not None
        if in_table:
            unregister_memory(a.base)
        if a.mapped:  # registered host memory and module globals are not ours to free
            self._regions.release(a.base)

    def copy(self, dst: int, src: int, size: int) -> None:
        memmove(dst, src, size)  # a device pointer is a host pointer

    def fill(self, dst: int, value: int, element_size: int, count: int) -> None:
        if element_size == 1:
            memset(dst, value & 0xFF, count)
        elif count:
            buf = ffi.buffer(ffi.cast("char *", dst), count * element_size)
            np.frombuffer(buf, dtype=_ELEMENT[element_size]).fill(value)


memory = Memory()
vmm, ipc = HostVmm(), HostIpc()  # cuMem* virtual memory and cuIpc* memory handles: host pages


def available() -> bool:
    """The host CPU is always there."""
    return True

def load(ptx_texts: list[str], name: str = ""):
    """A new instance (its own variables) of the PTX compiled for the host CPU (several texts
    are linked into one module); its kernels are built at first use unless
    CUDA_MODULE_LOADING=EAGER (cache/lazy.py), each compiled, or read from the persistent
    cache, once per distinct input in this process. `name` names it in progress lines."""
    from ..cache.lazy import load as load_lazily

    return load_lazily(ptx_texts, name)


def devices() -> list:
    from ..devinfo import cpu_devices

    return cpu_devices()


def unload(module) -> None:
    """Nothing to give back: the instance's code and variables live as long as the JIT."""


def launch(module, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
           shared_mem: int, grid_workspace: int = 0, stack_size: int = 1024) -> None:
    """`stack_size`: the context's CU_LIMIT_STACK_SIZE (per thread)."""
    memory.forget_unmapped()
    module.launch_raw(kernel, grid, block, params, shared_mem, stack_size=stack_size, grid_workspace=grid_workspace)
