"""Running a kernel launch: every wave of every workgroup, round-robin within a workgroup so that
`s_barrier` holds each wave until all of its workgroup's live waves have reached it; `s_sleep`
ends a wave's turn (a wave polling an mbarrier lets the others arrive).

A cooperative launch (hipModuleLaunchCooperativeKernel: grid.sync()) makes every workgroup
resident at once: all their waves take turns of at most SLICE instructions, so a wave spinning on
a grid barrier's counter lets the other workgroups' waves reach it; a turn ends early where a
load returns what the same load (PC and addresses) returned last time (`Wave.polled`): the
wave is polling memory no one has changed since, and its turn is better spent on the others."""

from __future__ import annotations

import os
import struct
from typing import Sequence

import numpy as np

from zluda_py.emulator import loader
from zluda_py.emulator.errors import EmulatorError
from zluda_py.emulator.execute import SCRATCH_RESOURCE, Program, Wave, step
from zluda_py.emulator.memory import Memory

MAX_STEPS = 5_000_000  # per workgroup: a launch that runs longer is taken to hang
TTMP0 = 108  # the trap temporaries' operand number on RDNA
SLICE = 256  # instructions a wave of a cooperative launch runs before the next wave's turn


def _dims(v: "int | Sequence[int]") -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    return tuple(list(t) + [1] * (3 - len(t)))  # type: ignore[return-value]


class Workgroup:
    def __init__(self, memory: Memory, lds_size: int):
        self.memory = memory
        self.lds = np.zeros(lds_size, np.uint8)


def _hidden_args(kernel: loader.Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 dynamic_lds: int) -> dict[int, bytes]:
    """Values of the code object v5 hidden kernel arguments the kernel declares, by offset."""
    values: dict[str, bytes] = {}
    for i, axis in enumerate("xyz"):
        values[f"hidden_block_count_{axis}"] = struct.pack("<I", grid[i])
        values[f"hidden_group_size_{axis}"] = struct.pack("<H", block[i])
        values[f"hidden_remainder_{axis}"] = struct.pack("<H", 0)  # CUDA grids are uniform
    values["hidden_grid_dims"] = struct.pack("<H", 3 if grid[2] > 1 else 2 if grid[1] > 1 else 1)
    values["hidden_dynamic_lds_size"] = struct.pack("<I", dynamic_lds)
    out = {}
    for arg in kernel.args:
        kind = arg.get(".value_kind", "")
        if kind.startswith("hidden_"):
            out[arg[".offset"]] = values.get(kind, bytes(arg[".size"]))[: arg[".size"]]
    return out


def launch(code: "bytes | loader.Image", kernel: str, grid: "int | Sequence[int]", block: "int | Sequence[int]",
           kernarg: bytes, memory: Memory, arch: str = "gfx1100", dynamic_lds: int = 0,
           cooperative: bool = False, stack_size: int = loader.DEFAULT_STACK) -> None:
    """Run `kernel` of a code object (bytes, loaded into `memory` for this launch, or an Image
    loaded there before) over `grid` x `block` threads. `kernarg` holds the explicit arguments
    (CUDA's parameter buffer); the hidden arguments are filled in here. `cooperative`: every
    workgroup resident at once, their waves interleaved (grid-wide barriers can complete).
    `stack_size`: each lane's call stack in a kernel with a dynamic stack (hipLimitStackSize)."""
    image = loader.Image(code, memory) if isinstance(code, (bytes, bytearray)) else code
    try:
        _launch(image, kernel, _dims(grid), _dims(block), kernarg, memory, arch, dynamic_lds, cooperative,
                stack_size)
    finally:
        if image is not code:
            image.unload()


def _launch(image: loader.Image, kernel: str, grid3: tuple[int, int, int], block3: tuple[int, int, int],
            kernarg: bytes, memory: Memory, arch: str, dynamic_lds: int, cooperative: bool, stack_size: int) -> None:
    k = image.kernel(kernel, arch)
    stack = stack_size if k.dynamic_stack else 0
    scratch = k.scratch_per_lane(stack_size)
    family = loader.isa_family(arch)
    segment = bytearray(max(k.kernarg_size, len(kernarg)))
    segment[: len(kernarg)] = kernarg
    for off, raw in _hidden_args(k, grid3, block3, dynamic_lds).items():
        segment[off:off + len(raw)] = raw
    kernarg_addr = memory.upload(bytes(segment))
    # the AQL dispatch packet (kernels that make indirect calls ask for its pointer) and a queue
    # of zeros: gfx9+ code reads nothing it needs from the queue
    packet = struct.pack("<HHHHHHIIIIIQQQQ", 0, len([n for n in grid3 if n > 1]) or 1, *block3, 0,
                         *(g * b for g, b in zip(grid3, block3)), scratch,
                         k.group_segment_size + dynamic_lds, 0, kernarg_addr, 0, 0)
    inputs = {"kernarg_segment_ptr": kernarg_addr, "dispatch_ptr": memory.upload(packet),
              "queue_ptr": memory.alloc(256)}
    program = image.programs.get(family)
    if program is None:
        program = image.programs[family] = Program(k.text, k.text_base, family)
    threads = block3[0] * block3[1] * block3[2]
    nwaves = (threads + k.wave - 1) // k.wave
    groups = [(gx, gy, gz) for gz in range(grid3[2]) for gy in range(grid3[1]) for gx in range(grid3[0])]

    strict = os.environ.get("ZLUDA_EMULATOR_STRICT") == "1"  # memory completes at s_waitcnt (strict.py)
    if strict and family not in ("rdna3", "cdna"):
        raise EmulatorError(f"ZLUDA_EMULATOR_STRICT models the gfx11 and CDNA wait counters, not {arch}'s")

    def start(group: tuple[int, int, int]) -> list[Wave]:
        wg = Workgroup(memory, k.group_segment_size + dynamic_lds)
        waves = [_start_wave(k, program, wg, i, group, block3, threads, arch, inputs, scratch, stack)
                 for i in range(nwaves)]
        for w in waves if strict else ():
            w.pending = []
        return waves

    try:
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are what the pseudocode computes
            if cooperative:
                resident = [start(g) for g in groups]
                for w in (w for waves in resident for w in waves):
                    w.polls = {}
                _run_resident(resident)
            else:
                for g in groups:
                    _run_workgroup(start(g))
    finally:
        for addr in inputs.values():
            memory.remove(addr)


