"""Shared helpers for the CPU-target benchmarks: build the CUDA kernels and C baselines, time them."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

from zluda_py.compiler import CompiledModule, compile

HERE = Path(__file__).parent
CACHE = Path(os.environ.get("ZLUDA_TEST_BUILD_CACHE", Path.home() / ".cache" / "zluda-test-builds"))


def kernels() -> CompiledModule:
    src = HERE / "cuda" / "cpu_kernels.cu"
    CACHE.mkdir(parents=True, exist_ok=True)
    ptx = CACHE / f"cpu_kernels-{hashlib.sha256(src.read_bytes()).hexdigest()[:16]}.ptx"
    if not ptx.exists():
        subprocess.run(["nvcc", "-ptx", "-arch=sm_80", str(src), "-o", str(ptx)], check=True)
    return compile(ptx.read_text())


def c_library(code: str, openmp: bool = False) -> ctypes.CDLL:
    """Compile C with gcc -O3 -march=native (the baseline) and load it."""
    d = tempfile.mkdtemp(prefix="zluda-bench-")
    c, so = os.path.join(d, "k.c"), os.path.join(d, "k.so")
    Path(c).write_text(code)
    flags = ["-O3", "-march=native", "-shared", "-fPIC"] + (["-fopenmp-simd"] if openmp else [])
    subprocess.run(["gcc", *flags, c, "-o", so], check=True)
    return ctypes.CDLL(so)


def best_time(fn, repeat: int = 7) -> float:
    """Best time of `repeat` runs after one warm-up (seconds). With ZLUDA_BENCH_CLOCK=cpu it is
    the process CPU time, which stays meaningful on a machine shared with other work (for one
    worker thread; it sums the time of all threads otherwise)."""
    clock = time.process_time if os.environ.get("ZLUDA_BENCH_CLOCK") == "cpu" else time.perf_counter
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best
