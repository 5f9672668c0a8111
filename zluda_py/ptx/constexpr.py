"""PTX constant expressions (PTX ISA, "Constant Expressions"): `(1 + 2) * 3`, `~0 >> 4`,
`1.0 / 3.0`, `(.u64)-1`, `c ? a : b`, in operands, initializers and address offsets.

Where the manual and ptxas 13.0 (whose front end NVIDIA's driver shares) disagree, this follows
ptxas, each rule checked against the bytes ptxas writes for initializers
(tests/ptx/test_constant_expressions.py):
* integers are 64-bit, signed (s64) unless a literal needs 64 bits or has a `U` suffix (u64);
  + - * / & | ^ and the ordered comparisons convert both sides to u64 if either is; `%`
  reads both sides as u64 and gives a u64; unary + changes nothing; shifts keep the left side's type and count modulo 64; ! && || ==
  != and comparisons give s64 0 or 1; `&&` and `||` evaluate both sides;
* `c ? a : b` takes integers only and has the type of the side it picks (no conversion);
* floating-point arithmetic is in f64 (+ - * / and comparisons; no casts to or from integers,
  no mixing with integers); division by zero, integer or not, is an error;
* a `0f` literal takes part in an expression only inside parentheses, and there it stands for
  the f64 whose bits are its 32 bits zero-extended (so `(0f3F800000) * 2.0` is a tiny
  denormal, and `-(0f3F800000)` is -0.0 in an .f32, as NVIDIA's driver computes them); alone
  or under unary `+` it stays the f32 bit pattern, and `-0f...` (which ptxas refuses) flips its
  sign bit as before;
* nesting is bounded the way ptxas's parser stack bounds it (about 9,980 parentheses, half as
  many unary operators), without recursion here.

The parser hands tokens in (peek/next); this module turns them into one ast.Imm."""

from __future__ import annotations

import struct
from typing import Protocol

from .ast import Imm, Pos
from .errors import PtxError
from .literals import MAX_INT, hex_float_value, int_value

MASK = (1 << 64) - 1
SIGN = 1 << 63
# ptxas's parser stack holds about 10,000 entries: 9,978 parentheses fit around an operand
# (9,988 around an initializer), 4,994 unary operators; an open parenthesis costs 1 here, a
# pending operator 2.
MAX_WEIGHT = 9978

# binary operators: text -> precedence (C's); all left-associative
_BINARY = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11, "<": 10, ">": 10,
           "<=": 10, ">=": 10, "==": 9, "!=": 9, "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4}
_TERNARY = 3
_UNARY = 14
# first characters of two-character operators, and the second character each takes
_PAIRS = {"<": "<=", ">": ">=", "=": "=", "!": "=", "&": "&", "|": "|"}
_CASTS = {".u64": "u", ".s64": "s"}
_INTEGER_ONLY = frozenset("% << >> & | ^ && || ! ~".split())


class Tokens(Protocol):
    """What the parser offers: tokens as (kind, text, offset), errors at an offset."""

    text: str
    i: int  # the offset the next token is read from

    def peek(self) -> tuple[str, str, int]: ...
    def next(self) -> tuple[str, str, int]: ...
    def error(self, at: int, message: str) -> PtxError: ...


class Value:
    """An evaluated (sub)expression: kind "s"/"u" (value: the 64 bits) or "f" (a Python
    float); `literal` holds (Imm kind, raw bits) while it is a hex float literal no operator
    has touched, `bare` that it is a `0f` literal outside parentheses."""

    __slots__ = ("kind", "value", "literal", "bare")

    def __init__(self, kind: str, value: int | float, literal: tuple[str, int] | None = None,
                 bare: bool = False) -> None:
        self.kind, self.value, self.literal, self.bare = kind, value, literal, bare


def _f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _signed(bits: int) -> int:
    return bits - (1 << 64) if bits & SIGN else bits


def _int(kind: str, value: int) -> Value:
    return Value(kind, value & MASK)


def _truth(flag: bool) -> Value:
    return Value("s", int(flag))