def _start_wave(k: loader.Kernel, program: Program, wg: Workgroup, index: int, group: tuple[int, int, int],
                block: tuple[int, int, int], threads: int, arch: str, inputs: dict[str, int], scratch: int,
                stack: int) -> Wave:
    w = Wave(program, k.wave, wg, index, scratch, stack)
    w.pc = k.entry
    for name, reg in k.user_sgprs:
        if name in inputs:
            w.sgpr[reg], w.sgpr[reg + 1] = inputs[name] & 0xFFFFFFFF, inputs[name] >> 32
        elif name == "private_segment_buffer":  # gfx90a (no architected flat scratch): a scratch V#
            w.sgpr[reg:reg + 4] = SCRATCH_RESOURCE
        elif name == "flat_scratch_init":  # (offset, size): scratch is per lane here, FLAT_SCRATCH unused
            w.sgpr[reg], w.sgpr[reg + 1] = 0, scratch
        elif name == "private_segment_size":
            w.sgpr[reg] = scratch
    sreg = k.user_sgpr_count
    for axis, enabled in enumerate(k.workgroup_id_enabled):
        if enabled:
            w.sgpr[sreg] = group[axis]
            sreg += 1
    if loader.isa_family(arch) == "rdna4":  # architected SGPRs: TTMP9 = workgroup id x, TTMP7 = y | z << 16
        w.sgpr[TTMP0 + 9] = group[0]
        w.sgpr[TTMP0 + 7] = group[1] | group[2] << 16
    if k.rsrc2 & (1 << 10):  # workgroup info
        sreg += 1
    if k.private_segment_enabled:  # the wave's scratch offset: scratch is per lane here, so 0
        w.sgpr[sreg] = 0
    linear = np.arange(index * k.wave, (index + 1) * k.wave)
    live = linear < threads
    x = linear % block[0]
    y = (linear // block[0]) % block[1]
    z = linear // (block[0] * block[1])
    if loader.packed_workitem_ids(arch):
        w.vgpr[0] = (x | y << 10 | z << 20).astype(np.uint32)
    else:
        for i, v in enumerate((x, y, z)[: k.workitem_id_dims]):
            w.vgpr[i] = v.astype(np.uint32)
    mask = sum(1 << i for i in range(k.wave) if live[i])
    w.set_mask(126, mask)
    return w


def _run_workgroup(waves: list[Wave]) -> None:
    steps = 0
    while True:
        live = [w for w in waves if not w.done]
        if not live:
            return
        for w in live:
            while not (w.done or w.at_barrier or w.yielded):
                step(w)
                steps += 1
                if steps > MAX_STEPS:
                    raise EmulatorError(f"workgroup ran more than {MAX_STEPS} instructions; it looks hung at {w.pc:#x}")
            w.yielded = False
        if all(w.done or w.at_barrier for w in waves):
            for w in waves:
                w.at_barrier = False


def _run_resident(workgroups: list[list[Wave]]) -> None:
    """Every workgroup at once: each live wave not held at its workgroup's barrier runs up to
    SLICE instructions in turn, and a workgroup's barrier opens when all its live waves are there."""
    limit = MAX_STEPS * len(workgroups)
    steps = 0
    while True:
        progress = False
        for waves in workgroups:
            for w in waves:
                n = 0
                while n < SLICE and not (w.done or w.at_barrier or w.yielded):
                    step(w)
                    n += 1
                w.yielded = False
                steps += n
                progress = progress or n > 0
            if all(w.done or w.at_barrier for w in waves) and any(w.at_barrier for w in waves):
                for w in waves:
                    w.at_barrier = False
                progress = True
        if all(w.done for waves in workgroups for w in waves):
            return
        if not progress:
            raise EmulatorError("every wave of the cooperative launch waits at a barrier that cannot open")
        if steps > limit:
            w = next(w for waves in workgroups for w in waves if not w.done)
            raise EmulatorError(f"cooperative launch ran more than {limit} instructions; it looks hung at {w.pc:#x}")
