"""Compile time and run time of the CPU target's kernels under other LLVM settings, in one process
per setting (back-end options are process-wide), to pick settings by both costs.

    python bench/cpu_settings.py                          # the settings the pipeline uses
    python bench/cpu_settings.py --opt 1                  # every kernel at optimiser level 1
    python bench/cpu_settings.py --option=-enable-misched=false   # an extra LLVM option

Each kernel of bench/cuda/suite.cu is compiled as the lazy loader builds it (its own part), and
"compile" is this process's CPU time for lowering, optimising and generating its code; then it
runs on one worker, timed by process CPU time (best of --reps after one warm-up run), so other
jobs on the machine change the figures less than wall clock would. Run settings alternately,
several times, and compare ranges.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from compile import ptx_of  # noqa: E402

import zluda_py.compiler.cpu.runtime as runtime  # noqa: E402
from zluda_py.compiler import pipeline  # noqa: E402
from zluda_py.compiler.cpu import target as cpu_target  # noqa: E402
from zluda_py.compiler.linker import link  # noqa: E402
from zluda_py.ptx import parse  # noqa: E402

N, SIDE, WIDTH, BODIES = 1 << 20, 256, 512, 1024


def cases(rng: np.random.Generator) -> dict[str, tuple]:
    """suite.cu's kernels: (grid, block, arguments), a few milliseconds each."""
    x, y = rng.standard_normal(N).astype(np.float32), np.zeros(N, np.float32)
    a, b = (rng.standard_normal(SIDE * SIDE).astype(np.float32) for _ in range(2))
    img = rng.standard_normal(WIDTH * WIDTH).astype(np.float32)
    pos = rng.standard_normal(BODIES * 4).astype(np.float32)
    keys = rng.integers(0, 1 << 30, N).astype(np.uint32)
    return {
        "saxpy": ((N // 256,), (256,), [np.int32(N), np.float32(2.0), x, y]),
        "sgemm": ((SIDE // 16, SIDE // 16), (16, 16), [np.int32(SIDE), a, b, np.zeros_like(a)]),
        "block_reduce": ((N // 256,), (256,), [np.int32(N), x, y]),
        "warp_reduce": ((N // 256,), (256,), [np.int32(N), x, y]),
        "stencil": ((WIDTH // 16, WIDTH // 16), (16, 16), [np.int32(WIDTH), img, np.zeros_like(img)]),
        "histogram": ((64,), (256,), [np.int32(N), keys, np.zeros(256, np.uint32)]),
        "nbody": ((BODIES // 256,), (256,), [np.int32(BODIES), pos, np.zeros_like(pos)]),
        "scan": ((N // 256,), (256,), [np.int32(N), x, y]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--opt", type=int, help="optimiser level for every kernel (default: the pipeline's opt_level)")
    ap.add_argument("--option", action="append", default=[], help="an extra LLVM option, e.g. -enable-misched=false")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    if a.opt is not None:
        cpu_target.opt_level = lambda lines: a.opt
    cpu_target.BACKEND_OPTIONS += tuple(a.option)
    cpu_target.set_backend_options()  # before the first optimiser run too
    runtime.worker_count = lambda: 1
    runtime.helpers_library()  # the shared helpers are built once per cache, in no kernel's time
    module = link([parse(ptx_of(Path(__file__).parent / "cuda" / "suite.cu"))])
    clock = time.process_time
    row = []
    for short, (grid, block, args) in cases(np.random.default_rng(0)).items():
        name = next(k.name for k in module.kernels() if short in k.name)
        t0 = clock()
        lowered = cpu_target.CPU.lower_part(module, name)
        compiled = pipeline.load(cpu_target.CPU.emit(lowered.text), lowered.metadata)
        built = clock() - t0
        compiled.launch(name, grid, block, args)
        best = float("inf")
        for _ in range(a.reps):
            t0 = clock()
            compiled.launch(name, grid, block, args)
            best = min(best, clock() - t0)
        row.append(f"{short} {built:.2f}/{best * 1e3:.2f}")
    label = " ".join([f"O{a.opt}" if a.opt is not None else "default", *a.option])
    print(f"{label}: kernel compile s/run ms: " + ", ".join(row), flush=True)


if __name__ == "__main__":
    main()
