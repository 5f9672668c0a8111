"""Loading CPU object code and running grids on a pool of worker threads.

Each worker call runs a contiguous range of blocks in native code (ctypes releases the GIL),
with its own launch record, shared arena, per-thread stacks and warp frames.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import llvmlite.binding as llvm
import numpy as np

from zluda_py.compiler.cpu import bounds as address_ranges
from zluda_py.compiler.cpu import device_launch
from zluda_py.compiler.cpu.abi import (ABORTED, BAR_SLOTS, BASE_ALIGN, FAULT_BRKPT, FAULT_DEADLOCK, FAULT_STACK,
                                       NBARRIERS, RESERVED_SMEM, STACK_ALIGN, WARP, Ctx)
from zluda_py.compiler.cpu.hostcalls import HOST_ADDRESS, SINKS
from zluda_py.compiler.errors import (CUDA_ERROR_ASSERT, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, CUDA_ERROR_ILLEGAL_ADDRESS,
                                      CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_MISALIGNED_ADDRESS,
                                      LaunchError, ModuleMemoryError)
from zluda_py.compiler.kernels import GlobalInfo, KernelInfo
from zluda_py.compiler.ptxtypes import align_up

DEFAULT_STACK_SIZE = 1024  # bytes per thread, NVIDIA's default cudaLimitStackSize
WORKER_THREAD_STACK = 64 << 20  # native recursion through .func calls runs on the worker's stack
RUNNER = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_names = itertools.count()


@dataclass
class CpuKernelInfo(KernelInfo):
    """A kernel as the host runs it: its block runner and warp frames besides what every target knows."""

    frame_bytes: int = field(repr=False, default=0)
    runner: int = field(repr=False, default=0)
    reserved_smem: bool = field(repr=False, default=False)  # reads %reserved_smem_offset_*
    stack_size: int = 0  # per-thread stack its frame and deepest non-recursive call chain need
    local_align: int = STACK_ALIGN  # its module's frame alignment: each thread's stack window is aligned to it
    device_launches: bool = False  # it calls the device runtime (CUDA Dynamic Parallelism: device_launch.py)


_jit_lock = threading.Lock()
_jit: llvm.LLJIT | None = None
_pool: ThreadPoolExecutor | None = None
# The helpers every part declares (memory.SHARED_HELPERS): one library per process, linked at the
# first load from the object `use_helpers` names (target.py compiles it; the cache keeps it).
_HELPERS = "zluda_helpers"
_helpers_lock = threading.Lock()
_helpers: llvm.ResourceTracker | None = None
_helpers_source: Callable[[], bytes] | None = None


def target_machine(opt: int = 3) -> llvm.TargetMachine:
    """The host CPU with all its features, at optimisation level `opt`."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=opt, reloc="pic", codemodel="default")


def _the_jit() -> llvm.LLJIT:
    global _jit
    with _jit_lock:
        if _jit is None:
            # JITLink lays each object's sections out in one allocation: RuntimeDyld maps them
            # apart and aborts the process (an assertion) when a 32-bit PC-relative reference
            # from code to its own constants or variables spans more than 2 GiB, which happens
            # once large device allocations have fragmented the address space
            _jit = llvm.create_lljit_compiler(target_machine(), use_jit_link=True)
        return _jit


def use_helpers(source: Callable[[], bytes]) -> None:
    """Where the shared helpers' object code comes from when the first module loads."""
    global _helpers_source
    _helpers_source = source


def helpers_library() -> str:
    """The shared helpers' library, linked first if this process has not yet."""
    global _helpers
    jit = _the_jit()
    with _helpers_lock:
        if _helpers is None:
            builder = llvm.JITLibraryBuilder()
            builder.add_object_img(_helpers_source())
            builder.add_current_process()
            builder.import_symbol("zluda_host", HOST_ADDRESS)
            _helpers = builder.link(jit, _HELPERS)
    return _HELPERS


def worker_count() -> int:
    return int(os.environ.get("ZLUDA_CPU_THREADS", 0)) or os.cpu_count() or 1


