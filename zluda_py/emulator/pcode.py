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

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

Type = tuple[str, int]  # (kind 'u'/'i'/'f', bits); 'b' (raw bits) is read as 'u'
BOOL: Type = ("u", 1)


class PcodeUnsupported(Exception):
    """The pseudocode uses a construct this compiler does not translate."""


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
        out = out & dtype(dst).type((1 << dst[1]) - 1)
    return out


def _float_to_int(x: np.ndarray, dst: Type):
    info = np.iinfo(dtype(dst))
    with np.errstate(invalid="ignore"):
        clipped = np.clip(np.nan_to_num(np.trunc(x), nan=0.0), info.min, info.max)
    return clipped.astype(dtype(dst))


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
    return raw if dst[0] == "u" else raw.view(dtype(dst))


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


def uniform(cond) -> bool:
    c = np.asarray(cond)
    if c.size > 1 and not (c.all() or not c.any()):
        raise PcodeUnsupported("an `if` whose condition differs between lanes")
    return bool(c.flat[0])


# ---------------------------------------------------------------------------- lexer

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|//[^\n]*)
  | (?P<nl>[\n;])
  | (?P<cast>\d+'[UIFB])(?=\s*\()
  | (?P<sized>\d+'(?:-?\d+\.\d+|0x[0-9a-fA-F]+|\d+)[UIFB]?)
  | (?P<float>\d+\.\d+(?:[eE][-+]?\d+)?F?)
  | (?P<int>(?:0x[0-9a-fA-F]+|\d+)(?:ULL|LL|U|L)?)
  | (?P<type>\.[uibf]\d+)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|\*=|\|=|&=|\^=|[-+*/%&|^~!<>?:=()\[\]{},])
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
_OPERANDS = {"S0", "S1", "S2", "D0", "D1", "SCC", "VCC", "EXEC", "M0", "PC", "SIMM16", "SIMM32",
             "SDATA", "VDATA", "DATA", "RETURN_DATA", "ADDR", "OFFSET"}
_KINDS = {"U": "u", "I": "i", "F": "f", "B": "u"}
_BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="),
           ("<<", ">>"), ("+", "-"), ("*", "/", "%")]


@dataclass
class Expr:
    code: str
    type: Type
    weak: bool = False  # an untyped loop variable: takes the other operand's type
    operand: str | None = None  # a bare register name, typed by the following `.type`


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
        self.tmp = 0

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
            self.block(depth + 1, ("endfor",))
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
            t = ltype or (BOOL if name == "SCC" else ("i", 64) if name == "PC" else None)
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

    def read_name(self, name: str, t: Type | None) -> Expr:
        if name in _OPERANDS:
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
        if op in ("==", "!=", "<>", "<", ">", "<=", ">="):
            return Expr(code, BOOL)
        return Expr(code, t)

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
        if fn == "signext" and len(args) == 1:
            t = ("i", 64)
            a = args[0]
            signed = ("i", a.type[1]) if a.type[0] != "f" else None
            if signed is None:
                raise PcodeUnsupported("signext of a float")
            return Expr(_conv(Expr(_conv(a, signed), signed), t), t)
        if fn == "abs" and len(args) == 1:
            return Expr(f"np.abs({args[0].code})", args[0].type)
        if fn in ("fma",) and len(args) == 3 and all(a.type[0] == "f" for a in args):
            t = args[0].type
            wide = ("f", 64)  # exact product and sum in f64 then one rounding: exact for f32/f16
            if t[1] == 64:
                raise PcodeUnsupported("fma on f64")
            return Expr(_conv(Expr(f"({_conv(args[0], wide)} * {_conv(args[1], wide)} + {_conv(args[2], wide)})", wide), t), t)
        raise PcodeUnsupported(f"function {fn}()")


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
    if suffix == "" and value >= 1 << 31:
        t = ("u", 32) if value < 1 << 32 else ("u", 64)
    return (value, t)


_NAMESPACE = {"np": np, "_convert": convert, "_reinterpret": reinterpret, "_bitslice": bitslice,
              "_bitindex": bitindex, "_bitreverse": bitreverse, "_uniform": uniform}
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
    _cache[text] = fn
    return fn
