"""NVIDIA's driver's answers to the hostile-input suite's cases (zluda_py/fuzz/hostile): each case
through the same entry point, in a forked child of its own, as `python -m zluda_py.fuzz.hostile`
drives ours, one line per case:

    python3 -m tests.hardware.record_hostile --seeds 0-4999 --jobs 14 --out hostile.txt

`seed category entry outcome call=CUresult ...` (outcome as runner.py classifies it; the calls
in order). golden/hostile_nvidia.txt; tests/hostile/test_nvidia_answers.py compares ours
(`--library zluda_py/_shim/libcuda.so.1`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from zluda_py.fuzz.hostile import cases, runner
from zluda_py.fuzz.hostile.__main__ import DEFAULT_CORPUS


def line(r: runner.Result) -> str:
    steps = " ".join(f"{name}={code}" for name, code in r.steps)
    return f"{r.case.seed} {r.case.category} {r.case.entry} {r.outcome} {steps}".rstrip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", required=True, help="A-B, inclusive")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--library", default="libcuda.so.1", help="the driver to ask (default: the system's)")
    ap.add_argument("--only", help="categories to run, comma-separated (default: all)")
    args = ap.parse_args()
    first, _, last = args.seeds.partition("-")
    corpus = cases.Corpus.load(DEFAULT_CORPUS)
    os.environ.update(runner.CHILD_ENV)  # eager loading, no JIT cache: each case stands alone
    limits = runner.Limits(memory=0, cpu=60, wall=120)
    start = time.monotonic()
    results = []
    with open(args.out, "w", buffering=1) as out:  # as they finish: a run cut short keeps its lines
        wanted = [cases.case(s, corpus) for s in range(int(first), int(last) + 1)]
        wanted = [c for c in wanted if not args.only or c.category in args.only.split(",")]
        for r in runner.run(wanted, args.jobs, limits, args.library):
            results.append(r)
            out.write(line(r) + "\n")
    results.sort(key=lambda r: r.case.seed)
    args.out.write_text("".join(line(r) + "\n" for r in results))
    counts = {o: sum(r.outcome == o for r in results) for o in runner.OUTCOMES}
    print(f"{len(results)} cases in {time.monotonic() - start:.0f} s: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
