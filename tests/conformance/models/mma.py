"""The warp-level matrix instructions as numpy, written from the PTX ISA manual's "Matrix Fragments
for mma.mMnNkK" sections and the ldmatrix/stmatrix/movmatrix pages, independent of
zluda_py/compiler/matrix.py: each table entry below transcribes one of the manual's row/col
formulas (g = groupID = %laneid >> 2, t = threadID_in_group = %laneid % 4, i = the element
index, low to high across the fragment's registers).

`pack` turns a matrix into the registers of 32 lanes (`[lane, register]`, uint32 or uint64
bit patterns), `unpack` does the reverse; `reference` is D = A*B + C computed exactly
(float64 products and sums of values that fit, Python integers for the integer forms).
"""

from __future__ import annotations

import numpy as np

# (shape, operand, element family) -> (elements per lane, (g, t, i) -> (row, col)).
# Element families: "h" = .f16/.bf16, "w" = .tf32 (32-bit), "d" = .f64, "i8" = .s8/.u8;
# accumulators: "c" (any type: the layout of C and D is the same for every 16x8 shape).
LAYOUTS = {
    # m16n8k16, floating point (manual: Figures 79, 81, 83)
    ("m16n8k16", "a", "h"): (8, lambda g, t, i: (g if i in (0, 1, 4, 5) else g + 8,
                                                  t * 2 + (i & 1) + (8 if i >= 4 else 0))),
    ("m16n8k16", "b", "h"): (4, lambda g, t, i: (t * 2 + (i & 1) + (8 if i >= 2 else 0), g)),
    ("m16n8k16", "a", "d"): (8, lambda g, t, i: (g if i % 2 == 0 else g + 8,
                                                  i * 2 + t if i % 2 == 0 else i * 2 - 2 + t)),
    ("m16n8k16", "b", "d"): (4, lambda g, t, i: (t + i * 4, g)),
    # m16n8k8 (Figures 71-77)
    ("m16n8k8", "a", "h"): (4, lambda g, t, i: (g if i < 2 else g + 8, t * 2 + (i & 1))),
    ("m16n8k8", "b", "h"): (2, lambda g, t, i: (t * 2 + i, g)),
    ("m16n8k8", "a", "w"): (4, lambda g, t, i: (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)),
    ("m16n8k8", "b", "w"): (2, lambda g, t, i: (t if i == 0 else t + 4, g)),
    # m16n8k4 (Figures 65-68)
    ("m16n8k4", "a", "w"): (2, lambda g, t, i: (g if i == 0 else g + 8, t)),
    ("m16n8k4", "b", "w"): (1, lambda g, t, i: (t, g)),
    # .f64 on m16n8k4/m16n8k8: the manual gives the .tf32 formulas again (Figures 66, 68, 73, 76)
    ("m16n8k8", "a", "d"): (4, lambda g, t, i: (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)),
    ("m16n8k8", "b", "d"): (2, lambda g, t, i: (t if i == 0 else t + 4, g)),
    ("m16n8k4", "a", "d"): (2, lambda g, t, i: (g if i == 0 else g + 8, t)),
    ("m16n8k4", "b", "d"): (1, lambda g, t, i: (t, g)),
    # m8n8k4 .f64 (Figures 53-55)
    ("m8n8k4", "a", "d"): (1, lambda g, t, i: (g, t)),
    ("m8n8k4", "b", "d"): (1, lambda g, t, i: (t, g)),
    ("m8n8k4", "c", "c"): (2, lambda g, t, i: (g, t * 2 + (i & 1))),
    # integer (Figures 56-58, 84-86, 88, 90-91)
    ("m8n8k16", "a", "i8"): (4, lambda g, t, i: (g, t * 4 + i)),
    ("m8n8k16", "b", "i8"): (4, lambda g, t, i: (t * 4 + i, g)),
    ("m8n8k16", "c", "c"): (2, lambda g, t, i: (g, t * 2 + i)),
    ("m16n8k16", "a", "i8"): (8, lambda g, t, i: (g if i < 4 else g + 8, t * 4 + (i & 3))),
    ("m16n8k16", "b", "i8"): (4, lambda g, t, i: (t * 4 + i, g)),
    ("m16n8k32", "a", "i8"): (16, lambda g, t, i: (g if (0 <= i < 4 or 8 <= i < 12) else g + 8,
                                                    t * 4 + (i & 3) + (16 if i >= 8 else 0))),
    ("m16n8k32", "b", "i8"): (8, lambda g, t, i: (t * 4 + (i & 3) + (16 if i >= 4 else 0), g)),
}
ACCUMULATOR_16x8 = (4, lambda g, t, i: (g if i < 2 else g + 8, t * 2 + (i & 1)))
FAMILY = {"f16": "h", "bf16": "h", "tf32": "w", "f64": "d", "s8": "i8", "u8": "i8"}
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32}