def _the_pool() -> ThreadPoolExecutor:
    global _pool
    with _jit_lock:
        if _pool is None:
            old = threading.stack_size()
            threading.stack_size(WORKER_THREAD_STACK)
            try:
                _pool = ThreadPoolExecutor(worker_count(), thread_name_prefix="zluda-cpu")
                list(_pool.map(lambda _: None, range(worker_count())))  # start the threads now
            finally:
                threading.stack_size(old)
        return _pool


def _run_coresident(run, nblocks: int) -> list:
    """run(i) for every block at once, each on a new thread (a cooperative grid's blocks spin on
    each other, so none may wait for another's thread; the OS time-slices them over the cores).
    The blocks start together once every thread exists: when the OS refuses a thread, none has
    run and the launch fails with COOPERATIVE_LAUNCH_TOO_LARGE."""
    results: list = [None] * nblocks
    go, abandon = threading.Event(), threading.Event()

    def block(i: int) -> None:
        go.wait()
        if not abandon.is_set():
            try:
                results[i] = run(i)
            except BaseException as e:  # noqa: BLE001 - re-raised by the launching thread
                results[i] = e

    threads = []
    with _jit_lock:  # threading.stack_size is process-wide
        old = threading.stack_size(WORKER_THREAD_STACK)
        try:
            for i in range(nblocks):
                t = threading.Thread(target=block, args=(i,), name=f"zluda-coop-{i}", daemon=True)
                t.start()
                threads.append(t)
        except RuntimeError as e:  # "can't start new thread"
            abandon.set()
            raise LaunchError(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                              f"cooperative launch of {nblocks} blocks: only {len(threads)} threads could start ({e})") from None
        finally:
            threading.stack_size(old)
            go.set()
            if abandon.is_set():
                for t in threads:
                    t.join()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def object_files(object_code: bytes, metadata: dict) -> list[bytes]:
    """The object files in `object_code`: one, or, for a module split per kernel
    (`cpu/split.py`), the concatenated objects whose sizes metadata["objects"] lists."""
    sizes = metadata.get("objects")
    if sizes is None:
        return [object_code]
    if sum(sizes) != len(object_code):
        raise ValueError(f"object code of {len(object_code)} bytes does not hold objects of {sizes} bytes")
    ends = list(itertools.accumulate(sizes))
    return [object_code[end - n:end] for end, n in zip(ends, sizes)]


_MAPPED_CHECK_FROM = 64 << 20  # bytes of variables: smaller modules load without the check


def _check_mappable(metadata: dict) -> None:
    """LLVM aborts the process when it cannot allocate a section, so the variables' memory is
    mapped (untouched, so free) and given back first: a module declaring more than the process
    can have is error 2, as from NVIDIA's loader, instead."""
    size = sum(g["size"] for g in metadata["globals"].values())
    if size < _MAPPED_CHECK_FROM:
        return
    try:
        mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS).close()
    except OSError as e:
        raise ModuleMemoryError(f"the module's variables need {size} bytes: {e.strerror}") from None


