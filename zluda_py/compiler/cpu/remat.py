"""Registers a whole warp recomputes where it resumes after a barrier instead of reloading them.

A tree reduction's `&s[t]` is live across every barrier, and each resume loaded it back from
the warp frame. A register that is *invariant* in the sense of `scalar_lanes.invariant_registers`
(one unguarded definition, a pure integer function of launch constants, symbol addresses,
`%tid` and other such registers) has the same value in a lane whenever that definition has
run, so where it has run on every path to the resume point, its definition (and those of the
invariant registers it reads that are not live there) can run again instead, from the live
registers once they are reloaded or recomputed. Definitions reading `%tid` are not rerun: the
`%tid` set-up at the resume cost more than the reload (docs/cpu_target.md). The barrier still
saves the register when frame_sync says so: the divergent resume paths reload it.
"""

from __future__ import annotations

from typing import Callable

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.affine import written
from zluda_py.compiler.cpu.scalar_lanes import _sources, invariant_registers
from zluda_py.ptx import ast


class Remat:
    """Per function: the definitions a whole warp reruns at a resume point before a block."""

    def __init__(self, body: cfg.FunctionBody, live: set[str], uniform: set[str],
                 uniform_symbol: Callable[[str], bool]) -> None:
        self.body = body
        self.defs: dict[str, tuple[int, int, ast.Instruction]] = {}  # (block, position, instruction)
        for blk in body.blocks:
            for k, inst in enumerate(blk.insts):
                for name in written(inst):
                    self.defs[name] = (blk.index, k, inst)
        no_param = lambda inst: False  # noqa: E731  (a resumable kernel reads its parameters per resume)
        self.invariant = invariant_registers(body.blocks, live - uniform, uniform, no_param, uniform_symbol)
        self.sources = {n: [r for r in _sources(self.defs[n][2], no_param, uniform_symbol) or []
                            if r in self.invariant] for n in self.invariant}
        self._skipping: dict[int, set[int]] = {}

    def program(self, live: set[str], next_block: int) -> tuple[set[str], list[ast.Instruction]]:
        """(the registers of `live` recomputed instead of reloaded, the definitions to rerun, in
        order) at the resume point before `next_block`. Live registers a definition reads are
        reloaded or recomputed first; a definition reading %tid is not rerun (its set-up at the
        resume costs more than the reload)."""
        remat = {n for n in live & self.invariant if self._reruns(n, live, next_block)}
        order: list[ast.Instruction] = []
        seen: set[str] = set()

        def visit(r: str) -> None:  # sources first
            if r not in seen:
                seen.add(r)
                for s in self.sources[r]:
                    if s not in live or s in remat:
                        visit(s)
                order.append(self.defs[r][2])
        for name in sorted(remat):
            visit(name)
        return remat, order

    def _reruns(self, name: str, live: set[str], next_block: int) -> bool:
        """Whether `name` can be recomputed before `next_block`: its definition runs on every path
        there, each invariant register a rerun definition reads is defined on every path to it,
        and no rerun definition reads %tid."""
        if not self._runs_before(name, next_block, 0):
            return False
        todo, seen = [name], {name}
        while todo:
            r = todo.pop()
            if any(n.startswith("%tid") for n in ast.mentioned_names([self.defs[r][2]])):
                return False
            for s in self.sources[r]:
                if not self._runs_before(s, *self.defs[r][:2]):
                    return False
                if s not in live and s not in seen:
                    seen.add(s)
                    todo.append(s)
        return True

    def _runs_before(self, name: str, block: int, position: int) -> bool:
        """Whether every path from the function's start to instruction `position` of `block` runs
        `name`'s one definition (an unguarded instruction: entering its block runs it)."""
        home, k, _ = self.defs[name]
        if home == block:
            return k < position
        if home not in self._skipping:  # blocks reachable without entering `home`
            seen: set[int] = set()
            todo = [0] if home != 0 else []
            while todo:
                i = todo.pop()
                if i not in seen and i != home:
                    seen.add(i)
                    todo += self.body.blocks[i].succs
            self._skipping[home] = seen
        return block not in self._skipping[home]
