"""Float operand generators (bit patterns): specials, boundaries, random patterns, and values
close to each other so sums cancel and products under/overflow."""

from __future__ import annotations

import numpy as np

from conformance.harness import DTYPES
from conformance.refs import Format

WIDTH = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16}


def edges(f: Format) -> list[int]:
    sign = 1 << (f.total - 1)
    one = ((1 << (f.ebits - 1)) - 1) << f.mbits
    pos = [0, 1, 2, (1 << f.mbits) - 1, 1 << f.mbits, (1 << f.mbits) + 1, one, one + 1, one - 1,
           one + (1 << f.mbits), one - (1 << f.mbits), f.inf - 1, f.inf - 2, f.inf,
           f.inf + 1, f.inf | (1 << (f.mbits - 1)), f.inf | ((1 << f.mbits) - 1)]
    return pos + [p | sign for p in pos]


def patterns(f: Format, n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    bits = f.total
    dt = DTYPES[bits]
    raw = g.integers(0, 1 << 62, n, dtype=np.uint64) * np.uint64(4) + g.integers(0, 4, n, dtype=np.uint64)
    raw &= np.uint64((1 << bits) - 1)
    # Half the samples get exponents near 1.0 so that results are mostly finite and interesting.
    near = g.random(n) < 0.5
    span = max(2, min(1 << (f.ebits - 2), 40))
    exp = (((1 << (f.ebits - 1)) - 1) + g.integers(-span, span, n)).astype(np.uint64)
    mant = raw & np.uint64((1 << f.mbits) - 1)
    sign = raw >> np.uint64(bits - 1) << np.uint64(bits - 1)
    nice = sign | (exp << np.uint64(f.mbits)) | mant
    return np.where(near, nice, raw).astype(dt)


def operand_sets(f: Format, arity: int, n: int = 2500, seed: int = 0) -> list[np.ndarray]:
    """Edge cross products (for arity <= 2) followed by random samples; arrays of bit patterns."""
    dt = DTYPES[f.total]
    e = edges(f)
    cols: list[list[int]]
    if arity == 1:
        cols = [e]
    elif arity == 2:
        cols = [[x for x in e for _ in e], [y for _ in e for y in e]]
    else:
        cols = [[x for x in e for _ in e], [y for _ in e for y in e], (e * len(e))[::-1]]
    out = []
    for k, col in enumerate(cols):
        rnd = patterns(f, n, seed + 17 * k)
        out.append(np.concatenate([np.array(col, dt), rnd]))
    if arity >= 2:  # cancellation: b close to -a or a
        m = n // 4
        a = out[0][-m:]
        flip = np.array(1 << (f.total - 1), dt)
        out[1][-m:] = (a ^ flip) + (np.random.default_rng(seed).integers(0, 3, m).astype(dt))
    return out
