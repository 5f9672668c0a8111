"""The Semantic interface, the registry, and modifier parsing shared by every family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes
from zluda_py.compiler.lanes import ptx_bits as width  # noqa: F401  (re-exported for the families)
from zluda_py.ptx import ast

from zluda_py.compiler.errors import UnsupportedError, unsupported

ROUNDING = ("rn", "rz", "rm", "rp", "rna")
# Instruction type modifiers beyond the declarable register types of ast.SCALAR_TYPES: packed
# integer pairs (add.u16x2) and the narrow cvt.pack destinations.
TYPE_NAMES = ast.SCALAR_TYPES | frozenset({"u16x2", "s16x2", "u4", "s4", "u2", "s2"})
INT_ROUNDING = ("rni", "rzi", "rmi", "rpi")
FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"})
INT_TYPES = frozenset({"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"})


@dataclass
class OperandTypes:
    """PTX types the framework reads (src) and writes (dst), in PTX operand order.

    A `PredOut` destination `d|p` appears as two entries. The pseudo-type "cc" is the carry flag.
    """

    dst: list[str]
    src: list[str]


@dataclass
class Form:
    """An instruction's modifiers sorted into the groups semantics care about."""

    inst: ast.Instruction
    types: tuple[str, ...]
    flags: frozenset[str]

    @property
    def type(self) -> str:
        return self.types[-1]

    def rounding(self, default: str | None = None) -> str | None:
        found = [m for m in self.inst.mods if m in ROUNDING or m in INT_ROUNDING]
        return found[0] if found else default

    def has(self, *mods: str) -> bool:
        return any(m in self.flags for m in mods)


def types_of(inst: ast.Instruction) -> tuple[str, ...]:
    """The type modifiers in source order (`inst.types`, plus the packed integer and cvt.pack ones)."""
    return tuple(m for m in inst.mods if m in TYPE_NAMES)


def form(inst: ast.Instruction, allowed: set[str] | frozenset[str], ntypes: int = 1,
         type_ok: Callable[[str], bool] | None = None) -> Form:
    """Parse and validate modifiers: every non-type modifier must be in `allowed`."""
    types = types_of(inst)
    if len(types) != ntypes:
        raise unsupported(inst, f"expected {ntypes} type modifier(s)")
    if type_ok is not None and not all(type_ok(t) for t in types):
        raise unsupported(inst, "operand type")
    flags = frozenset(m for m in inst.mods if m not in TYPE_NAMES)
    bad = sorted(flags - set(allowed))
    if bad:
        raise unsupported(inst, "modifier ." + " .".join(bad))
    if len(flags) != len([m for m in inst.mods if m not in TYPE_NAMES]):
        raise unsupported(inst, "repeated modifier")
    return Form(inst, types, flags)


def is_float(t: str) -> bool:
    return t in FLOAT_TYPES


def is_int(t: str) -> bool:
    return t in INT_TYPES


def signed(t: str) -> bool:
    return t[0] == "s"


def has_pred_out(inst: ast.Instruction) -> bool:
    return bool(inst.operands) and isinstance(inst.operands[0], ast.PredOut)


class Semantic:
    """One PTX opcode (or family of opcodes): operand typing and the pure computation."""

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        raise NotImplementedError

    def emit(self, lanes: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        raise NotImplementedError


@dataclass
class ByType(Semantic):
    """An opcode shared by families (add is integer or float): pick by the last type modifier."""

    integer: Semantic | None = None
    floating: Semantic | None = None
    carry: Semantic | None = None  # the .cc forms: add.cc sub.cc mad.cc

    def pick(self, inst: ast.Instruction) -> Semantic:
        types = types_of(inst)
        t = types[-1] if types else ""
        if inst.has("cc") and self.carry is not None:
            return self.carry
        impl = self.floating if is_float(t) else self.integer if (is_int(t) or t in ("pred", "u16x2", "s16x2")) else None
        if impl is None:
            raise unsupported(inst, "operand type")
        return impl

    def operands(self, inst: ast.Instruction) -> OperandTypes:
        return self.pick(inst).operands(inst)

    def emit(self, lanes: Lanes, inst: ast.Instruction, srcs: list[ir.Value]) -> list[ir.Value]:
        return self.pick(inst).emit(lanes, inst, srcs)


SEMANTICS: dict[str, Semantic] = {}


def register(kind: str, *opcodes: str) -> Callable[[type], type]:
    """Class decorator: register one instance for `opcodes`.

    kind "any" owns the opcode outright; "integer", "float" and "carry" share it through ByType.
    """

    def deco(cls: type) -> type:
        impl = cls()
        for op in opcodes:
            if kind == "any":
                SEMANTICS[op] = impl
                continue
            slot = SEMANTICS.setdefault(op, ByType())
            assert isinstance(slot, ByType)
            setattr(slot, {"integer": "integer", "float": "floating", "carry": "carry"}[kind], impl)
        return cls

    return deco
