"""The reference's flat memory: every state space is a window in one 64-bit generic space.

Each window sits at its own 2^32-aligned base, so `address >> 32` names it: kernel arguments'
numpy arrays and module variables are global memory, the block's `.shared` window and the
thread's `.local` window are the same generic range for every block / thread (each sees its
own, as on the GPU), and the kernel parameter buffer is the `.param` window. `.shared` and
`.local` addresses are offsets into their window. Anything else faults with 700.
"""

from __future__ import annotations

from dataclasses import dataclass

CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_TIMEOUT = 702
CUDA_ERROR_LAUNCH_FAILED = 719

SHARED_TOP, LOCAL_TOP, PARAM_TOP, FUNC_TOP, VARS_TOP, CONST_TOP, ARRAYS_TOP = 0x2, 0x3, 0x4, 0x5, 0x8, 0x9, 0x10
SHARED_BASE, LOCAL_BASE, PARAM_BASE = SHARED_TOP << 32, LOCAL_TOP << 32, PARAM_TOP << 32
FUNC_BASE, VARS_BASE, CONST_BASE = FUNC_TOP << 32, VARS_TOP << 32, CONST_TOP << 32
STOP = -1  # what an instruction step returns to leave the thread's run loop (see program.py)
WINDOW_SPACE = {SHARED_TOP: "shared", LOCAL_TOP: "local", PARAM_TOP: "param"}


class ReferenceFault(Exception):
    """A launch the reference stopped: `.cu_result` is the CUresult NVIDIA's driver would give
    (700 illegal address, 719 trap / launch failure, 702 hang: step limit or deadlock)."""

    def __init__(self, cu_result: int, message: str) -> None:
        super().__init__(message)
        self.cu_result = cu_result


@dataclass
class Region:
    """A global-memory window: an argument array or the module variables."""

    name: str
    data: memoryview  # bytes, writable
    const: bool = False


class Memory:
    """Global regions of one launch, plus the access primitives over any window."""

    def __init__(self) -> None:
        self.regions: dict[int, Region] = {}
        self.params = bytearray()

    def add_region(self, top: int, region: Region) -> int:
        self.regions[top] = region
        return top << 32

    def window(self, t, space: str, addr: int, n: int) -> tuple[memoryview | bytearray, int]:
        """(buffer, offset) of the `n` bytes at `addr` in `space` for thread `t`; faults with
        700 when they are not all inside one window."""
        if space == "generic":
            top = addr >> 32
            space = WINDOW_SPACE.get(top, "global")
            if space != "global":
                addr -= top << 32
        if space == "shared":
            buf = t.block.shared
        elif space == "local":
            buf = t.local
        elif space == "param":
            buf, addr = self.params, addr - PARAM_BASE
        else:  # global / const
            region = self.regions.get(addr >> 32)
            if region is None:
                raise _illegal(t, space, addr, n)
            buf, addr = region.data, addr & 0xFFFFFFFF
        if addr < 0 or addr + n > len(buf):
            raise _illegal(t, space, addr, n)
        return buf, addr

    def space_of(self, addr: int) -> str:
        """The state space a generic address points into ("none" outside every window)."""
        top = addr >> 32
        if top in WINDOW_SPACE:
            return WINDOW_SPACE[top]
        region = self.regions.get(top)
        if region is None:
            return "none"
        return "const" if region.const else "global"


def _illegal(t, space: str, addr: int, n: int) -> ReferenceFault:
    return ReferenceFault(CUDA_ERROR_ILLEGAL_ADDRESS,
                          f"illegal address: {n}-byte .{space} access at 0x{addr & (2**64 - 1):x} by {t.name()}")
