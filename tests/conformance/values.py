"""Input generation for conformance tests: edge values plus seeded random samples, as unsigned
bit patterns, and small helpers converting between patterns and Python ints."""

from __future__ import annotations

import numpy as np

from conformance.harness import DTYPES

N_RANDOM = 3000


def rng(seed: int = 1234) -> np.random.Generator:
    return np.random.default_rng(seed)


def int_edges(bits: int) -> list[int]:
    """Interesting unsigned patterns of a width: 0, 1, all ones, sign boundaries, small values."""
    m = (1 << bits) - 1
    h = 1 << (bits - 1)
    vals = {0, 1, 2, 3, 7, m, m - 1, h, h - 1, h + 1, 0x55 & m, 0xAA & m, 24, 31, 32, 33, 63, 64, 65}
    vals |= {(m >> k) for k in (1, 7, 8, 15, 16)} | {(1 << k) & m for k in range(0, bits, 5)}
    return sorted(v & m for v in vals)


def random_bits(bits: int, n: int = N_RANDOM, seed: int = 1) -> np.ndarray:
    g = rng(seed)
    if bits == 1:
        return g.integers(0, 2, n, dtype=np.uint8)
    raw = g.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + g.integers(0, 2, n, dtype=np.uint64)
    return (raw & np.uint64((1 << bits) - 1)).astype(DTYPES[bits])


def pairs(bits_a: int, bits_b: int | None = None, n: int = N_RANDOM, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of edge values, then random pairs."""
    bits_b = bits_b or bits_a
    ea, eb = int_edges(bits_a), int_edges(bits_b)
    a = [x for x in ea for _ in eb]
    b = [y for _ in ea for y in eb]
    ra, rb = random_bits(bits_a, n, seed), random_bits(bits_b, n, seed + 1)
    return (np.concatenate([np.array(a, DTYPES[bits_a]), ra]),
            np.concatenate([np.array(b, DTYPES[bits_b]), rb]))


def to_signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def from_int(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def as_ints(arr: np.ndarray, bits: int, signed: bool) -> list[int]:
    return [to_signed(int(x), bits) if signed else int(x) for x in arr]


def check_bits(got: np.ndarray, expected: list[int] | np.ndarray, inputs: list[np.ndarray], what: str) -> None:
    """Compare bit patterns; on failure name the first mismatching inputs."""
    exp = np.asarray(expected, dtype=got.dtype) if not isinstance(expected, np.ndarray) else expected.astype(got.dtype)
    bad = np.nonzero(got != exp)[0]
    if len(bad):
        i = bad[0]
        args = ", ".join(hex(int(x[i])) for x in inputs)
        raise AssertionError(f"{what}: {len(bad)} of {len(got)} wrong; first: ({args}) -> "
                             f"{hex(int(got[i]))}, expected {hex(int(exp[i]))}")
