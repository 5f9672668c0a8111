"""Record the outcome of each fuzz kernel (`zluda_py.fuzz.generate`) on a CUDA driver, as
`seed digest` lines comparable with `python -m zluda_py.fuzz --digests` (the reference's).

On an NVIDIA machine this is ground truth for the reference executor and the CPU target:
    python -m tests.hardware.record_fuzz --seeds 0-20299 --out golden.txt --ptxas
(`--ptxas`: each batch is compiled by ptxas for the GPU and loaded as a cubin, which is much
faster than the driver's JIT; the compiler is NVIDIA's either way). Under `zluda run` it checks
our own driver end to end against the reference (tests/hardware).

Each batch runs in a child process with a time limit, several at once: a kernel that hangs the
GPU or crashes the compiler ends only its child. A batch that does not finish is run again one
kernel per child, so the record names the kernel (`# seed N: ...`) and keeps the others.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
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


def run_seeds(seeds: list[int], ptxas: bool, expected: dict[int, str], out: Path) -> None:
    """The child's work: compile the seeds' kernels as one module, run each, and write
    `seed digest [CUresult]` lines to `out` (and the buffers of launches that differ from
    `expected` to out.npz)."""
    from tests.hardware.cudadrv import Driver

    drv = Driver()
    major, minor = drv.compute_capability()
    kernels = [generate(s) for s in seeds]
    ptx = module_ptx(kernels)
    image = _ptxas(ptx, f"sm_{major}{minor}") if ptxas else ptx
    module = drv.load(image)
    lines, differ = [], {}
    for k in kernels:
        res = np.zeros(k.grid * k.block * NOUT, np.uint32)
        acc = k.acc_init.copy()
        ptrs = [drv.alloc(a.nbytes) for a in (k.inputs, res, acc)]
        for p, a in zip(ptrs, (k.inputs, res, acc)):
            drv.to_device(p, a)
        code = module.launch_status(k.name, (k.grid, 1, 1), (k.block, 1, 1), [ctypes.c_uint64(p) for p in ptrs])
        if code:  # a sticky error: the next kernels need a fresh context and module
            lines.append(f"{k.seed} {digest(True, res, acc)} {code}")
            drv.reset()
            module = drv.load(image)
            continue
        drv.to_host(res, ptrs[1])
        drv.to_host(acc, ptrs[2])
        for p in ptrs:
            drv.free(p)
        d = digest(False, res, acc)
        lines.append(f"{k.seed} {d}")
        if k.seed in expected and expected[k.seed] != d:
            differ[f"{k.seed}_out"], differ[f"{k.seed}_acc"] = res, acc
    out.write_text("".join(ln + "\n" for ln in lines))
    if differ:
        np.savez_compressed(str(out) + ".npz", **differ)


def _child(seeds: list[int], args: argparse.Namespace, tmp: Path, limit: float) -> tuple[list[str], str | None]:
    """Lines of a child's record of `seeds`, and why it did not finish (None when it did)."""
    out = tmp / f"{seeds[0]}-{seeds[-1]}.txt"
    cmd = [sys.executable, "-m", "tests.hardware.record_fuzz", "--child", "--seeds", f"{seeds[0]}-{seeds[-1]}",
           "--out", str(out)] + (["--ptxas"] if args.ptxas else []) + (["--expect", args.expect] if args.expect else [])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return [], f"no result in {limit:.0f} s (a hang)"
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        return [], f"child {'killed by signal ' + str(-r.returncode) if r.returncode < 0 else 'exit ' + str(r.returncode)}: {tail}"
    return out.read_text().splitlines(), None


def _record(seeds: list[int], args: argparse.Namespace, tmp: Path) -> list[str]:
    """A batch's lines; a batch that fails runs again kernel by kernel, and a kernel that fails
    alone gets a `# seed N: why` line."""
    lines, why = _child(seeds, args, tmp, BATCH_SECONDS)
    if why is None:
        return lines
    if len(seeds) == 1:
        return [f"# seed {seeds[0]}: {why}"]
    out = [f"# seeds {seeds[0]}-{seeds[-1]}: {why}; again one by one"]
    with ThreadPoolExecutor(args.jobs) as pool:
        for s, (one, why) in zip(seeds, pool.map(lambda s: _child([s], args, tmp, KERNEL_SECONDS), seeds)):
            out += one if why is None else [f"# seed {s}: {why}"]
    return out


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
        run_seeds(seeds, args.ptxas, load_digests(args.expect) if args.expect else {}, Path(args.out))
        return 0
    from tests.hardware.cudadrv import Driver

    info = Driver().describe()
    major, minor = info["compute_capability"]
    start = time.time()
    chunks = [seeds[i:i + args.batch] for i in range(0, len(seeds), args.batch)]
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(args.jobs) as pool:
        tmp = Path(d)

        def job(chunk: list[int]) -> list[str]:
            if args.budget and time.time() - start > args.budget:
                return [f"# seeds {chunk[0]}-{chunk[-1]}: not run (budget of {args.budget:.0f} s spent)"]
            return _record(chunk, args, tmp)

        lines = [ln for chunk_lines in pool.map(job, chunks) for ln in chunk_lines]
        differ = {}
        for npz in tmp.glob("*.npz"):
            with np.load(npz) as z:
                differ.update({k: z[k] for k in z.files})
    notes = [ln for ln in lines if ln.startswith("#")]
    records = [ln for ln in lines if not ln.startswith("#")]
    with open(args.out, "w") as f:
        f.write(f"# {info['name']}, compute capability {major}.{minor}, driver API {info['driver_api_version']}, "
                f"{'ptxas sm_%d%d' % (major, minor) if args.ptxas else 'driver JIT'}\n")
        f.writelines(ln + "\n" for ln in notes + records)
    if differ:
        np.savez_compressed(args.out + ".npz", **differ)
    faults = sum(len(ln.split()) > 2 for ln in records)
    print(f"{len(records)} kernels recorded ({faults} faulted, {len(notes)} notes, {len(differ) // 2} differ from "
          f"--expect) in {time.time() - start:.1f} s on {info['name']}")
    for ln in notes:
        print(ln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
