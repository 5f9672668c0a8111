"""The instruction forms the semantics support, enumerated from the PTX grammar.

A form is an opcode plus its modifiers, normalized the way the CPU framework looks semantics
up (a dotted grammar opcode whose head is a semantics entry, `cvt.pack`, becomes that entry
with the rest as modifiers). Modifiers other than types are order-free, as ptxas reads them;
type modifiers keep their order, which matters: `cvt.u32.s8` is not `cvt.s8.u32`.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from zluda_py.compiler.semantics import SEMANTICS, supports
from zluda_py.compiler.semantics.base import TYPE_NAMES
from zluda_py.ptx import grammar

Form = tuple[str, frozenset[str], tuple[str, ...]]


def key(opcode: str, mods: "tuple[str, ...] | list[str]") -> Form:
    """(opcode, the other modifiers as a set, the type modifiers in order)."""
    return opcode, frozenset(m for m in mods if m not in TYPE_NAMES), tuple(m for m in mods if m in TYPE_NAMES)


def canonical(text: str) -> Form:
    """`cvt.pack.sat.u8.s32.b32` -> ("cvt", {"pack", "sat"}, ("u8", "s32", "b32"))."""
    opcode, *mods = text.split(".")
    return key(opcode, mods)


def _expand(form: grammar.Form) -> set[tuple[str, ...]]:
    choices = [sorted(s.values) + ([None] if s.optional else []) for s in form.slots]
    return {tuple(m for m in combo if m is not None) for combo in itertools.product(*choices)}


@lru_cache(maxsize=1)
def supported_forms() -> dict[Form, tuple[str, ...]]:
    """Every grammar form (per modifier set) that `semantics.supports` accepts, with its
    modifiers in grammar order (type order matters: cvt.dtype.atype)."""
    out: dict[Form, tuple[str, ...]] = {}
    for name, op in grammar.opcodes().items():
        head, *rest = name.split(".")
        name_key, extra = (name, ()) if name in SEMANTICS else (head, tuple(rest))
        if name_key not in SEMANTICS:
            continue
        for f in op.forms:
            for mods in _expand(f):
                if supports(name_key, extra + mods):
                    out.setdefault(key(name_key, extra + mods), extra + mods)
    return out
