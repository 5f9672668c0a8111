"""CUDA Dynamic Parallelism on the CPU target: the device runtime's calls (`__cudaCDP2*`, what
nvcc's `-rdc` code calls for a kernel launch, a stream or an allocation made on the device),
served on the host.

A kernel launched from a kernel is queued with the launch its parent belongs to and runs when
that grid has finished, its own children before the next queued grid. The CUDA 12 device
runtime (CDP2) gives a parent no way to wait for a child (device-side cudaDeviceSynchronize is
gone; tail launches run after the parent anyway), and a grid counts as complete only when its
children are, so one order that every stream's order allows is to run the queue depth first,
in launch order. Device-side streams are tokens: every queued operation runs in that order,
then the tail launches (cudaStreamTailLaunch), which wait for all the rest.
A device-side cudaMemcpyAsync is queued the same way. The CPU device's limits apply to each
child's configuration; the pending-launch count has no limit here.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field

from zluda_py.compiler.cpu.abi import Ctx
from zluda_py.compiler.cpu.bounds import RANGES
from zluda_py.compiler.device_runtime import LAUNCH_FUNCTIONS

# LAUNCH_FUNCTIONS' indices, in their order: calls.py's host-call kind is HOST_DEVICE_RUNTIME + index
(GET_PARAMETER_BUFFER, LAUNCH_DEVICE, STREAM_CREATE, STREAM_DESTROY, GET_LAST_ERROR, PEEK_AT_LAST_ERROR,
 GET_ERROR_STRING, MEMCPY_ASYNC, MALLOC, FREE) = range(len(LAUNCH_FUNCTIONS))

# cudaError_t values (driver_types.h) the device runtime answers with
SUCCESS, INVALID_VALUE, MEMORY_ALLOCATION, INVALID_CONFIGURATION = 0, 1, 2, 9
INVALID_DEVICE_FUNCTION, INVALID_RESOURCE_HANDLE = 98, 400
_MESSAGES = {SUCCESS: "no error", INVALID_VALUE: "invalid argument", MEMORY_ALLOCATION: "out of memory",
             INVALID_CONFIGURATION: "invalid configuration argument",
             INVALID_DEVICE_FUNCTION: "invalid device function", INVALID_RESOURCE_HANDLE: "invalid resource handle"}
STREAM_NON_BLOCKING = 1  # the only flags a device-side stream may have
STREAM_TAIL_LAUNCH = 3  # cudaStreamTailLaunch: runs once the grid and all else it launched are done
PARAMETER_ALIGN = 64  # cudaGetParameterBuffer's buffers are 64-byte aligned
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)

_libc = ctypes.CDLL(None)
_libc.malloc.restype, _libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


@dataclass
class ChildGrid:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    params: bytes = b""


@dataclass
class DeviceCopy:
    dst: int
    src: int
    size: int


@dataclass
class DeviceLaunches:
    """What the grids of one launch asked the device runtime for: `queue` runs after them."""

    module: object  # the CpuModule whose kernels may be launched (runtime.py)
    queue: list = field(default_factory=list)
    tail: list = field(default_factory=list)  # tail launches: after the queue
    _buffers: dict[int, tuple[ChildGrid, object]] = field(default_factory=dict)  # parameter buffer -> (grid, memory)
    _errors: dict[tuple, int] = field(default_factory=dict)  # a thread's last error
    _kernels: dict[int, str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def kernel_at(self, address: int) -> str | None:
        """The kernel whose address (its block runner's: module.py) a kernel took."""
        if self._kernels is None:
            self._kernels = {info.runner: name for name, info in self.module.kernels.items()}
        return self._kernels.get(address)

    def release_buffers(self) -> None:
        """Parameter buffers no launch took (each launch frees its own)."""
        for address in list(self._buffers):
            self._free_buffer(address)

    def _free_buffer(self, address: int) -> None:
        RANGES.unregister(address)
        self._buffers.pop(address, None)


class Registry:
    """The DeviceLaunches of each running worker, keyed by the address of its launch record."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_ctx: dict[int, DeviceLaunches] = {}

    def attach(self, ctx_address: int, launches: DeviceLaunches) -> None:
        with self.lock:
            self.by_ctx[ctx_address] = launches

    def detach(self, ctx_address: int) -> None:
        with self.lock:
            self.by_ctx.pop(ctx_address, None)

    def get(self, ctx_address: int) -> DeviceLaunches | None:
        with self.lock:
            return self.by_ctx.get(ctx_address)


LAUNCHES = Registry()
_error_strings: dict[int, ctypes.Array] = {}
_streams = iter(range(0x1000, 1 << 62, 0x10))  # device-side stream tokens
_streams_lock = threading.Lock()


def _dim3(address: int) -> tuple[int, int, int]:
    return tuple((ctypes.c_uint32 * 3).from_address(address))


def _thread_key(ctx: int, thread: int) -> tuple[int, ...]:
    slots = (ctypes.c_int64 * Ctx.SLOTS).from_address(ctx)
    return ctx, slots[Ctx.CTA_X], slots[Ctx.CTA_Y], slots[Ctx.CTA_Z], thread


def _error_string(code: int) -> int:
    s = _error_strings.get(code)
    if s is None:
        s = _error_strings[code] = ctypes.create_string_buffer(_MESSAGES.get(code, "unrecognized error code").encode())
        RANGES.register(ctypes.addressof(s), len(s))  # the kernel may read it
    return ctypes.addressof(s)


def _configuration_error(child: ChildGrid, info) -> bool:
    threads = child.block[0] * child.block[1] * child.block[2]
    return (min(*child.grid, *child.block) < 1 or any(g > m for g, m in zip(child.grid, MAX_GRID))
            or any(b > m for b, m in zip(child.block, MAX_BLOCK)) or threads > min(info.max_threads, 1024))


def failed(function: int) -> int:
    """What a device runtime call answers when serving it failed on the host: NULL for the
    pointers, else cudaErrorUnknown."""
    return 0 if function in (GET_PARAMETER_BUFFER, GET_ERROR_STRING) else 999


def call(function: int, ctx: int, a: int, b: int, c: int, d: int, e: int) -> int:
    """The device runtime function `function` called by one thread with arguments a..e (a
    function of fewer than five gets the calling thread's index in block as `e`)."""
    launches = LAUNCHES.get(ctx)
    if launches is None:
        raise RuntimeError(f"{LAUNCH_FUNCTIONS[function]} outside a driver launch")
    key = _thread_key(ctx, e) if function != MEMCPY_ASYNC else ()
    code = _serve(launches, function, key, a, b, c, d, e)
    if function in (GET_PARAMETER_BUFFER, GET_ERROR_STRING, MEMCPY_ASYNC):  # no error record (the copy has no e)
        return code
    if function == GET_LAST_ERROR:
        with launches._lock:
            return launches._errors.pop(key, SUCCESS)
    if function == PEEK_AT_LAST_ERROR:
        with launches._lock:
            return launches._errors.get(key, SUCCESS)
    if code != SUCCESS:
        with launches._lock:
            launches._errors[key] = code
    return code


def _serve(launches: DeviceLaunches, function: int, key: tuple, a: int, b: int, c: int, d: int, e: int) -> int:
    if function == GET_PARAMETER_BUFFER:  # (func, gridDim *, blockDim *, sharedMem) -> buffer or NULL
        kernel = launches.kernel_at(a & (2**64 - 1))
        if kernel is None:
            with launches._lock:
                launches._errors[key] = INVALID_DEVICE_FUNCTION
            return 0
        info = launches.module.kernels[kernel]
        child = ChildGrid(kernel, _dim3(b), _dim3(c), d & 0xFFFFFFFF)
        size = max(info.param_size, 1)
        memory = (ctypes.c_uint8 * (size + PARAMETER_ALIGN))()
        address = -ctypes.addressof(memory) % PARAMETER_ALIGN + ctypes.addressof(memory)
        RANGES.register(address, size)
        with launches._lock:
            launches._buffers[address] = (child, memory)
        return address
    if function == LAUNCH_DEVICE:  # (parameter buffer, stream)
        with launches._lock:
            entry = launches._buffers.get(a)
            if entry is None:
                return INVALID_VALUE
            child, _ = entry
            info = launches.module.kernels[child.kernel]
            child.params = ctypes.string_at(a, info.param_size)
            launches._free_buffer(a)
            if _configuration_error(child, info):
                return INVALID_CONFIGURATION
            (launches.tail if b == STREAM_TAIL_LAUNCH else launches.queue).append(child)
        return SUCCESS
    if function == STREAM_CREATE:  # (cudaStream_t *, flags)
        if b != STREAM_NON_BLOCKING or not a:
            return INVALID_VALUE
        with _streams_lock:
            ctypes.c_uint64.from_address(a).value = next(_streams)
        return SUCCESS
    if function == STREAM_DESTROY:
        return SUCCESS if a else INVALID_RESOURCE_HANDLE
    if function in (GET_LAST_ERROR, PEEK_AT_LAST_ERROR):
        return SUCCESS  # call() answers from the thread's record
    if function == GET_ERROR_STRING:
        return _error_string(a & 0xFFFFFFFF)
    if function == MEMCPY_ASYNC:  # (dst, src, count, kind, stream): in order with the queued grids
        if d not in range(5):  # cudaMemcpyKind
            return INVALID_VALUE
        with launches._lock:
            launches.queue.append(DeviceCopy(a, b, c))
        return SUCCESS
    if function == MALLOC:  # (void **, size), as device-side malloc
        if not a:
            return INVALID_VALUE
        p = _libc.malloc(b) or 0
        if b and not p:
            return MEMORY_ALLOCATION
        if p:
            RANGES.register(p, b)
        ctypes.c_uint64.from_address(a).value = p
        return SUCCESS
    if function == FREE:
        if a:
            RANGES.unregister(a)
            _libc.free(a)
        return SUCCESS
    raise ValueError(f"device runtime function {function}")


def run_queue(launches: DeviceLaunches, launch) -> None:
    """Run what the finished grids queued, in order; `launch(child)` runs a ChildGrid to completion
    (its own queue included)."""
    for op in launches.queue + launches.tail:
        if isinstance(op, DeviceCopy):
            ctypes.memmove(op.dst, op.src, op.size)
        else:
            launch(op)
