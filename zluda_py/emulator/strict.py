"""Strict mode (ZLUDA_EMULATOR_STRICT=1): memory operations complete at their matching s_waitcnt.

Normally the emulator finishes a memory instruction as it executes it. In strict mode a load's
destination registers (VGPRs, SGPRs; LDS reads and cross-lane DS operations included) hold POISON
from its issue until an `s_waitcnt` that covers it, and a store becomes visible to the other waves
only then (or when its own wave next reads memory, or ends): code that reads a result before
waiting for it computes with POISON, and a wave that releases data without waiting for its stores
lets the others read the old values.

The counters, as the ISA manuals define them:
* gfx11 (RDNA3): vmcnt counts vector memory loads and atomics that return data, vscnt stores and
  atomics that do not, lgkmcnt LDS (DS), scalar memory and FLAT (which counts in vmcnt/vscnt too).
  `s_waitcnt` holds vmcnt in bits 15:10, lgkmcnt in 9:4, expcnt in 2:0; `s_waitcnt_vscnt` (and
  the vmcnt/lgkmcnt/expcnt forms) take the count in SIMM16.
* CDNA (gfx9): vmcnt counts every vector memory operation, lgkmcnt as above; `s_waitcnt` holds
  vmcnt in bits 3:0 and 15:14, expcnt in 6:4, lgkmcnt in 11:8.
Operations of one counter complete in issue order (scalar loads, which the hardware may return
out of order, are completed in order here too). Nothing here exports, so expcnt waits are met.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from zluda_py.emulator.errors import EmulatorError

if TYPE_CHECKING:
    from zluda_py.emulator.execute import Decoded, Wave

POISON = 0xFFBADBAD  # a quiet-NaN pattern as f32, an implausible integer and address
_NULL = 124  # the NULL SGPR operand on RDNA
_COUNTER_OF = {"S_WAITCNT_VMCNT": "vm", "S_WAITCNT_VSCNT": "vs", "S_WAITCNT_LGKMCNT": "lgkm", "S_WAITCNT_EXPCNT": "exp"}
WAITS = ("S_WAITCNT", *_COUNTER_OF)


class Pending:
    """An outstanding memory operation: the counters it occupies and what completing it does."""

    __slots__ = ("counters", "complete", "store")

    def __init__(self, counters: tuple[str, ...], complete: Callable[[], None], store: bool):
        self.counters, self.complete, self.store = counters, complete, store


def counters(w: "Wave", d: "Decoded", returns: bool) -> tuple[str, ...]:
    """The counters instruction `d` occupies; `returns`: it writes registers (loads, atomics
    with return)."""
    fmt = d.fmt.removeprefix("V")
    if fmt.startswith(("SMEM", "DS")):
        return ("lgkm",)
    vmem = "vm" if returns or not w.rdna else "vs"
    return (vmem, "lgkm") if fmt.startswith("FLAT") else (vmem,)


def deliver(w: "Wave", d: "Decoded", regs: np.ndarray, index: tuple, values: np.ndarray, keep: int) -> None:
    """A memory instruction's result for regs[index]: POISON there until its s_waitcnt. `keep`:
    the register bits the result leaves alone (a d16 load's other half), merged at completion."""
    kept = np.uint32(keep)
    regs[index] = regs[index] & kept | np.uint32(POISON & ~keep)
    values = np.array(values, regs.dtype)  # a copy: the values as they were read at issue

    def complete() -> None:
        regs[index] = regs[index] & kept | values

    w.pending.append(Pending(counters(w, d, True), complete, False))


def defer(w: "Wave", d: "Decoded", returns: bool, complete: Callable[[], None], store: bool) -> None:
    """An operation whose completion (a store's write: `store`) waits for its s_waitcnt."""
    w.pending.append(Pending(counters(w, d, returns), complete, store))


def done() -> None:
    """The completion of an operation with nothing left to do (counted until its wait)."""


def flush_stores(w: "Wave") -> None:
    """The wave's own stores, before it reads memory: a wave sees its own writes in order. They
    stay counted until their s_waitcnt (the count the compiler waits for includes them)."""
    for p in w.pending:
        if p.store:
            p.complete()
            p.complete, p.store = done, False


def drain(w: "Wave") -> None:
    """Everything outstanding completes (the wave ends)."""
    for p in w.pending:
        p.complete()
    w.pending.clear()


def _limits(w: "Wave", d: "Decoded") -> dict[str, int]:
    if d.name != "S_WAITCNT":
        if d.inst.sdst.offset != _NULL:
            raise EmulatorError(w.where(f"{d.name.lower()} with a count in an SGPR (strict mode)"))
        return {_COUNTER_OF[d.name]: d.inst.simm16}
    imm = d.inst.simm16
    if w.rdna:
        return {"vm": imm >> 10 & 0x3F, "lgkm": imm >> 4 & 0x3F}
    return {"vm": (imm & 0xF) | (imm >> 14 & 3) << 4, "lgkm": imm >> 8 & 0xF}


def wait(w: "Wave", d: "Decoded") -> None:
    """s_waitcnt and its single-counter forms: the oldest operations of each counter complete
    until at most the given number are outstanding."""
    if w.pending is None:
        return
    for counter, limit in _limits(w, d).items():
        mine = [p for p in w.pending if counter in p.counters]
        done = mine[: max(len(mine) - limit, 0)]
        for p in done:
            p.complete()
        if done:
            gone = {id(p) for p in done}
            w.pending = [p for p in w.pending if id(p) not in gone]
