"""Compiled-code cache benchmark: a Thrust sort (many kernels), built with nvcc at run time.
`--program templates` uses 96 template-instantiated kernels instead (for builds whose compiler
does not translate all of Thrust yet).

Prints two ratios (goal for the first: <= 0.1):
  * compile time of a warm `zluda run` / a cold one: the time the driver spent getting runnable
    modules (cache lookup or compile, then load), summed from the `cache: loaded` trace lines;
  * module load from the cache / fresh compile, in process, for each image of the program.
Wall-clock times of both runs are printed too. Usage: python bench/cache.py [--keep DIR]

The runs use a snapshot of this checkout (zluda_py/ and ptx_grammar/ copied into the work
directory, first on PYTHONPATH): the cache key covers the translator's source, so an edit
made in the shared tree between the two runs would otherwise turn the warm run cold.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = r"""
#include <cstdio>
#include <algorithm>
#include <vector>
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/sequence.h>

int main() {
    const int n = 1 << 16;
    std::vector<unsigned> h(n);
    unsigned x = 12345;
    for (auto& v : h) { x = x * 1664525u + 1013904223u; v = x; }
    thrust::device_vector<unsigned> d(h.begin(), h.end());
    thrust::sort(d.begin(), d.end());
    std::vector<unsigned> got(n);
    thrust::copy(d.begin(), d.end(), got.begin());
    std::sort(h.begin(), h.end());
    bool ok = got == h;
    printf("thrust sort of %d keys: %s\n", n, ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
"""

TEMPLATES = r"""
#include <cstdio>
#include <utility>
#include <vector>

template <int K> __global__ void step(unsigned* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * (2 * K + 1) + K;
}

template <int... K> void all_steps(unsigned* d, int n, std::integer_sequence<int, K...>) {
    (step<K><<<(n + 255) / 256, 256>>>(d, n), ...);
}

int main() {
    const int n = 4096;
    constexpr int kernels = 96;
    std::vector<unsigned> h(n), want(n);
    for (int i = 0; i < n; i++) h[i] = want[i] = i;
    for (int k = 0; k < kernels; k++)
        for (auto& v : want) v = v * (2 * k + 1) + k;
    unsigned* d;
    cudaMalloc(&d, n * sizeof(unsigned));
    cudaMemcpy(d, h.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice);
    all_steps(d, n, std::make_integer_sequence<int, kernels>{});
    cudaMemcpy(h.data(), d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
    bool ok = h == want;
    printf("%d template kernels: %s\n", kernels, ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
"""
PROGRAMS = {"thrust": PROGRAM, "templates": TEMPLATES}

LOADED = re.compile(r" cache: loaded \S+ (from the cache|compiled) in ([0-9.]+) s")


def build(work: Path, program: str) -> Path:
    src, exe = work / f"{program}.cu", work / program
    src.write_text(PROGRAMS[program])
    subprocess.run(["nvcc", "-O2", "-arch=sm_80", str(src), "-o", str(exe)], check=True)
    return exe


REPO = Path(__file__).resolve().parents[1]


def snapshot(work: Path) -> Path:
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    for name in ("zluda_py", "ptx_grammar"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    return src


def zluda_run(exe: Path, cache: Path, trace: Path, src: Path) -> tuple[float, float, int, int]:
    """(wall seconds, seconds getting modules, modules compiled, modules from the cache)."""
    env = dict(os.environ, CUDA_CACHE_PATH=str(cache), PYTHONPATH=str(src))
    env.pop("CUDA_CACHE_DISABLE", None)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())",
                          "run", "--trace", str(trace), "--", str(exe)], env=env, capture_output=True,
                         text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0 or "PASSED" not in res.stdout:
        sys.exit(f"the program failed under zluda run:\n{res.stdout}{res.stderr}")
    found = [LOADED.search(line) for p in trace.glob("calls-*.log") for line in p.read_text().splitlines()]
    found = [m for m in found if m]
    if not found:
        sys.exit(f"no `cache: loaded` lines in the trace {trace}")
    return (wall, sum(float(m.group(2)) for m in found), sum(m.group(1) == "compiled" for m in found),
            sum(m.group(1) == "from the cache" for m in found))


def in_process(trace: Path, cache: Path) -> tuple[float, float, int]:
    """(fresh compile seconds, load-from-cache seconds, kernels) over the modules the driver
    loaded in the cold run (the trace saves each one's PTX)."""
    from zluda_py import cache as zcache, compiler

    os.environ["CUDA_CACHE_PATH"] = str(cache)
    fresh = cached = 0.0
    kernels = 0
    for path in sorted(trace.glob("module-*.ptx")):
        text = path.read_text()
        start = time.perf_counter()
        m = compiler.compile(text)
        fresh += time.perf_counter() - start
        kernels += len(m.kernels)
        start = time.perf_counter()
        zcache.compile_cached(text)
        cached += time.perf_counter() - start
    if zcache.events.counts[zcache.events.COMPILED]:
        print("note: some modules were not in the cache (linked modules, or the compiler changed meanwhile)")
    return fresh, cached, kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", choices=PROGRAMS, default="thrust", help="what to run (default: thrust)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary directory)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="zluda-bench-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    exe = build(work, args.program)
    cache = work / "cache"
    for old in (cache, work / "trace-cold", work / "trace-warm"):
        shutil.rmtree(old, ignore_errors=True)
    src = snapshot(work)
    sys.path.insert(0, str(src))
    cold = zluda_run(exe, cache, work / "trace-cold", src)
    warm = zluda_run(exe, cache, work / "trace-warm", src)
    fresh, cached, kernels = in_process(work / "trace-cold", cache)
    print(f"program: {args.program}, {kernels} kernels in {cold[2] + cold[3]} module(s)")
    print(f"cold zluda run: {cold[0]:.2f} s wall, {cold[1]:.3f} s getting modules ({cold[2]} compiled)")
    print(f"warm zluda run: {warm[0]:.2f} s wall, {warm[1]:.3f} s getting modules ({warm[3]} from the cache, "
          f"{warm[2]} compiled)")
    print(f"ratio warm/cold compile time: {warm[1] / cold[1]:.3f}  (goal <= 0.1)")
    print(f"module load: from the cache {cached:.4f} s, fresh compile {fresh:.3f} s, ratio {cached / fresh:.4f}")
    print(f"ratio warm/cold wall time: {warm[0] / cold[0]:.3f}")
    return 0 if warm[1] / cold[1] <= 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