def layout(shape: str, operand: str, etype: str) -> tuple[int, object]:
    if operand in ("c", "d"):
        return LAYOUTS.get((shape, "c", "c"), ACCUMULATOR_16x8)
    return LAYOUTS[(shape, operand, FAMILY[etype])]


def dims(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def to_bits(values: np.ndarray, etype: str) -> np.ndarray:
    """Element values as unsigned bit patterns of the element's width."""
    if etype == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.uint64)
    if etype == "bf16":  # the values are exact bf16 numbers: the upper half of their f32 encoding
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if etype in ("tf32", "f32"):
        return values.astype(np.float32).view(np.uint32).astype(np.uint64)
    if etype == "f64":
        return values.astype(np.float64).view(np.uint64)
    bits = ELEMENT_BITS[etype]
    return (values.astype(np.int64) & ((1 << bits) - 1)).astype(np.uint64)


def from_bits(bits: np.ndarray, etype: str) -> np.ndarray:
    if etype == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if etype == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if etype == "f64":
        return bits.astype(np.uint64).view(np.float64)
    return bits.astype(np.uint32).view(np.int32).astype(np.int64)  # .s32


def pack(matrix: np.ndarray, shape: str, operand: str, etype: str) -> np.ndarray:
    """Registers [lane, register] holding `matrix` as operand `operand` of an mma of `shape`."""
    count, where = layout(shape, operand, etype)
    bits = ELEMENT_BITS[etype]
    width = 64 if etype == "f64" else 32
    per = width // bits
    out = np.zeros((32, -(-count // per)), np.uint64)
    for lane in range(32):
        for i in range(count):
            r, c = where(lane >> 2, lane % 4, i)
            out[lane, i // per] |= int(to_bits(np.array([matrix[r, c]]), etype)[0]) << (i % per * bits)
    return out.astype(np.uint32 if width == 32 else np.uint64)


def unpack(regs: np.ndarray, shape: str, etype: str) -> np.ndarray:
    """The D matrix (float64, or int64 for .s32) that registers [lane, register] hold."""
    m, n, _ = dims(shape)
    count, where = layout(shape, "d", etype)
    bits = ELEMENT_BITS[etype]
    per = (64 if etype == "f64" else 32) // bits
    out = np.zeros((m, n), np.float64 if etype != "s32" else np.int64)
    for lane in range(32):
        for i in range(count):
            r, c = where(lane >> 2, lane % 4, i)
            word = int(regs[lane, i // per]) >> (i % per * bits) & ((1 << bits) - 1)
            out[r, c] = from_bits(np.array([word], np.uint64), etype)[0]
    return out


def reference_int(a: np.ndarray, b: np.ndarray, c: np.ndarray, satfinite: bool) -> np.ndarray:
    """The integer mma: exact sums, then clamped to s32 (.satfinite) or wrapped."""
    exact = a.astype(object) @ b.astype(object) + c.astype(object)
    if satfinite:
        return np.vectorize(lambda v: min(max(v, -2**31), 2**31 - 1))(exact).astype(np.int64)
    return np.vectorize(lambda v: (v + 2**31) % 2**32 - 2**31)(exact).astype(np.int64)


def error_bound(a: np.ndarray, b: np.ndarray, c: np.ndarray, unit: float) -> np.ndarray:
    """PTX leaves accumulation order and intermediate rounding open: allow a rounding of `unit`
    (relative) per addition over the magnitudes involved, for k+1 additions."""
    k = a.shape[1]
    return (k + 1) * unit * (np.abs(a) @ np.abs(b) + np.abs(c))


# ---------------------------------------------------------------------- ldmatrix/stmatrix/movmatrix
def fragment_8x8(matrix: np.ndarray) -> np.ndarray:
    """The 8x8 .b16 fragment of ldmatrix/stmatrix/movmatrix (manual Figures 104, 107, 109): lane l
    holds row l/4, columns 2(l%4) (low half) and 2(l%4)+1 (high half). uint32[32]."""
    out = np.zeros(32, np.uint32)
    for lane in range(32):
        row, col = lane // 4, 2 * (lane % 4)
        out[lane] = int(matrix[row, col]) | int(matrix[row, col + 1]) << 16
    return out


# ---------------------------------------------------------------------- m8n8k4 .f16 (four products)
# Manual section "Matrix Fragments for mma.m8n8k4 with .f16 floating point type": product q is
# computed by lanes 4q..4q+3 (the low group) and 16+4q..16+4q+3 (the high group), q = 0..3;
# (lane, i) -> (row, col) within product q's 8x4 A, 4x8 B and 8x8 C/D.
def _high(lane: int) -> bool:
    return lane >= 16


QUAD = {
    ("a", "row"): lambda lane, i: (lane % 4 + (4 if _high(lane) else 0), i),  # Figure 46
    ("a", "col"): lambda lane, i: (i % 4 + (4 if _high(lane) else 0), lane % 4),  # Figure 47
    ("b", "row"): lambda lane, i: (lane % 4, i + (4 if _high(lane) else 0)),  # Figure 48
    ("b", "col"): lambda lane, i: (i, lane % 4 + (4 if _high(lane) else 0)),  # Figure 49
    ("c", "f16"): lambda lane, i: (lane % 4 + (4 if _high(lane) else 0), i),  # Figure 50
    ("c", "f32"): lambda lane, i: ((lane & 1) + (i & 2) + (4 if _high(lane) else 0),  # Figures 51-52
                                   (i & 4) + (lane & 2) + (i & 1)),
}


def quad_product(lane: int) -> int:
    return [q for q in range(4) if lane in (*range(4 * q, 4 * q + 4), *range(16 + 4 * q, 20 + 4 * q))][0]


def quad_pack(mats: np.ndarray, operand: str, key: str, etype: str) -> np.ndarray:
    """Registers [lane, register] for the four products' matrices mats[q] (A: key = alayout,
    B: blayout, C: the C type)."""
    count = 4 if operand in ("a", "b") else 8
    per = 32 // ELEMENT_BITS[etype]
    out = np.zeros((32, count // per), np.uint64)
    for lane in range(32):
        for i in range(count):
            r, c = QUAD[(operand, key)](lane, i)
            value = mats[quad_product(lane)][r, c]
            out[lane, i // per] |= int(to_bits(np.array([value]), etype)[0]) << (i % per * ELEMENT_BITS[etype])
    return out.astype(np.uint32)


def quad_unpack(regs: np.ndarray, etype: str) -> np.ndarray:
    bits = ELEMENT_BITS[etype]
    per = 32 // bits
    out = np.zeros((4, 8, 8))
    for lane in range(32):
        for i in range(8):
            r, c = QUAD[("c", etype)](lane, i)
            word = int(regs[lane, i // per]) >> (i % per * bits) & ((1 << bits) - 1)
            out[quad_product(lane), r, c] = from_bits(np.array([word], np.uint64), etype)[0]
    return out
