"""Per-kernel compile time of the CPU target against ptxas on the same PTX.

    python bench/compile.py                    # the whole corpus (Thrust takes minutes)
    python bench/compile.py --only reduce      # kernels whose name or file matches a regex
    python bench/compile.py --files barrier_kernels.cu vector_add.cu

Corpus: every tests/cuda/*.cu that `nvcc -ptx -arch=sm_80` compiles alone (Thrust is
tests/cuda/e2e_thrust.cu) and bench/cuda/*.cu (barrier-heavy kernels). Each kernel is compiled
as the lazy loader builds it (`CpuTarget.lower_part`: the kernel and what it calls; a module
`parts.whole_reason` keeps whole is one row, against ptxas on all of it), then
optimised and code-generated at the level the pipeline picks. "ours" is this process's CPU
time for lower + optimise + codegen (the helpers every kernel links to are compiled once per
cache, `CpuTarget.helpers_object`: printed first, in no kernel's row); "ptxas" is the CPU time (user + sys) of
`ptxas -arch=sm_80 --entry KERNEL` on the module's PTX. CPU times, so a loaded machine
changes them less than wall clock would.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import llvmlite.binding as llvm

from zluda_py.compiler.cpu import target as cpu_target
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.linker import link
from zluda_py.compiler.parts import whole_reason
from zluda_py.ptx import parse

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ZLUDA_TEST_BUILD_CACHE", Path.home() / ".cache" / "zluda-test-builds"))


def sources() -> list[Path]:
    return sorted((ROOT / "tests" / "cuda").glob("*.cu")) + sorted((ROOT / "bench" / "cuda").glob("*.cu"))


def ptx_of(src: Path) -> str | None:
    """nvcc -ptx of one file (cached by content), None if it does not build alone."""
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"{src.stem}-{hashlib.sha256(src.read_bytes()).hexdigest()[:16]}-sm80.ptx"
    if not out.exists():
        r = subprocess.run(["nvcc", "-ptx", "-arch=sm_80", "-std=c++17", str(src), "-o", str(out)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
    return out.read_text()


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ptxas_time(ptx_file: str, kernel: str | None) -> float:
    t0 = child_cpu()
    entry = ["--entry", kernel] if kernel else []
    subprocess.run(["ptxas", "-arch=sm_80", *entry, "-o", os.devnull, ptx_file], check=True, capture_output=True)
    return child_cpu() - t0


def ours(module, kernel: str | None) -> dict:
    """Lower (one kernel's part, or with None the whole module), optimise, generate code."""
    clock = time.process_time
    t0 = clock()
    text = (CPU.lower_part(module, kernel) if kernel else CPU.lower(module)).text
    t1 = clock()
    mod = llvm.parse_assembly(text)
    mod.verify()
    lines = text.count("\n")
    level = cpu_target.opt_level(lines)
    cpu_target.optimise(mod, level)
    t2 = clock()
    cpu_target.machine_code(mod, level)
    t3 = clock()
    return {"lower": t1 - t0, "opt": t2 - t1, "codegen": t3 - t2, "total": t3 - t0, "lines": lines, "level": level}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="regex over 'file:kernel'")
    ap.add_argument("--files", nargs="*", help="source file names (default: the whole corpus)")
    a = ap.parse_args()
    only = re.compile(a.only) if a.only else None
    rows = []
    t0 = time.process_time()
    CPU.helpers_object()
    print(f"shared helpers (once per cache): {time.process_time() - t0:.2f} s")
    print(f"{'kernel':58} {'IR lines':>8} {'O':>1} {'lower':>6} {'opt':>6} {'cg':>6} {'ours':>7} {'ptxas':>6} {'ratio':>6}")
    for src in sources():
        if a.files and src.name not in a.files:
            continue
        text = ptx_of(src)
        if text is None:
            print(f"{src.name}: does not build with plain nvcc -ptx, skipped")
            continue
        module = link([parse(text)])
        whole = whole_reason(module)
        # a module that stays whole (parts.whole_reason) is compiled whole, against ptxas on all of it
        units = [None] if whole else [k.name for k in module.kernels()]
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(text)
            f.flush()
            for name in units:
                label = f"{src.stem}:{name or '(whole module)'}"
                if only and not only.search(label):
                    continue
                try:
                    t = ours(module, name)
                except UnsupportedError as e:
                    print(f"{label}: {e}, skipped")
                    continue
                p = ptxas_time(f.name, name)
                ratio = t["total"] / max(p, 1e-3)
                rows.append((label, t, p, ratio))
                print(f"{label[:58]:58} {t['lines']:8} {t['level']:1} {t['lower']:6.2f} {t['opt']:6.2f} "
                      f"{t['codegen']:6.2f} {t['total']:7.2f} {p:6.3f} {ratio:6.1f}x", flush=True)
    if not rows:
        return
    ratios = [r[3] for r in rows]
    worst = max(rows, key=lambda r: r[3])
    print(f"{len(rows)} kernels: ours {sum(r[1]['total'] for r in rows):.1f} s, ptxas {sum(r[2] for r in rows):.1f} s; "
          f"ratio median {statistics.median(ratios):.1f}x, max {worst[3]:.1f}x ({worst[0]})")


if __name__ == "__main__":
    main()
