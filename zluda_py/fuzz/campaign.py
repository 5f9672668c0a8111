"""Differential runs: each generated kernel on the reference executor and on the targets under
test: the CPU target, and AMDGPU code objects on the ISA emulator (`gfx1100`, `gfx950`).

Kernels are compiled for each target in batches (one module of many `.entry`s, one compile),
and the reference gets each kernel's own module. A kernel *diverges* when a target and the
reference disagree on fault/no-fault or, without a fault, on any output word or global
accumulator word.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

import numpy as np

from zluda_py.fuzz.generate import NOUT, Kernel, generate, module_ptx


@dataclass
class Outcome:
    """What one executor left: a fault message (None if the launch finished) and the buffers."""

    fault: str | None
    out: np.ndarray
    acc: np.ndarray
    error: str | None = None   # the executor failed (not a fault of the kernel): not comparable


Executor = Callable[[Kernel], Outcome]


def digest(fault: bool, out: np.ndarray, acc: np.ndarray) -> str:
    """A launch's outcome in 16 hex digits ("fault" for a faulting one): how outcomes on other
    machines (NVIDIA hardware, tests/hardware) are recorded and compared."""
    if fault:
        return "fault"
    h = hashlib.sha256(np.ascontiguousarray(out, "<u4").tobytes())
    h.update(np.ascontiguousarray(acc, "<u4").tobytes())
    return h.hexdigest()[:16]


def load_digests(path: Path | str) -> dict[int, str]:
    """seed -> digest from `seed digest [CUresult]` lines ('#' lines are comments)."""
    out: dict[int, str] = {}
    for line in Path(path).read_text().splitlines():
        if line and not line.startswith("#"):
            seed, d = line.split()[:2]
            out[int(seed)] = d
    return out


def hardware_comparable(k: Kernel) -> bool:
    """Whether an outcome recorded on NVIDIA hardware says anything about `k`'s reference outcome:
    not for kernels with recursive calls, which ptxas 13.0 (sm_90) miscompiles when a warp's lanes
    recurse to different depths, nor for kernels with `activemask`, whose PTX has changed since the
    recording (a `bar.warp.sync` before it; docs/fuzz.md, "Against NVIDIA hardware")."""
    return "call_recursive" not in k.shapes and "coll_activemask" not in k.shapes


def run_reference(k: Kernel) -> Outcome:
    """The kernel on `zluda_py.reference` (imported here: the CPU-only paths work without it)."""
    from zluda_py.reference import ReferenceFault, Undefined, run

    inp, out, acc = k.buffers()
    try:
        run(k.ptx(), k.name, (k.grid, 1, 1), k.block_dims, [inp, out, acc])
    except Undefined as e:  # the generator broke its own rules (a wrong mask, say): no oracle
        return Outcome(None, out, acc, error=f"generator error: {e}")
    except ReferenceFault as e:
        return Outcome(f"fault: {e}", out, acc)
    except Exception as e:  # noqa: BLE001 - an unsupported form or a crash of the reference itself
        return Outcome(None, out, acc, error=f"reference error: {type(e).__name__}: {e}")
    return Outcome(None, out, acc)


TARGETS = ("cpu", "gfx1100", "gfx950")  # gfx*: our AMDGPU code objects on the ISA emulator


def compile_cpu(ptx: str, opt: int | None = None):
    """Compile for the CPU target: exactly `compile()` when `opt` is None, else at that LLVM level."""
    from zluda_py.compiler import compile, emit_object, load, lower

    if opt is None:
        return compile(ptx)
    from zluda_py.compiler.linker import link
    from zluda_py.ptx import parse

    ir_text, metadata = lower(link([parse(ptx)]))
    return load(emit_object(ir_text, opt), metadata)


def compile_for(target: str, ptx: str, opt: int | None = None):
    """A module with `launch` for `target`. `opt` is the CPU target's LLVM level; AMDGPU code is
    always built as the HIP backend builds it (O3)."""
    if target == "cpu":
        return compile_cpu(ptx, opt)
    from zluda_py.emulator.module import EmulatedModule

    return EmulatedModule.from_ptx(ptx, target)


def run_module(module, k: Kernel) -> Outcome:
    """The kernel launched on a compiled module (the CPU target's, or an emulated AMDGPU one)."""
    from zluda_py.compiler import LaunchError
    from zluda_py.emulator.errors import EmulatorError

    inp, out, acc = k.buffers()
    try:
        module.launch(k.name, (k.grid, 1, 1), k.block_dims, [inp, out, acc])
    except LaunchError as e:
        return Outcome(f"fault {e.cu_result}: {e}", out, acc)
    except EmulatorError as e:  # an instruction the emulator lacks: no verdict on the code
        return Outcome(None, out, acc, error=f"emulator error: {e}")
    return Outcome(None, out, acc)


def compare(k: Kernel, ref: Outcome, got: Outcome, target: str = "cpu") -> str | None:
    """None when the outcomes agree, else a one-line description of the first difference."""
    if ref.error or got.error:
        return ref.error or f"{target}: {got.error}"
    if (ref.fault is None) != (got.fault is None):
        return f"fault differs: reference {ref.fault or 'no fault'}; {target} {got.fault or 'no fault'}"
    if ref.fault is not None:
        return None  # both faulted: what was written before the fault depends on scheduling
    diff = np.flatnonzero(ref.out != got.out)
    if diff.size:
        i = int(diff[0])
        thread, slot = divmod(i, NOUT)
        return (f"{diff.size} output words differ, first thread {thread} (block {thread // k.block}, "
                f"tid {thread % k.block}) slot {slot}: reference {int(ref.out[i]):#x} {target} {int(got.out[i]):#x}")
    diff = np.flatnonzero(ref.acc != got.acc)
    if diff.size:
        i = int(diff[0])
        return f"accumulator {i} differs: reference {int(ref.acc[i]):#x} {target} {int(got.acc[i]):#x}"
    return None


@dataclass
class Failure:
    seed: int
    message: str
    path: str = ""
    target: str = "cpu"


@dataclass
class BatchResult:
    kernels: int = 0
    failures: list[Failure] = field(default_factory=list)
    shapes: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)  # target -> kernels an AMDGPU target refuses (UnsupportedError)
    digests: dict[int, str] = field(default_factory=dict)  # seed -> the reference outcome's digest
    not_for_hardware: set[int] = field(default_factory=set)  # seeds failing hardware_comparable