def _unary(op: str, a: Value, at: int, src: Tokens) -> Value:
    if op == "+":  # changes nothing, not even a literal's standing
        if a.bare:
            raise src.error(at, "a 0f literal takes part in an expression only inside parentheses")
        return a
    if a.bare:  # `-0f...`, which ptxas refuses, is taken as the literal with its sign flipped
        if op != "-":
            raise src.error(at, "a 0f literal takes part in an expression only inside parentheses")
        raw = a.literal[1] ^ (1 << 31)
        return Value("f", _f64(raw), ("f32", raw), True)
    if a.literal and a.literal[0] == "f64" and op == "-":  # the same bits as the arithmetic
        raw = a.literal[1] ^ SIGN
        return Value("f", _f64(raw), ("f64", raw))
    if a.kind == "f":
        if op == "-":
            return Value("f", -a.value)
        raise src.error(at, f"'{op}' needs an integer constant expression")
    if op == "-":
        return _int(a.kind, -a.value)
    if op == "~":
        return _int("u", ~a.value)
    if op == "!":
        return _truth(a.value == 0)
    return Value(_CASTS[op], a.value)  # (.u64) / (.s64): the bits stay


def _binary(op: str, a: Value, b: Value, at: int, src: Tokens) -> Value:
    if a.bare or b.bare:
        raise src.error(at, "a 0f literal takes part in an expression only inside parentheses")
    if a.kind == "f" or b.kind == "f":
        if op in _INTEGER_ONLY:
            raise src.error(at, f"'{op}' needs integer constant expressions")
        if a.kind != "f" or b.kind != "f":
            raise src.error(at, f"'{op}' mixes an integer and a floating-point constant")
        x, y = a.value, b.value
        if op == "+":
            return Value("f", x + y)
        if op == "-":
            return Value("f", x - y)
        if op == "*":
            return Value("f", x * y)
        if op == "/":
            if y == 0:
                raise src.error(at, "division by zero in a constant expression")
            return Value("f", x / y)
        return _truth({"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y}[op])
    x, y = a.value, b.value
    if op in ("<<", ">>"):
        n = y & 63
        if op == "<<":
            return _int(a.kind, x << n)
        return _int(a.kind, (_signed(x) if a.kind == "s" else x) >> n)
    if op == "&&":
        return _truth(x != 0 and y != 0)
    if op == "||":
        return _truth(x != 0 or y != 0)
    if op == "==":
        return _truth(x == y)
    if op == "!=":
        return _truth(x != y)
    kind = "u" if "u" in (a.kind, b.kind) else "s"
    if op in ("/", "%") and y == 0:
        raise src.error(at, "division by zero in a constant expression")
    if op == "%":
        return _int("u", x % y)
    if kind == "s":
        x, y = _signed(x), _signed(y)
    if op == "+":
        return _int(kind, x + y)
    if op == "-":
        return _int(kind, x - y)
    if op == "*":
        return _int(kind, x * y)
    if op == "/":  # C's division truncates; the s64 minimum over -1 wraps (ptxas itself crashes)
        q = abs(x) // abs(y)
        return _int(kind, q if (x < 0) == (y < 0) else -q)
    if op == "&":
        return _int(kind, x & y)
    if op == "|":
        return _int(kind, x | y)
    if op == "^":
        return _int(kind, x ^ y)
    return _truth({"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op])


def _ternary(c: Value, a: Value, b: Value, at: int, src: Tokens) -> Value:
    if "f" in (c.kind, a.kind, b.kind) or c.bare or a.bare or b.bare:
        raise src.error(at, "'?:' needs integer constant expressions")
    return a if c.value else b


def _literal(tok: tuple[str, str, int], src: Tokens, constants: dict[str, int]) -> Value:
    kind, text, at = tok
    if kind == "int":
        value = int_value(text)
        if value is None:
            raise src.error(at, f"invalid octal literal {text!r}")
        if value > MAX_INT:
            raise src.error(at, f"integer literal {text[:24]}{'...' if len(text) > 24 else ''} "
                                "is out of range: more than 64 bits")
        return Value("u" if text[-1] == "U" or value & SIGN else "s", value)
    if kind == "float":
        return Value("f", float(text))
    if kind == "fhex":
        raw, k = hex_float_value(text)
        return Value("f", _f64(raw), (k, raw), bare=k == "f32")
    if kind == "id" and text in constants:
        return Value("s", constants[text])
    raise src.error(at, f"expected a constant, found {text!r}" if kind != "eof" else
                    "expected a constant, found end of file")


def _operator(src: Tokens, tok: tuple[str, str, int]) -> str | None:
    """The binary operator (or '?', ':') starting at `tok`, if one does; two-character
    operators are written without a blank between their characters, as ptxas reads them."""
    kind, text, at = tok
    if kind == "id" and text == "%":
        return "%"
    if kind != "p":
        return None
    pair = _PAIRS.get(text)
    if pair is not None and src.text[at + 1:at + 2] == pair[-1] and (text + pair[-1]) in _BINARY:
        return text + pair[-1]
    if text in ("<", ">") and src.text[at + 1:at + 2] == text:
        return text * 2
    return text if text in _BINARY or text in "?:" else None


def evaluate(src: Tokens, pos: Pos, constants: dict[str, int]) -> Imm:
    """Read one constant expression from `src` and return its value as an immediate at `pos`:
    an "int" (signed or unsigned by its type), a "float", or an untouched hex float literal's
    bits ("f32"/"f64"). Stops before the first token that cannot continue it."""
    vals: list[Value] = []
    # pending operators: ("(", at), ("u", op, at), ("b", op, at), ("?", at), (":", at)
    ops: list[tuple] = []
    weight = 0
    parens = 0  # open "(" in ops

    def apply(entry: tuple) -> None:
        if entry[0] == "u":
            vals.append(_unary(entry[1], vals.pop(), entry[2], src))
        elif entry[0] == "b":
            b = vals.pop()
            vals.append(_binary(entry[1], vals.pop(), b, entry[2], src))
        else:  # ":" (a completed ?:)
            b, a = vals.pop(), vals.pop()
            vals.append(_ternary(vals.pop(), a, b, entry[1], src))

    def reduce(prec: int) -> None:
        nonlocal weight
        while ops:
            top = ops[-1]
            level = {"u": _UNARY, "b": 0, ":": _TERNARY}.get(top[0], -1)  # "(" and "?" stay
            if top[0] == "b":
                level = _BINARY[top[1]]
            if level < prec:
                return
            ops.pop()
            weight -= 2
            apply(top)

    while True:  # expecting an operand
        tok = src.peek()
        kind, text, at = tok
        if kind == "p" and text == "(":
            src.next()
            nxt = src.peek()
            if nxt[0] == "dot":
                cast = nxt[1]
                if cast not in _CASTS:
                    raise src.error(nxt[2], f"unsupported cast {cast!r}: (.u64) and (.s64) are the casts")
                src.next()
                close = src.peek()
                if close[1] != ")":
                    raise src.error(close[2], "expected ')' after the cast")
                src.next()
                ops.append(("u", cast, at))
                weight += 2
            else:
                ops.append(("(", at))
                weight += 1
                parens += 1
        elif kind == "p" and text in "+-~!":
            src.next()
            ops.append(("u", text, at))
            weight += 2
        else:
            vals.append(_literal(src.next() if kind != "eof" else tok, src, constants))
            # expecting an operator, a ')' or the end
            while True:
                tok = src.peek()
                op = _operator(src, tok)
                if tok[0] == "p" and tok[1] == ")" and parens:
                    src.next()
                    reduce(0)
                    if ops[-1][0] == "?":
                        raise src.error(tok[2], "expected ':' in the '?:' expression")
                    ops.pop()  # its "("
                    weight -= 1
                    parens -= 1
                    inner = vals[-1]
                    if inner.bare:
                        vals[-1] = Value(inner.kind, inner.value, inner.literal)
                    continue
                if op == ":":
                    # the innermost open '?', past the operators that complete its middle
                    k = len(ops) - 1
                    while k >= 0 and ops[k][0] not in ("?", "("):
                        k -= 1
                    if k < 0 or ops[k][0] == "(":
                        op = None
                    else:
                        src.i = tok[2] + 1
                        while ops[-1][0] != "?":
                            entry = ops.pop()
                            weight -= 2
                            apply(entry)
                        ops[-1] = (":", ops[-1][1])
                        break
                if op is None:
                    reduce(0)
                    if ops:
                        entry = ops[-1]
                        if entry[0] == "(":
                            raise src.error(tok[2], "expected ')' to close the constant expression"
                                            + (f", found {tok[1]!r}" if tok[0] != "eof" else ""))
                        raise src.error(tok[2], "expected ':' in the '?:' expression")
                    result = vals[0]
                    if result.literal:
                        return Imm(result.literal[1], result.literal[0], pos=pos)
                    if result.kind == "f":
                        return Imm(result.value, "float", pos=pos)
                    return Imm(_signed(result.value) if result.kind == "s" else result.value, "int", pos=pos)
                src.i = tok[2] + len(op)
                if op == "?":
                    reduce(_TERNARY + 1)
                    ops.append(("?", tok[2]))
                else:
                    reduce(_BINARY[op])
                    ops.append(("b", op, tok[2]))
                weight += 2
                break
        if weight > MAX_WEIGHT:
            raise src.error(at, "constant expression nested too deeply")

