"""The exact float reference agrees with numpy's IEEE round-to-nearest where both apply."""

from __future__ import annotations

import numpy as np

from conformance.refs import F16, F32, F64, decode, encode, reference


def test_reference_matches_numpy_rn():
    g = np.random.default_rng(0)
    a = g.integers(0, 2**32, 4000, dtype=np.uint32)
    b = g.integers(0, 2**32, 4000, dtype=np.uint32)
    fa, fb = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        for op, got in (("add", fa + fb), ("mul", fa * fb), ("div", fa / fb)):
            for x, y, z in zip(a, b, got.view(np.uint32)):
                r = reference(op, [int(x), int(y)], F32)
                if np.isnan(np.uint32(r).view(np.float32)):
                    assert np.isnan(np.uint32(z).view(np.float32))
                else:
                    assert r == int(z), (op, hex(x), hex(y))
    # f64 -> f16 (numpy rounds directly, once)
    d = g.standard_normal(4000) * 2.0 ** g.integers(-30, 20, 4000)
    with np.errstate(over="ignore"):
        halves = d.astype(np.float16).view(np.uint16)
    for x, h in zip(d, halves):
        assert encode(decode(int(np.float64(x).view(np.uint64)), F64), F16) == int(h)
