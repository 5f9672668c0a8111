"""Record the outcome of each fuzz kernel (`zluda_py.fuzz.generate`) on a CUDA driver, as
`seed digest` lines comparable with `python -m zluda_py.fuzz --digests` (the reference's).

On an NVIDIA machine this is ground truth for the reference executor and the CPU target:
    python -m tests.hardware.record_fuzz --seeds 0-20299 --out golden.txt --ptxas
(`--ptxas`: each batch is compiled by ptxas for the GPU and loaded as a cubin, which is much
faster than the driver's JIT; the compiler is NVIDIA's either way). Under `zluda run` it checks
our own driver end to end against the reference (tests/hardware).

Each batch runs in a child process, several at once, and lines are written as batches finish.
A kernel still running after HANG_SECONDS ends its child, as does a crash: the record names the
kernel (`# seed N: ...`) and a new child goes on with the rest of the batch.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zluda_py.fuzz.campaign import digest, load_digests
from zluda_py.fuzz.generate import NOUT, generate, module_ptx

BATCH_SECONDS = 45    # a child running one batch: ptxas, module load, launches (about 6 s on an H200 host)
KERNEL_SECONDS = 15   # a child running one kernel


@dataclass
class Launch:
    seed: int
    name: str
    grid: int
    block: int
    inputs: np.ndarray
    acc_init: np.ndarray


def _ptxas(ptx: str, arch: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
        subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], check=True, capture_output=True)
        with open(cubin, "rb") as f:
            return f.read()


HANG_SECONDS = 2      # a fuzz kernel runs for microseconds: one still running after this hangs
HUNG = 3              # a child's exit status after it met a hung kernel


def _image(kernels: list, arch: str | None, out) -> str | bytes:
    """The kernels' module as PTX, or as a cubin from ptxas; a kernel ptxas fails on (a crash:
    ptxas 13.0 on seed 224 for sm_90) is left out of the module, with a note."""
    if arch is None:
        return module_ptx(kernels)
    try:
        return _ptxas(module_ptx(kernels), arch)
    except subprocess.CalledProcessError:
        pass
    ok = []
    for k in kernels:
        try:
            _ptxas(k.ptx(), arch)
            ok.append(k)
        except subprocess.CalledProcessError as e:
            why = f"signal {-e.returncode}" if e.returncode < 0 else f"exit {e.returncode}"
            out.write(f"# seed {k.seed}: ptxas {arch} failed ({why}); not run\n")
    kernels[:] = ok
    return _ptxas(module_ptx(ok), arch)


def run_seeds(seeds: list[int], ptxas: bool, expected: dict[int, str], path: Path) -> int:
    """The child's work: compile the seeds' kernels as one module, run each, and write
    `seed digest [CUresult]` lines to `path` as they finish (and the buffers of launches that
    differ from `expected` to path.npz). Returns HUNG at a kernel that does not finish."""
    from tests.hardware.cudadrv import CUDA_ERROR_NOT_READY, Driver

    drv = Driver()
    major, minor = drv.compute_capability()
    kernels = [generate(s) for s in seeds]
    differ: dict[str, np.ndarray] = {}
    status = 0
    with open(path, "w", buffering=1) as out:
        image = _image(kernels, f"sm_{major}{minor}" if ptxas else None, out)
        module = drv.load(image)
        for k in kernels:
            res = np.zeros(k.grid * k.block * NOUT, np.uint32)
            acc = k.acc_init.copy()
            ptrs = [drv.alloc(a.nbytes) for a in (k.inputs, res, acc)]
            for p, a in zip(ptrs, (k.inputs, res, acc)):
                drv.to_device(p, a)
            code = module.launch_status(k.name, (k.grid, 1, 1), (k.block, 1, 1), [ctypes.c_uint64(p) for p in ptrs],
                                        limit=HANG_SECONDS)
            if code == CUDA_ERROR_NOT_READY:
                out.write(f"# seed {k.seed}: hang (still running after {HANG_SECONDS} s)\n")
                status = HUNG
                break
            if code:  # a sticky error: the next kernels need a fresh context and module
                out.write(f"{k.seed} {digest(True, res, acc)} {code}\n")
                drv.reset()
                module = drv.load(image)
                continue
            drv.to_host(res, ptrs[1])
            drv.to_host(acc, ptrs[2])
            for p in ptrs:
                drv.free(p)
            d = digest(False, res, acc)
            out.write(f"{k.seed} {d}\n")
            if k.seed in expected and expected[k.seed] != d:
                differ[f"{k.seed}_out"], differ[f"{k.seed}_acc"] = res, acc
    if differ:
        np.savez_compressed(str(path) + ".npz", **differ)
    return status


def _child(seeds: list[int], args: argparse.Namespace, tmp: Path, limit: float) -> tuple[list[str], str | None]:
    """The lines a child recorded of `seeds`, and why it stopped early (None when it did not)."""
    out = tmp / f"{seeds[0]}-{seeds[-1]}.txt"
    cmd = [sys.executable, "-m", "tests.hardware.record_fuzz", "--child", "--seeds", f"{seeds[0]}-{seeds[-1]}",
           "--out", str(out)] + (["--ptxas"] if args.ptxas else []) + (["--expect", args.expect] if args.expect else [])
    why = None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        if r.returncode == HUNG:
            why = "hang"
        elif r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
            why = f"child {'killed by signal ' + str(-r.returncode) if r.returncode < 0 else 'exit ' + str(r.returncode)}: {tail}"
    except subprocess.TimeoutExpired:
        why = f"no result in {limit:.0f} s"
    return (out.read_text().splitlines() if out.exists() else []), why


def _record(seeds: list[int], args: argparse.Namespace, tmp: Path, report) -> None:
    """Record a batch; after a hang or a crash a new child goes on after the kernel it stopped at
    (a crash without a note is put down to the first kernel it did not record)."""
    rest = seeds
    while rest:
        lines, why = _child(rest, args, tmp, BATCH_SECONDS)
        report(lines)
        done = {int(ln.split()[2 if ln.startswith("# seed ") else 0].rstrip(":")) for ln in lines
                if not ln.startswith("#") or ln.startswith("# seed ")}
        remaining = [s for s in rest if s not in done]
        if why is None or not remaining:
            return
        if why != "hang":
            report([f"# seed {remaining[0]}: {why}"])
            remaining = remaining[1:]
        rest = remaining


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", required=True, help="A-B inclusive")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--ptxas", action="store_true", help="compile batches with ptxas for this GPU (NVIDIA only)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="children at once")
    ap.add_argument("--budget", type=float, default=0, help="start no batch after this many seconds (0: none)")
    ap.add_argument("--expect", help="`seed digest` lines (zluda_py.fuzz --digests): the buffers of launches "
                                     "whose digest differs are saved to OUT.npz")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    seeds = list(range(int(first), int(last or first) + 1))
    if args.child:
        return run_seeds(seeds, args.ptxas, load_digests(args.expect) if args.expect else {}, Path(args.out))
    from tests.hardware.cudadrv import Driver

    info = Driver().describe()
    major, minor = info["compute_capability"]
    start = time.time()
    chunks = [seeds[i:i + args.batch] for i in range(0, len(seeds), args.batch)]
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(args.jobs) as pool, open(args.out, "w") as f:
        tmp = Path(d)
        f.write(f"# {info['name']}, compute capability {major}.{minor}, driver API {info['driver_api_version']}, "
                f"{'ptxas sm_%d%d' % (major, minor) if args.ptxas else 'driver JIT'}\n")
        lock = threading.Lock()
        counts = {"kernels": 0, "faults": 0, "notes": 0}

        def report(lines: list[str]) -> None:  # written as batches finish: a cut-off run keeps them
            with lock:
                f.writelines(ln + "\n" for ln in lines)
                f.flush()
                for ln in lines:
                    if ln.startswith("#"):
                        counts["notes"] += 1
                        print(ln, flush=True)
                    else:
                        counts["kernels"] += 1
                        counts["faults"] += len(ln.split()) > 2

        def job(chunk: list[int]) -> None:
            if args.budget and time.time() - start > args.budget:
                report([f"# seeds {chunk[0]}-{chunk[-1]}: not run (budget of {args.budget:.0f} s spent)"])
            else:
                _record(chunk, args, tmp, report)

        list(pool.map(job, chunks))
        differ = {}
        for npz in tmp.glob("*.npz"):
            with np.load(npz) as z:
                differ.update({k: z[k] for k in z.files})
    if differ:
        np.savez_compressed(args.out + ".npz", **differ)
    print(f"{counts['kernels']} kernels recorded ({counts['faults']} faulted, {counts['notes']} notes, "
          f"{len(differ) // 2} differ from --expect) in {time.time() - start:.1f} s on {info['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
