"""Checks after parsing: names, labels, duplicates, modifiers, operand types, state spaces,
and version/target gating. Every problem becomes a PtxError at the construct's position."""

from __future__ import annotations

import re
from functools import lru_cache

from . import access_forms, compare_forms, cvt_forms, grammar
from .ast import (
    SCALAR_TYPES, Addr, ArgList, Block, Directive, Function, Imm, Instruction, Label, Module, Not,
    PredOut, Reg, Sink, Sym, UnbuiltBody, Variable, Vec,
)
from .errors import CUDA_ERROR_NOT_SUPPORTED, PtxError
from .facts import (
    NVIDIA_ABSENT_TXQ, BodyFacts, absent_query, names_a_function, taken_function, taken_reason, variable_reason,
)
from .source import Source

# Special registers (without `%`); vector ones take .x/.y/.z (and .w for some).
_SREG_VECTOR = frozenset(
    "tid ntid ctaid nctaid clusterid nclusterid cluster_ctaid cluster_nctaid".split())
_SREG_SCALAR = frozenset(
    """laneid warpid nwarpid smid nsmid gridid lanemask_eq lanemask_le lanemask_lt lanemask_ge
    lanemask_gt clock clock_hi clock64 globaltimer globaltimer_lo globaltimer_hi
    total_smem_size aggr_smem_size dynamic_smem_size is_explicit_cluster cluster_ctarank
    cluster_nctarank reserved_smem_offset_begin reserved_smem_offset_end reserved_smem_offset_cap
    current_graph_exec""".split())
_SREG_INDEXED = re.compile(r"%(?:pm[0-7](?:_64)?|envreg(?:[12]?\d|3[01])|reserved_smem_offset_[0-9]+)")

_SIZE = {"pred": 0, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16,
         "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
         "tf32": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128,
         # packed narrow floats live in bit-size registers (.b16 for fp8x2, .b8 for fp4x2)
         "e4m3x2": 16, "e5m2x2": 16, "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16, "e2m1x2": 8,
         # packed integers (add.u16x2 ...) and cvt.pack's narrow destinations
         "u16x2": 32, "s16x2": 32, "u4": 4, "s4": 4, "u2": 2, "s2": 2}
_FLOAT = frozenset("f16 bf16 f32 f64 f16x2 bf16x2 tf32 e4m3x2 e5m2x2 e2m3x2 e3m2x2 ue8m0x2 e2m1x2".split())
_BIT_TYPE = re.compile(r"b\d+")

# Which operands carry the instruction type, per opcode: "T" the (first) type, "2T" twice its
# width (.wide), "D"/"A" cvt's destination/source types, "p" a predicate, "u32", "W" an ld/st
# register (or each of a vector's) of a type `held` takes, "C" cas's third operand (else an
# unchecked cache policy), "*" unchecked.
_SAME3 = ("T", "T", "T")
_ROLES: dict[str, tuple[str, ...]] = {
    "add": _SAME3, "sub": _SAME3, "min": _SAME3, "max": _SAME3, "and": _SAME3, "or": _SAME3,
    "xor": _SAME3, "div": _SAME3, "rem": _SAME3, "copysign": _SAME3,
    "mul": _SAME3, "mad": ("T", "T", "T", "T"), "fma": ("T", "T", "T", "T"),
    "not": ("T", "T"), "cnot": ("T", "T"), "neg": ("T", "T"), "abs": ("T", "T"),
    "rcp": ("T", "T"), "sqrt": ("T", "T"), "rsqrt": ("T", "T"), "sin": ("T", "T"),
    "cos": ("T", "T"), "lg2": ("T", "T"), "ex2": ("T", "T"), "mov": ("T", "T"),
    "shl": ("T", "T", "u32"), "shr": ("T", "T", "u32"),
    "setp": ("p", "T", "T", "p"), "selp": ("T", "T", "T", "p"),
    "cvt": ("D", "A"), "popc": ("u32", "T"), "clz": ("u32", "T"), "brev": ("T", "T"),
    "bfe": ("T", "T", "u32", "u32"), "bfi": ("T", "T", "T", "u32", "u32"),
    "ld": ("W", "*"), "ldu": ("W", "*"), "st": ("*", "W"),
    "atom": ("T", "*", "T", "C"), "red": ("*", "T"),
    "set": ("D", "A", "A", "p"), "testp": ("p", "T"), "sad": ("T", "T", "T", "T"), "mul24": _SAME3,
    "mad24": ("T", "T", "T", "T"), "prmt": ("T", "T", "T", "T"), "shfl": ("T", "T"), "cvta": ("T", "T"),
}
# Instructions whose register may be wider than the instruction type (PTX's relaxed rule).
_RELAXED = frozenset(("ld", "st", "cvt", "ldu"))


