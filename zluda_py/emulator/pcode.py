"""A compiler from AMD's ISA pseudocode (tinygrad's str_pcode tables, text from AMD's manuals)
to Python functions over numpy arrays, vectorised over the lanes of a wave.

Covers the subset the ALU, compare, branch and exec-mask instructions use: typed operand
views (`S0.u32`, `VCC.u64[laneId]`), sized casts (`64'U(x)`), sized and suffixed literals,
bit slices, C operators and `?:`, locals, `for` loops with constant bounds and `if` whose
condition is the same in every lane. Anything else raises `PcodeUnsupported` at compile time,
and the caller falls back to a hand-written implementation or refuses the instruction.

A compiled function takes one argument, the operand context (`execute.Ctx`), with
`rd(name, kind, bits)`, `wr(name, kind, bits, value)`, `rdbit(name, lanes)`,
`wrbit(name, value)`, `scalar(name)` and `lanes`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Callable

import numpy as np

Type = tuple[str, int]  # (kind 'u'/'i'/'f', bits); 'b' (raw bits) is read as 'u'
BOOL: Type = ("u", 1)


class PcodeUnsupported(Exception):
    """The pseudocode uses a construct this compiler does not translate."""


@lru_cache(maxsize=None)  # called for every operand of every step
def dtype(t: Type) -> np.dtype:
    kind, bits = t
    if bits == 1:
        return np.dtype(np.bool_)
    if bits > 64:
        raise PcodeUnsupported(f"{bits}-bit value")
    size = 8 if bits <= 8 else 16 if bits <= 16 else 32 if bits <= 32 else 64
    if kind == "f":
        if size not in (16, 32, 64):
            raise PcodeUnsupported(f"f{bits}")
        return np.dtype(f"float{size}")
    return np.dtype(f"{'int' if kind == 'i' else 'uint'}{size}")


@lru_cache(maxsize=None)
def _uint(bits: int) -> np.dtype:
    return dtype(("u", max(bits, 8)))


# Runtime helpers the generated code calls. Values are numpy arrays (or numpy scalars).

def convert(x, src: Type, dst: Type):
    """C value conversion (casts, assignment): integers wrap or extend by the source's sign,
    floats round; n-bit integers narrower than their container are masked."""
    x = np.asarray(x)
    if dst == BOOL:
        return x != 0
    out = x.astype(dtype(dst)) if dst[0] == "f" or src[0] != "f" else _float_to_int(x, dst)
    if dst[0] != "f" and dst[1] not in (8, 16, 32, 64):
        out = _sign_extend(out & dtype(dst).type((1 << dst[1]) - 1), dst[1]) if dst[0] == "i" else \
            out & dtype(dst).type((1 << dst[1]) - 1)
    return out


def _float_to_int(x: np.ndarray, dst: Type):
    info = np.iinfo(dtype(dst))
    with np.errstate(invalid="ignore"):  # clipped to the range first: saturating, as the hardware does
        return np.clip(np.nan_to_num(np.trunc(x), nan=0.0), info.min, info.max).astype(dtype(dst))


def reinterpret(x, src: Type, dst: Type):
    """`.type` on a value: the same bits seen as another type, truncated or zero-extended."""
    x = np.asarray(x)
    if src == dst:
        return x
    if src == BOOL:
        raw = x.astype(np.uint8)
    else:
        x = x if x.dtype == dtype(src) else x.astype(dtype(src))
        raw = x.view(_uint(src[1]) if src[0] != "f" else np.dtype(f"uint{x.dtype.itemsize * 8}"))
    if dst == BOOL:
        return (raw & raw.dtype.type(1)) != 0
    raw = raw.astype(_uint(dst[1]))
    if dst[1] not in (8, 16, 32, 64):
        raw = raw & raw.dtype.type((1 << dst[1]) - 1)
    return raw if dst[0] == "u" else _sign_extend(raw.view(dtype(dst)), dst[1])


def _sign_extend(x: np.ndarray, bits: int) -> np.ndarray:
    """An n-bit signed value (S0.i24) held in a wider container: its top bit is the sign."""
    if bits in (8, 16, 32, 64):
        return x
    sign = x.dtype.type(1 << (bits - 1))
    return (x ^ sign) - sign


def bitslice(x, t: Type, hi: int, lo: int):
    raw = reinterpret(x, t, ("u", t[1]))
    width = hi - lo + 1
    return (raw >> raw.dtype.type(lo)) & raw.dtype.type((1 << width) - 1 if width < 64 else ~0)


def bitreverse(x, t: Type, hi: int, lo: int):
    raw = bitslice(x, t, hi, lo)
    width = hi - lo + 1
    out = np.zeros_like(raw)
    for i in range(width):
        out |= ((raw >> raw.dtype.type(i)) & raw.dtype.type(1)) << raw.dtype.type(width - 1 - i)
    return out


def bitindex(x, t: Type, idx):
    raw = reinterpret(x, t, ("u", 64))
    return ((raw >> np.asarray(idx).astype(np.uint64)) & np.uint64(1)) != 0


class LaneVarying(Exception):
    """Raised at run time by an `if` whose condition differs between lanes: the caller runs the
    instruction again lane by lane (`execute._run_pcode`)."""


def uniform(cond) -> bool:
    c = np.asarray(cond)
    if c.size > 1 and not (c.all() or not c.any()):
        raise LaneVarying()
    return bool(c.flat[0])


# Helper functions of the pseudocode (AMD's manuals, "Pseudocode functions").
_QUIET_BIT = {16: 9, 32: 22, 64: 51}
_EXPONENT = {16: (10, 0x1F), 32: (23, 0xFF), 64: (52, 0x7FF)}


def _float_bits(x, t: Type):
    return reinterpret(np.asarray(x, dtype(t)), t, ("u", t[1]))


def quiet_nan(x, t: Type) -> np.ndarray:
    """isQuietNAN: a NaN with the mantissa's top bit set."""
    bits = _float_bits(x, t)
    return np.isnan(x) & ((bits >> bits.dtype.type(_QUIET_BIT[t[1]])) & bits.dtype.type(1) == 1)


