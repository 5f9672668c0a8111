"""Device printf formatting on the host (target-neutral).

vprintf receives the format and a buffer of packed arguments, each aligned to its size: ints
are 4 bytes (8 with l/ll/j/z/t), `*` widths and precisions 4, chars 4, floats (promoted to
double), strings and pointers 8. Both targets format with `format_printf`; the AMDGPU target
also needs `argument_layout` to copy the arguments into its output buffer.
"""

from __future__ import annotations

import ctypes
import re
from typing import Iterator

SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcspn%])")
_WIDE = ("l", "ll", "j", "z", "t")


def c_string(address: int) -> bytes:
    """The NUL-terminated string at a host address ("(null)" for 0)."""
    return ctypes.string_at(address) if address else b"(null)"


def _fields(text: str) -> Iterator[tuple[re.Match, list[tuple[int, int]]]]:
    """Each conversion of a format and the (offset, size) of the arguments it consumes, in order:
    the `*` width, the `*` precision, then the value."""
    offset = 0

    def take(size: int) -> tuple[int, int]:
        nonlocal offset
        at = (offset + size - 1) // size * size
        offset = at + size
        return at, size

    for m in SPEC.finditer(text):
        _, width, prec, length, conv = m.groups()
        if conv in "%n":
            yield m, []
            continue
        args = [take(4) for star in (width, prec) if star == "*"]
        if conv in "diouxX":
            args.append(take(8 if length in _WIDE else 4))
        else:
            args.append(take(4 if conv == "c" else 8))
        yield m, args


def argument_layout(fmt: bytes) -> tuple[int, list[int]]:
    """(bytes of packed arguments, offsets of %s pointers) for a format."""
    end = 0
    strings: list[int] = []
    for m, args in _fields(fmt.decode("latin-1")):
        if args:
            end = args[-1][0] + args[-1][1]
            if m.group(5) == "s":
                strings.append(args[-1][0])
    return end, strings


def format_printf(fmt: bytes, args: int) -> bytes:
    """Format like device printf; `args` is the host address of the packed arguments."""
    def read(field: tuple[int, int], kind: str) -> int | float:
        offset, size = field
        raw = ctypes.string_at(args + offset, size)
        if kind == "f":
            return ctypes.c_double.from_buffer_copy(raw).value
        return int.from_bytes(raw, "little", signed=(kind == "s"))

    out = bytearray()
    pos = 0
    text = fmt.decode("latin-1")
    for m, fields in _fields(text):
        out += text[pos:m.start()].encode("latin-1")
        pos = m.end()
        flags, width, prec, _, conv = m.groups()
        if conv == "%":
            out += b"%"
            continue
        if conv == "n":
            continue
        fields = list(fields)
        if width == "*":
            width = str(read(fields.pop(0), "s"))
        if prec == "*":
            prec = str(read(fields.pop(0), "s"))
        spec = "%" + flags + (width or "") + (f".{prec}" if prec is not None else "")
        value = fields[0]
        if conv in "di":
            out += (spec + "d").__mod__(read(value, "s")).encode()
        elif conv in "ouxX":
            out += (spec + ("d" if conv == "u" else conv)).__mod__(read(value, "u")).encode()
        elif conv in "eEfFgGaA":
            number = read(value, "f")
            out += (float.hex(number) if conv in "aA" else (spec + conv) % number).encode()
        elif conv == "c":
            out += (spec + "c").__mod__(chr(read(value, "u") & 0xFF)).encode("latin-1")
        elif conv == "s":
            out += (spec + "s").__mod__(c_string(read(value, "u")).decode("latin-1")).encode("latin-1")
        elif conv == "p":
            out += (spec + "s").__mod__(hex(read(value, "u"))).encode()
    out += text[pos:].encode("latin-1")
    return bytes(out)