# suq queries with which NVIDIA's driver refuses the whole module with CUDA_ERROR_NOT_SUPPORTED,
# JIT and ptxas cubin alike, though the PTX manual lists them (an H100, driver 580.159.04:
# tests/hardware/golden/ptx_forms_probe.txt); txq's same fields load (below). Refused the same way here.
NVIDIA_REFUSED_SUQ = frozenset({"channel_order", "channel_data_type", "memory_layout", "array_size"})
# txq's queries that load but build no kernel: NVIDIA_ABSENT_TXQ (facts.py).


def _sm_number(target: tuple[str, ...]) -> int | None:
    for t in target:
        m = re.fullmatch(r"sm_(\d+)[a-z]?", t)
        if m:
            return int(m.group(1))
    return None


def compatible(reg_type: str, insn_type: str, relaxed: bool = False) -> bool:
    """PTX operand type rules as ptxas 13.0 applies them: equal types; bit-size types match any
    type of their size; signed and unsigned integers of one size match, and an .f16x2 register
    holds bits an integer instruction takes (`add.u32` of one); a cvt's (`relaxed`) register may be
    wider: a bit-size one for any type, an integer one for an integer type."""
    if reg_type == insn_type:
        return True
    rs, ts = _SIZE.get(reg_type), _SIZE.get(insn_type)
    if rs is None or ts is None or (rs == 0) != (ts == 0):
        return False
    integer_reg = reg_type not in _FLOAT or reg_type == "f16x2"
    bits = _BIT_TYPE.fullmatch(reg_type)
    if relaxed and rs > ts and (bits and insn_type[0] == "f" or integer_reg and insn_type not in _FLOAT):
        return True
    if rs != ts:
        return False
    if bits or _BIT_TYPE.fullmatch(insn_type):
        return True
    return integer_reg and insn_type not in _FLOAT


# Parameterized declarations (`.reg .b32 %r<N>`) up to this many names are entered name by
# name; larger ones are kept as ranges and resolved on lookup (_Scope), so a tiny module that
# declares ten million registers costs nothing.
EXPANDED_RANGE = 4096
# the largest `.align`: page alignment is the most real code asks for; far more costs memory to place
MAX_ALIGN = 1 << 16
MAX_KERNEL_PARAMS = 32764  # bytes: NVIDIA's limit since CUDA 12.1 (ptxas refuses more)
# ptxas 13.0's limits, which NVIDIA's driver applies at load (golden/hostile_nvidia.txt, H100):
MAX_CONST_BYTES = 1 << 16  # a module's .const variables together ("too much global constant data")
MAX_COUNT = (1 << 32) - 1  # a `.reg %r<N>` count and each .maxntid/.reqntid size ("constant overflow")
_BITS = re.compile(r"\d+")  # of a type name: u32, b128, f16x2 (an element's size, low by at most 2)


class _Scope(dict):
    """A block's names: a dict, plus the parameterized declarations kept as ranges."""

    __slots__ = ("ranges",)

    def __init__(self, names: dict) -> None:
        super().__init__(names)
        self.ranges: list[Variable] = []

    def add_range(self, var: Variable) -> None:
        self.ranges.append(var)

    def get(self, name: str, default=None):  # type: ignore[override]
        hit = dict.get(self, name)
        if hit is not None or not self.ranges:
            return hit if hit is not None else default
        for var in self.ranges:
            digits = name[len(var.name):]
            if (name.startswith(var.name) and digits.isdecimal() and str(int(digits)) == digits
                    and int(digits) < var.count):
                return var
        return default


