"""PTX numeric literals: integers in every base and the exact float forms."""

from __future__ import annotations

import math
import re

# 0fXXXXXXXX (f32 bit pattern) and 0dXXXXXXXXXXXXXXXX (f64 bit pattern)
HEX_FLOAT_RE = r"0[fF][0-9a-fA-F]{8}(?![\w$])|0[dD][0-9a-fA-F]{16}(?![\w$])"
DEC_FLOAT_RE = r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w$])|\d+[eE][+-]?\d+(?![\w$])"
INT_RE = r"0[xX][0-9a-fA-F]+U?(?![\w$])|0[bB][01]+U?(?![\w$])|\d+U?(?![\w$])"

_OCTAL = re.compile(r"0[0-7]+")


MAX_INT = (1 << 64) - 1  # PTX integers are 64-bit
TOO_BIG = 1 << 64


def int_value(text: str) -> int | None:
    """Value of an integer literal as lexed by INT_RE; None for a malformed octal like 09;
    TOO_BIG for one past 64 bits with more digits than any 64-bit value has (a literal of a
    million digits is not converted: Python refuses that, and so must we, cheaply)."""
    t = text[:-1] if text[-1] == "U" else text
    if len((t[2:] if t[1:2] in ("x", "X", "b", "B") else t).lstrip("0")) > 64:
        return TOO_BIG
    c = t[1:2]
    if t[0] != "0" or len(t) == 1:
        return int(t)
    if c in "xX":
        return int(t[2:], 16)
    if c in "bB":
        return int(t[2:], 2)
    return int(t, 8) if _OCTAL.fullmatch(t) else None


def hex_float_value(text: str) -> tuple[int, str]:
    """(raw bit pattern, "f32" or "f64") of a 0f/0d literal."""
    return int(text[2:], 16), ("f32" if text[1] in "fF" else "f64")


def format_float(value: float) -> str:
    """A decimal float literal PTX reads back as exactly `value`."""
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    text = repr(value)
    return text if ("." in text or "e" in text) else text + ".0"
