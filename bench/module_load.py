"""What a cold lazy module load costs (CPU target): parse (with the front end's checks), link and
`parts.whole_reason` in this process, then `cache.lazy.load` as the driver calls it (it parses
again and builds the variables' part) in a fresh process on an empty cache, and the full
collection of the cyclic GC that the program pays later (what the load left alive is walked). Process CPU time.

    python bench/module_load.py FILE.ptx [--rounds 3]

A library's PTX as the driver sees it: `ZLUDA_TRACE=DIR zluda run -- PROGRAM` writes every
loaded module to DIR (CuPy's CUB: `module-*compute_120.ptx.ptx`, 21 MB). The shared helpers
(built once per cache, whichever module comes first) are built before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOAD = """
import gc, sys, time
from zluda_py.cache import compile as cache_compile, lazy
from zluda_py.compiler.cpu.target import CPU
cache_compile.helpers(CPU)
text = open(sys.argv[1]).read()
t = time.process_time()
module = lazy.load([text], "bench")
t1 = time.process_time()
gc.collect()
print(f"{t1 - t:.2f} s, then a full collection {time.process_time() - t1:.2f} s")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from zluda_py.compiler.linker import link
    from zluda_py.compiler.parts import whole_reason
    from zluda_py.ptx import parse

    text = a.ptx.read_text()
    clock = time.process_time
    print(f"{a.ptx.name}: {len(text) / 1e6:.1f} MB of PTX")
    for r in range(a.rounds):
        t0 = clock()
        module = parse(text)
        t1 = clock()
        linked = link([module])
        t2 = clock()
        whole_reason(linked)
        t3 = clock()
        del module, linked
        with tempfile.TemporaryDirectory(prefix="zluda-load-") as cache:
            load = subprocess.run([sys.executable, "-c", LOAD, str(a.ptx)], capture_output=True, text=True,
                                  check=True, cwd=cache,  # not the checkout's cwd, which `-c` would import from
                                  env={**os.environ, "CUDA_CACHE_PATH": cache}).stdout.strip()
        print(f"round {r + 1}: parse+check {t1 - t0:.2f} s, link {t2 - t1:.2f} s, whole_reason {t3 - t2:.2f} s; "
              f"lazy.load (fresh process, empty cache) {load}", flush=True)


if __name__ == "__main__":
    main()
