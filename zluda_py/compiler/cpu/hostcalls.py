"""Host side of device system calls: printf output per launch, malloc/free ranges, assert messages,
texture and surface requests, the device runtime's launches (device_launch.py).

Native code calls `zluda_host(kind, ctx, a, b, c, d, e)`; the launch that owns `ctx` collects
printf output in order and writes it to fd 1 before `launch_raw` returns.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from zluda_py import hostmem
from zluda_py.compiler.cpu import device_launch, texture
from zluda_py.compiler.cpu.abi import Ctx
from zluda_py.compiler.cpu.bounds import RANGES
from zluda_py.compiler.cpu.calls import HOST_ASSERT, HOST_DEVICE_RUNTIME, HOST_FREE, HOST_MALLOC, HOST_VPRINTF
from zluda_py.compiler.cpu.memory import HOST_BOUNDS
from zluda_py.compiler.cpu.texops import HOST_TEXTURE
from zluda_py.compiler.errors import CUDA_ERROR_LAUNCH_FAILED
from zluda_py.compiler.printf import c_string, format_printf

HOST_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


class OutputSinks:
    """printf output per running launch, keyed by the address of each worker's ctx record."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_ctx: dict[int, list[bytes]] = {}

    def attach(self, ctx_address: int, sink: list[bytes]) -> None:
        with self.lock:
            self.by_ctx[ctx_address] = sink

    def detach(self, ctx_address: int) -> None:
        with self.lock:
            self.by_ctx.pop(ctx_address, None)


SINKS = OutputSinks()


def _thread_coords(ctx: int, thread: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    slots = (ctypes.c_int64 * Ctx.SLOTS).from_address(ctx)
    bx, by = slots[Ctx.BLOCK_X], slots[Ctx.BLOCK_Y]
    block = (slots[Ctx.CTA_X], slots[Ctx.CTA_Y], slots[Ctx.CTA_Z])
    return block, (thread % bx, thread // bx % by, thread // (bx * by))


def _pageable(ctx: int, lo: int, hi: int) -> bool:
    """A driver launch (the device reports PAGEABLE_MEMORY_ACCESS, as with HMM): any host memory
    of the process is the kernel's too, in the GPU-like mode (`exact` checks allocations only).
    Writable is asked, as the check knows no load from a store and a site's cached range serves
    both: a load from read-only memory still faults."""
    return (RANGES.mode == "mapped" and not ctypes.c_int64.from_address(ctx + 8 * Ctx.TABLE_ONLY).value
            and hostmem.writable(lo, hi - lo))


def _host(kind: int, ctx: int, a: int, b: int, c: int, d: int, e: int) -> int:
    try:
        if kind == HOST_VPRINTF:
            text = format_printf(c_string(a), b)
            with SINKS.lock:
                sink = SINKS.by_ctx.get(ctx)
            if sink is not None:
                sink.append(text)
            return len(text)
        if kind == HOST_MALLOC:
            if a:
                RANGES.register(a, b)
            return 0
        if kind == HOST_FREE:
            RANGES.unregister(a)
            return 0
        if kind == HOST_TEXTURE:  # a warp's texture or surface request at a; its form's text at c
            return texture.run(c_string(c), a, b)
        if kind == HOST_BOUNDS:  # [a, b) registered since the launch took its snapshot, or pageable?
            lo, hi = a & 0xFFFFFFFFFFFFFFFF, b & 0xFFFFFFFFFFFFFFFF
            return int(RANGES.contains(lo, hi) or _pageable(ctx, lo, hi))
        if kind >= HOST_DEVICE_RUNTIME:  # CUDA Dynamic Parallelism's calls
            return device_launch.call(kind - HOST_DEVICE_RUNTIME, ctx, a, b, c, d, e)
        if kind == HOST_ASSERT:
            block, thread = _thread_coords(ctx, e)
            msg = (f"{c_string(b).decode(errors='replace')}:{c & 0xFFFFFFFF}: {c_string(d).decode(errors='replace')}: "
                   f"block: [{block[0]},{block[1]},{block[2]}], thread: [{thread[0]},{thread[1]},{thread[2]}] "
                   f"Assertion `{c_string(a).decode(errors='replace')}` failed.\n")
            sys.stderr.write(msg)
            sys.stderr.flush()
        return 0
    except Exception as exc:  # never unwind into native code
        sys.stderr.write(f"zluda: device system call failed: {exc}\n")
        if kind >= HOST_DEVICE_RUNTIME:
            return device_launch.failed(kind - HOST_DEVICE_RUNTIME)
        return {HOST_BOUNDS: 0, HOST_TEXTURE: CUDA_ERROR_LAUNCH_FAILED}.get(kind, -1)


HOST_CALLBACK = HOST_FN(_host)
HOST_ADDRESS = ctypes.cast(HOST_CALLBACK, ctypes.c_void_p).value