def keep_case(keep: Path, k: Kernel, message: str, ref: Outcome | None, got: Outcome | None,
              opt: int | None, target: str = "cpu") -> Path:
    """Write kernel.ptx, case.json and arrays.npz (inputs, both executors' buffers) to
    keep/seed<N> (keep/seed<N>-<target> for the emulated targets)."""
    d = keep / (f"seed{k.seed}" if target == "cpu" else f"seed{k.seed}-{target}")
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.ptx").write_text(k.ptx())
    arrays = {"input": k.inputs, "acc_init": k.acc_init}
    for tag, o in (("ref", ref), (target, got)):
        if o is not None:
            arrays[f"{tag}_out"], arrays[f"{tag}_acc"] = o.out, o.acc
    np.savez(d / "arrays.npz", **arrays)
    case = {"seed": k.seed, "kernel": k.name, "grid": k.grid, "block": k.block, "width": k.width, "opt": opt,
            "target": target,
            "message": message, "ref_fault": ref.fault if ref else None, f"{target}_fault": got.fault if got else None,
            "shapes": sorted(k.shapes)}
    (d / "case.json").write_text(json.dumps(case, indent=1) + "\n")
    return d


REFUSED = "refused"  # an AMDGPU target's UnsupportedError: a loud refusal, not a divergence


def _compile_batch(target: str, kernels: list[Kernel], opt: int | None) -> dict[int, object]:
    """seed -> module, or the compile error's message for the kernels that do not compile
    (REFUSED where an AMDGPU target refuses a form it does not translate)."""
    from zluda_py.compiler import UnsupportedError

    try:
        m = compile_for(target, module_ptx(kernels), opt)
        return {k.seed: m for k in kernels}
    except Exception:  # noqa: BLE001 - find the kernel(s) the target cannot compile
        modules: dict[int, object] = {}
        for k in kernels:
            try:
                modules[k.seed] = compile_for(target, k.ptx(), opt)
            except UnsupportedError as e:
                modules[k.seed] = REFUSED if target != "cpu" else f"{target} compile error: UnsupportedError: {e}"
            except Exception as e:  # noqa: BLE001
                modules[k.seed] = f"{target} compile error: {type(e).__name__}: {e}"
        return modules


