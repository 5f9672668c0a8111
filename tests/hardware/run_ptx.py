"""Run one hand-written PTX kernel on a CUDA driver and print its output words, so that a
kernel written to show a compiler's behaviour (tests/hardware/ptxas_*.ptx) can be settled on
real hardware and kept as golden data:

    python3 -m tests.hardware.run_ptx tests/hardware/ptxas_recursion_uniform_loop.ptx \
        --entry k --block 32 --words 288 [--ptxas]

The kernel takes one `.u64` pointer to `--words` zeroed 32-bit words. `--ptxas` compiles with
the machine's ptxas for the GPU and loads the cubin; without it the driver JIT-compiles the PTX.
Output: `# ` header lines, then `index value` (hex) per word.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from tests.hardware.cudadrv import Driver
    from tests.hardware.record_fuzz import _ptxas

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ptx")
    ap.add_argument("--entry", default="k")
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--grid", type=int, default=1)
    ap.add_argument("--words", type=int, required=True)
    ap.add_argument("--ptxas", action="store_true")
    args = ap.parse_args(argv)
    drv = Driver()
    major, minor = drv.compute_capability()
    ptx = Path(args.ptx).read_text()
    image = _ptxas(ptx, f"sm_{major}{minor}") if args.ptxas else ptx
    out = np.zeros(args.words, np.uint32)
    drv.load(image).launch(args.entry, (args.grid, 1, 1), (args.block, 1, 1), [out])
    print(f"# {args.ptx} entry {args.entry}, {args.grid}x{args.block} threads, "
          f"{'ptxas sm_%d%d cubin' % (major, minor) if args.ptxas else 'driver JIT'}")
    for i, v in enumerate(out):
        print(f"{i} {int(v):#x}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
