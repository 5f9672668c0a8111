"""Entry points: stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64,
cuStreamBatchMemOp, v1 and _v2 ABIs) and the graph nodes holding them.

A batch is one op of its stream. A wait occupies the stream's worker thread, polling the word
through the backend's `copy` (so a kernel of another stream, the host writing pinned memory or
another process sharing the pages can satisfy it) with a back-off from a yield up to 1 ms; other
streams have workers of their own and keep running. A wait that is never satisfied hangs its
stream, as on NVIDIA; the host blocks only where it synchronizes with that stream, and Ctrl-C
still ends the program. Writes go through `copy` too, after everything queued before them (the
stream-scoped fence cuda.h describes). Device memory is coherent with the host here, so
CU_STREAM_WAIT_VALUE_FLUSH and CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES have nothing left to flush
and the device reports CAN_FLUSH_REMOTE_WRITES."""

from __future__ import annotations

import time

from . import context as ctxs
from .api import entry
from ..cdata import addr, ffi
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .memory import _memory, check_device_range, run

ffi.cdef("""
typedef struct {
    int operation; unsigned long long address; unsigned long long value64; unsigned int flags;
    unsigned long long alias;
} CUstreamMemOpValueParams;
typedef union {
    int operation;
    CUstreamMemOpValueParams waitValue;
    CUstreamMemOpValueParams writeValue;
    struct { int operation; unsigned int flags; } flushRemoteWrites;
    struct { int operation; unsigned int flags; } memoryBarrier;
    unsigned long long pad[6];
} CUstreamBatchMemOpParams;
typedef struct { void *ctx; unsigned int count; CUstreamBatchMemOpParams *paramArray; unsigned int flags; }
    CUDA_BATCH_MEM_OP_NODE_PARAMS;
""")

WAIT_GEQ, WAIT_EQ, WAIT_AND, WAIT_NOR = 0, 1, 2, 3
WAIT_FLUSH = 1 << 30
WRITE_NO_MEMORY_BARRIER = 0x1  # v1 only
OP_WAIT_32, OP_WRITE_32, OP_FLUSH_REMOTE_WRITES, OP_WAIT_64, OP_WRITE_64, OP_BARRIER = 1, 2, 3, 4, 5, 6
BARRIER_SYS, BARRIER_GPU = 0, 1
MAX_BATCH = 256  # "count: the number of operations in the array. Must be less than 256."
BATCH_MEM_OP_NODE = 12  # CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
_MAX_SLEEP = 1e-3


def satisfied(current: int, value: int, condition: int, bits: int) -> bool:
    """cuda.h's CUstreamWaitValue_flags conditions on `bits`-wide unsigned words."""
    mask = (1 << bits) - 1
    if condition == WAIT_GEQ:  # cyclic: (intN_t)(*addr - value) >= 0
        return (current - value) & mask < 1 << (bits - 1)
    if condition == WAIT_EQ:
        return current == value
    if condition == WAIT_AND:
        return current & value != 0
    return ~(current | value) & mask != 0  # WAIT_NOR


