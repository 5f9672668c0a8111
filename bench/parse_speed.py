"""Parse speed of the PTX front end on real nvcc output: prints MB/s (one core).

    python bench/parse_speed.py [--min-mb 5] [--runs 3]

The corpus is the project's CUDA sources (tests/cuda/) compiled by nvcc for several
targets, with the tests' build cache, repeated whole until at least --min-mb of PTX.
Prints MB/s of process CPU time and of wall time, and the CPU figure for plain and for
`nvcc -G` (debug) modules apart.
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


def corpus(min_bytes: int) -> list[tuple[str, str]]:
    """(kind, text) pairs, kind "-G" for the debug builds and "plain" for the others."""
    spec = importlib.util.spec_from_file_location("_conftest", ROOT / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    texts = [("-G" if "-G" in args else "plain", conftest.nvcc_build([src], args, ".ptx").read_text())
             for src, args in BUILDS]
    out, total = [], 0
    while total < min_bytes:
        for kind, t in texts:
            out.append((kind, t))
            total += len(t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-mb", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from zluda_py import ptx

    texts = corpus(int(args.min_mb * 1e6))
    sizes: dict[str, int] = {}
    for kind, t in texts:
        sizes[kind] = sizes.get(kind, 0) + len(t.encode())
    ptx.parse(texts[0][1])  # load the grammar outside the timing
    # CPU time of this process (one core) and wall time, each the best of --runs: on a shared
    # machine wall time also counts the time other processes hold the core, CPU time less so.
    best_cpu = best_wall = float("inf")
    best_kind = dict.fromkeys(sizes, float("inf"))  # CPU time per kind of module
    for _ in range(args.runs):
        start, start_wall = time.process_time(), time.perf_counter()
        spent = dict.fromkeys(sizes, 0.0)
        for i, (kind, t) in enumerate(texts):
            before = time.process_time()
            ptx.parse(t, f"m{i}.ptx")
            spent[kind] += time.process_time() - before
        best_cpu = min(best_cpu, time.process_time() - start)
        best_wall = min(best_wall, time.perf_counter() - start_wall)
        best_kind = {k: min(best_kind[k], spent[k]) for k in sizes}
    mb = sum(sizes.values()) / 1e6
    print(f"parsed {mb:.1f} MB of PTX: {mb / best_cpu:.1f} MB/s of CPU time ({best_cpu:.2f} s), "
          f"{mb / best_wall:.1f} MB/s wall ({best_wall:.2f} s); best of {args.runs}")
    print("  by kind (CPU time): " + ", ".join(
        f"{k} {sizes[k] / 1e6:.1f} MB at {sizes[k] / 1e6 / best_kind[k]:.1f} MB/s" for k in sizes))

if __name__ == "__main__":
    main()
