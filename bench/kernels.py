"""The CPU target against POCL and C on the same kernels, side by side in one run.

Each kernel is written three ways: CUDA (`bench/cuda/suite.cu`, built with nvcc and run under
`zluda run`, so launches go through cudart and our libcuda.so.1), OpenCL C on POCL
(`bench/opencl/suite.cl`, driven through the OpenCL C API with ctypes) and C
(`bench/c/suite.c`, gcc -O3 -march=native -fopenmp). Every implementation runs in a child
process per thread count (ZLUDA_CPU_THREADS, POCL_CPU_MAX_CU_NUM, OMP_NUM_THREADS), prints the
best of REPS timed runs per kernel and a checksum of the first run's output, and the table
gives throughput with the ratios zluda/POCL and zluda/C. It also reports the time of an empty
launch through cudart and cudaMemcpy bandwidth against memcpy.

    python bench/kernels.py [--rounds R] [--reps N] [--only K,K] [--impl zluda,pocl,c]
                            [--threads 1,2] [--tiny] [--only-kernels] [--tree DIR] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("ZLUDA_TEST_BUILD_CACHE", Path.home() / ".cache" / "zluda-test-builds"))


@dataclass(frozen=True)
class Kernel:
    name: str
    size: int  # the benchmark's size (elements, matrix side, bodies)
    tiny: int  # a size that runs in milliseconds everywhere (smoke tests)
    unit: str
    work: object  # size -> units of work per run (the throughput's numerator)


KERNELS = [
    Kernel("saxpy", 1 << 24, 1024, "GB/s", lambda n: 12 * n),
    Kernel("saxpy_grid", 1 << 24, 1024, "GB/s", lambda n: 12 * n),  # a grid-stride loop, <= 1024 blocks
    Kernel("sgemm", 512, 32, "GFLOP/s", lambda n: 2 * n**3),
    Kernel("block_reduce", 1 << 24, 1024, "G elem/s", lambda n: n),
    Kernel("warp_reduce", 1 << 24, 1024, "G elem/s", lambda n: n),
    Kernel("stencil", 2048, 32, "G cells/s", lambda n: n * n),
    Kernel("histogram", 1 << 24, 4096, "G elem/s", lambda n: n),
    Kernel("nbody", 4096, 256, "G pairs/s", lambda n: n * n),
    Kernel("scan", 1 << 24, 1024, "G elem/s", lambda n: n),
]
BY_NAME = {k.name: k for k in KERNELS}
IMPLS = ("zluda", "pocl", "c", "base")
RATIO_NAMES = {"pocl": "POCL", "c": "C", "base": "base"}
LAUNCHES, COPY_BYTES = 20000, 64 << 20


def _build(kind: str, source: Path, command: list[str], libs: tuple[str, ...] = ()) -> Path:
    """Compile `source` once per content (cached like the tests' nvcc builds)."""
    digest = hashlib.sha256(source.read_bytes() + " ".join([*command, *libs]).encode()).hexdigest()[:16]
    out = BUILD / f"bench-{kind}-{digest}"
    if not out.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        subprocess.run([*command, str(source), "-o", f"{out}.tmp", *libs], check=True)
        os.replace(f"{out}.tmp", out)
    return out


def cuda_program() -> Path:
    nvcc = os.environ.get("NVCC", "nvcc")
    return _build("cuda", HERE / "cuda" / "suite.cu", [nvcc, "-O3", "-arch=sm_80"])


def c_program() -> Path:
    return _build("c", HERE / "c" / "suite.c", ["gcc", "-O3", "-march=native", "-fopenmp"], ("-lm",))


def child(impl: str, threads: int, reps: int, specs: list[str], tree: str | None = None) -> dict[str, tuple[float, float]]:
    """Run one implementation's program; {name: (best seconds, checksum or bytes)}. zluda-py
    ("zluda", "base") runs from `tree` when given: a directory holding a copy of zluda_py/ with
    its built _shim/ (to compare a compiler change with its parent in the same run)."""
    env = dict(os.environ)
    t = str(threads)
    cwd = HERE.parent
    if impl in ("zluda", "base"):
        env["ZLUDA_CPU_THREADS"] = t
        if tree:  # `python -m` puts the working directory first on sys.path
            cwd = Path(tree)
            env["PYTHONPATH"] = str(cwd)
        cmd = [sys.executable, "-m", "zluda_py.cli", "run", "--", str(cuda_program())]
    elif impl == "pocl":
        env["POCL_CPU_MAX_CU_NUM"] = env["POCL_MAX_PTHREAD_COUNT"] = t
        cmd = [sys.executable, str(Path(__file__).resolve()), "--opencl-child"]
    else:
        env["OMP_NUM_THREADS"] = t
        cmd = [str(c_program())]
    res = subprocess.run([*cmd, str(reps), *specs], env=env, capture_output=True, text=True, cwd=cwd)
    if res.returncode != 0:
        raise RuntimeError(f"{impl} ({threads} threads) failed with {res.returncode}:\n{res.stderr[-3000:]}")
    out = {}
    for line in res.stdout.splitlines():
        name, secs, value = line.split()
        out[name] = (float(secs), float(value))
    return out


# ---- the OpenCL host (runs in its own process: POCL reads its thread count at start) ----

CL_DEVICE_TYPE_ALL, CL_MEM_READ_WRITE, CL_MEM_COPY_HOST_PTR = 0xFFFFFFFF, 1, 0x20
CL_PROGRAM_BUILD_LOG = 0x1183


def _inputs(i):
    """bench/cuda/suite.cu's input formulas over the index array `i` (uint32 arithmetic)."""
    import numpy as np

    u = i.astype(np.uint32)
    f = ((u * np.uint32(37)) % np.uint32(101)).astype(np.float32) * np.float32(0.01) - np.float32(0.5)
    g = (((u * np.uint32(37)) % np.uint32(17)).astype(np.int32) - 8).astype(np.float32)
    h = (u * np.uint32(2654435761)) >> np.uint32(8)
    return f, g, h


def opencl_child(reps: int, specs: list[str]) -> None:
    import time

    import numpy as np

    cl = ctypes.CDLL("libOpenCL.so.1")
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for fn in ("clCreateContext", "clCreateCommandQueue", "clCreateProgramWithSource", "clCreateKernel",
               "clCreateBuffer"):
        getattr(cl, fn).restype = vp
    err = ctypes.c_int()

    def ok(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what}: OpenCL error {rc}")

    platform, dev = vp(), vp()
    ok(cl.clGetPlatformIDs(1, ctypes.byref(platform), None), "clGetPlatformIDs")
    ok(cl.clGetDeviceIDs(platform, ctypes.c_ulonglong(CL_DEVICE_TYPE_ALL), 1, ctypes.byref(dev), None), "devices")
    ctx = vp(cl.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err)))
    queue = vp(cl.clCreateCommandQueue(ctx, dev, ctypes.c_ulonglong(0), ctypes.byref(err)))
    src = (HERE / "opencl" / "suite.cl").read_bytes()
    prog = vp(cl.clCreateProgramWithSource(ctx, 1, ctypes.byref(ctypes.c_char_p(src)),
                                           ctypes.byref(sz(len(src))), ctypes.byref(err)))
    if cl.clBuildProgram(prog, 1, ctypes.byref(dev), b"-cl-std=CL2.0", None, None) != 0:
        log = ctypes.create_string_buffer(1 << 16)
        cl.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sz(len(log)), log, None)
        raise RuntimeError(f"OpenCL build failed:\n{log.value.decode()}")

    def buffer(array) -> vp:
        b = vp(cl.clCreateBuffer(ctx, ctypes.c_ulonglong(CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR),
                                 sz(array.nbytes), vp(array.ctypes.data), ctypes.byref(err)))
        ok(err.value, "clCreateBuffer")
        return b

    for spec in specs:
        name, n = spec.split(":")[0], int(spec.split(":")[1])
        f, g, h = _inputs(np.arange(n * n if name in ("sgemm", "stencil") else 4 * n if name == "nbody" else n))
        local: tuple[int, ...] = (256,)
        if name in ("saxpy", "saxpy_grid"):
            glob = (n,) if name == "saxpy" else (256 * min(-(-n // 256), 1024),)  # suite.cu's GRID_STRIDE_BLOCKS
            bufs, out = [buffer(f[:n]), buffer(g[:n].copy())], 1
            args, result = [np.int32(n), np.float32(2.0)], np.empty(n, np.float32)
        elif name == "sgemm":
            bufs = [buffer(f[:n * n]), buffer(g[:n * n] * np.float32(0.125)), buffer(np.zeros(n * n, np.float32))]
            out, glob, local, args, result = 2, (n, n), (16, 16), [np.int32(n)], np.empty(n * n, np.float32)
        elif name in ("block_reduce", "warp_reduce", "scan"):
            count = {"block_reduce": n // 256, "warp_reduce": n // 32, "scan": n}[name]
            bufs, out, glob = [buffer(g[:n]), buffer(np.zeros(n, np.float32))], 1, (n,)
            args, result = [np.int32(n)], np.empty(count, np.float32)
        elif name == "stencil":
            bufs, out, glob = [buffer(f[:n * n]), buffer(np.zeros(n * n, np.float32))], 1, (n, n)
            local, args, result = (16, 16), [np.int32(n)], np.empty(n * n, np.float32)
        elif name == "histogram":
            bufs, out, glob = [buffer(h[:n]), buffer(np.zeros(256, np.uint32))], 1, (-(-n // (256 * 16)) * 256,)
            args, result = [np.int32(n)], np.empty(256, np.uint32)
        elif name == "nbody":
            pos = f[:4 * n].reshape(n, 4).copy()
            pos[:, 3] += np.float32(1.0)
            bufs, out, glob = [buffer(pos), buffer(np.zeros(4 * n, np.float32))], 1, (n,)
            args, result = [np.int32(n)], np.empty(4 * n, np.float32)
        else:
            raise SystemExit(f"unknown kernel {name}")
        kernel = vp(cl.clCreateKernel(prog, name.encode(), ctypes.byref(err)))
        ok(err.value, f"clCreateKernel {name}")
        for k, a in enumerate(args):
            ok(cl.clSetKernelArg(kernel, k, sz(a.nbytes), vp(np.array(a).ctypes.data)), "clSetKernelArg")
        for k, b in enumerate(bufs):
            ok(cl.clSetKernelArg(kernel, len(args) + k, sz(8), ctypes.byref(b)), "clSetKernelArg")
        gsize, lsize = (sz * len(glob))(*glob), (sz * len(local))(*local)

        def launch() -> None:
            ok(cl.clEnqueueNDRangeKernel(queue, kernel, len(glob), None, gsize, lsize, 0, None, None), name)
            ok(cl.clFinish(queue), "clFinish")

        launch()
        ok(cl.clEnqueueReadBuffer(queue, bufs[out], 1, sz(0), sz(result.nbytes), vp(result.ctypes.data),
                                  0, None, None), "clEnqueueReadBuffer")
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            launch()
            best = min(best, time.perf_counter() - t)
        print(name, f"{best:.9g}", f"{checksum(result):.17g}", flush=True)
        for b in bufs:
            cl.clReleaseMemObject(b)
        cl.clReleaseKernel(kernel)


def checksum(values) -> float:
    """The hosts' checksum: sum of |value| * (index % 7 + 1), in double."""
    import numpy as np

    return float((np.abs(values.astype(np.float64)) * (np.arange(values.size) % 7 + 1)).sum())


# ---- the table ----

def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if len(values) == 1 or format(lo, fmt) == format(hi, fmt) else \
        f"{format(lo, fmt)}-{format(hi, fmt)}"


def _agrees(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * max(abs(a), abs(b), 1.0)


def measure(args: argparse.Namespace) -> None:
    kernels = [BY_NAME[k] for k in args.only]
    size = {k.name: k.tiny if args.tiny else k.size for k in kernels}
    specs = [f"{k.name}:{size[k.name]}" for k in kernels]
    cores = os.cpu_count() or 1
    threads = args.threads or sorted({1, cores})
    # runs[impl][threads] = one dict per round
    runs = {impl: {t: [] for t in threads} for impl in args.impl}
    launches, copy_bytes = (100, 1 << 16) if args.tiny else (LAUNCHES, COPY_BYTES)
    extra = []
    for _ in range(args.rounds):
        for t in threads:
            for impl in args.impl:
                runs[impl][t].append(child(impl, t, args.reps, specs, args.baseline if impl == "base" else args.tree))
        if "zluda" in args.impl and not args.only_kernels:
            extra.append(child("zluda", 1, args.reps, [f"launch:{launches}", f"memcpy:{copy_bytes}"], args.tree))
    print(f"python bench/kernels.py: {cores} cores, best of {args.reps} runs, {args.rounds} round(s); "
          "ranges are over rounds, ratios within a round")
    head = ["kernel", "size", "unit", "threads", *args.impl]
    head += [f"zluda/{RATIO_NAMES[i]}" for i in args.impl if i != "zluda" and "zluda" in args.impl]
    rows = []
    mismatches = []
    for k in kernels:
        for t in threads:
            row = [k.name, str(size[k.name]), k.unit, str(t)]
            for impl in args.impl:
                rates = [k.work(size[k.name]) / r[k.name][0] / 1e9 for r in runs[impl][t]]
                row.append(_span(rates, ".3g"))
            for impl in args.impl:
                if impl == "zluda" or "zluda" not in args.impl:
                    continue
                ratios = [o[k.name][0] / z[k.name][0] for z, o in zip(runs["zluda"][t], runs[impl][t])]
                row.append(_span(ratios, ".2f") + "x")
            rows.append(row)
            sums = {impl: runs[impl][t][0][k.name][1] for impl in args.impl}
            if not all(_agrees(s, next(iter(sums.values()))) for s in sums.values()):
                mismatches.append(f"{k.name} ({t} threads): checksums differ {sums}")
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        print(" | ".join(v.ljust(w) for v, w in zip(r, widths)))
    if extra:
        launch = [e["launch"][0] * 1e6 for e in extra]
        print(f"empty launch through cudart (1 worker, {launches} launches): {_span(launch, '.1f')} us each")
        for what in ("h2d", "d2h", "d2d"):
            gbs = [e[what][1] / e[what][0] / 1e9 for e in extra]
            ratio = [e["memcpy"][0] / e[what][0] for e in extra]
            print(f"cudaMemcpy {what.upper()} {extra[0][what][1] / 2**20:.0f} MiB: {_span(gbs, '.2f')} GB/s "
                  f"= {_span(ratio, '.2f')}x of memcpy")
    for m in mismatches:
        print("MISMATCH:", m)
    if mismatches:
        sys.exit(1)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1, help="repeat the whole measurement (ranges over rounds)")
    p.add_argument("--reps", type=int, default=10, help="timed runs per kernel (best is kept), after one more")
    p.add_argument("--only", type=lambda s: s.split(","), default=[k.name for k in KERNELS],
                   help="kernels, comma-separated (default: all)")
    p.add_argument("--impl", type=lambda s: s.split(","), default=None,
                   help="zluda,pocl,c (default), and base with --baseline")
    p.add_argument("--tree", help="run zluda-py from this directory (holding zluda_py/ with its _shim/), not this checkout")
    p.add_argument("--baseline", help="likewise, a directory whose zluda-py runs as the implementation 'base'")
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="thread counts (default: 1 and all cores)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes (smoke test; timings meaningless)")
    p.add_argument("--only-kernels", action="store_true", help="skip the launch and memcpy measurements")
    args = p.parse_args(argv)
    if args.impl is None:
        args.impl = ["zluda", "pocl", "c"] + (["base"] if args.baseline else [])
    if "base" in args.impl and not args.baseline:
        p.error("--impl base needs --baseline DIR")
    bad = [k for k in args.only if k not in BY_NAME] + [i for i in args.impl if i not in IMPLS]
    if bad:
        p.error(f"unknown: {', '.join(bad)} (kernels: {', '.join(BY_NAME)}; implementations: {', '.join(IMPLS)})")
    return args


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--opencl-child":
        opencl_child(int(sys.argv[2]), sys.argv[3:])
    else:
        measure(parse())
