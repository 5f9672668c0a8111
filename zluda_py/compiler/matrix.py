"""Warp-level matrix instructions (PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions"):
which forms are translated, and where each matrix element lives in a warp's registers.

Defined once, target-neutral; both targets lower them from these tables (cpu/mma.py over a lane
vector, amdgpu/mma.py one lane at a time with cross-lane reads), and compute with
matrix_values.py. The fragment layouts are the manual's "Matrix Fragments for mma.mMnNkK" formulas, with
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
    wmma: bool = False  # wmma.mma: our own fragment layout (wmma_fragment)
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
            rows, cols = {"a": (self.m, self.k), "b": (self.k, self.n)}.get(operand, (self.m, self.n))
            return wmma_fragment(rows, cols)
        etype = {"a": self.atype, "b": self.btype, "c": self.ctype, "d": self.dtype}[operand]
        if self.quad:
            return quad_fragment("c" if operand == "d" else operand, etype, self.layouts)
        return fragment(self.m, self.n, self.k, "c" if operand == "d" else operand, etype)

    def registers(self, operand: str) -> tuple[int, int]:
        """(number of registers, register bits) of an operand's vector expression."""
        etype = {"a": self.atype, "b": self.btype, "c": self.ctype, "d": self.dtype}[operand]
        if self.wmma:
            return wmma_registers(operand, etype), 64 if etype == "f64" else 32
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


def matrix_space(inst: ast.Instruction) -> str:
    """ldmatrix/stmatrix: the state space of the row addresses (shared, or generic)."""
    return "shared" if any(m.startswith("shared") for m in inst.mods) else "generic"


def matrix_rows(m: int, trans: bool, half: int = 0) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """ldmatrix/stmatrix of matrix `m`: per lane, the lane whose row address it uses and the
    bytes added to it. Not transposed, lane l moves row l/4's columns 2(l%4) and 2(l%4)+1 (one
    32-bit word); transposed, half `half` of its word is column l/4 of stored row 2(l%4)+half."""
    if not trans:
        return tuple(8 * m + lane // 4 for lane in range(WARP)), tuple(4 * (lane % 4) for lane in range(WARP))
    return (tuple(8 * m + 2 * (lane % 4) + half for lane in range(WARP)),
            tuple(2 * (lane // 4) for lane in range(WARP)))


def movmatrix_source(half: int) -> tuple[tuple[int, int], ...]:
    """movmatrix: per lane l, (source lane, half of its word) of its result's half `half`, which
    is element (2(l%4)+half, l/4) of the source matrix; element (r, c) is lane 4r + c/2's half c%2."""
    return tuple((4 * (2 * (lane % 4) + half) + lane // 8, (lane // 4) % 2) for lane in range(WARP))



# wmma: PTX leaves the fragment layout to the implementation. Ours: an R x C matrix's elements in
# row-major order, E = R*C/32 consecutive ones per lane (lane l holds elements lE .. lE+E-1), low
# to high across the registers; a fragment with more register room than elements (an .f16 A of
# m16n16k16: eight .f16x2 registers for 8 elements) repeats its words. wmma.load/store/mma agree
# on it, which is all PTX asks.
WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m16n16k8": (16, 16, 8), "m8n8k4": (8, 8, 4)}
WMMA_TYPES = {  # shape -> (A/B types, C/D types)
    "m16n16k16": (("f16", "bf16", "s8", "u8"), ("f16", "f32", "s32")),
    "m16n16k8": (("tf32",), ("f32",)),
    "m8n8k4": (("f64",), ("f64",)),
}
# registers per fragment, as the manual's "Matrix Fragments for WMMA" fixes them: (A/B, C/D) by type
WMMA_REGISTERS = {"f16": (8, 4), "bf16": (4, 0), "s8": (2, 0), "u8": (2, 0), "tf32": (4, 0), "f32": (0, 8),
                  "s32": (0, 8), "f64": (1, 2)}


@lru_cache(maxsize=None)
def wmma_fragment(rows: int, cols: int) -> Layout:
    per = rows * cols // WARP
    return tuple(tuple(divmod(lane * per + e, cols) for e in range(per)) for lane in range(WARP))


def wmma_dims(shape: str, operand: str) -> tuple[int, int]:
    m, n, k = WMMA_SHAPES[shape]
    return {"a": (m, k), "b": (k, n)}.get(operand, (m, n))


def wmma_registers(operand: str, etype: str) -> int:
    return WMMA_REGISTERS[etype][0 if operand in ("a", "b") else 1]


@dataclass(frozen=True)
class WmmaMove:
    """A wmma.load or wmma.store: operand a/b/c (load) or d (store) of `shape`."""

    operand: str
    etype: str
    shape: str
    space: str
    row_major: bool


def wmma_form(inst: ast.Instruction) -> WmmaMove | MmaForm:
    """wmma.load/.store: its WmmaMove; wmma.mma: its MmaForm. Raises the unsupported error for
    what is not built: the m8n32k16/m32n8k16 shapes, sub-byte and single-bit forms, .satfinite
    on floating point, directed rounding of .f64."""
    mods = inst.mods
    shape = next((m for m in mods if m in WMMA_SHAPES), "")
    if not shape:
        raise unsupported(inst, "only the wmma shapes m16n16k16, m16n16k8 and m8n8k4 are translated")
    ab, cd = WMMA_TYPES[shape]
    types = inst.types
    if mods[0] == "mma":
        m, n, k = WMMA_SHAPES[shape]
        if len(types) == 2:  # .f16 multiplicands: .dtype.ctype
            types = (types[0], "f16", "f16", types[1])
        dtype, atype, btype, ctype = types if len(types) == 4 else ("",) * 4
        integer = atype in ("s8", "u8")
        if not (atype in ab and btype == atype and dtype in cd and ctype in cd):  # ptxas: A and B types agree
            raise unsupported(inst, "wmma.mma with these types is not translated")
        if integer != ((dtype, ctype) == ("s32", "s32")) or (atype != "f16" and dtype != ctype):
            raise unsupported(inst, "wmma.mma with these accumulator types is not translated")
        if "satfinite" in mods and not integer:
            raise unsupported(inst, "wmma .satfinite on floating point is not translated")
        if any(r in mods for r in ("rz", "rm", "rp")):
            raise unsupported(inst, "directed rounding of .f64 wmma is not translated")
        return MmaForm(m, n, k, dtype, atype, btype, ctype, "satfinite" in mods, wmma=True)
    operand = mods[1] if len(mods) > 1 else ""
    allowed = ab if operand in ("a", "b") else cd
    if mods[0] not in ("load", "store") or operand not in ("a", "b", "c", "d") or len(types) != 1 \
            or types[0] not in allowed:
        raise unsupported(inst, "wmma form not recognised")
    space = next((m.split("::")[0] for m in mods if m in ("global", "shared", "shared::cta")), "generic")
    return WmmaMove(operand, types[0], shape, space, "row" in mods)
