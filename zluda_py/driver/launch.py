"""Entry points: kernel launches (plain, Ex, cooperative), host functions and occupancy.

Parameters are laid out from the kernel's PTX .entry signature (KernelInfo.params); the
configuration is checked as NVIDIA's driver checks it; the grid then runs on the stream's
worker thread. CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous."""

from __future__ import annotations

import os
import struct

from . import context as ctxs, device as devices, native
from .api import entry
from ..cdata import addr, ffi, read_bytes, store
from ..curesult import (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, CUDA_ERROR_INVALID_VALUE, CudaError)
from .init_device import require
from .module import Function, function_of
from .. import backends, devinfo, hostmem

CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
GRID_WORKSPACE_BYTES = 8  # cooperative_groups' grid_workspace: {u32 wsSize; u32 barrier}
WORD = ffi.sizeof("void *")  # an entry of kernelParams or extra


def _host(address: int, size: int, what: str) -> bytes:
    """size bytes of the program's memory at address, checked before they are read: memory that
    is not there is CUDA_ERROR_INVALID_VALUE, never a segfault."""
    if not hostmem.valid(address, size):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what}: {size} bytes at {address:#x} are not readable memory")
    return read_bytes(address, size)


def _word(address: int, what: str) -> int:
    return int.from_bytes(_host(address, WORD, what), "little")


def _kernel_params(fn: Function, array: int) -> bytes:
    """The parameters kernelParams points to, laid out as the kernel takes them. All are checked
    at once (hostmem.all_valid: a call or two); only a failure looks at them one by one, to name
    the culprit."""
    info = fn.info
    n = len(info.params)
    pointers: tuple[int, ...] = ()
    if hostmem.valid(array, n * WORD):
        pointers = struct.unpack(f"<{n}Q", read_bytes(array, n * WORD))
    if not (pointers and all(pointers) and hostmem.all_valid([(q, p.size) for q, p in zip(pointers, info.params)])):
        for i, p in enumerate(info.params):  # raises for the first bad entry
            pointer = _word(array + i * WORD, f"kernelParams[{i}] of {fn.name}")
            if not pointer:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"kernelParams[{i}] of {fn.name} is NULL")
            _host(pointer, p.size, f"parameter {i} of {fn.name} at kernelParams[{i}]")
        # every piece is valid alone: another thread changed the mappings between the checks
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"kernelParams of {fn.name}: memory changed while read")
    buf = bytearray(info.param_size)
    for p, pointer in zip(info.params, pointers):
        buf[p.offset:p.offset + p.size] = read_bytes(pointer, p.size)
    return bytes(buf)


def _params(fn: Function, kernel_params, extra) -> bytes:
    info = fn.info
    if kernel_params != ffi.NULL and extra != ffi.NULL:  # cuda.h: INVALID_VALUE
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"launch of {fn.name}: both kernelParams and extra given")
    if kernel_params != ffi.NULL:
        return _kernel_params(fn, addr(kernel_params)) if info.params else b""
    if extra != ffi.NULL:
        return _extra_params(fn, addr(extra))
    if info.params:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{fn.name} takes {len(info.params)} parameters, none given")
    return b""


def _extra_params(fn: Function, extra: int) -> bytes:
    """The parameter buffer of an `extra` list: (key, value) pairs up to CU_LAUNCH_PARAM_END, each
    word read as it is reached, so a list running into memory that is not there is an error."""
    pointer, size, i = None, None, 0
    while (key := _word(extra + i * WORD, f"extra[{i}]")) != CU_LAUNCH_PARAM_END:
        value = _word(extra + (i + 1) * WORD, f"extra[{i + 1}], the value of key {key}")
        if key == CU_LAUNCH_PARAM_BUFFER_POINTER:
            pointer = value
        elif key == CU_LAUNCH_PARAM_BUFFER_SIZE:
            size = _word(value, "the size_t of CU_LAUNCH_PARAM_BUFFER_SIZE")
        else:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown launch parameter key {key:#x} in extra[{i}]")
        i += 2
    if pointer is None or size is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "extra needs CU_LAUNCH_PARAM_BUFFER_POINTER and _SIZE")
    if size < fn.info.param_size:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{fn.name} takes {fn.info.param_size} bytes of parameters, got {size}")
    return _host(pointer, fn.info.param_size, "the buffer of CU_LAUNCH_PARAM_BUFFER_POINTER")


