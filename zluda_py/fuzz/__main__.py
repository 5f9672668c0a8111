"""`python -m zluda_py.fuzz --seeds A-B [--targets cpu,gfx1100,gfx950] [--jobs N] [--keep DIR] [--opt L] [--rows]`
or `--minimize CASE`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m zluda_py.fuzz", description=__doc__)
    ap.add_argument("--seeds", help="seed range A-B (inclusive)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (each compiles its own batches)")
    ap.add_argument("--keep", type=Path, default=Path("fuzz-failures"), help="where divergent cases are written")
    ap.add_argument("--opt", type=int, choices=(0, 1, 2, 3), default=None,
                    help="LLVM level for the CPU target (default: what compile() picks, O3)")
    ap.add_argument("--targets", "--target", default="cpu",
                    help="comma-separated targets compared with the reference: cpu, gfx1100, gfx950 "
                         "(AMDGPU code objects on the ISA emulator); default cpu")
    ap.add_argument("--batch", type=int, default=25, help="kernels per compiled module")
    ap.add_argument("--digests", type=Path, help="append `seed digest` of each reference outcome to this file")
    ap.add_argument("--golden", type=Path, help="outcome digests recorded on NVIDIA hardware "
                    "(tests/hardware/golden/fuzz_digests.txt): the reference must agree")
    ap.add_argument("--rows", action="store_true", help="launch each kernel as a 2-D block (rows of a width "
                    "dividing its size, mostly 16; its thread index from %%tid.x/%%tid.y): the "
                    "memory lowering's rows paths")
    ap.add_argument("--minimize", type=Path, metavar="CASE", help="a kept case.json (or its directory)")
    args = ap.parse_args(argv)
    if args.minimize:
        from zluda_py.fuzz.minimize import minimize

        minimize(args.minimize)
        return 0
    if not args.seeds:
        ap.error("--seeds A-B or --minimize CASE")
    first, _, last = args.seeds.partition("-")
    from zluda_py.fuzz.campaign import campaign, load_digests

    targets = tuple(t for t in args.targets.split(",") if t)
    result = campaign(int(first), int(last or first), args.jobs, args.keep, args.opt, args.batch, targets=targets,
                      digests=args.digests, golden=load_digests(args.golden) if args.golden else None,
                      rows=args.rows)
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
