"""saxpy (memory bound) and fma64 (compute bound) on the CPU target vs the same loop in C (gcc -O3
-march=native), single thread and all cores. Prints throughput and ratios from one run.

    python bench/cpu_saxpy.py [n]
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
void saxpy(int n, float a, const float* restrict x, float* restrict y) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
void fma64(int n, const float* restrict x, float* restrict y) {
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float v = x[i], acc = 0.0f;
        for (int k = 0; k < 64; k++) acc = __builtin_fmaf(acc, v, 1.0f);
        y[i] = acc;
    }
}
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 22
    m = kernels()
    lib = c_library(C_CODE, openmp=True)
    ptr = ctypes.c_void_p
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    y = np.random.default_rng(1).random(n, dtype=np.float32)
    blocks = (n + 255) // 256

    def gpu_saxpy() -> None:
        m.launch("_Z5saxpyifPKfPf", (blocks,), (256,), [np.int32(n), np.float32(2.0), x, y])

    def c_saxpy() -> None:
        lib.saxpy(n, ctypes.c_float(2.0), ptr(x.ctypes.data), ptr(y.ctypes.data))

    small = 1 << 16  # fma64 in cache
    xs, ys = x[:small].copy(), np.zeros(small, np.float32)

    def gpu_fma() -> None:
        m.launch("_Z5fma64iPKfPf", (small // 256,), (256,), [np.int32(small), xs, ys])

    def c_fma() -> None:
        lib.fma64(small, ptr(xs.ctypes.data), ptr(ys.ctypes.data))

    workers = runtime.worker_count()
    print(f"cpu: {os.cpu_count()} cores, {workers} workers; saxpy n={n}, fma64 n={small}")
    c1 = best_time(c_saxpy)
    cf = best_time(c_fma)
    for threads in sorted({1, workers}):
        runtime.worker_count = lambda t=threads: t  # noqa: E731
        runtime._pool = None
        g = best_time(gpu_saxpy)
        gf = best_time(gpu_fma)
        print(f"  {threads} thread(s): saxpy {n / g / 1e9:6.2f} G elem/s (C 1 thread {n / c1 / 1e9:6.2f}) "
              f"ratio {c1 / g:5.2f}x | fma64 {64 * 2 * small / gf / 1e9:6.1f} GFLOP/s "
              f"(C {64 * 2 * small / cf / 1e9:6.1f}) ratio {cf / gf:5.2f}x")


if __name__ == "__main__":
    main()
