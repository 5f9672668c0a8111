"""Warp-level matrix instructions (PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions"):
which forms are translated, and where each matrix element lives in a warp's registers.

Defined once, target-neutral; the CPU target lowers them (cpu/mma.py), the AMDGPU target refuses
them. The fragment layouts are the manual's "Matrix Fragments for mma.mMnNkK" formulas, with
groupID = %laneid >> 2 and threadID_in_group = %laneid % 4: `fragment(...)[lane][i]` is the
(row, column) of element i (low to high: register i // per_register, bit offset
(i % per_register) * element bits) held by `lane`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from zluda_py.compiler.errors import unsupported
from zluda_py.ptx import ast

WARP = 32
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32}
# The forms translated, by shape: the multiplicand types each accepts (A and B alike).
SHAPES = {
    (16, 8, 8): ("f16", "bf16", "tf32", "f64"),
    (16, 8, 16): ("f16", "bf16", "f64", "s8", "u8"),
    (16, 8, 4): ("tf32", "f64"),
    (8, 8, 4): ("f64", "f16"),
    (8, 8, 16): ("s8", "u8"),
    (16, 8, 32): ("s8", "u8"),
}
ACCUMULATORS = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f64": ("f64",), "s8": ("s32",),
                "u8": ("s32",)}
Layout = tuple[tuple[tuple[int, int], ...], ...]  # [lane][element] -> (row, column)


@dataclass(frozen=True)
class MmaForm:
    m: int
    n: int
    k: int
    dtype: str
    atype: str
    btype: str
    ctype: str
    satfinite: bool
    wmma: bool = False  # wmma.mma: our own fragment layout (WMMA_FRAGMENT)
    layouts: str = "row.col"  # .alayout.blayout (only m8n8k4 .f16 takes others)

    @property
    def quad(self) -> bool:
        """m8n8k4 .f16: four independent 8x8x4 products, one per quad pair (lanes 4q..4q+3 and
        16+4q..16+4q+3). They are computed as one 32x4 by 4x32 product whose diagonal 8x8
        blocks are the four results (`fragment` places product q's elements in block q)."""
        return (self.m, self.n, self.k) == (8, 8, 4) and self.atype == "f16"

    @property
    def size(self) -> tuple[int, int]:
        """Rows and columns of the C/D matrix the helper computes."""
        return (32, 32) if self.quad else (self.m, self.n)

    @property
    def name(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        kind = "wmma." if self.wmma else ""
        order = f".{self.layouts}" if self.quad else ""
        return f"{kind}m{self.m}n{self.n}k{self.k}{order}{sat}.{self.dtype}.{self.atype}.{self.btype}.{self.ctype}"

    def layout(self, operand: str) -> Layout:
        """Operand "a", "b", "c" or "d" (C and D share theirs)."""
        if self.wmma:
            return WMMA_FRAGMENT
        etype = {"a": self.atype, "b": self.btype, "c": self.ctype, "d": self.dtype}[operand]
        if self.quad:
            return quad_fragment("c" if operand == "d" else operand, etype, self.layouts)
        return fragment(self.m, self.n, self.k, "c" if operand == "d" else operand, etype)

    def registers(self, operand: str) -> tuple[int, int]:
        """(number of registers, register bits) of an operand's vector expression."""
        etype = {"a": self.atype, "b": self.btype, "c": self.ctype, "d": self.dtype}[operand]
        if self.wmma:
            return wmma_registers(operand, etype), 32
        width = 64 if etype == "f64" else 32
        per = width // BITS[etype]
        return -(-len(self.layout(operand)[0]) // per), width


def mma_form(inst: ast.Instruction) -> MmaForm:
    """The mma form of `inst` (opcode "mma"), or the unsupported error naming what is not built."""
    mods = inst.mods
    if "sp" in mods or any(m.startswith("sp::") for m in mods):
        raise unsupported(inst, "sparse mma is not translated")
    if any(m.startswith(("kind::", "scale_vec::")) or m == "block_scale" for m in mods):
        raise unsupported(inst, "block-scaled and .kind mma are not translated")
    shape = next((m for m in mods if re.fullmatch(r"m\d+n\d+k\d+", m)), "")
    types = inst.types
    if len(types) != 4 or not shape:
        raise unsupported(inst, "mma form not recognised")
    m, n, k = (int(x) for x in re.findall(r"\d+", shape))
    dtype, atype, btype, ctype = types
    if atype not in SHAPES.get((m, n, k), ()) or btype not in SHAPES[(m, n, k)]:
        raise unsupported(inst, f"mma.{shape} with .{atype}/.{btype} multiplicands is not translated")
    if (atype in ("s8", "u8")) != (btype in ("s8", "u8")) or (atype not in ("s8", "u8") and atype != btype):
        raise unsupported(inst, "mixed multiplicand types")
    quad = (m, n, k) == (8, 8, 4) and atype == "f16"
    mixed = quad and (dtype, ctype) == ("f32", "f16")  # m8n8k4: an .f16 C may give an .f32 D
    if ctype not in ACCUMULATORS[atype] or dtype not in ACCUMULATORS[atype] or (dtype != ctype and not mixed):
        raise unsupported(inst, f"accumulators .{dtype}/.{ctype} with .{atype}")
    layouts = ".".join(x for x in mods if x in ("row", "col"))
    if layouts != "row.col" and not (quad and len(layouts) == 7):
        raise unsupported(inst, "only .row.col layouts are translated")
    if any(r in mods for r in ("rz", "rm", "rp")):
        raise unsupported(inst, "directed rounding of .f64 mma is not translated")
    return MmaForm(m, n, k, dtype, atype, btype, ctype, "satfinite" in mods, layouts=layouts)


@lru_cache(maxsize=None)
def fragment(m: int, n: int, k: int, operand: str, etype: str) -> Layout:
    """Per lane, the (row, column) of each fragment element (see the module docstring)."""
    out = []
    for lane in range(WARP):
        g, t = lane >> 2, lane % 4
        out.append(tuple(_element(m, n, k, operand, etype, g, t, i) for i in range(_count(m, n, k, operand, etype))))
    return tuple(out)


def _count(m: int, n: int, k: int, operand: str, etype: str) -> int:
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]
    return rows * cols // WARP


def _element(m: int, n: int, k: int, operand: str, etype: str, g: int, t: int, i: int) -> tuple[int, int]:
    if operand == "c":  # every shape: row groupID (+8 for the second pair), two adjacent columns
        return g + 8 * (i >= 2), 2 * t + (i & 1)
    eight = etype in ("s8", "u8")
    if operand == "a":
        if eight:  # four consecutive columns per 32-bit register
            if k == 16 and m == 8:
                return g, 4 * t + i
            if k == 16:
                return g + 8 * (i >= 4), 4 * t + (i & 3)
            return g + 8 * (4 <= i < 8 or i >= 12), 4 * t + (i & 3) + 16 * (i >= 8)
        if etype in ("f16", "bf16"):
            return g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1) + 8 * (i >= 4)
        if m == 8:  # m8n8k4 .f64
            return g, t
        return g + 8 * (i % 2), t + 4 * (i // 2)  # .tf32/.f64 on m16n8kK
    if eight:
        return (4 * t + i if k == 16 else 4 * t + (i & 3) + 16 * (i >= 4)), g
    if etype in ("f16", "bf16"):
        return 2 * t + (i & 1) + 8 * (i >= 2), g
    return t + 4 * i, g  # .tf32/.f64


@lru_cache(maxsize=None)
def quad_fragment(operand: str, etype: str, layouts: str) -> Layout:
    """m8n8k4 .f16 (the manual's Figures 46-52): lane l takes part in product q = (l >> 2) & 3;
    `high` = l >= 16 holds rows (A, C) or columns (B) 4-7. Placed in the 32x32 product (see
    MmaForm.quad): A row 8q + r, B column 8q + c, C/D block (q, q)."""
    alayout, blayout = layouts.split(".")
    out = []
    for lane in range(WARP):
        q, t, high = (lane >> 2) & 3, lane % 4, 4 * (lane >= 16)
        cells = []
        for i in range(_quad_count(operand)):
            if operand == "a":
                r, c = (t + high, i) if alayout == "row" else (i % 4 + high, t)
                cells.append((8 * q + r, c))
            elif operand == "b":
                r, c = (t, i + high) if blayout == "row" else (i, t + high)
                cells.append((r, 8 * q + c))
            else:
                r, c = (t + high, i) if etype == "f16" else ((lane & 1) + (i & 2) + high, (i & 4) + (lane & 2) + (i & 1))
                cells.append((8 * q + r, 8 * q + c))
        out.append(tuple(cells))
    return tuple(out)


def _quad_count(operand: str) -> int:
    return 4 if operand in ("a", "b") else 8


def matrix_form(inst: ast.Instruction) -> tuple[int, bool]:
    """ldmatrix/stmatrix/movmatrix: (number of 8x8 .b16 matrices, transposed), or the
    unsupported error for the 8-bit and sub-byte shapes."""
    mods = inst.mods
    if "m8n8" not in mods or "b16" not in mods or any(m in mods for m in ("b8x16", "b6x16_p32", "b4x16_p64")):
        raise unsupported(inst, "only the m8n8 .b16 shape is translated")
    if inst.opcode == "movmatrix":
        return 1, True
    count = next((int(m[1]) for m in mods if m in ("x1", "x2", "x4")), 0)
    if not count:
        raise unsupported(inst, "missing .num")
    return count, "trans" in mods


# wmma (m16n16k16 .f16/.bf16 only): PTX leaves the fragment layout to the implementation; ours
# gives lane l row l/2, columns 8(l%2) .. 8(l%2)+7 of each 16x16 matrix, elements low to high.
# An .f16 A or B fragment is eight .f16x2 registers (16 halves) for 8 elements: registers 4-7
# repeat 0-3. wmma.load/store/mma agree on it, which is all PTX asks.
WMMA_FRAGMENT: Layout = tuple(tuple((lane // 2, 8 * (lane % 2) + e) for e in range(8)) for lane in range(WARP))
WMMA_SIZE = 16


def wmma_registers(operand: str, etype: str) -> int:
    """Registers of a wmma m16n16k16 fragment, as the manual's "Matrix Fragments for WMMA" fixes them."""
    if operand in ("a", "b"):
        return 8 if etype == "f16" else 4
    return 4 if etype == "f16" else 8


def wmma_form(inst: ast.Instruction) -> tuple[str, str, str, bool] | MmaForm:
    """wmma.load/.store: (operand a/b/c/d, element type, space, row-major); wmma.mma: its MmaForm.
    Raises the unsupported error for what is not built (every shape but m16n16k16, and
    the integer, .tf32, .f64, sub-byte and .satfinite forms)."""
    mods = inst.mods
    if "m16n16k16" not in mods:
        raise unsupported(inst, "only wmma m16n16k16 is translated")
    if "satfinite" in mods:
        raise unsupported(inst, "wmma .satfinite is not translated")
    types = inst.types
    if mods[0] == "mma":
        if len(types) == 2 and types[0] in ("f16", "f32") and types[1] in ("f16", "f32"):
            return MmaForm(16, 16, 16, types[0], "f16", "f16", types[1], False, wmma=True)
        if types == ("f32", "bf16", "bf16", "f32"):
            return MmaForm(16, 16, 16, "f32", "bf16", "bf16", "f32", False, wmma=True)
        raise unsupported(inst, "wmma.mma with these types is not translated")
    which = next((m for m in mods[1:2] if m in ("a", "b", "c", "d")), "")
    allowed = ("f16", "bf16") if which in ("a", "b") else ("f16", "f32")
    if mods[0] not in ("load", "store") or not which or len(types) != 1 or types[0] not in allowed:
        raise unsupported(inst, "wmma form not recognised")
    space = next((m.split("::")[0] for m in mods if m in ("global", "shared", "shared::cta")), "generic")
    return which, types[0], space, "row" in mods
