"""Typed AST for PTX modules.

This module is the contract between the front end (parser, printer, checks) and every
later stage (compiler, cache, driver). Later stages read it; only the front end builds it.

Conventions
* Source positions (`pos`) are excluded from equality, so `parse(format(m)) == m` holds.
* Names keep their PTX spelling (`%r1`, `%tid.x` is a special register with a component,
  `my_var`, `$L__BB0_2`). An operand is a `Reg` when its name starts with `%` or when it
  resolves to a `.reg` declaration in scope (`.reg .b32 r1;` declares a register without
  `%`, e.g. in inline asm: `{ .reg .pred p; ... @p add.s32 r0, r0, 1; }`); every other name
  (variables, parameters, labels, functions) is a `Sym`. The rule follows scopes: inside a
  block declaring `.reg .b32 x`, `x` is a Reg even where a module variable `x` exists.
* Instruction modifiers are kept as written, without dots and in source order
  (`ld.global.v4.f32` -> opcode "ld", mods ("global", "v4", "f32")). The grammar in
  ptx_grammar/ says which modifier belongs to which group; `Instruction.types` gives the
  type modifiers in order (cvt.rn.f32.s32 -> ("f32", "s32")).
* Opcodes that the PTX manual names with several words keep them (`cp.async.bulk`,
  `mbarrier.arrive`, `wgmma.mma_async`): the opcode is the longest instruction name in
  ptx_grammar/ that the dotted text starts with, the rest are mods.

Compatible extensions made by the front end (issue 2):
* `Addr.extra` (default empty): operands after the first inside brackets (`[tex, {x, y}]`).
* `Pos` is a plain class (was a frozen dataclass) so that the parser can hand out lazy
  positions cheaply; construction, attributes, equality, hashing and str() are unchanged.
* Operand nodes are read-only once parsed: the parser shares one `Reg`, `Imm`, `Sink` or
  `Addr(Reg, offset)` node between all the operands of a module written the same way
  (`a.operands[1] is b.operands[2]` may hold); shared nodes have `pos` NOPOS (the
  instruction's `pos` locates them). Build a new node instead of assigning to one.
* `Function.facts` (issue 14): what the checker's walk of a body found for the compiler
  (facts.py: why the module stays whole, an absent txq query); excluded from equality and repr.
* `Instruction` and `Label` have `__slots__` (issue 14): no attributes beyond their fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .facts import BodyFacts

# Every PTX fundamental type, plus the packed and narrow float forms.
SCALAR_TYPES: frozenset[str] = frozenset(
    """b8 b16 b32 b64 b128 u8 u16 u32 u64 s8 s16 s32 s64 f16 f16x2 bf16 bf16x2 f32 f64
    pred tf32 e4m3 e5m2 e4m3x2 e5m2x2 e2m3x2 e3m2x2 e2m1x2 ue8m0x2 s2f6x2 u4x8 s4x8 s2x16 u16x2 s16x2 u4 s4 u2 s2""".split()
)


class Pos:
    """1-based line and column of the first character of a construct in `file`.

    Treat it as immutable. Two positions are equal when file, line and col are. The parser
    does not build these eagerly: it makes `source.SourcePos` values (a subclass holding only
    the character offset) whose file, line and col are computed when first read.
    """

    def __init__(self, file: str, line: int, col: int) -> None:
        self.file = file
        self.line = line
        self.col = col

    def _key(self) -> tuple[str, int, int]:
        return (self.file, self.line, self.col)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pos) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Pos({self.file!r}, {self.line}, {self.col})"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def __reduce__(self):
        # Pickling (and copy) materialises a lazy position into a plain one.
        return (Pos, self._key())


NOPOS = Pos("<none>", 0, 0)


# --------------------------------------------------------------------------- operands


@dataclass
class Reg:
    """A register or special register: `%r1`, `%tid.x`, `%laneid`."""

    name: str
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Sym:
    """A named variable, function or label used as an operand (`bra $L__BB0_1`, `mov.u64 %rd, arr`)."""

    name: str
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Imm:
    """An immediate.

    kind "int":   value is a Python int (any sign, unbounded; the instruction type decides width).
    kind "f32":   value is the raw 32-bit pattern of a `0fXXXXXXXX` literal.
    kind "f64":   value is the raw 64-bit pattern of a `0dXXXXXXXXXXXXXXXX` literal.
    kind "float": value is the Python float of a decimal float literal (`1.5`, `1e-3`).
    """

    value: int | float
    kind: str = "int"
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Vec:
    """A vector operand `{%f1, %f2, _, %f4}`."""

    elems: list[Operand]
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Addr:
    """A memory address `[base+offset]`; base is a register, a symbol, or None for `[imm]`.

    extra: the operands after the first inside the brackets of texture, surface and tensor
    addresses: `[tex, {%f1, %f2}]` -> base Sym("tex"), extra [Vec]; `[tex, smp, {...}]`.
    """

    base: Reg | Sym | None
    offset: int = 0
    pos: Pos = field(default=NOPOS, compare=False)
    extra: list[Operand] = field(default_factory=list)


@dataclass
class Sink:
    """The sink `_`: the result is discarded."""

    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Not:
    """A negated predicate source `!%p1`."""

    operand: Reg
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class PredOut:
    """A destination with an optional predicate output `%r1|%p1` (setp, shfl.sync, ...)."""

    dest: Reg | Sink
    pred: Reg | Sink
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class ArgList:
    """A parenthesised argument list of `call`: `(%r1, param0)` or `()`."""

    args: list[Operand]
    pos: Pos = field(default=NOPOS, compare=False)


Operand = Union[Reg, Sym, Imm, Vec, Addr, Sink, Not, PredOut, ArgList]


def renamed(op: Operand, names: "dict[str, str]") -> Operand:
    """`op` with the registers and symbols named in `names` renamed, at any depth (scope
    flattening and inlining give declarations new names)."""
    if isinstance(op, Reg):
        return Reg(names[op.name], op.pos) if op.name in names else op
    if isinstance(op, Sym):
        return Sym(names[op.name], op.pos) if op.name in names else op
    if isinstance(op, Addr):
        base = renamed(op.base, names) if op.base is not None else None
        return Addr(base, op.offset, op.pos, [renamed(e, names) for e in op.extra])  # type: ignore[arg-type]
    if isinstance(op, Vec):
        return Vec([renamed(e, names) for e in op.elems], op.pos)
    if isinstance(op, Not):
        return Not(renamed(op.operand, names), op.pos)  # type: ignore[arg-type]
    if isinstance(op, PredOut):
        return PredOut(renamed(op.dest, names), renamed(op.pred, names), op.pos)  # type: ignore[arg-type]
    if isinstance(op, ArgList):
        return ArgList([renamed(a, names) for a in op.args], op.pos)
    return op


def mentioned_names(body: "list[Statement]") -> set[str]:
    """Every register and symbol name an instruction of `body` (at any depth) refers to."""
    names: set[str] = set()
    todo: list = list(body)
    while todo:
        s = todo.pop()
        if isinstance(s, Block):
            todo += s.body
        elif isinstance(s, Instruction):
            if s.guard is not None:
                names.add(s.guard.reg)
            todo += s.operands
        elif isinstance(s, (Reg, Sym)):
            names.add(s.name)
        elif isinstance(s, Addr):
            todo += [s.base, *s.extra] if s.base is not None else s.extra
        elif isinstance(s, Vec):
            todo += s.elems
        elif isinstance(s, Not):
            todo.append(s.operand)
        elif isinstance(s, PredOut):
            todo += [s.dest, s.pred]
        elif isinstance(s, ArgList):
            todo += s.args
    return names


def declared_names(var: "Variable", among: set[str]) -> list[str]:
    """The name of a plain declaration; of a parameterized one (`%r<N>`), the names in
    `among`, in index order. Passes ask only for the names the code mentions: such a
    declaration may declare millions that nothing uses."""
    if var.count is None:
        return [var.name]
    found = []
    for name in among:
        digits = name[len(var.name):]
        if name.startswith(var.name) and digits.isdecimal() and str(int(digits)) == digits and int(digits) < var.count:
            found.append((int(digits), name))
    return [name for _, name in sorted(found)]


# --------------------------------------------------------------------------- statements


@dataclass
class Guard:
    """Guard predicate `@%p` or `@!%p`."""

    reg: str
    negated: bool = False


@dataclass(slots=True)
class Instruction:
    opcode: str
    mods: tuple[str, ...] = ()
    operands: list[Operand] = field(default_factory=list)
    guard: Guard | None = None
    pos: Pos = field(default=NOPOS, compare=False)

    @property
    def types(self) -> tuple[str, ...]:
        """The type modifiers in source order, e.g. cvt.rn.f32.s32 -> ("f32", "s32")."""
        return tuple(m for m in self.mods if m in SCALAR_TYPES)

    def has(self, mod: str) -> bool:
        return mod in self.mods


@dataclass(slots=True)
class Label:
    name: str
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Initializer:
    """A variable initializer: a scalar expression, or nested braces of them.

    items is None for a scalar; then `value` is an Imm, a Sym (address of a variable or
    function), or a call-like wrapper `generic(sym)` / `mask(sym)` kept in `wrapper`, with
    `offset` for `sym+4`.
    """

    value: Imm | Sym | None = None
    wrapper: str | None = None
    offset: int = 0
    items: list[Initializer] | None = None
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class PtrAttr:
    """`.ptr.space.align N` on an .entry parameter."""

    space: str | None = None
    align: int | None = None


@dataclass
class Variable:
    """A variable or register declaration in any state space.

    space: reg, sreg, const, global, local, param, shared, tex (and `.pred` registers are
    space "reg" with type "pred").
    count: for `.reg .b32 %r<100>` the number of registers; the names are name+0..count-1.
    array: array dimensions, None for an unsized `[]`.
    vector: 2, 4 or 8 for `.v2/.v4/.v8` variables, else None.
    linkage: visible, extern, weak, common, or None.
    managed: `.attribute(.managed)`, a .global variable in managed (unified) memory.
    """

    name: str
    space: str
    type: str
    array: tuple[int | None, ...] = ()
    align: int | None = None
    vector: int | None = None
    count: int | None = None
    linkage: str | None = None
    init: Initializer | None = None
    ptr: PtrAttr | None = None
    managed: bool = False
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Directive:
    """Any other directive: `.pragma "nounroll"`, `.loc 1 22 5`, `.maxntid 256, 1, 1`, `.file 1 "a.cu"`,
    `.section .debug_info { ... }` (raw text kept in args), `.alias`, `.callprototype` labels, ...

    args holds the arguments as parsed values (ints, strings, names).
    """

    name: str
    args: list = field(default_factory=list)
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Block:
    """A nested `{ ... }` scope inside a function body."""

    body: list[Statement] = field(default_factory=list)
    pos: Pos = field(default=NOPOS, compare=False)


Statement = Union[Instruction, Label, Variable, Directive, Block]


# --------------------------------------------------------------------------- top level


class UnbuiltBody(list):
    """The body of a function checked by fastcheck.py: a definition (not None) whose
    statements were never built. Reading it is an error: the compiler must parse the function
    again (cache/part_source.py does), never see it as empty."""

    __slots__ = ("pending", "names")

    def __init__(self, pending: list[tuple[str, str | None]], names: set[str]) -> None:
        super().__init__()
        self.pending = pending  # (name, space an access wants or None): names no block declares
        self.names = names  # every non-register name the body mentions

    def _unbuilt(self, *_):
        raise RuntimeError("this function body was checked but not built: parse its text again")

    __iter__ = __len__ = __bool__ = __getitem__ = _unbuilt


@dataclass
class Function:
    """An .entry (kernel) or .func, with its parameters and body.

    params: .entry parameters are space "param"; .func parameters are "param" or "reg".
    returns: .func return parameters.
    body: None for a declaration without a body (prototype / .extern); an UnbuiltBody for a
    body a module load checked without building it.
    directives: performance tuning directives (.maxntid, .reqntid, .minnctapersm, ...),
    .noreturn, .pragma, in source order.
    """

    name: str
    kind: str  # "entry" or "func"
    linkage: str | None = None
    params: list[Variable] = field(default_factory=list)
    returns: list[Variable] = field(default_factory=list)
    body: list[Statement] | None = None
    directives: list[Directive] = field(default_factory=list)
    pos: Pos = field(default=NOPOS, compare=False)
    # what the checker's walk of the body found for the compiler (facts.py); None if not checked
    facts: BodyFacts | None = field(default=None, compare=False, repr=False)


@dataclass
class Module:
    version: tuple[int, int]
    target: tuple[str, ...]
    address_size: int = 64
    items: list[Function | Variable | Directive] = field(default_factory=list)
    filename: str = field(default="<ptx>", compare=False)

    def functions(self) -> list[Function]:
        return [i for i in self.items if isinstance(i, Function)]

    def kernels(self) -> list[Function]:
        return [f for f in self.functions() if f.kind == "entry" and f.body is not None]

    def variables(self) -> list[Variable]:
        return [i for i in self.items if isinstance(i, Variable)]
