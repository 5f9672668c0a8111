"""Record the outcome of each fuzz kernel (`zluda_py.fuzz.generate`) on a CUDA driver, as
`seed digest` lines comparable with `python -m zluda_py.fuzz --digests` (the reference's).

On an NVIDIA machine this is ground truth for the reference executor and the CPU target:
    python -m tests.hardware.record_fuzz --seeds 0-20299 --out golden.txt --ptxas
(`--ptxas`: batches are compiled by ptxas in parallel processes and loaded as cubins, which is
much faster than the driver's serial JIT; the compiler is NVIDIA's either way). Under
`zluda run` it checks our own driver end to end against the reference (tests/hardware).
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
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from tests.hardware.cudadrv import CudaError, Driver
from zluda_py.fuzz.campaign import digest, load_digests
from zluda_py.fuzz.generate import NOUT, generate, module_ptx


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


def build(seeds: list[int], arch: str | None) -> tuple[list[tuple[list[Launch], str | bytes]], list[str]]:
    """The batch as (launches, image) groups: one module of PTX text, or of a cubin when `arch`
    names ptxas's target. When ptxas fails on the batch, each kernel is compiled alone, and one
    it fails on is left out (the driver's JIT shares ptxas's code: a crash there would end the
    recording); the notes say which."""
    kernels = [generate(s) for s in seeds]
    launches = [Launch(k.seed, k.name, k.grid, k.block, k.inputs, k.acc_init) for k in kernels]
    if arch is None:
        return [(launches, module_ptx(kernels))], []
    try:
        return [(launches, _ptxas(module_ptx(kernels), arch))], []
    except subprocess.CalledProcessError:
        pass
    groups: list[tuple[list[Launch], str | bytes]] = []
    notes = []
    for k, ln in zip(kernels, launches):
        try:
            groups.append(([ln], _ptxas(k.ptx(), arch)))
        except subprocess.CalledProcessError as e:
            why = f"signal {-e.returncode}" if e.returncode < 0 else f"exit {e.returncode}: {e.stderr.decode(errors='replace').strip()[:200]}"
            notes.append(f"seed {k.seed}: ptxas {arch} failed ({why}); not run")
    return groups, notes


def run_batch(drv: Driver, launches: list[Launch], image: str | bytes,
              keep: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> list[tuple[int, str, int]]:
    """(seed, digest, CUresult) per launch; a faulting kernel's context is reset and the batch's
    module loaded again for the rest. `keep` receives every finished launch's buffers."""
    out: list[tuple[int, str, int]] = []
    module = drv.load(image)
    for ln in launches:
        res = np.zeros(ln.grid * ln.block * NOUT, np.uint32)
        acc = ln.acc_init.copy()
        ptrs = [drv.alloc(a.nbytes) for a in (ln.inputs, res, acc)]
        for p, a in zip(ptrs, (ln.inputs, res, acc)):
            drv.to_device(p, a)
        code = module.launch_status(ln.name, (ln.grid, 1, 1), (ln.block, 1, 1), [ctypes.c_uint64(p) for p in ptrs])
        if code:
            out.append((ln.seed, digest(True, res, acc), code))
            drv.reset()
            module = drv.load(image)
            continue
        drv.to_host(res, ptrs[1])
        drv.to_host(acc, ptrs[2])
        for p in ptrs:
            drv.free(p)
        out.append((ln.seed, digest(False, res, acc), 0))
        if keep is not None:
            keep[ln.seed] = (res, acc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", required=True, help="A-B inclusive")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--ptxas", action="store_true", help="compile batches with ptxas for this GPU (NVIDIA only)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budget", type=float, default=0, help="stop after this many seconds (0: none)")
    ap.add_argument("--expect", help="`seed digest` lines (zluda_py.fuzz --digests): the buffers of launches "
                                     "whose digest differs are saved to OUT.npz (at most 300)")
    args = ap.parse_args(argv)
    expected = load_digests(args.expect) if args.expect else {}
    differ: dict[str, np.ndarray] = {}
    first, _, last = args.seeds.partition("-")
    seeds = list(range(int(first), int(last or first) + 1))
    drv = Driver()
    info = drv.describe()
    major, minor = info["compute_capability"]
    arch = f"sm_{major}{minor}" if args.ptxas else None
    start = time.time()
    done = faults = 0
    with open(args.out, "w") as f, ProcessPoolExecutor(args.jobs) as pool:
        f.write(f"# {info['name']}, compute capability {major}.{minor}, driver API {info['driver_api_version']}, "
                f"{'ptxas ' + arch if arch else 'driver JIT'}\n")
        chunks = [seeds[i:i + args.batch] for i in range(0, len(seeds), args.batch)]
        for groups, notes in pool.map(build, chunks, [arch] * len(chunks)):
            for note in notes:
                f.write(f"# {note}\n")
                print(note, file=sys.stderr)
            for launches, image in groups:
                kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}
                try:
                    results = run_batch(drv, launches, image, kept)
                except CudaError as e:
                    print(f"kernels from seed {launches[0].seed}: {e}", file=sys.stderr)
                    f.write(f"# kernels from seed {launches[0].seed}: {str(e)[:300]}\n")
                    continue
                for seed, d, code in results:
                    f.write(f"{seed} {d}" + (f" {code}" if code else "") + "\n")
                    faults += code != 0
                    if seed in expected and expected[seed] != d and len(differ) < 600:
                        f.write(f"# seed {seed}: differs from the expected {expected[seed]}\n")
                        if seed in kept:
                            differ[f"{seed}_out"], differ[f"{seed}_acc"] = kept[seed]
                done += len(results)
            f.flush()
            if args.budget and time.time() - start > args.budget:
                print(f"budget of {args.budget:.0f} s spent", file=sys.stderr)
                pool.shutdown(cancel_futures=True)
                break
    if differ:
        np.savez_compressed(args.out + ".npz", **differ)
    print(f"{done} kernels recorded ({faults} faulted) in {time.time() - start:.1f} s on {info['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