def check_config(fn: Function, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int) -> None:
    if 0 in grid or 0 in block:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"grid {grid} / block {block} has a zero dimension")
    if any(b > m for b, m in zip(block, devinfo.MAX_BLOCK_DIM)) or any(g > m for g, m in zip(grid, devinfo.MAX_GRID_DIM)):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"grid {grid} / block {block} exceeds the device limits")
    threads = block[0] * block[1] * block[2]
    if threads > fn.info.max_threads:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{threads} threads per block, {fn.name} allows {fn.info.max_threads}")
    reqntid = getattr(fn.info, "reqntid", None)
    if reqntid and tuple(reqntid) != tuple(block):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{fn.name} requires block {tuple(reqntid)}, got {block}")
    if shared > fn.max_dynamic_shared:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{shared} bytes of dynamic shared memory, {fn.name} allows {fn.max_dynamic_shared}")


def coresident_blocks(fn: Function, block_size: int, dynamic_shared: int, device: devinfo.Device) -> int:
    """How many blocks of this kernel can run at once: what a cooperative grid may hold, as
    cuOccupancyMaxActiveBlocksPerMultiprocessor x MULTIPROCESSOR_COUNT tells programs."""
    return max_active_blocks(fn, block_size, dynamic_shared) * device.cores  # cores = MULTIPROCESSOR_COUNT


class KernelLaunch:
    """A checked launch, ready to run: what a stream op and a graph's kernel node execute."""

    node_type = 0  # CU_GRAPH_NODE_TYPE_KERNEL: stream capture records it as such a node

    def __init__(self, handle: int, grid, block, shared: int, kernel_params, extra, cooperative: bool = False) -> None:
        fn = function_of(handle)
        self.handle, self.function = handle, fn
        self.grid, self.block, self.shared, self.cooperative = tuple(grid), tuple(block), shared, cooperative
        check_config(fn, self.grid, self.block, shared)
        self.ctx = ctxs.current()
        if cooperative:
            resident = coresident_blocks(fn, block[0] * block[1] * block[2], shared, self.ctx.device)
            if grid[0] * grid[1] * grid[2] > resident:
                raise CudaError(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                                f"cooperative launch of {fn.name}: grid {self.grid} has more blocks than the {resident} "
                                f"that can be resident at once with block {self.block} and {shared} bytes of dynamic shared memory")
        self.params = _params(fn, kernel_params, extra)

    def __call__(self) -> None:
        backend = backends.select()
        compiled, name = self.function.module.compiled, self.function.name
        limits = self.ctx.limits
        stack = self.stack_limit()
        if stack != limits[ctxs.CU_LIMIT_STACK_SIZE]:
            limits[ctxs.CU_LIMIT_STACK_SIZE] = stack
            native.forget()  # the other kernels' descriptors hold the smaller stack
        self._run(backend, compiled, name, stack)

    def stack_limit(self) -> int:
        """The context's per-thread stack limit grown to what the kernel needs without recursion:
        the driver grows it so, and it stays grown (cuCtxGetLimit reports it); info builds a
        lazily loaded kernel."""
        need = (getattr(self.function.info, "stack_size", 0) + 15) // 16 * 16
        return max(self.ctx.limits[ctxs.CU_LIMIT_STACK_SIZE], need)

    def _run(self, backend, compiled, name: str, stack: int) -> None:
        if not self.cooperative:
            backend.launch(compiled, name, self.grid, self.block, self.params, self.shared, stack_size=stack)
            return
        # the grid workspace nvcc's grid.sync() counts arrivals in: zeroed, one per launch
        workspace = backend.memory.allocate(GRID_WORKSPACE_BYTES, "device", 0, self.ctx)
        try:
            backend.memory.fill(workspace.base, 0, 1, GRID_WORKSPACE_BYTES)  # device memory on HIP
            backend.launch(compiled, name, self.grid, self.block, self.params, self.shared, grid_workspace=workspace.base,
                           stack_size=stack)
        finally:
            backend.memory.release(workspace.base)


def launch(handle: int, grid, block, shared: int, stream_handle: int, kernel_params, extra,
           cooperative: bool = False) -> None:
    work = KernelLaunch(handle, grid, block, shared, kernel_params, extra, cooperative)
    stream = ctxs.resolve_stream(stream_handle)
    op = stream.ctx.submit(stream, work)
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" and op is not None:
        op.done.wait()
        stream.raise_error()
    # the launches of this kernel that follow may take the native path (native.py)
    native.offer(handle, work, extra != ffi.NULL)


@entry("cuLaunchKernel")
def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params, extra):
    launch(addr(f), (gx, gy, gz), (bx, by, bz), shared, addr(stream), kernel_params, extra)


@entry("cuLaunchCooperativeKernel")
def cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params):
    launch(addr(f), (gx, gy, gz), (bx, by, bz), shared, addr(stream), kernel_params, ffi.NULL, cooperative=True)


