"""The native ABI shared by Python, the block runner and the generated warp code.

A launch is described by one record of i64 slots (`Ctx`); each worker call gets its own copy
and the block runner fills in the per-block slots. A warp function has the signature
`i32 warp(ptr ctx, ptr frame, i32 resume)` and returns 0 when all its lanes finished, a
positive resume point when it stops at a block barrier, or -status after a fault. A `.func`
becomes `i32 f(ptr ctx, i32 warp, i64 sp, <32 x i1> mask, ptr param...)` returning the
bitmask of lanes that executed `exit`.
"""

from __future__ import annotations

from enum import IntEnum

from zluda_py.compiler.layout import RESERVED_SMEM  # noqa: F401  (the launch places the region)

WARP = 32
DONE = 0x7FFFFFFF  # per-lane program counter of a finished lane
NBARRIERS = 16
BAR_SLOTS = 8  # i64 slots per hardware barrier (see BarSlot)
FRAME_HEADER = 64  # bytes at the start of each warp frame
STACK_ALIGN = 16
# Launches place the shared arena and the stacks at addresses aligned to this, so that a .shared
# or .local variable's generic address has the alignment it declares (up to this: larger ones
# are refused when compiling).
BASE_ALIGN = 4096
# Ranges access sites last hit (Ctx.BOUNDS_CACHE), shared round-robin: nvcc's 64-bit grid-stride
# loop (CuPy's CUPY_FOR) unrolls to 12 global accesses; with 8 entries its x and y sites shared
# ones and every access missed into zluda.bounds' search (3x slower, docs/cpu_target.md).
BOUNDS_CACHE_ENTRIES = 32
# Status of a block that left a wait because another block of the launch faulted (not a
# CUresult: the launch reports the other block's fault).
ABORTED = 0x10000
# The reserved shared memory (layout.RESERVED_SMEM) sits after the kernel's own (static +
# dynamic) shared memory, 16-byte aligned, in launches of modules that read its registers.
# Rounds of the block runner in which every warp that ran only yielded at failed mbarrier waits
# and no mbarrier changed, after which the block is deadlocked (nothing else can complete its
# waits): the launch fails with 719, as when every warp waits at a barrier nobody else reaches.
STALLED_ROUNDS = 1 << 20
# Ctx.FAULT_ARG of a 719 that is not a `trap`: what the launch failure message names.
FAULT_BRKPT = 1  # brkpt with no debugger attached
FAULT_STACK = 2  # a call whose frame overflows the per-thread stack
FAULT_DEADLOCK = 3  # every live warp of the block waits for something no thread will do


class Ctx(IntEnum):
    PARAMS = 0
    GRID_X = 1
    GRID_Y = 2
    GRID_Z = 3
    BLOCK_X = 4
    BLOCK_Y = 5
    BLOCK_Z = 6
    SHARED = 7  # this worker's shared-memory arena
    DYN_SMEM = 8
    STACK = 9  # this worker's per-thread stacks: thread t's window starts at STACK + t*STACK_SIZE
    STACK_SIZE = 10
    FRAMES = 11  # this worker's warp frames
    STOP = 12  # address of an i32 set when any worker faulted
    FIRST = 13  # first linear block index of this call
    COUNT = 14
    GRIDID = 15
    SMID = 16
    NSMID = 17
    STATUS = 18  # CUresult of a fault, 0 while running
    CTA_X = 19
    CTA_Y = 20
    CTA_Z = 21
    NWARPS = 22
    BARRIERS = 23  # address of NBARRIERS * BAR_SLOTS i64
    TOTAL_SMEM = 24
    FAULT_BLOCK = 25  # linear block index of the fault
    FAULT_LANES = 26  # lane mask of the faulting warp
    FAULT_WARP = 27
    FAULT_ARG = 28  # fault detail (e.g. the address of an assert record)
    # bounds checking (cpu/bounds.py): the snapshot of valid ranges and the parameter blob's size
    RANGES = 29  # address of NRANGES [start, end) u64 pairs sorted by start
    NRANGES = 30
    PARAM_SIZE = 31
    BOUNDS_CACHE = 32  # BOUNDS_CACHE_ENTRIES [lo, hi) pairs: ranges access sites hit last (0: empty)
    GRID_WORKSPACE = 32 + 2 * BOUNDS_CACHE_ENTRIES  # cooperative launch: its grid workspace (%envreg1:%envreg2), else 0
    SHARED_WINDOW = GRID_WORKSPACE + 1  # valid bytes of the arena: TOTAL_SMEM, then the reserved region
    MBAR_EPOCH = SHARED_WINDOW + 1  # count of mbarrier updates (the block runner's test for a stalled block)
    BAR_TOUCHED = MBAR_EPOCH + 1  # bit i: a bar.arrive at barrier i since the block runner last looked
    # 1: a bounds-check miss is a fault even in host memory the process maps (launches outside the
    # driver); 0 (the driver's launches, native ones too): the device has PAGEABLE_MEMORY_ACCESS
    TABLE_ONLY = BAR_TOUCHED + 1
    SLOTS = TABLE_ONLY + 1


class Frame(IntEnum):
    """i32 slots of a warp frame's header; registers are saved after FRAME_HEADER bytes."""

    WARP = 0
    BAR_ID = 1
    BAR_COUNT = 2  # thread count of the barrier, 0 = all threads of the block
    LIVE = 3  # number of lanes that have not exited
    BAR_MASK = 4  # lanes that arrived
    BAR_VALUE = 5  # bar.red contribution (number of lanes with a true predicate)
    YIELD = 6  # 1: the warp returned to let the others run (mbarrier waits), not at a barrier
    SPILL_ALL = 7  # 1: the warp was divergent at the barrier, every register was saved
    STATE = 8  # block runner: 0 not started, >0 resume point, -1 finished
    WAITGEN = 9  # block runner: generation of the barrier the warp waits at
    AT_NEXT = 10  # lanes at the block after the barrier of a converged warp (the others are done)


class BarSlot(IntEnum):
    ARRIVED = 0
    GEN = 1
    EXPECTED = 2
    ACC = 3
    RES_POPC = 4
    RES_ARRIVED = 5
