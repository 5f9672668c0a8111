"""The CPU backend: device memory is host memory (a device pointer is a host pointer), modules
are compiled by zluda_py.compiler for the host, and a launch runs the grid through the compiled
module, releasing the GIL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compiler.cpu import texture as textures  # noqa: F401  (the driver's texture and surface objects)
from ..compiler.cpu import runtime
from ..compiler.cpu.abi import ABORTED, BAR_SLOTS, BASE_ALIGN, NBARRIERS, RESERVED_SMEM, WARP, Ctx
from ..compiler.cpu.bounds import RANGES, register_memory, unregister_memory
from ..compiler.cpu.hostcalls import SINKS
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
        # told whether launches may skip forget_unmapped (none registered): the native launch path
        self.registered_watch: Callable[[bool], None] = lambda none_registered: None

    def _obtain(self, size: int, kind: str, flags: int) -> tuple[int, bool]:
        return self._regions.allocate(size, populate=kind in ("device", "host")), True

    def add(self, base: int, size: int, kind: str, flags: int, owner: object, mapped: bool = False) -> Allocation:
        a = super().add(base, size, kind, flags, owner, mapped)
        register_memory(base, size)
        if kind == "registered":
            with self._lock:
                self._registered[base] = a
            self.registered_watch(False)
        return a

    def has_registered(self) -> bool:
        with self._lock:
            return bool(self._registered)

    def forget_unmapped(self) -> None:
        """Registered memory the program has munmapped since is no device memory any more: a
        kernel's access to it is then 700 (a bounds check), not a segfault of the host."""
        with self._lock:
            gone = [a for a in self._registered.values() if not hostmem.mapped(a.base, a.size)]
            for a in gone:
                del self._registered[a.base]
            if gone:
                self.registered_watch(not self._registered)
        for a in gone:
            unregister_memory(a.base)

    def _give_back(self, a: Allocation) -> None:
        with self._lock:
            in_table = a.kind != "registered" or self._registered.pop(a.base, None) is not None
            if a.kind == "registered":
                self.registered_watch(not self._registered)
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
    module.launch_raw(kernel, grid, block, params, shared_mem, stack_size=stack_size, grid_workspace=grid_workspace,
                      pageable=True)


# ---- what the native launch path (libcuda_shim/native_launch.c, driver/native.py) needs ----
# launch record slots and constants, in the order of native_launch.c's enum
NATIVE_ABI = [Ctx.PARAMS, Ctx.GRID_X, Ctx.BLOCK_X, Ctx.SHARED, Ctx.DYN_SMEM, Ctx.STACK, Ctx.STACK_SIZE, Ctx.FRAMES,
              Ctx.STOP, Ctx.FIRST, Ctx.COUNT, Ctx.SMID, Ctx.NSMID, Ctx.STATUS, Ctx.BARRIERS, Ctx.TOTAL_SMEM,
              Ctx.RANGES, Ctx.NRANGES, Ctx.PARAM_SIZE, Ctx.GRID_WORKSPACE, Ctx.SHARED_WINDOW, Ctx.SLOTS,
              NBARRIERS * BAR_SLOTS * 8, RESERVED_SMEM, ABORTED, runtime.SCRATCH_KEPT, WARP, BASE_ALIGN]


@dataclass(frozen=True)
class NativeKernel:
    """A built kernel as a native launch runs it (runtime.launch_raw's inputs that do not vary)."""

    runner: int
    params: list[tuple[int, int]]  # (offset, size) in the parameter blob
    param_size: int
    max_threads: int
    reqntid: tuple[int, int, int] | None
    static_shared: int
    frame_bytes: int
    stack_size: int  # per thread, for the context's stack limit given
    reserved_smem: bool
    workers: int


def native_kernel(module, kernel: str, stack_limit: int) -> NativeKernel:
    info = module.kernel(kernel)
    return NativeKernel(info.runner, [(p.offset, p.size) for p in info.params], info.param_size, info.max_threads,
                        tuple(info.reqntid) if info.reqntid else None, info.static_shared, info.frame_bytes,
                        runtime.launch_stack(info, stack_limit), info.reserved_smem, runtime.worker_count())


def native_fault(kernel: str, status: int, record: int) -> Exception:
    """What launch_raw raises for a block that stopped with `status`; `record`: its launch record."""
    slots = np.frombuffer(ffi.buffer(ffi.cast("char *", record), Ctx.SLOTS * 8), np.int64)
    return runtime.fault(kernel, status, slots.tolist())


def native_ranges() -> tuple[int, int, int]:
    """(address, pairs, version) of the bounds table launches check accesses against."""
    table, version = RANGES.snapshot()
    return table.ctypes.data, len(table), version


def watch_ranges(changed: Callable[[int], None]) -> None:
    RANGES.listeners.append(changed)


class _Output:
    """printf sink of a native worker's launch record: the text goes to `write`."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self.append = write


def native_output(record: int, write: Callable[[bytes], None]) -> None:
    """Device printf of launches run with this launch record goes to write(text)."""
    SINKS.attach(record, _Output(write))
