"""Block tree reduction (shared memory + barriers) and warp shuffle reduction on the CPU target,
vs a C reduction (gcc -O3 -march=native), on one thread and on all workers.

    python bench/cpu_reduce.py [n]
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cpu_common import best_time, c_library, kernels  # noqa: E402

import zluda_py.compiler.cpu.runtime as runtime  # noqa: E402

C_CODE = """
float sum(int n, const float* restrict x) {
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 22
    m = kernels()
    lib = c_library(C_CODE, openmp=True)
    lib.sum.restype = ctypes.c_float
    x = np.random.default_rng(0).integers(-8, 8, n).astype(np.float32)
    blocks = (n + 255) // 256
    partial = np.zeros(blocks, np.float32)
    lanes = np.zeros(n // 32, np.float32)

    def block() -> None:
        m.launch("_Z12block_reducePKfPfi", (blocks,), (256,), [x, partial, np.int32(n)])

    def warp() -> None:
        m.launch("_Z11warp_reducePKfPfi", (blocks,), (256,), [x, lanes, np.int32(n)])

    def c_sum() -> None:
        lib.sum(n, ctypes.c_void_p(x.ctypes.data))

    block()
    warp()
    assert partial.sum() == x.sum() and lanes.sum() == x.sum()
    c = best_time(c_sum)
    workers = runtime.worker_count()
    print(f"cpu: {os.cpu_count()} cores, {workers} workers; n={n}; C sum {n / c / 1e9:.2f} G elem/s")
    for threads in sorted({1, workers}):
        runtime.worker_count = lambda t=threads: t  # noqa: E731
        runtime._pool = None
        tb, tw = best_time(block), best_time(warp)
        print(f"  {threads} thread(s): block reduction {n / tb / 1e9:5.2f} G threads/s, "
              f"shuffle reduction {n / tw / 1e9:5.2f} G lanes/s")


if __name__ == "__main__":
    main()