@entry("cuLaunchKernelEx")
def cuLaunchKernelEx(config, f, kernel_params, extra):
    require(config)
    configs = _copy_in("CUlaunchConfig", addr(config), 1, "config")
    c = configs[0]  # a view into configs, which lives as long as this call
    attrs = _copy_in("CUlaunchAttribute", addr(c.attrs), c.numAttrs, "config->attrs") if c.numAttrs else []
    cooperative = False
    for a in attrs:
        if a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            cooperative = ffi.cast("int *", a.value)[0] != 0
    launch(addr(f), (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ),
           c.sharedMemBytes, addr(c.hStream), kernel_params, extra, cooperative)


def _copy_in(ctype: str, address: int, count: int, what: str):
    """Our copy of the array of count structs the program passed at address."""
    size = count * ffi.sizeof(ctype)
    if not hostmem.valid(address, size):  # before a buffer of a size the program chose is made
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{what}: {size} bytes at {address:#x} are not readable memory")
    copy = ffi.new(f"{ctype}[]", count)
    ffi.memmove(copy, _host(address, size, what), size)
    return copy


@entry("cuLaunchHostFunc")
def cuLaunchHostFunc(stream, fn, user_data):
    if fn == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL host function")
    s = ctxs.resolve_stream(addr(stream))
    s.ctx.submit(s, HostCall(addr(fn), addr(user_data)))


class HostCall:
    """A host function and its argument: a stream op, and what a graph's host node holds."""

    node_type = 3  # CU_GRAPH_NODE_TYPE_HOST

    def __init__(self, fn: int, data: int) -> None:
        if not fn:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL host function")
        self.fn, self.data = fn, data
        self._call = ffi.cast("void (*)(void *)", fn)

    def __call__(self) -> None:
        self._call(ffi.cast("void *", self.data))


# ---- occupancy ----
def max_active_blocks(fn: Function, block_size: int, dynamic_shared: int) -> int:
    """Blocks of this size one multiprocessor holds, by sm_86's limits."""
    if block_size <= 0 or block_size > fn.info.max_threads:
        return 0
    warps = -(-block_size // devinfo.WARP_SIZE)
    by_threads = 1536 // (warps * devinfo.WARP_SIZE)
    shared = fn.info.static_shared + dynamic_shared + 1024
    by_shared = (100 * 1024) // shared
    return max(0, min(16, by_threads, by_shared))


@entry("cuOccupancyMaxActiveBlocksPerMultiprocessor")
def cuOccupancyMaxActiveBlocksPerMultiprocessor(pblocks, f, block_size, dynamic_shared):
    require(pblocks)
    store(pblocks, max_active_blocks(function_of(addr(f)), block_size, dynamic_shared))


@entry("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")
def cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(pblocks, f, block_size, dynamic_shared, flags):
    return cuOccupancyMaxActiveBlocksPerMultiprocessor(pblocks, f, block_size, dynamic_shared)


def _potential_block_size(min_grid, block_size, f, smem_fn, dynamic_shared, limit):
    require(min_grid, block_size)
    fn = function_of(addr(f))
    size_of = ffi.cast("size_t (*)(int)", smem_fn) if smem_fn != ffi.NULL else None
    best, best_blocks = 0, 0
    top = min(limit or fn.info.max_threads, fn.info.max_threads)
    for size in range(devinfo.WARP_SIZE, top + 1, devinfo.WARP_SIZE):
        shared = size_of(size) if size_of else dynamic_shared
        occupancy = max_active_blocks(fn, size, shared) * size
        if occupancy >= best_blocks:
            best, best_blocks = size, occupancy
    store(block_size, best)
    shared = size_of(best) if size_of else dynamic_shared
    store(min_grid, max_active_blocks(fn, best, shared) * ctxs.current().device.cores)


@entry("cuOccupancyMaxPotentialBlockSize")
def cuOccupancyMaxPotentialBlockSize(min_grid, block_size, f, smem_fn, dynamic_shared, limit):
    _potential_block_size(min_grid, block_size, f, smem_fn, dynamic_shared, limit)


@entry("cuOccupancyMaxPotentialBlockSizeWithFlags")
def cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block_size, f, smem_fn, dynamic_shared, limit, flags):
    _potential_block_size(min_grid, block_size, f, smem_fn, dynamic_shared, limit)


@entry("cuOccupancyAvailableDynamicSMemPerBlock")
def cuOccupancyAvailableDynamicSMemPerBlock(psize, f, num_blocks, block_size):
    require(psize)
    fn = function_of(addr(f))
    if num_blocks <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{num_blocks} blocks")
    per_block = (100 * 1024) // num_blocks - 1024 - fn.info.static_shared
    store(psize, max(0, min(per_block, devinfo.SHARED_MEMORY_PER_BLOCK_OPTIN - fn.info.static_shared)))
