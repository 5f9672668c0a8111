"""Threads, warps and blocks of one launch, and the scheduler.

Every thread is its own program (pc, registers, call frames), as with Volta's independent
thread scheduling. Blocks run one after another; within a block the scheduler takes threads
round-robin, each running until it waits at a rendezvous, exits, or has run SLICE
instructions (so a thread spinning on another's store lets it run). A rendezvous completes
when its whole group has arrived: block barriers when the expected number of threads has
arrived, warp collectives when every lane of the membermask that exists and has not exited
waits at a collective with the same qualifiers and membermask. Legacy collectives without
a membermask (and activemask) complete over the lanes waiting at that instruction once no
thread of the block can run. Nothing runnable and nothing to complete is a deadlock.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from zluda_py.ptx import ast
from zluda_py.reference.collectives import RESULTS, Undefined
from zluda_py.reference.memory import (ARRAYS_TOP, CONST_TOP, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_TIMEOUT,
                                       STOP, VARS_TOP, Memory, ReferenceFault, Region)
from zluda_py.reference.program import Func, Program

RUNNING, WAITING, DONE = 0, 1, 2
SLICE = 4096  # instructions a thread runs before the others get a turn


class Frame:
    __slots__ = ("func", "code", "pc", "regs", "sp", "params", "on_return")

    def __init__(self, func: Func, sp: int) -> None:
        self.func, self.code, self.pc, self.sp = func, func.code, 0, sp
        self.regs = [0] * func.nregs  # PTX leaves unwritten registers undefined
        self.params = {name: bytearray(size) for name, size in func.param_vars}
        self.on_return: list = []


class Thread:
    def __init__(self, launch: "Launch", block: "Block", tid: tuple[int, int, int], index: int) -> None:
        self.launch, self.block, self.tid = launch, block, tid
        self.warp, self.lane = divmod(index, 32)
        self.local = bytearray(launch.stack_size)
        self.frames: list[Frame] = []
        self.frame: Frame | None = None
        self.state = RUNNING

    def name(self) -> str:
        return f"thread ({','.join(map(str, self.tid))}) of block ({','.join(map(str, self.block.ctaid))})"

    def push(self, func: Func) -> Frame:
        sp = self.frame.sp + self.frame.func.frame_size if self.frame is not None else 0
        if sp + func.frame_size > len(self.local):
            raise ReferenceFault(CUDA_ERROR_LAUNCH_FAILED, f"stack overflow calling {func.name} by {self.name()}: "
                                 f"{sp + func.frame_size} bytes of {len(self.local)}")
        frame = Frame(func, sp)
        self.frames.append(frame)
        self.frame = frame
        return frame

    def ret(self) -> int:
        done = self.frames.pop()
        if not self.frames:
            return self.exit()
        self.frame = self.frames[-1]
        for copy in done.on_return:
            copy(done)
        return STOP

    def exit(self) -> int:
        self.state = DONE
        self.frames.clear()
        self.block.exited(self)
        return STOP


class Warp:
    """The lanes of one warp and the collectives they wait at."""

    def __init__(self, launch: "Launch", lanes: list[Thread]) -> None:
        self.launch = launch
        self.lanes = {t.lane: t for t in lanes}
        self.live = sum(1 << t.lane for t in lanes)
        self.waiting: dict[int, tuple] = {}  # lane -> (inst, key, mask, inputs, writers)

    def wait(self, t: Thread, inst: ast.Instruction, key, mask: int | None, inputs: tuple, writers: list) -> int | None:
        if mask is not None and not mask >> t.lane & 1:
            raise Undefined(f"{'.'.join((inst.opcode, *inst.mods))} by {t.name()}: lane not in membermask 0x{mask:08x}")
        self.waiting[t.lane] = (inst, key, mask, inputs, writers)
        t.state = WAITING
        if mask is not None:
            self._try(mask)
        return STOP if t.state == WAITING else None

    def _try(self, mask: int) -> None:
        """Complete the group of membermask `mask` if all of it waits with the same qualifiers."""
        group = mask & self.live
        lanes = [i for i in range(32) if group >> i & 1]
        entries = [self.waiting.get(i) for i in lanes]
        if any(e is None or e[2] != mask for e in entries) or len({e[1] for e in entries}) != 1:
            return
        self._complete(lanes)

    def _complete(self, lanes: list[int]) -> None:
        inst = self.waiting[lanes[0]][0]
        results = RESULTS[inst.opcode](inst, {i: self.waiting[i][3] for i in lanes})
        for i in lanes:
            writers = self.waiting.pop(i)[4]
            t = self.lanes[i]
            for w, v in zip(writers, results[i]):
                w(t, t.frame.regs, v)
            self.launch.wake(t)

    def exited(self, t: Thread) -> None:
        self.live &= ~(1 << t.lane)
        for mask in {e[2] for e in self.waiting.values() if e[2] is not None}:
            self._try(mask)

    def resolve_legacy(self) -> bool:
        """Complete one collective without a membermask, over the lanes waiting at it: the one
        earliest in the program text. Lanes waiting at a later one may be behind (the other
        side of an if, a loop still iterating) and catch up once the earlier completes: PTX
        leaves which lanes are "active together" to the implementation, and this is the
        choice that a GPU reconverging at the end of each if and loop makes."""
        groups: dict[object, list[int]] = {}
        for i, e in sorted(self.waiting.items()):
            if e[2] is None:
                groups.setdefault(e[1], []).append(i)
        if not groups:
            return False
        first = min(groups.values(), key=lambda lanes: _place(self.waiting[lanes[0]][0]))
        self._complete(first)
        return True


class Block:
    def __init__(self, launch: "Launch", ctaid: tuple[int, int, int]) -> None:
        self.launch, self.ctaid, self.ntid = launch, ctaid, launch.block
        bx, by, bz = self.ntid
        self.threads = [Thread(launch, self, (x, y, z), x + bx * (y + by * z))
                        for z in range(bz) for y in range(by) for x in range(bx)]
        self.nwarps = (len(self.threads) + 31) // 32
        self.warps = [Warp(launch, self.threads[32 * w:32 * w + 32]) for w in range(self.nwarps)]
        self.shared = bytearray(launch.program.shared_static + launch.shared_mem)
        self.live = len(self.threads)
        self.barriers: dict[int, dict] = {}

    def arrive(self, t: Thread, bar_id: int, count: int, pred: int, kind: str | None, dst, arrive_only: bool) -> int | None:
        """bar.sync / bar.arrive / bar.red at barrier `bar_id`; STOP while `t` must wait."""
        if bar_id >= 16:
            raise ReferenceFault(CUDA_ERROR_LAUNCH_FAILED, f"barrier id {bar_id} by {t.name()}")
        b = self.barriers.setdefault(bar_id, {"arrived": 0, "expected": 0, "acc": 0, "waiters": []})
        b["arrived"] += 1
        b["acc"] += pred
        if count:
            b["expected"] = count
        if not arrive_only:
            t.state = WAITING
            b["waiters"].append((t, kind, dst))
        self._check(bar_id)
        return STOP if t.state == WAITING else None

    def _check(self, bar_id: int) -> None:
        b = self.barriers[bar_id]
        if b["arrived"] < (b["expected"] or self.live) or not b["waiters"] and not b["expected"]:
            return
        del self.barriers[bar_id]
        acc, arrived = b["acc"], b["arrived"]
        result = {"popc": acc, "and": int(acc == arrived), "or": int(acc != 0)}
        for t, kind, dst in b["waiters"]:
            if dst is not None:
                dst(t, t.frame.regs, result[kind])
            self.launch.wake(t)

    def exited(self, t: Thread) -> None:
        self.live -= 1
        self.warps[t.warp].exited(t)
        for bar_id in [k for k, b in self.barriers.items() if not b["expected"]]:
            if bar_id in self.barriers:
                self._check(bar_id)


class Launch:
    def __init__(self, program: Program, grid, block, shared_mem: int, stack_size: int, max_steps: int) -> None:
        self.program, self.grid, self.block = program, grid, block
        self.shared_mem, self.stack_size, self.max_steps = shared_mem, stack_size, max_steps
        self.memory = Memory()
        self.steps = 0
        self.current: Thread | None = None
        self.runnable: deque[Thread] = deque()

    def wake(self, t: Thread) -> None:
        t.state = RUNNING
        if t is not self.current:
            self.runnable.append(t)

    def run_block(self, ctaid: tuple[int, int, int], kernel: Func) -> None:
        blk = Block(self, ctaid)
        for t in blk.threads:
            t.push(kernel)
        self.runnable = deque(blk.threads)
        while True:
            while self.runnable:
                t = self.runnable.popleft()
                if t.state != RUNNING:
                    continue
                self.current = t
                self._run(t)
                self.current = None
                if t.state == RUNNING:
                    self.runnable.append(t)
            if blk.live == 0:
                return
            if not any(w.resolve_legacy() for w in blk.warps):
                raise ReferenceFault(CUDA_ERROR_LAUNCH_TIMEOUT, f"deadlock in block {ctaid}: " + "; ".join(
                    _waits_at(t) for t in blk.threads if t.state == WAITING))

    def _run(self, t: Thread) -> None:
        """Run `t` until it waits, exits or has used its slice."""
        budget = min(SLICE, self.max_steps - self.steps + 1)
        n = 0
        try:
            while t.state == RUNNING and n < budget:
                f = t.frame
                code, r, pc = f.code, f.regs, f.pc
                while n < budget:
                    n += 1
                    x = code[pc](t, r)
                    if x is None:
                        pc += 1
                    elif x >= 0:
                        pc = x
                    else:  # a call, return, wait or exit: `f` resumes after this instruction
                        pc += 1
                        break
                f.pc = pc
        finally:
            self.steps += n
        if self.steps > self.max_steps:
            raise ReferenceFault(CUDA_ERROR_LAUNCH_TIMEOUT, f"step limit of {self.max_steps} instructions exceeded "
                                 f"(a hang?) in {t.name()}")


def _place(inst: ast.Instruction) -> tuple[str, int, int]:
    return (inst.pos.file, inst.pos.line, inst.pos.col) if inst.pos is not None else ("", 0, 0)


def _waits_at(t: Thread) -> str:
    return f"{t.name()} at instruction {t.frame.pc - 1} of {t.frame.func.name}"


def bind_arguments(launch: Launch, params: list[dict], size: int, args: list) -> None:
    """Kernel arguments into the parameter buffer: arrays become global regions (their fake
    device address is passed), scalars are copied by value."""
    mem = launch.memory
    mem.params = bytearray(size)
    mem.add_region(VARS_TOP, Region("module .global variables", memoryview(bytearray(launch.program.vars))))
    mem.add_region(CONST_TOP, Region("module .const variables", memoryview(bytearray(launch.program.consts)), True))
    if len(args) != len(params):
        raise TypeError(f"kernel takes {len(params)} arguments, got {len(args)}")
    for k, (p, a) in enumerate(zip(params, args)):
        if isinstance(a, np.ndarray):
            if not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"argument {k}: arrays must be C-contiguous and writeable")
            raw = mem.add_region(ARRAYS_TOP + k, Region(f"argument {k}", memoryview(a.reshape(-1).view(np.uint8))))
            data = raw.to_bytes(8, "little")
        elif isinstance(a, np.generic):
            data = a.tobytes()
        elif isinstance(a, float):
            data = np.array(a, np.float32 if p["size"] == 4 else np.float64).tobytes()
        elif isinstance(a, (int, bool)):
            data = (int(a) & ((1 << (8 * p["size"])) - 1)).to_bytes(p["size"], "little")
        elif isinstance(a, (bytes, bytearray)):
            data = bytes(a)
        else:
            raise TypeError(f"cannot pass {type(a).__name__} as a kernel argument")
        if len(data) != p["size"] and not isinstance(a, np.ndarray):
            raise TypeError(f"argument {k} is {len(data)} bytes, the parameter {p['size']}")
        mem.params[p["offset"]:p["offset"] + p["size"]] = data[:p["size"]]
