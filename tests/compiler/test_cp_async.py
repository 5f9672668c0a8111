"""cp.async into shared memory, with and without the src-size operand (PTX: the bytes of the
copy at or past src-size are written as zeros)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zluda_py.compiler import compile

PTX = Path(__file__).parent / "ptx" / "cp_async.ptx"


def test_cp_async_copies_and_zero_fills_past_src_size():
    threads = 64
    src = np.random.default_rng(7).integers(1, 256, threads * 16, dtype=np.uint8)
    out = np.zeros_like(src)
    compile(PTX.read_text()).launch("cp_async", (1,), (threads,), [src, out])
    expected = src.copy().reshape(threads, 16)
    for t in range(32, threads):
        expected[t, min((t * 5) % 17, 16):] = 0
    np.testing.assert_array_equal(out.reshape(threads, 16), expected)
