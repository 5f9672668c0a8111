"""The instruction forms the CPU target translates itself (memory, atomics, warp collectives,
barriers, control flow) or accepts as no-ops, enumerated from the grammar.

The value semantics forms are swept combination by combination (forms.py, test_sweep.py).
Target forms have too many combinations for that (ld alone has thousands), so the target
sweep (test_target_sweep.py) asks for breadth per modifier value instead: for every grammar
form line, every value of every modifier slot, and the absence of every optional slot, occurs
in at least one instance that runs against a reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from zluda_py.compiler.coverage import cpu_support
from zluda_py.ptx import grammar

ABSENT = "<absent>"  # stands for an optional slot left out


@dataclass(frozen=True)
class TargetForm:
    opcode: str  # grammar opcode name (may be dotted: "cp.async.wait_group")
    form: grammar.Form

    @property
    def syntax(self) -> str:
        return self.form.syntax

    def requirements(self) -> set[tuple[int, str]]:
        """(slot index, value) pairs the sweep must cover, ABSENT for a left-out optional slot."""
        need = set()
        for i, slot in enumerate(self.form.slots):
            need |= {(i, v) for v in slot.values}
            if slot.optional:
                need.add((i, ABSENT))
        return need

    def covered_by(self, mods: tuple[str, ...]) -> set[tuple[int, str]] | None:
        """The requirements `mods` meets, or None when `mods` is not a modifier list of this form
        (it assigns the modifiers to the slots in order, as the grammar writes them)."""
        got: set[tuple[int, str]] = set()
        rest = list(mods)
        for i, slot in enumerate(self.form.slots):
            if rest and rest[0] in slot.values:
                got.add((i, rest.pop(0)))
            elif slot.optional:
                got.add((i, ABSENT))
            else:
                return None
        return None if rest else got


@lru_cache(maxsize=1)
def target_forms() -> tuple[TargetForm, ...]:
    """Every grammar form line for which the CPU target claims at least one combination as its
    own ("target") or as a no-op, per `zluda ptx coverage`."""
    out = []
    for name, op in sorted(grammar.opcodes().items()):
        for form in op.forms:
            combos, _ = grammar.expand(form)
            if any(cpu_support(name, mods) in ("target", "no-op") for mods in combos):
                out.append(TargetForm(name, form))
    return tuple(out)