def to_quiet_nan(x, t: Type):
    """cvtToQuietNAN: the NaN with its quiet bit set (other values unchanged)."""
    bits = _float_bits(x, t)
    quiet = bits | bits.dtype.type(1 << _QUIET_BIT[t[1]])
    return np.where(np.isnan(x), reinterpret(quiet, ("u", t[1]), t), x)


def exponent(x, t: Type):
    """The biased exponent field, as a signed 32-bit value (the manuals subtract them)."""
    shift, mask = _EXPONENT[t[1]]
    bits = _float_bits(x, t)
    return ((bits >> bits.dtype.type(shift)) & bits.dtype.type(mask)).astype(np.int32)


def signext_from_bit(x, t: Type, width):
    """The low `width` bits of x, sign-extended (0 for width 0)."""
    v = np.asarray(x).astype(np.int64)
    w = np.asarray(width).astype(np.int64)
    low = v & ((np.int64(1) << w) - 1)
    neg = (low >> np.maximum(w - 1, 0)) & 1
    return convert(np.where(w == 0, 0, low - (neg << w)), ("i", 64), t)


_CONVERSION = re.compile(r"^([uif])(8|16|32|64)_to_([uif])(8|16|32|64)$")


# ---------------------------------------------------------------------------- lexer

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|//[^\n]*)
  | (?P<nl>[\n;])
  | (?P<cast>\d+'[UIFB])(?=\s*\()
  | (?P<sized>\d+'(?:-?\d+\.\d+|0x[0-9a-fA-F]+|\d+)[UIFB]?)
  | (?P<decltype>\d+'[UIFB])
  | (?P<float>\d+\.\d+(?:[eE][-+]?\d+)?F?)
  | (?P<int>(?:0x[0-9a-fA-F]+|\d+)(?:ULL|LL|U|L)?)
  | (?P<type>\.[uibf]\d+)
  | (?P<name>WAVE_MODE\.IEEE|[A-Za-z_]\w*)
  | (?P<op>\*\*|<<=|>>=|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|\*=|\|=|&=|\^=|[-+*/%&|^~!<>?:=()\[\]{},])
""", re.X)


def _lex(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise PcodeUnsupported(f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    out.append(("end", ""))
    return out


# ---------------------------------------------------------------------------- parser/codegen

# Registers the context resolves; everything else is a local or a loop variable.
_OPERANDS = {"S0", "S1", "S2", "D0", "D1", "SCC", "VCC", "EXEC", "M0", "PC", "SIMM16", "SIMM32", "OPSEL",
             "SDATA", "VDATA", "DATA", "RETURN_DATA", "ADDR", "OFFSET"}
_KINDS = {"U": "u", "I": "i", "F": "f", "B": "u"}
_BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="),
           ("<<", ">>"), ("+", "-"), ("*", "/", "%"), ("**",)]


@dataclass
class Expr:
    code: str
    type: Type
    weak: bool = False  # an untyped loop variable: takes the other operand's type
    operand: str | None = None  # a bare register name, typed by the following `.type`
    constant: str | None = None  # a named constant (INF, NAN): `.f32` makes it that type's value


def _unify(a: Expr, b: Expr) -> Type:
    if a.weak:
        return b.type
    if b.weak:
        return a.type
    ta, tb = a.type, b.type
    if "f" in (ta[0], tb[0]):
        return max((t for t in (ta, tb) if t[0] == "f"), key=lambda t: t[1])
    if ta[1] != tb[1]:
        return max(ta, tb, key=lambda t: t[1]) if max(ta[1], tb[1]) > 1 else BOOL
    return ("u" if "u" in (ta[0], tb[0]) else "i", ta[1])


def _conv(e: Expr, t: Type) -> str:
    if e.weak or e.type == t:
        return e.code if not e.weak else f"np.asarray({e.code}).astype({dtype(t).name!r})"
    return f"_convert({e.code}, {e.type}, {t})"


class _Compiler:
    def __init__(self, text: str):
        self.toks = _lex(text)
        self.i = 0
        self.lines: list[str] = []
        self.locals: dict[str, Type] = {}
        self.loopvars: set[str] = set()
        self.loop_depth = 0  # `break` is valid inside a `for`
        self.macros: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}  # lambdas: parameters, body
        self.bound: dict[str, Expr] = {}  # a lambda's parameters while its body is expanded
        self.tmp = 0
        self.operands: set[str] = set()  # the registers and fields the text reads

    # token helpers
    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.toks[self.i + k]

    def take(self, value: str | None = None) -> str:
        kind, text = self.toks[self.i]
        if value is not None and text != value:
            raise PcodeUnsupported(f"expected {value!r}, found {text!r}")
        self.i += 1
        return text

    def at(self, *values: str) -> bool:
        return self.peek()[1] in values

    def skip_newlines(self) -> None:
        while self.peek()[0] == "nl":
            self.i += 1

    # statements
    def block(self, depth: int, stop: tuple[str, ...]) -> None:
        while True:
            self.skip_newlines()
            if self.peek()[0] == "end" or self.at(*stop):
                return
            self.statement(depth)

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def statement(self, depth: int) -> None:
        word = self.peek()[1]
        if word == "for":
            self.take()
            var = self.take()
            self.take("in")
            lo, hi = self.expr(), None
            self.take(":")
            hi = self.expr()
            self.take("do")
            self.loopvars.add(var)
            self.emit(depth, f"for v_{var} in range(int({lo.code}), int({hi.code}) + 1):")
            mark = len(self.lines)
            self.loop_depth += 1
            self.block(depth + 1, ("endfor",))
            self.loop_depth -= 1
            self.take("endfor")
            if len(self.lines) == mark:
                self.emit(depth + 1, "pass")
            return
        if word == "if":
            self.take()
            cond = self.expr()
            self.take("then")
            self.emit(depth, f"if _uniform({cond.code}):")
            self.block(depth + 1, ("elsif", "else", "endif"))
            while self.at("elsif"):
                self.take()
                cond = self.expr()
                self.take("then")
                self.emit(depth, f"elif _uniform({cond.code}):")
                self.block(depth + 1, ("elsif", "else", "endif"))
            if self.at("else"):
                self.take()
                self.emit(depth, "else:")
                self.block(depth + 1, ("endif",))
            self.take("endif")
            return
        if word == "declare":  # declare name : 1'U;
            self.take()
            name = self.take()
            self.take(":")
            bits, k = self.take().split("'")
            t = (_KINDS[k], int(bits))
            self.locals[name] = t
            self.emit(depth, f"v_{name} = np.zeros(1, {dtype(t).name!r})")
            return
        if word == "break" and self.loop_depth:
            self.take()
            self.emit(depth, "break")
            return
        if self.peek(1)[1] == "=" and self.peek(2)[1] == "lambda":  # NAME = lambda(a, b) (expression);
            name = self.take()
            self.take("=")
            self.take("lambda")
            self.take("(")
            params = [self.take()]
            while self.at(","):
                self.take(",")
                params.append(self.take())
            self.take(")")
            start, level = self.i, 0
            while True:
                tok = self.take()
                level += tok == "("
                level -= tok == ")"
                if level == 0:
                    break
            body = [tok for tok in self.toks[start:self.i] if tok[0] != "nl"]  # the body may span lines
            self.macros[name] = (params, body + [("end", "")])
            return
        if word in ("declare", "break", "return", "lambda"):
            raise PcodeUnsupported(word)
        self.assignment(depth)

    def assignment(self, depth: int) -> None:
        kind, name = self.peek()
        if kind != "name":
            raise PcodeUnsupported(f"statement starting with {name!r}")
        self.take()
        ltype: Type | None = None
        if self.peek()[0] == "type":
            ltype = _parse_type(self.take())
        lane = False
        if self.at("[") and self.peek(1)[1] == "laneId":  # X.u64[laneId] = ...: one bit per lane of a mask
            self.i += 3
            lane = True
        elif self.at("[") and ltype is not None and name in _OPERANDS and self._single_index():
            # X.u32[i] = b (S_BITSET0/1): that bit of the register replaced, the others kept
            self.take("[")
            idx = self.expr()
            self.take("]")
            if self.take() != "=":
                raise PcodeUnsupported("compound assignment to one bit")
            bit = self.expr()
            u = ("u", ltype[1])
            shift = f"(np.asarray({_conv(idx, u)}) % {ltype[1]}).astype(np.{dtype(u).name})"
            cur = self.read_name(name, u)
            code = (f"(({cur.code} & ~(np.{dtype(u).name}(1) << {shift})) | "
                    f"((np.asarray({_conv(bit, u)}) & np.{dtype(u).name}(1)) << {shift}))")
            self.emit(depth, f"ctx.wr({name!r}, 'u', {ltype[1]}, {code})")
            return
        elif self.at("[") and ltype is not None:  # X.u32[31 : 0] = ...: only the whole register
            self.take("[")
            hi = _const(self.expr())
            self.take(":")
            lo = _const(self.expr())
            self.take("]")
            if (hi, lo) != (ltype[1] - 1, 0):
                raise PcodeUnsupported("assignment to part of a register")
        op = self.take()
        if op not in ("=", "+=", "-=", "|=", "&=", "^=", "*="):
            raise PcodeUnsupported(f"assignment operator {op!r}")
        value = self.expr()
        if op != "=":
            current = self.read_name(name, ltype)
            value = self.binop(op[0], current, value)
        if lane:
            self.emit(depth, f"ctx.wrbit({name!r}, {_conv(value, BOOL)})")
        elif name in _OPERANDS:
            t = ltype or (BOOL if name == "SCC" else ("i", 64) if name == "PC" else ("u", 64) if name in ("VCC", "EXEC")
                          else value.type if value.type[0] != "f" and not value.weak else None)  # D0 = { hi, lo }: its width
            if t is None:
                raise PcodeUnsupported(f"untyped write of {name}")
            self.emit(depth, f"ctx.wr({name!r}, {t[0]!r}, {t[1]}, {_conv(value, t)})")
        else:
            if name in self.locals and ltype is None:
                ltype = self.locals[name]
            t = ltype or (value.type if not value.weak else ("i", 32))
            if name in self.locals and self.locals[name] != t:
                # tmp.u32 = ... on a wider local: keep the local's type, replace the bits
                t = self.locals[name]
            self.locals[name] = t
            self.emit(depth, f"v_{name} = {_conv(value, t)}")

    def _single_index(self) -> bool:
        """At `[`: is it `[expr]` (one bit) rather than `[hi : lo]`? Brackets nest."""
        depth, j = 0, self.i
        while j < len(self.toks):
            tok = self.toks[j][1]
            if tok == "[":
                depth += 1
            elif tok == "]":
                depth -= 1
                if depth == 0:
                    return True
            elif tok == ":" and depth == 1:
                return False
            j += 1
        return False

    def read_name(self, name: str, t: Type | None) -> Expr:
        if name in self.bound:
            e = self.bound[name]
            return Expr(f"_reinterpret({e.code}, {e.type}, {t})", t) if t and t != e.type else e
        if name in _OPERANDS:
            self.operands.add(name)
            if t is None:
                if name == "SCC":
                    return Expr("ctx.rd('SCC', 'u', 1)", BOOL)
                if name == "PC":
                    return Expr("ctx.rd('PC', 'i', 64)", ("i", 64))
                return Expr("", ("u", 32), operand=name)
            return Expr(f"ctx.rd({name!r}, {t[0]!r}, {t[1]})", t)
        if name in self.loopvars:
            e = Expr(f"v_{name}", ("i", 32), weak=True)
        elif name in self.locals:
            e = Expr(f"v_{name}", self.locals[name])
        elif name == "laneId":
            e = Expr("ctx.lanes", ("u", 32))
        elif name in _CONSTANTS:
            t = t or ("f", 64)
            return Expr(f"np.{dtype(t).name}({_CONSTANTS[name]})", t, constant=name)
        elif name == "WAVE_MODE.IEEE":  # compute kernels run in IEEE mode (LLVM's default; gfx12 has no other)
            e = Expr("np.bool_(True)", BOOL)
        elif name == "DENORM":
            return Expr("_DENORM", t or ("f", 64))
        elif name in ("EXECZ", "VCCZ", "WAVE64", "WAVE32"):
            e = Expr(f"ctx.scalar({name!r})", BOOL)
        else:
            raise PcodeUnsupported(f"name {name!r}")
        return Expr(f"_reinterpret({e.code}, {e.type}, {t})", t) if t and t != e.type else e

    # expressions
    def expr(self) -> Expr:
        cond = self.binary(0)
        if not self.at("?"):
            return cond
        self.take("?")
        a = self.expr()
        self.take(":")
        b = self.expr()
        t = _unify(a, b)
        return Expr(f"np.where({_conv(cond, BOOL)}, {_conv(a, t)}, {_conv(b, t)})", t)

    def binary(self, level: int) -> Expr:
        if level == len(_BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.at(*_BINARY[level]):
            op = self.take()
            left = self.binop(op, left, self.binary(level + 1))
        return left

    def binop(self, op: str, a: Expr, b: Expr) -> Expr:
        a, b = self.resolve(a), self.resolve(b)
        if op in ("&&", "||"):
            fn = "np.logical_and" if op == "&&" else "np.logical_or"
            return Expr(f"{fn}({_conv(a, BOOL)}, {_conv(b, BOOL)})", BOOL)
        if op in ("==", "!=") and b.code == "_DENORM":  # x == DENORM.f32: x is a denormal
            test = f"_is_denormal({a.code}, {a.type})"
            return Expr(test if op == "==" else f"np.logical_not({test})", BOOL)
        if op == "**":
            t = a.type if a.type[0] == "f" else ("f", 64)
            return Expr(f"np.power({_conv(a, t)}, {b.code}, dtype={dtype(t).name!r})", t)
        if op in ("<<", ">>"):
            t = a.type if not a.weak else ("i", 32)
            if t[0] == "f" or b.type[0] == "f":
                raise PcodeUnsupported("shift of a float")
            return Expr(f"({_conv(a, t)} {op} {_conv(b, t)})", t)
        t = _unify(a, b)
        if t == BOOL and op in ("+", "-", "*"):
            t = ("u", 32)
        pyop = {"<>": "!="}.get(op, op)
        if op == "/":
            pyop = "/" if t[0] == "f" else "//"
            if t[0] == "i":
                raise PcodeUnsupported("signed integer division (C truncates)")
        if op == "%" and t[0] != "u":
            raise PcodeUnsupported("signed or float remainder")
        code = f"({_conv(a, t)} {pyop} {_conv(b, t)})"
        if op == "<>" and t[0] == "f":  # "less or greater": false for NaN operands, unlike !=
            code = f"(({_conv(a, t)} < {_conv(b, t)}) | ({_conv(a, t)} > {_conv(b, t)}))"
        if op in ("==", "!=", "<>", "<", ">", "<=", ">="):
            return Expr(code, BOOL)
        return Expr(code, t)

    def expand(self, fn: str, args: list[Expr]) -> Expr:
        """A lambda's body with its parameters bound to `args` (inlined, as a macro)."""
        params, body = self.macros[fn]
        if len(params) != len(args):
            raise PcodeUnsupported(f"{fn} takes {len(params)} arguments")
        saved = self.toks, self.i, self.bound
        self.toks, self.i, self.bound = body, 0, {**self.bound, **dict(zip(params, args))}
        try:
            return self.expr()
        finally:
            self.toks, self.i, self.bound = saved

    def resolve(self, e: Expr) -> Expr:
        if e.operand is not None:  # a bare register (S1[4 : 0]): its 32 bits
            return Expr(f"ctx.rd({e.operand!r}, 'u', 32)", ("u", 32))
        return e

    def unary(self) -> Expr:
        if self.at("-", "~", "!", "+"):
            op = self.take()
            e = self.resolve(self.unary())
            if op == "+":
                return e
            if op == "!":
                return Expr(f"np.logical_not({_conv(e, BOOL)})", BOOL)
            if op == "~" and e.type == BOOL:
                return Expr(f"np.logical_not({e.code})", BOOL)
            t = e.type if not e.weak else ("i", 32)
            return Expr(f"({op}{_conv(e, t)})", t)
        return self.postfix(self.primary())

    def postfix(self, e: Expr) -> Expr:
        while True:
            if self.peek()[0] == "type":
                t = _parse_type(self.take())
                if e.operand is not None:
                    e = Expr(f"ctx.rd({e.operand!r}, {t[0]!r}, {t[1]})", t)
                elif e.code == "_DENORM":  # DENORM.f32: still the marker `==` tests against
                    e = Expr("_DENORM", t)
                elif e.constant is not None:  # NAN.f32: the f32 NaN, not the f64 NaN's low bits
                    e = Expr(f"np.{dtype(t).name}({_CONSTANTS[e.constant]})", t)
                else:
                    e = Expr(f"_reinterpret({e.code}, {e.type}, {t})", t)
            elif self.at("["):
                self.take("[")
                e = self.resolve(e)
                first = self.expr()
                if self.at(":"):
                    self.take(":")
                    lo = self.expr()
                    self.take("]")
                    hi_v, lo_v = _const(first), _const(lo)
                    if hi_v < lo_v:  # [0 : 31]: the bits in reverse order
                        e = Expr(f"_bitreverse({e.code}, {e.type}, {lo_v}, {hi_v})", ("u", lo_v - hi_v + 1))
                        continue
                    e = Expr(f"_bitslice({e.code}, {e.type}, {hi_v}, {lo_v})", ("u", hi_v - lo_v + 1))
                else:
                    self.take("]")
                    e = Expr(f"_bitindex({e.code}, {e.type}, {first.code})", BOOL)
            else:
                return e

    def primary(self) -> Expr:
        kind, text = self.peek()
        if kind == "cast":
            self.take()
            bits, k = text.split("'")
            t = (_KINDS[k], int(bits))
            self.take("(")
            lit = self.peek()
            if t[0] == "f" and lit[0] == "int" and lit[1].lower().startswith("0x"):  # 64'F(0xfff8...LL): bits
                self.take()
                self.take(")")
                value = _literal("int", lit[1])[0] & ((1 << t[1]) - 1)
                return Expr(f"_reinterpret(np.uint64({value}), ('u', 64), {t})", t)
            inner = self.resolve(self.expr())
            self.take(")")
            return Expr(_conv(inner, t), t)
        if kind in ("sized", "int", "float"):
            self.take()
            value, t = _literal(kind, text)
            return Expr(f"np.{dtype(t).name}({value!r})" if t != BOOL else f"np.bool_({value})", t)
        if text == "(":
            self.take()
            e = self.expr()
            self.take(")")
            return e
        if text == "{":  # { hi, lo }: the bits side by side, the first operand on top
            self.take()
            parts = [self.resolve(self.expr())]
            while self.at(","):
                self.take(",")
                parts.append(self.resolve(self.expr()))
            self.take("}")
            width = sum(p.type[1] for p in parts)
            if width > 64:
                raise PcodeUnsupported(f"a {width}-bit concatenation")
            code, shift = [], 0
            for p in reversed(parts):
                code.append(f"(_reinterpret({p.code}, {p.type}, ('u', {p.type[1]})).astype(np.uint64) << np.uint64({shift}))")
                shift += p.type[1]
            return Expr(f"_reinterpret({' | '.join(code)}, ('u', 64), ('u', {width}))", ("u", width))  # floats by their bits
        if kind == "name":
            self.take()
            if self.at("(") and text not in _OPERANDS:
                return self.call(text)
            return self.read_name(text, None)
        raise PcodeUnsupported(f"unexpected {text!r}")

    def call(self, fn: str) -> Expr:
        self.take("(")
        args = [self.resolve(self.expr())]
        while self.at(","):
            self.take(",")
            args.append(self.resolve(self.expr()))
        self.take(")")
        if fn in self.macros:
            return self.expand(fn, args)
        minmax = re.match(r"^v_(min|max)(3?)_([uif])(16|32|64)$", fn)
        if minmax and len(args) == (3 if minmax.group(2) else 2):  # V_MIN3/V_MAX3/V_MED3's helpers: the instructions
            t = (minmax.group(3), int(minmax.group(4)))
            np_fn = ("np.fmin" if minmax.group(1) == "min" else "np.fmax") if t[0] == "f" else f"np.{minmax.group(1)}imum"
            code = _conv(args[0], t)
            for a in args[1:]:
                code = f"{np_fn}({code}, {_conv(a, t)})"
            return Expr(code, t)
        if fn == "pow" and len(args) == 2 and all(a.type[0] == "f" for a in args):
            t = _unify(args[0], args[1])
            return Expr(f"np.power({_conv(args[0], t)}, {_conv(args[1], t)})", t)
        if fn == "signext" and len(args) == 1:
            t = ("i", 64)
            a = args[0]
            signed = ("i", a.type[1]) if a.type[0] != "f" else None
            if signed is None:
                raise PcodeUnsupported("signext of a float")
            return Expr(_conv(Expr(_conv(a, signed), signed), t), t)
        m = _CONVERSION.match(fn)
        if m and len(args) == 1:
            src, dst = (m.group(1), int(m.group(2))), (m.group(3), int(m.group(4)))
            return Expr(f"_convert({_conv(args[0], src)}, {src}, {dst})", dst)
        if fn == "signext_from_bit" and len(args) == 2:
            return Expr(f"_signext_from_bit({args[0].code}, {args[0].type}, {args[1].code})", args[0].type)
        floats = all(a.type[0] == "f" for a in args)
        if floats and len(args) == 1 and fn in _FLOAT_UNARY:
            code, t = _FLOAT_UNARY[fn]
            return Expr(code.format(x=args[0].code, t=args[0].type), t or args[0].type)
        if args[0].type[0] == "f" and fn == "ldexp" and len(args) == 2:
            return Expr(f"np.ldexp({args[0].code}, np.asarray({args[1].code}).astype(np.int32)).astype({dtype(args[0].type).name!r})",
                        args[0].type)
        if fn == "abs" and len(args) == 1:
            return Expr(f"np.abs({args[0].code})", args[0].type)
        if fn in ("fma", "fma_scaled") and len(args) == (3 if fn == "fma" else 4) \
                and all(a.type[0] == "f" for a in args[:3]):
            # fma_scaled(a, b, c, k): (a * b + c) * 2^k rounded once (the emulator's V_DIV_FMAS)
            t, k = args[0].type, _const(args[3]) if fn == "fma_scaled" else 0
            if t[1] == 64:  # no wider float in numpy: exact rationals, one rounding
                return Expr(f"_fma64({args[0].code}, {args[1].code}, {args[2].code}, {k})", t)
            wide = ("f", 64)  # f64 rounded to odd, then rounded once more: exact for f32 and f16
            odd = f"_fma_odd({_conv(args[0], wide)}, {_conv(args[1], wide)}, {_conv(args[2], wide)})"
            return Expr(_conv(Expr(f"({odd} * {2.0 ** k!r})", wide), t), t)
        raise PcodeUnsupported(f"function {fn}()")


# Named float constants. The manuals leave UNDERFLOW/OVERFLOW (V_DIV_FIXUP's results for
# quotients out of range) undefined; zero and infinity are what a correctly rounded quotient gives.
_CONSTANTS = {"INF": "np.inf", "NAN": "np.nan", "PI": "np.pi", "UNDERFLOW_F32": "0.0", "UNDERFLOW_F64": "0.0",
              "OVERFLOW_F32": "np.inf", "OVERFLOW_F64": "np.inf"}


def _fma64_one(a: float, b: float, c: float, k: int) -> float:
    if not all(map(math.isfinite, (a, b, c))):
        return (a * b + c) * 2.0 ** k  # infinities and NaN: no intermediate rounding to avoid
    exact = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** k
    if not exact:
        return (a * b + c) * 2.0 ** k  # keep the sign rules of a zero result
    try:
        return float(exact)
    except OverflowError:  # beyond the largest finite value even after rounding
        return math.inf if exact > 0 else -math.inf


_fma64_lanes = np.frompyfunc(_fma64_one, 4, 1)


def fma64(a, b, c, k: int = 0):
    """fma on f64, times 2^k: the exact (a * b + c) * 2^k rounded once (float(Fraction) rounds to
    nearest even, subnormal results included)."""
    return np.asarray(_fma64_lanes(a, b, c, k), np.float64)


def fma_odd(a, b, c):
    """a * b + c for f32/f16 values held in f64, rounded to odd in f64: the product is exact, the
    sum's error is exact (TwoSum), and rounding the odd result to f32 or f16 is then the correctly
    rounded fma (f64 has more than twice their precision plus two bits)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    inexact = (err != 0) & np.isfinite(s)
    bits = s.view(np.uint64)
    bits = np.where(inexact & (np.signbit(err) != np.signbit(s)), bits - np.uint64(1), bits)  # toward zero
    return np.where(inexact, bits | np.uint64(1), bits).view(np.float64)


def is_denormal(x, t: Type):
    """x == DENORM: a nonzero value with a zero exponent field."""
    return (exponent(x, t) == 0) & (np.asarray(x) != 0)


# name -> (code over {x} of type {t}, result type; None: the argument's)
_FLOAT_UNARY: dict[str, tuple[str, Type | None]] = {
    "isNAN": ("np.isnan({x})", BOOL), "isQuietNAN": ("_quiet_nan({x}, {t})", BOOL),
    "isSignalNAN": ("(np.isnan({x}) & ~_quiet_nan({x}, {t}))", BOOL), "cvtToQuietNAN": ("_to_quiet_nan({x}, {t})", None),
    "sign": ("np.signbit({x})", BOOL), "exponent": ("_exponent({x}, {t})", ("i", 32)),
    "trunc": ("np.trunc({x})", None), "floor": ("np.floor({x})", None), "sqrt": ("np.sqrt({x})", None),
    "fract": ("({x} - np.floor({x}))", None), "isEven": ("(np.fmod({x}, 2) == 0)", BOOL),
    "mantissa": ("np.frexp({x})[0]", None),
    # the transcendental instructions (V_SIN/COS/LOG/EXP): numpy's results, within the hardware's 1 ulp
    "rndne": ("np.rint({x})", None),  # not the manual's: round half to even, exactly (see execute._pcode_fn)
    "sin": ("np.sin({x})", None), "cos": ("np.cos({x})", None), "log2": ("np.log2({x})", None),
}


def _parse_type(text: str) -> Type:
    kind, bits = text[1], int(text[2:])
    return ("u" if kind == "b" else kind, bits)


def _const(e: Expr) -> int:
    try:
        return int(eval(e.code, {"np": np}))  # literal-only expressions (slice bounds)
    except Exception as exc:
        raise PcodeUnsupported(f"non-constant bit slice bound {e.code}") from exc


def _literal(kind: str, text: str) -> tuple[object, Type]:
    if kind == "sized":
        bits_s, rest = text.split("'")
        bits = int(bits_s)
        k = _KINDS.get(rest[-1], "u") if rest[-1] in "UIFB" else ("f" if "." in rest else "u")
        body = rest.rstrip("UIFB")
        value = float(body) if k == "f" else int(body, 0)
        return (value, (k, bits))
    if kind == "float":
        return (float(text.rstrip("F")), ("f", 32 if text.endswith("F") else 64))
    suffix = re.search(r"(ULL|LL|U|L)?$", text).group(0)
    value = int(text[: len(text) - len(suffix)], 0)
    t = {"ULL": ("u", 64), "LL": ("i", 64), "U": ("u", 32), "L": ("i", 64)}.get(suffix, ("i", 32))
    if suffix in ("LL", "L") and value >= 1 << 63:  # a bit pattern (0xfff8000000000000LL)
        t = ("u", 64)
    if suffix == "" and value >= 1 << 31:
        t = ("u", 32) if value < 1 << 32 else ("u", 64)
    return (value, t)


_NAMESPACE = {"np": np, "_convert": convert, "_reinterpret": reinterpret, "_bitslice": bitslice,
              "_bitindex": bitindex, "_bitreverse": bitreverse, "_uniform": uniform, "_quiet_nan": quiet_nan,
              "_to_quiet_nan": to_quiet_nan, "_exponent": exponent, "_signext_from_bit": signext_from_bit,
              "_is_denormal": is_denormal, "_fma64": fma64, "_fma_odd": fma_odd}
_cache: dict[str, Callable] = {}


def compile_pcode(text: str) -> Callable:
    """A function `f(ctx)` applying the pseudocode `text`; cached per text."""
    if text in _cache:
        return _cache[text]
    c = _Compiler(text)
    c.block(1, ())
    if c.peek()[0] != "end":
        raise PcodeUnsupported(f"trailing {c.peek()[1]!r}")
    source = "def _op(ctx):\n" + "\n".join(c.lines or ["    pass"]) + "\n"
    scope = dict(_NAMESPACE)
    exec(compile(source, "<pcode>", "exec"), scope)
    fn = scope["_op"]
    fn.source = source  # type: ignore[attr-defined]
    fn.operands = frozenset(c.operands)  # type: ignore[attr-defined]
    _cache[text] = fn
    return fn