class _Mods:
    """Modifier validation against the grammar's forms, cached per (opcode, mods)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, tuple[str, ...]], tuple[list, str | None]] = {}

    def forms(self, opcode: str, mods: tuple[str, ...]) -> tuple[list, str | None]:
        key = (opcode, mods)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._match(opcode, mods)
        return hit

    @staticmethod
    def _fits(form: grammar.Form, mods: tuple[str, ...]) -> bool:
        return _Mods._missing(form, mods) == []

    @staticmethod
    def _missing(form: grammar.Form, mods: tuple[str, ...]) -> list[grammar.Slot] | None:
        """The required slots `mods` leave empty (None: a modifier fits no free slot)."""
        used = [False] * len(form.slots)
        last = -1
        for m in mods:
            found = -1
            # In source order first; ptxas also takes modifiers out of order, so fall back
            # to any free slot that accepts the modifier.
            for rng in (range(last + 1, len(form.slots)), range(0, last + 1)):
                for k in rng:
                    if not used[k] and m in form.slots[k].values:
                        found = k
                        break
                if found >= 0:
                    break
            if found < 0:
                return None
            used[found] = True
            last = found
        return [s for k, s in enumerate(form.slots) if not (used[k] or s.optional)]

    def _match(self, opcode: str, mods: tuple[str, ...]) -> tuple[list, str | None]:
        op = grammar.opcodes()[opcode]
        forms = [f for f in op.forms if self._fits(f, mods)]
        if forms:
            return forms, None
        known = set().union(*(s.values for f in op.forms for s in f.slots)) if op.forms else set()
        bad = [m for m in mods if m not in known]
        if bad:
            return [], f"unknown modifier .{bad[0]} for '{opcode}'"
        written = opcode + "".join("." + m for m in mods)
        # a form this one lacks a modifier of: say which (`div.f32` needs .approx, .full or a rounding)
        lacking = sorted({" ".join("." + v for v in sorted(missing[0].values))
                          for f in op.forms if (missing := self._missing(f, mods)) and len(missing) == 1})
        if lacking:
            return [], f"'{written}' needs one of: {'; '.join(lacking)}"
        return [], f"'{written}' matches no form of '{opcode}'; expected e.g. {op.forms[0].syntax}"


_MODS = _Mods()


def constant_fits(kind: str, want: str) -> bool:
    """Whether ptxas takes a constant of `kind` (ast.Imm.kind) for an operand of type `want`:
    integers for integer and bit-size operands; floating-point constants for f32/f64 operands,
    and for a .b32 (a 0f literal) or .b64 (a decimal or 0d literal, both f64) operand; no
    constant for the narrow floats (f16, bf16, packed). tests/ptx/test_constant_operands.py."""
    if want in ("f32", "f64"):
        return kind != "int"
    if want in _FLOAT:
        return False
    if kind == "int" or want[0] != "b":
        return kind == "int"
    return _SIZE[want] == (32 if kind == "f32" else 64)


_SCALAR_FLOATS = frozenset(("f16", "bf16", "f32", "f64"))


@lru_cache(maxsize=128)
def held(want: str, vector: bool) -> frozenset[str]:
    """The register types an ld/st of type `want` reads or writes (role "W"), as ptxas 13.0 takes
    them: at least as wide as the access; for a bit-size access any of those; for an integer
    access none of a scalar float type (an .f16x2 register is bits here); for a float access a
    bit-size register, its own type and, in a vector, an integer of its size
    (tests/ptx/test_ptxas_forms.py sweeps every pairing)."""
    size = max(_SIZE.get(want, 0), 1)

    def takes(t: str) -> bool:
        if _SIZE.get(t, 0) < size:
            return False
        if want[0] == "f":
            return _BIT_TYPE.fullmatch(t) or t == want or (vector and t[0] in "su" and _SIZE[t] == size)
        return want[0] not in "su" or t not in _SCALAR_FLOATS

    return frozenset(t for t in SCALAR_TYPES if takes(t))


def joint_type(a: str | None, b: str) -> str | None:
    """The type vector registers of types `a` (None: none yet) and `b` combine into, or None."""
    if a is None or a == b:
        return b
    if _SIZE.get(a) != _SIZE.get(b) or not _SIZE.get(a):
        return None
    if a[0] + b[0] in ("su", "us") or _BIT_TYPE.fullmatch(a) or _BIT_TYPE.fullmatch(b):
        return f"b{_SIZE[a]}"
    return None


def _register_types(insn: Instruction, role: str | None, want: str) -> frozenset[str]:
    """The register types an operand of `insn` with `role` and type `want` accepts: `held` for an
    ld/st register; else `compatible`, wider registers for ld/st/cvt (PTX's relaxed rule) except
    in a cvt with a bf16 side, where ptxas takes none (`cvt.rn.bf16.f32 %rs1, %rd1`)."""
    if role == "W":
        return held(want, False)
    relaxed = insn.opcode in _RELAXED and not (insn.opcode == "cvt" and "bf16" in insn.types)
    return _accepted(want, relaxed)


@lru_cache(maxsize=256)
def _accepted(want: str, relaxed: bool) -> frozenset[str]:
    """The register types an operand of type `want` accepts (see compatible())."""
    return frozenset([want, *(t for t in SCALAR_TYPES if compatible(t, want, relaxed))])


@lru_cache(maxsize=4096)
def _special(name: str) -> bool:
    """A special register (`%tid.x`, `%laneid`, `%envreg3`): known without a declaration."""
    base, _, comp = name[1:].partition(".")
    if base in _SREG_VECTOR:
        return comp in ("x", "y", "z", "w", "")
    return (base in _SREG_SCALAR and not comp) or _SREG_INDEXED.fullmatch(name) is not None


class Checker:
    def __init__(self, module: Module, src: Source) -> None:
        self.m = module
        self.src = src
        self.errors: list[PtxError] = []
        self.sm = _sm_number(module.target)
        self.globals: dict[str, object] = {}
        # (opcode, mods, operand count) -> plan(): most modules repeat a few forms.
        self.plans: dict[tuple, tuple[str, tuple, tuple]] = {}
        # directive name -> gating message ("" when allowed); `.loc` lines are many
        self.directive_gates: dict[str, str] = {}
        self.labels: dict[str, object] = {}
        self.pending: list[tuple] = []
        # for Function.facts (facts.py): the module's function names; the current function's
        # name, first reason to stay whole and whether it makes an absent query
        self.functions = frozenset(i.name for i in module.items if isinstance(i, Function))
        self.fn_name = ""
        self.whole: str | None = None
        self.absent = False
        # a body checked without its AST (fastcheck.py) names what only the full check settles
        self.unsure = False
        self.percent_function = any(n[:1] == "%" for n in self.functions)  # named like a register

    def error(self, pos, message: str) -> None:
        self.errors.append(self.src.error_at(pos, message))

    def run(self) -> list[PtxError]:
        self.const_bytes()
        for item in self.m.items:
            if isinstance(item, (Function, Variable)):
                self.declare(self.globals, item.name, item, item.pos)
            if isinstance(item, Variable) and item.space in ("param", "reg"):
                self.error(item.pos, f".{item.space} variables cannot be declared at module scope")
            if isinstance(item, Variable):
                self.layout(item)
            if isinstance(item, Directive):
                self.gate_directive(item)
        for item in self.m.items:
            if isinstance(item, Function):
                self.function(item)
        return self.errors

    def const_bytes(self) -> None:
        """The module's .const variables fit the 64 KiB constant bank (said at the first past it)."""
        total = 0
        for v in self.m.items:
            if isinstance(v, Variable) and v.space == "const":
                total += _size(v)
                if total > MAX_CONST_BYTES:
                    self.error(v.pos, f"the module's .const variables take {total} bytes up to '{v.name}', "
                                      f"more than {MAX_CONST_BYTES}")
                    return

    def layout(self, v: Variable) -> None:
        for message in self.layout_problems(v):
            self.error(v.pos, message)

    @staticmethod
    def layout_problems(v: Variable) -> list[str]:
        """`.align` is a power of two (LLVM refuses the IR otherwise), and a huge one would make
        the loader allocate that much to place the variable; the size fits 64 bits."""
        problems = []
        if v.align is not None and (v.align & (v.align - 1) or not 0 < v.align <= MAX_ALIGN):
            problems.append(f".align {v.align}: must be a power of two, at most {MAX_ALIGN}")
        size = _size(v)
        if size >> 64:
            problems.append(f"'{v.name}' is {size} bytes: more than a 64-bit address space holds")
        return problems

    def declare(self, scope: dict, name: str, what, pos) -> None:
        prev = scope.get(name)
        if prev is not None and not self._redeclaration_ok(prev, what):
            self.error(pos, f"duplicate declaration of '{name}'")
        scope[name] = what

    @staticmethod
    def _redeclaration_ok(prev, new) -> bool:
        # A function may be declared (prototype/.extern) and defined once.
        return (isinstance(prev, Function) and isinstance(new, Function)
                and (prev.body is None or new.body is None)) or (
            isinstance(prev, Variable) and isinstance(new, Variable)
            and "extern" in (prev.linkage, new.linkage))

    def gate_directive(self, d: Directive) -> None:
        message = self.gate_of(d.name)
        if message:
            self.error(d.pos, message)

    def gate_of(self, name: str) -> str:
        """Why this module may not use directive `.name` ("" when it may)."""
        message = self.directive_gates.get(name)
        if message is None:
            spec = grammar.load().directives.get(name)
            message = "" if spec is None else self.gate_message("." + name, spec.ptx, spec.sm)
            self.directive_gates[name] = message
        return message

    def gate_message(self, what: str, ptx: tuple[int, int], sm: int) -> str:
        if tuple(self.m.version) < ptx:
            return (f"{what} requires PTX ISA {ptx[0]}.{ptx[1]} or later "
                    f"(module has .version {self.m.version[0]}.{self.m.version[1]})")
        if self.sm is not None and sm and self.sm < sm:
            return f"{what} requires sm_{sm} or later (module targets sm_{self.sm})"
        return ""

    # ------------------------------------------------------------------ functions

    def function(self, fn: Function) -> None:
        for d in fn.directives:
            self.gate_directive(d)
            if d.name in ("maxntid", "reqntid") and any(not (isinstance(a, int) and 0 < a <= MAX_COUNT) for a in d.args):
                self.error(d.pos, f".{d.name} {', '.join(map(str, d.args))}: each size must be from 1 to {MAX_COUNT}")
        if fn.body is None:
            return
        if fn.kind == "entry" and (size := sum(map(_size, fn.params))) > MAX_KERNEL_PARAMS:
            self.error(fn.pos, f"kernel '{fn.name}' takes {size} bytes of parameters, more than {MAX_KERNEL_PARAMS}")
        scope: dict[str, object] = {}
        for p in fn.returns + fn.params:
            self.declare(scope, p.name, p, p.pos)
            self.layout(p)
        if type(fn.body) is UnbuiltBody:
            self.unbuilt(fn, fn.body)
            return
        # Labels are function-scoped and may be used before they appear: names that no
        # enclosing declaration resolves are kept and resolved against the labels and the
        # module scope once the whole body has been seen.
        self.labels = {}
        self.pending = []
        self.fn_name, self.whole, self.absent = fn.name, None, False
        self.block(fn.body, [scope])
        fn.facts = BodyFacts(self.functions, self.whole, self.absent)
        labels, module = self.labels, self.globals
        for op, insn, addr, guard in self.pending:
            v = labels.get(op.name)
            if v is None:
                v = module.get(op.name)
            if v is None:
                kind = "register" if type(op) is Reg else "symbol"
                self.error(op.pos, f"undeclared {kind} '{op.name}'")
            elif guard:
                if not (isinstance(v, Variable) and v.type == "pred"):
                    self.error(insn.pos, f"guard '{op.name}' is not a .pred register")
            elif addr is not None:
                self.check_space(insn, addr, v)

    def unbuilt(self, fn: Function, body: UnbuiltBody) -> None:
        """The checks of a body fastcheck.py checked that need the whole module: the names no
        block declares resolve to module names as `function` would resolve them, and none of
        the body's names is a function's (else `unsure`: the module is checked in full)."""
        functions = self.functions
        if not body.names.isdisjoint(functions) or self.percent_function:
            self.unsure = True
            return
        for name, space in body.pending:
            v = self.globals.get(name)
            if v is None or (space is not None and isinstance(v, Variable) and v.space not in ("reg", space)):
                self.unsure = True
                return
        fn.facts = BodyFacts(functions, None, False)

    def block(self, body: list, scopes: list[dict]) -> None:
        local: dict[str, object] = {}
        scopes = scopes + [local]
        instruction = self.instruction
        labels = self.labels
        for s in body:
            t = type(s)
            if t is Instruction:
                instruction(s, scopes, local)
            elif t is Label:
                if s.name in labels:
                    self.declare(labels, s.name, s, s.pos)
                else:
                    labels[s.name] = s
            elif t is Variable:
                if self.whole is None:
                    self.whole = variable_reason(s, self.fn_name)
                if s.align is not None or s.array:
                    self.layout(s)
                if s.count is not None and s.count > MAX_COUNT:
                    self.error(s.pos, f"'{s.name}<{s.count}>': more than {MAX_COUNT} registers")
                elif s.count is not None and s.count > EXPANDED_RANGE:
                    if not isinstance(local, _Scope):  # plain dicts keep the common lookups fast
                        local = scopes[-1] = _Scope(local)
                    local.add_range(s)  # names resolved on lookup: memory stays proportional to use
                elif s.count is not None:
                    names = [f"{s.name}{k}" for k in range(s.count)]
                    if local.keys().isdisjoint(names):  # the usual case: declare them at once
                        local.update(dict.fromkeys(names, s))
                    else:
                        for name in names:
                            self.declare(local, name, s, s.pos)
                else:
                    self.declare(local, s.name, s, s.pos)
            elif t is Block:
                self.block(s.body, scopes)
            elif t is Directive:
                self.gate_directive(s)
                if s.name == "calltargets" and self.whole is None:
                    self.whole = f"{self.fn_name} has .calltargets (an indirect call)"
                if s.name in ("callprototype", "branchtargets", "calltargets"):
                    self.declare(self.labels, s.args[0], s, s.pos)
                if s.name in ("branchtargets", "calltargets"):
                    for a in s.args[1:]:
                        self.resolve(a, scopes, None, None)

    def resolve(self, op, scopes: list[dict], insn: Instruction | None, addr: Addr | None):
        """The declaration `op` names in the enclosing scopes, or None (then it is resolved
        against the labels and the module scope at the end of the function)."""
        name = op.name
        for scope in reversed(scopes):
            hit = scope.get(name)
            if hit is not None:
                return hit
        if type(op) is not Reg or not _special(name):
            self.pending.append((op, insn, addr, False))
        return None

    # ------------------------------------------------------------------ instructions

    def instruction(self, insn: Instruction, scopes: list[dict], local: dict) -> None:
        """Check `insn` in `scopes`, whose innermost is `local`. fastcheck.py states these checks
        (and `block`'s) again for a lazy load: a check added here must be added there too, or
        made to send such statements the general way (tests/ptx/test_unbuilt_bodies.py)."""
        ops = insn.operands
        key = (insn.opcode, insn.mods, len(ops))
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self.plan(insn)
        verdict, roles, wants, accepts, query = plan
        if query == "suq":
            refused = self.src.error_at(insn.pos, f"suq.{'.'.join(insn.mods)}: NVIDIA's driver does not load "
                                                  "modules with this surface query (CUDA_ERROR_NOT_SUPPORTED)")
            refused.cu_result = CUDA_ERROR_NOT_SUPPORTED
            self.errors.append(refused)
        if verdict:
            self.error(insn.pos, verdict)
            if "(module " not in verdict:  # gated forms are still checked further
                return
        if ops and type(ops[0]) is PredOut and compare_forms.one_predicate(insn.opcode, insn.types):
            self.error(insn.pos, f"'{insn.opcode}.{'.'.join(insn.mods)}' writes one predicate, not 'p|q'")
        functions = self.functions
        g = insn.guard
        mentions = False  # a name of the operands (or guard) is a function's (facts.py)
        if g is not None:
            mentions = g.reg in functions
            for scope in reversed(scopes):
                v = scope.get(g.reg)
                if v is not None:
                    if not (isinstance(v, Variable) and v.type == "pred"):
                        self.error(insn.pos, f"guard '{g.reg}' is not a .pred register")
                    break
            else:
                if not _special(g.reg):
                    self.pending.append((Reg(g.reg, insn.pos), insn, None, True))
        local_get = local.get
        for k, op in enumerate(ops):
            t = type(op)
            if t is Reg:
                if op.name in functions:
                    mentions = True
                v = local_get(op.name)
                if v is None:
                    v = self.resolve(op, scopes, insn, None)
                    if v is None:
                        continue
                # Scopes hold Variables; the type test comes first as it rejects most.
                ok = accepts[k]
                if ok is not None and v.type not in ok and type(v) is Variable and v.space == "reg":
                    self.type_error(insn, op, v.type, wants[k])
            elif t is Imm:
                if roles[k] == "p":  # a predicate operand rejects every constant
                    self.operand(insn, op, scopes, "p", wants[k])
                elif wants[k] is not None and not constant_fits(op.kind, wants[k]):
                    what = "integer" if op.kind == "int" else "floating-point"
                    self.error(op.pos,
                               f"'{insn.opcode}' takes no {what} constant for its .{wants[k]} operand {k + 1}")
            elif t is Addr and type(op.base) is Reg and not op.extra:
                # `[%rd1+8]`: only the base register needs resolving (a register has no space)
                if op.base.name in functions:
                    mentions = True
                v = local_get(op.base.name)
                if v is None:
                    v = self.resolve(op.base, scopes, insn, op)
                if v is not None and (type(v) is not Variable or v.space != "reg"):
                    self.check_space(insn, op, v)
            else:
                if not mentions and names_a_function(op, functions):
                    mentions = True
                new = self.operand(insn, op, scopes, roles[k], wants[k])
                if new is not op:
                    ops[k] = new
        # after the loop, which may turn a Sym naming a register into a Reg
        if mentions and self.whole is None and (taken := taken_function(insn, functions)):
            self.whole = taken_reason(taken, self.fn_name)
        if query == "txq" and not self.absent:
            self.absent = absent_query(insn)

    def plan(self, insn: Instruction) -> tuple[str, tuple, tuple, tuple, str]:
        """Per (opcode, mods, operand count): the form verdict; per operand its role, the
        register type it wants and the register types it accepts (None: unchecked); "suq" for
        a query NVIDIA refuses, "txq" for one it may leave kernels out for, else ""."""
        types = insn.types
        roles = _ROLES.get(insn.opcode) if types else None
        n = len(insn.operands)
        role_of = tuple(roles[k] if roles and k < len(roles) else None for k in range(n))
        wants = tuple(self.want(insn, role, types, k) for k, role in enumerate(role_of))
        accepts = tuple(None if w is None else _register_types(insn, role, w) for role, w in zip(role_of, wants))
        query = ""
        if insn.opcode == "suq" and not NVIDIA_REFUSED_SUQ.isdisjoint(insn.mods):
            query = "suq"
        elif insn.opcode == "txq" and not NVIDIA_ABSENT_TXQ.isdisjoint(insn.mods):
            query = "txq"
        return self.form_verdict(insn), role_of, wants, accepts, query

    @staticmethod
    def want(insn: Instruction, role: str | None, types: tuple[str, ...], k: int) -> str | None:
        if role is None or role == "*":
            return None
        if role == "p":
            return "pred"
        if role == "u32":
            return "u32"
        if role == "A":
            return types[-1]
        if role == "C" and "cas" not in insn.mods:
            return None
        want = types[0]
        # .wide: the destination (and mad's addend c) are twice the source width
        if role == "T" and (k == 0 or (k == 3 and insn.opcode == "mad")) \
                and insn.opcode in ("mul", "mad") and "wide" in insn.mods:
            want = want[0] + {"16": "32", "32": "64"}.get(want[1:], want[1:])
        return want

    def form_verdict(self, insn: Instruction) -> str:
        """'' when the modifiers and operand count fit a form this module may use, else why not."""
        forms, problem = _MODS.forms(insn.opcode, insn.mods)
        if problem:
            return problem
        n = len(insn.operands)
        fits = [f for f in forms if f.min_operands <= n <= f.max_operands]
        if not fits:
            lo = min(f.min_operands for f in forms)
            hi = max(f.max_operands for f in forms)
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            return f"'{insn.opcode}' takes {want} operands, found {n}"
        name = f"'{insn.opcode}" + "".join("." + m for m in insn.mods) + "'"
        if insn.opcode == "cvt" and cvt_forms.applies(insn.types, n):
            why = cvt_forms.problem(*insn.types, insn.mods)
            if why:
                return f"{name}: {why}"
        best = min(fits, key=lambda f: (f.ptx, f.sm))
        ptx, sm = best.ptx, best.sm
        gates = grammar.opcodes()[insn.opcode].gates
        for m in insn.mods:
            if m in gates:
                ptx, sm = max(ptx, gates[m][0]), max(sm, gates[m][1])
        why = ""
        if compare_forms.applies(insn.opcode, insn.types):
            why, need_ptx, need_sm = compare_forms.verdict(insn.mods, insn.types)
        elif access_forms.applies(insn.opcode, insn.types):
            why, need_ptx, need_sm = access_forms.verdict(insn.mods, insn.types, tuple(self.m.version))
        else:
            need_ptx, need_sm = ptx, sm
        if why:
            return f"{name}: {why}"
        ptx, sm = max(ptx, need_ptx), max(sm, need_sm)
        return self.gate_message(name, ptx, sm)

    def operand(self, insn: Instruction, op, scopes, role, want):
        """Check one operand; returns it, or the Reg that replaces a Sym naming a register."""
        t = type(op)
        if t is Reg:
            v = self.resolve(op, scopes, insn, None)
            if want and type(v) is Variable and v.space == "reg":
                self.check_type(insn, op, v.type, want, role)
        elif t is Sym:
            v = self.resolve(op, scopes, insn, None)
            if type(v) is Variable and v.space == "reg":
                # `.reg .b32 r1;` declares a register without '%': its uses are registers.
                op = Reg(op.name, op.pos)
                if want:
                    self.check_type(insn, op, v.type, want, role)
        elif t is Addr:
            base = op.base
            if base is not None:
                v = self.resolve(base, scopes, insn, op)
                if type(base) is Sym and type(v) is Variable and v.space == "reg":
                    op.base = Reg(base.name, base.pos)
                elif v is not None:
                    self.check_space(insn, op, v)
            self.operands(insn, op.extra, scopes)
        elif t is Vec and role == "W":
            typed = []
            for k, e in enumerate(op.elems):
                if type(e) is Reg:
                    v = self.resolve(e, scopes, insn, None)
                    if type(v) is Variable and v.space == "reg":
                        typed.append((e, v.type))
                else:
                    op.elems[k] = self.operand(insn, e, scopes, None, None)
            self.check_elements(insn, typed, want)
        elif t is Vec:
            self.operands(insn, op.elems, scopes)
        elif t is ArgList:
            self.operands(insn, op.args, scopes)
        elif t is Not:
            op.operand = self.operand(insn, op.operand, scopes, None, "pred" if role else None)
        elif t is PredOut:
            op.dest = self.operand(insn, op.dest, scopes, None, want if role != "p" else None)
            op.pred = self.operand(insn, op.pred, scopes, None, "pred")
        elif t is Imm and role == "p":
            self.error(op.pos, f"'{insn.opcode}' expects a predicate here, found a constant")
        return op

    def operands(self, insn: Instruction, ops: list, scopes) -> None:
        for k, e in enumerate(ops):
            new = self.operand(insn, e, scopes, None, None)
            if new is not e:
                ops[k] = new

    def check_type(self, insn: Instruction, op, reg_type: str, want: str, role: str | None = None) -> None:
        if reg_type not in _register_types(insn, role, want):
            self.type_error(insn, op, reg_type, want)

    def check_elements(self, insn: Instruction, typed: list, want: str) -> None:
        """An ld/st vector's registers, as ptxas takes them: their types combine into one (equal
        types; of one size, with a bit-size type or signed with unsigned: that size's bit type),
        which `held` must take. So `{%f1, %b1}` is taken where a .b32 register is."""
        joint = None
        for e, reg_type in typed:
            joint = joint_type(joint, reg_type)
            if joint is None:
                kinds = " and ".join(sorted({f".{r}" for _, r in typed}))
                self.error(e.pos, f"'{insn.opcode}': a vector's registers of types {kinds} do not combine")
                return
        if joint is not None and joint not in held(want, True):
            e, reg_type = next(((e, r) for e, r in typed if r not in held(want, True)), typed[0])
            self.type_error(insn, e, reg_type, want)

    def type_error(self, insn: Instruction, op, reg_type: str, want: str) -> None:
        self.error(op.pos, f"operand '{op.name}' has type .{reg_type}, "
                           f"incompatible with .{want} of '{insn.opcode}'")

    def check_space(self, insn: Instruction, addr: Addr, v) -> None:
        if not isinstance(v, Variable) or insn.opcode not in ("ld", "st", "atom", "red", "ldu"):
            return
        if v.space == "reg":
            return
        spaces = [m.split("::")[0] for m in insn.mods if m.split("::")[0] in
                  ("global", "shared", "local", "const", "param")]
        if spaces and spaces[0] != v.space:
            self.error(addr.pos, f"'{v.name}' is in .{v.space} space but '{insn.opcode}' "
                                 f"accesses .{spaces[0]}")


def _size(v: Variable) -> int:
    size = (v.vector or 1) * max(1, int(m.group()) // 8 if (m := _BITS.search(v.type)) else 1)
    for d in v.array:
        size *= d or 1
    return size


def check(module: Module, src: Source) -> list[PtxError]:
    """All problems found in a parsed module, in source order."""
    errors = Checker(module, src).run()
    errors.sort(key=lambda e: (e.line, e.col))
    return errors