class MemOp:
    """One checked wait, write or fence, decoded from the caller's arguments."""

    def __init__(self, operation: int, address: int = 0, value: int = 0, flags: int = 0, v2: bool = True) -> None:
        self.operation, self.address, self.flags = operation, address, flags
        if operation in (OP_WAIT_32, OP_WAIT_64):
            if flags & ~(WAIT_FLUSH | 3):
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"wait flags {flags:#x}")
        elif operation in (OP_WRITE_32, OP_WRITE_64):
            if flags & ~(0 if v2 else WRITE_NO_MEMORY_BARRIER):
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"write flags {flags:#x}"
                                + (" (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is not in the v2 API)" if v2 else ""))
        elif operation == OP_FLUSH_REMOTE_WRITES:
            if flags:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flush flags {flags:#x} (must be 0)")
            return
        elif operation == OP_BARRIER:
            if not v2:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "CU_STREAM_MEM_OP_BARRIER is only in the v2 API")
            if flags not in (BARRIER_SYS, BARRIER_GPU):
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"memory barrier flags {flags:#x}")
            return
        else:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"stream memory operation {operation}")
        self.size = 8 if operation in (OP_WAIT_64, OP_WRITE_64) else 4
        self.value = value & ((1 << 8 * self.size) - 1)
        if address % self.size:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"address {address:#x} is not {self.size}-byte aligned")
        check_device_range(address, self.size)
        if _memory().find(address).kind == "managed":  # "None of the operations accepts pointers to managed memory"
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{address:#x} is managed memory")

    def run(self, ctx) -> None:
        memory = _memory()
        if self.operation in (OP_WRITE_32, OP_WRITE_64):
            word = ffi.new("unsigned long long *", self.value)
            memory.copy(self.address, addr(word), self.size)
        elif self.operation in (OP_WAIT_32, OP_WAIT_64):
            word = ffi.new("unsigned long long *")
            delay = 0.0
            while not ctx.sticky_error:  # a corrupted context runs nothing more
                memory.copy(addr(word), self.address, self.size)
                if satisfied(word[0], self.value, self.flags & 3, 8 * self.size):
                    return
                time.sleep(delay)
                delay = min(_MAX_SLEEP, delay * 2 or 1e-5)
        # flushes and barriers: every earlier write of the stream is already visible

    def write_params(self, p) -> None:
        """Fill one CUstreamBatchMemOpParams (for the node getters)."""
        p.operation = self.operation
        if self.operation in (OP_FLUSH_REMOTE_WRITES, OP_BARRIER):
            p.flushRemoteWrites.flags = self.flags
            return
        p.waitValue.address, p.waitValue.value64, p.waitValue.flags = self.address, self.value, self.flags


class BatchMemOp:
    """A checked batch: one stream op, and the work of a batch mem op graph node."""

    node_type = BATCH_MEM_OP_NODE

    def __init__(self, ops: list[MemOp], ctx, flags: int = 0) -> None:
        self.ops, self.ctx, self.flags = ops, ctx, flags
        self._params = None  # the array the node getter hands out, made on demand

    @classmethod
    def decode(cls, count: int, params, flags: int, ctx, v2: bool) -> BatchMemOp:
        if flags:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"batch flags {flags:#x} (reserved, must be 0)")
        if count >= MAX_BATCH:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{count} operations (fewer than {MAX_BATCH} allowed)")
        if count and params == ffi.NULL:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL paramArray")
        p = ffi.cast("CUstreamBatchMemOpParams *", params)
        ops = []
        for i in range(count):
            op = p[i].operation
            if op in (OP_FLUSH_REMOTE_WRITES, OP_BARRIER):
                ops.append(MemOp(op, flags=p[i].flushRemoteWrites.flags, v2=v2))
            else:
                w = p[i].waitValue
                ops.append(MemOp(op, w.address, w.value64, w.flags, v2))
        return cls(ops, ctx)

    def params(self):
        """The node's CUstreamBatchMemOpParams array, owned by the work."""
        if self._params is None:
            self._params = ffi.new("CUstreamBatchMemOpParams[]", max(len(self.ops), 1))
            for op, p in zip(self.ops, self._params):
                op.write_params(p)
        return self._params

    def __call__(self) -> None:
        for op in self.ops:
            op.run(self.ctx)


def _submit(stream, ops: list[MemOp]) -> None:
    s = ctxs.resolve_stream(addr(stream))
    run(addr(stream), BatchMemOp(ops, s.ctx), False)


def _define_single() -> None:
    for bits, wait, write in ((32, OP_WAIT_32, OP_WRITE_32), (64, OP_WAIT_64, OP_WRITE_64)):
        for v2 in (False, True):
            suffix = "_v2" if v2 else ""

            def wait_value(stream, address, value, flags, wait=wait, v2=v2):
                _submit(stream, [MemOp(wait, address, value, flags, v2)])

            def write_value(stream, address, value, flags, write=write, v2=v2):
                _submit(stream, [MemOp(write, address, value, flags, v2)])

            entry(f"cuStreamWaitValue{bits}{suffix}")(wait_value)
            entry(f"cuStreamWriteValue{bits}{suffix}")(write_value)


_define_single()


@entry("cuStreamBatchMemOp")
def cuStreamBatchMemOp(stream, count, params, flags):
    s = ctxs.resolve_stream(addr(stream))
    run(addr(stream), BatchMemOp.decode(count, params, flags, s.ctx, v2=False), False)


@entry("cuStreamBatchMemOp_v2")
def cuStreamBatchMemOp_v2(stream, count, params, flags):
    s = ctxs.resolve_stream(addr(stream))
    run(addr(stream), BatchMemOp.decode(count, params, flags, s.ctx, v2=True), False)


def node_work(p) -> BatchMemOp:
    """The work a CUDA_BATCH_MEM_OP_NODE_PARAMS (a pointer to one) describes."""
    ctx = ctxs.contexts.get(addr(p.ctx)) if p.ctx != ffi.NULL else ctxs.current()
    return BatchMemOp.decode(p.count, p.paramArray, p.flags, ctx, v2=True)


def write_node_params(p, work: BatchMemOp) -> None:
    p.ctx = ffi.cast("void *", work.ctx.handle)
    p.count = len(work.ops)
    p.paramArray = work.params()
    p.flags = work.flags