class CompiledModule:
    """Native code for one (linked) PTX module, loaded into this process. A module built per
    kernel (`compiler/parts.py`) starts as its variables' part; `add_part` links a kernel's
    part to them later."""

    def __init__(self, object_code: bytes, metadata: dict) -> None:
        self.object_code = object_code
        self.metadata = metadata
        self._name = f"zluda_module_{next(_names)}"
        self._parts: list[llvm.ResourceTracker] = []  # keeps every linked part alive
        self.kernels: dict[str, CpuKernelInfo] = {}
        library = self._link(object_code, metadata, self._name)
        self.globals = {name: GlobalInfo(library[g["symbol"]], g["size"], g["space"], g.get("managed", False))
                        for name, g in metadata["globals"].items()}
        address_ranges.register_module(self, [(g.address, g.size) for g in self.globals.values()])

    def add_part(self, object_code: bytes, metadata: dict) -> None:
        """Link a kernel's part (its variables resolve to this instance's)."""
        self._link(object_code, metadata, f"{self._name}.{next(_names)}")

    def kernel(self, name: str) -> CpuKernelInfo:
        return self.kernels[name]

    def _link(self, object_code: bytes, metadata: dict, name: str) -> llvm.ResourceTracker:
        builder = llvm.JITLibraryBuilder()
        for obj in object_files(object_code, metadata):
            builder.add_object_img(obj)
        if self._parts:
            builder.add_jit_library(self._name)
        builder.add_jit_library(helpers_library())
        builder.add_current_process()
        builder.import_symbol("zluda_host", HOST_ADDRESS)
        for k in metadata["kernels"].values():
            builder.export_symbol(k["runner"])
        for g in metadata["globals"].values():
            builder.export_symbol(g["symbol"])
        _check_mappable(metadata)
        library = builder.link(_the_jit(), name)
        self._parts.append(library)
        reserved_smem = bool(metadata.get("reserved_smem"))
        for kname, k in metadata["kernels"].items():
            self.kernels[kname] = CpuKernelInfo.declared(kname, k, k["static_shared"], k["local_size"],
                                                         frame_bytes=k["frame_bytes"], runner=library[k["runner"]],
                                                         reserved_smem=reserved_smem,
                                                         stack_size=k.get("stack_size", k["local_size"]),
                                                         local_align=k["local_align"],
                                                         device_launches=k.get("device_launches", False),
                                                         declared_shared=k["declared_shared"])
        return library

    # ------------------------------------------------------------------ launch
    def launch_raw(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
                   shared_mem: int = 0, stack_size: int = DEFAULT_STACK_SIZE, grid_workspace: int = 0,
                   pageable: bool = False) -> None:
        """Run the grid to completion. A nonzero `grid_workspace` makes it a cooperative launch:
        %envreg1:%envreg2 read that address (nvcc's grid.sync() counts arrivals there) and every
        block runs on a thread of its own, since blocks may wait for each other. `pageable`: an
        access outside the range table may still go to writable host memory of the process (the
        driver's device reports PAGEABLE_MEMORY_ACCESS)."""
        info = self.kernels[kernel]
        gx, gy, gz = grid
        bx, by, bz = block
        threads = bx * by * bz
        nblocks = gx * gy * gz
        if min(*grid, *block) < 1 or threads > info.max_threads or threads > 1024:
            raise LaunchError(CUDA_ERROR_INVALID_VALUE, f"invalid launch configuration grid={grid} block={block}")
        if len(params) < info.param_size:
            raise LaunchError(CUDA_ERROR_INVALID_VALUE, f"{kernel}: {len(params)} parameter bytes, needs {info.param_size}")
        stack_limit, stack_size = stack_size, launch_stack(info, stack_size)
        param_buf = ctypes.create_string_buffer(bytes(params), max(len(params), 1))
        stop = np.zeros(1, np.int32)
        stop_at = stop.ctypes.data
        output: list[bytes] = []
        workers = worker_count()
        chunks = nblocks if grid_workspace else min(nblocks, workers * 4)
        bounds = [nblocks * i // chunks for i in range(chunks + 1)]
        nwarps = (threads + WARP - 1) // WARP
        smem_total = info.static_shared + shared_mem
        # only modules that read %reserved_smem_offset_* get the region: elsewhere an access
        # just past the kernel's own shared memory stays a fault
        smem_window = (smem_total + 15) // 16 * 16 + RESERVED_SMEM if info.reserved_smem else smem_total
        ranges = address_ranges.RANGES.table()  # stays alive (and unchanged) until the launch returns

        params_at, ranges_at = ctypes.addressof(param_buf), ranges.ctypes.data
        runner = self._runner(info)
        children = device_launch.DeviceLaunches(self) if info.device_launches else None

        def run(i: int) -> tuple[int, list[int] | None]:
            first, count = bounds[i], bounds[i + 1] - bounds[i]
            s = _scratch(max(smem_window, 16) + BASE_ALIGN, max(threads * stack_size, 16) + BASE_ALIGN,
                         nwarps * info.frame_bytes)
            ctx = s.ctx
            ctx.fill(0)
            arena, stacks = align_up(s.at["arena"], BASE_ALIGN), align_up(s.at["stacks"], BASE_ALIGN)
            s.arena[arena - s.at["arena"]:][:smem_window] = 0  # the reserved region starts cleared
            s.bars.fill(0)
            ctx[Ctx.PARAMS] = params_at
            ctx[Ctx.GRID_X:Ctx.GRID_Z + 1] = grid
            ctx[Ctx.BLOCK_X:Ctx.BLOCK_Z + 1] = block
            ctx[Ctx.SHARED] = arena
            ctx[Ctx.DYN_SMEM] = shared_mem
            ctx[Ctx.TOTAL_SMEM] = smem_total
            ctx[Ctx.SHARED_WINDOW] = smem_window
            ctx[Ctx.STACK] = stacks
            ctx[Ctx.STACK_SIZE] = stack_size
            ctx[Ctx.FRAMES] = s.at["frames"]
            ctx[Ctx.STOP] = stop_at
            ctx[Ctx.FIRST], ctx[Ctx.COUNT] = first, count
            ctx[Ctx.SMID], ctx[Ctx.NSMID] = i % workers, workers
            ctx[Ctx.BARRIERS] = s.at["bars"]
            ctx[Ctx.GRID_WORKSPACE] = grid_workspace
            ctx[Ctx.TABLE_ONLY] = not pageable
            ctx[Ctx.RANGES], ctx[Ctx.NRANGES], ctx[Ctx.PARAM_SIZE] = ranges_at, len(ranges), len(params)
            SINKS.attach(s.at["ctx"], output)
            if children is not None:
                device_launch.LAUNCHES.attach(s.at["ctx"], children)
            try:
                status = runner(s.at["ctx"]) or int(ctx[Ctx.STATUS])
            finally:
                SINKS.detach(s.at["ctx"])
                device_launch.LAUNCHES.detach(s.at["ctx"])
            return status, (ctx.tolist() if status else None)  # the record names a fault

        if chunks == 1:
            results = [run(0)]
        elif grid_workspace:
            results = _run_coresident(run, chunks)
        else:
            results = list(_the_pool().map(run, range(chunks)))
        if output:
            os.write(1, b"".join(output))
        if children is not None:
            children.release_buffers()
        for status, ctx in results:
            if status and status != ABORTED:
                raise _fault(kernel, status, ctx, grid)
        if children is not None:  # the grids launched from this one (device_launch.py)
            device_launch.run_queue(children, lambda c: self.launch_raw(c.kernel, c.grid, c.block, c.params, c.shared,
                                                                        stack_limit, 0, pageable))

    def _runner(self, info: CpuKernelInfo):
        """The kernel's block runner as a ctypes function (made once: building one costs a launch microseconds)."""
        runners = self.__dict__.setdefault("_runners", {})
        if info.runner not in runners:
            runners[info.runner] = RUNNER(info.runner)
        return runners[info.runner]

    def launch(self, kernel: str, grid, block, args, shared_mem: int = 0) -> None:
        """launch_raw with numpy arrays (passed by address) and Python/numpy scalars."""
        info = self.kernels[kernel]
        grid, block = _dims(grid), _dims(block)
        blob = info.param_buffer(args)
        with address_ranges.registered(*args):  # the arrays passed are the launch's device buffers
            self.launch_raw(kernel, grid, block, blob, shared_mem)


class _Scratch(threading.local):
    """A worker thread's launch buffers (launch record, shared arena, stacks, warp frames,
    barrier slots), kept across launches and grown when a launch needs more: allocating them
    per launch was a large part of a small launch's time. `at` holds their addresses."""

    def __init__(self) -> None:
        self.ctx = np.zeros(Ctx.SLOTS, np.int64)
        self.bars = np.zeros(NBARRIERS * BAR_SLOTS, np.int64)
        self.arena = self.stacks = self.frames = np.empty(0, np.uint8)
        self.at = {"ctx": self.ctx.ctypes.data, "bars": self.bars.ctypes.data}
        self.grow(0, 0, 0)

    def grow(self, arena: int, stacks: int, frames: int) -> None:
        for name, size in (("arena", arena), ("stacks", stacks), ("frames", frames)):
            if getattr(self, name).size < size or name not in self.at:
                buf = np.empty(max(size, 64), np.uint8)
                setattr(self, name, buf)
                self.at[name] = buf.ctypes.data


_scratch_local = _Scratch()
SCRATCH_KEPT = 16 << 20  # bytes of buffers a worker keeps between launches; larger ones are per launch


def _scratch(arena: int, stacks: int, frames: int) -> _Scratch:
    s = _scratch_local if arena + stacks + frames <= SCRATCH_KEPT else _Scratch()
    if s.arena.size < arena or s.stacks.size < stacks or s.frames.size < frames:
        s.grow(arena, stacks, frames)
    return s


def launch_stack(info: CpuKernelInfo, stack_size: int) -> int:
    """Bytes of stack per thread of a launch with the context's limit `stack_size`. The stack holds
    the kernel's frame and its deepest non-recursive call chain whatever the limit (the driver
    grows it for the launch); recursion beyond that faults with 719 once a frame would overflow
    the limit."""
    return align_up(max(stack_size, info.local_size, info.stack_size), info.local_align)


def fault(kernel: str, status: int, record: list[int]) -> LaunchError:
    """The error of a launch of `kernel` whose block stopped with `status`; `record`: the launch
    record of the worker call that saw it."""
    return _fault(kernel, status, record, (record[Ctx.GRID_X], record[Ctx.GRID_Y]))


def _dims(d) -> tuple[int, int, int]:
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(int(x) for x in d)
    return (d + (1, 1))[:3]


def _fault(kernel: str, status: int, ctx: list[int], grid) -> LaunchError:
    blk = ctx[Ctx.FAULT_BLOCK]
    gx, gy = grid[0], grid[1]
    warp, lanes = ctx[Ctx.FAULT_WARP], ctx[Ctx.FAULT_LANES] & 0xFFFFFFFF
    where = f"block ({blk % gx},{blk // gx % gy},{blk // (gx * gy)}), warp {warp}, "
    named = status in (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS)
    if named:  # the first faulting lane (the only bit set), as compute-sanitizer names it
        lane = (lanes & -lanes).bit_length() - 1
        t, bx, by = warp * 32 + lane, ctx[Ctx.BLOCK_X], ctx[Ctx.BLOCK_Y]
        where += f"lane {lane} (thread ({t % bx},{t // bx % by},{t // (bx * by)}))"
    else:
        where += f"lanes 0x{lanes:08x}"
    what = {CUDA_ERROR_LAUNCH_FAILED: "unspecified launch failure (trap)", CUDA_ERROR_ASSERT: "device-side assert triggered",
            CUDA_ERROR_ILLEGAL_ADDRESS: "an illegal memory access was encountered",
            CUDA_ERROR_MISALIGNED_ADDRESS: "misaligned address"}.get(status, f"error {status}")
    if status == CUDA_ERROR_LAUNCH_FAILED:
        what = {FAULT_BRKPT: "unspecified launch failure (brkpt with no debugger attached)",
                FAULT_STACK: f"unspecified launch failure (a call overflows the {ctx[Ctx.STACK_SIZE]}-byte per-thread "
                             "stack: raise cudaLimitStackSize)",
                FAULT_DEADLOCK: "unspecified launch failure (deadlock: every live warp of the block waits at a "
                                "barrier or mbarrier that no thread will complete)"}.get(ctx[Ctx.FAULT_ARG], what)
    if named:
        where += f", address 0x{ctx[Ctx.FAULT_ARG] & 0xFFFFFFFFFFFFFFFF:x}"
    return LaunchError(status, f"{kernel}: {what} at {where}")
