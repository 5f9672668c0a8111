"""Parse speed of the PTX front end on real nvcc output: prints MB/s (one core).

    python bench/parse_speed.py [--min-mb 5] [--runs 3]

The corpus is the project's CUDA sources (tests/cuda/) compiled by nvcc for several
targets, with the tests' build cache, repeated whole until at least --min-mb of PTX.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILDS = [
    (src, ["-ptx", f"-arch=sm_{arch}"] + extra)
    for src in ("corpus_thrust.cu", "corpus_sync_atomics.cu", "corpus_types_cg.cu")
    for arch, extra in (("80", []), ("90", []), ("100", []), ("86", ["-lineinfo"]), ("75", ["-G"]))
]


def corpus(min_bytes: int) -> list[str]:
    spec = importlib.util.spec_from_file_location("_conftest", ROOT / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    texts = [conftest.nvcc_build([src], args, ".ptx").read_text() for src, args in BUILDS]
    out, total = [], 0
    while total < min_bytes:
        for t in texts:
            out.append(t)
            total += len(t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-mb", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from zluda_py import ptx

    texts = corpus(int(args.min_mb * 1e6))
    size = sum(len(t.encode()) for t in texts)
    ptx.parse(texts[0])  # load the grammar outside the timing
    # CPU time of this process (one core): on a shared machine wall time also counts the
    # time other processes hold the core. Best of --runs.
    best = wall = None
    for _ in range(args.runs):
        start, start_wall = time.process_time(), time.perf_counter()
        for i, t in enumerate(texts):
            ptx.parse(t, f"m{i}.ptx")
        elapsed = time.process_time() - start
        if best is None or elapsed < best:
            best, wall = elapsed, time.perf_counter() - start_wall
    print(f"parsed {size / 1e6:.1f} MB of PTX in {best:.2f} s of CPU ({wall:.2f} s wall): "
          f"{size / 1e6 / best:.1f} MB/s")


if __name__ == "__main__":
    main()