def run_batch(seeds: list[int], opt: int | None, keep: Path | None,
              reference: Executor = run_reference, targets: tuple[str, ...] = ("cpu",),
              rows: bool = False) -> BatchResult:
    """Generate, compile once per target, and compare every kernel of the batch on each target
    (`rows`: each launched as a 2-D block, `generate`)."""
    kernels = [generate(s, rows) for s in seeds]
    res = BatchResult(kernels=len(kernels))
    for k in kernels:
        res.shapes.update(k.shapes)
    modules = {t: _compile_batch(t, kernels, opt) for t in targets}
    for k in kernels:
        ref = reference(k)
        if ref.error is None:
            res.digests[k.seed] = digest(ref.fault is not None, ref.out, ref.acc)
        if not hardware_comparable(k):
            res.not_for_hardware.add(k.seed)
        for t in targets:
            m = modules[t][k.seed]
            if m == REFUSED:
                res.refused[t] += 1
                continue
            if isinstance(m, str):
                got, message = None, m
            else:
                got = run_module(m, k)
                message = compare(k, ref, got, t)
            if message is not None:
                path = str(keep_case(keep, k, message, ref, got, opt, t)) if keep else ""
                res.failures.append(Failure(k.seed, message.splitlines()[0][:300], path, t))
    return res


PROGRESS_EVERY = 1000
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(parent: int) -> None:
    """A worker dies (SIGKILL) with the campaign, however the campaign ends."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


def _batch_job(args: tuple[list[int], int | None, str | None, tuple[str, ...], bool]) -> BatchResult:
    seeds, opt, keep, targets, rows = args
    return run_batch(seeds, opt, Path(keep) if keep else None, targets=targets, rows=rows)


def campaign(first: int, last: int, jobs: int = 1, keep: Path | None = Path("fuzz-failures"),
             opt: int | None = None, batch: int = 25, report: Callable[[str], None] = print,
             targets: tuple[str, ...] = ("cpu",), digests: Path | None = None,
             golden: dict[int, str] | None = None, rows: bool = False) -> BatchResult:
    """Seeds first..last inclusive, in batches of `batch` kernels over `jobs` processes, each
    kernel compared with the reference on every target. `digests` receives a line
    `seed digest` per kernel: the reference's outcome, for comparing with hardware records;
    `golden` (seed -> digest recorded on NVIDIA hardware) is compared with the reference where
    `hardware_comparable`. `rows`: every kernel launched as a 2-D block (`generate`)."""
    unknown = set(targets) - set(TARGETS)
    if unknown:
        raise ValueError(f"unknown fuzz targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    seeds = list(range(first, last + 1))
    batches = [(seeds[i:i + batch], opt, str(keep) if keep else None, tuple(targets), rows)
               for i in range(0, len(seeds), batch)]
    total = BatchResult()
    start = time.time()

    def add(r: BatchResult) -> None:
        total.kernels += r.kernels
        total.shapes.update(r.shapes)
        total.refused.update(r.refused)
        total.digests.update(r.digests)
        total.not_for_hardware |= r.not_for_hardware
        for seed, d in sorted(r.digests.items()):
            if golden is not None and seed in golden and seed not in r.not_for_hardware and golden[seed] != d:
                r.failures.append(Failure(seed, f"reference outcome {d}, NVIDIA hardware {golden[seed]}", target="nvidia"))
        if digests is not None:
            with open(digests, "a") as f:
                f.writelines(f"{s} {d}\n" for s, d in sorted(r.digests.items()))
        for f in r.failures:
            report(f"seed {f.seed} ({f.target}): {f.message}" + (f" [{f.path}]" if f.path else ""))
        total.failures += r.failures
        if total.kernels % PROGRESS_EVERY < r.kernels:  # a line now and then for long campaigns
            report(f"... {total.kernels} of {len(seeds)} kernels, {len(total.failures)} divergences, "
                   f"{time.time() - start:.0f} s")

    if jobs <= 1:
        for b in batches:
            add(_batch_job(b))
    else:
        # each process compiles with one LLVM thread; spawn, not fork: the parent may hold a JIT
        os.environ.setdefault("ZLUDA_CPU_THREADS", "1")
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_die_with, initargs=(os.getpid(),)) as pool:
            for r in pool.map(_batch_job, batches):
                add(r)
    notes = "".join(f", {n} refused by {t}" for t, n in sorted(total.refused.items()))
    if golden is not None:
        notes += f", {len(total.not_for_hardware)} with recursive calls not compared with hardware"
    report(f"{total.kernels} kernels, {len(total.failures)} divergences{notes}, {time.time() - start:.1f} s")
    report("shapes: " + ", ".join(f"{s} {n}" for s, n in sorted(total.shapes.items())))
    return total
