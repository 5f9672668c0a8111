"""`zluda-compile PATH... [--target T] [-j N] [--cache DIR] [--dump DIR]`: warm the
compiled-code cache ahead of time, e.g. on a build machine or while building a container image.

Every CUDA executable, shared library, fatbin, cubin and PTX file found under PATH is opened
the way the driver opens it: for each separately loaded image, the PTX the device would JIT
(ZLUDA_COMPUTE_CAPABILITY, default 8.6; ZLUDA_PTX_SELECT), linked as the driver links it. Each
module is compiled into the cache in a pool of worker processes.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from zluda_py.compiler.target import Target, TargetUnavailable, get, names

_CANDIDATE_SUFFIXES = (".ptx", ".fatbin", ".cubin")


@dataclass
class Job:
    file: str
    image: int
    target: Target
    texts: list[str]
    names: list[str]

    @property
    def label(self) -> str:
        return f"{self.file}[image {self.image}] ({self.target})"


@dataclass
class Result:
    job: Job
    status: str  # "compiled", "cached" or "failed"
    kernels: int = 0
    seconds: float = 0.0
    reason: str = ""
    entries: int = 0  # cache entries: the module's, or one per part


@dataclass
class Summary:
    files: int = 0
    skipped: int = 0  # files without CUDA code, met while walking directories
    skipped_images: list[tuple[str, str]] = field(default_factory=list)  # (image, why): nothing to translate
    results: list[Result] = field(default_factory=list)
    file_errors: list[tuple[str, str]] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


# --------------------------------------------------------------------------- finding modules
def _walk(paths: list[str]) -> list[tuple[str, bool]]:
    """(file, named explicitly) for every regular file under paths, in a stable order."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [(os.path.join(root, f), False) for f in sorted(files)
                        if os.path.isfile(os.path.join(root, f)) and not os.path.islink(os.path.join(root, f))]
        else:
            out.append((p, True))
    return out


def _holds_cuda(path: str) -> bool:
    """Cheap test for files met while walking: PTX/fatbin/cubin by name, or an ELF with fatbins."""
    from zluda_py.fatbin.container import FATBIN_MAGIC
    from zluda_py.fatbin.elf import ELF_MAGIC, FATBIN_SECTIONS

    if path.endswith(_CANDIDATE_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head == FATBIN_MAGIC.to_bytes(4, "little"):
                return True
            if head != ELF_MAGIC:
                return False
            f.seek(0)
            data = f.read()
    except OSError:
        return False
    from zluda_py.fatbin.elf import fatbin_sections
    try:
        return any(s.name in FATBIN_SECTIONS for s in fatbin_sections(data))
    except Exception:  # a broken ELF met while walking is not ours to report
        return False


def _images(path: str, sm: int) -> list:
    from zluda_py.fatbin import image_results_from_file

    return image_results_from_file(path, sm)


def find_jobs(paths: list[str], targets: list[Target], sm: int, summary: Summary) -> list[Job]:
    from zluda_py.fatbin import CUDA_ERROR_NO_BINARY_FOR_GPU, FatbinError

    jobs = []
    for path, explicit in _walk(paths):
        if not explicit and not _holds_cuda(path):
            summary.skipped += 1
            continue
        if not os.path.exists(path):
            summary.file_errors.append((path, "no such file or directory"))
            continue
        try:
            images = _images(path, sm)
        except FatbinError as e:
            reason = str(e)
            reason = reason[len(path):].lstrip(": ") if reason.startswith(path) else reason
            if e.cu_result == CUDA_ERROR_NO_BINARY_FOR_GPU:  # SASS only: nothing the driver would translate
                summary.skipped_images.append((path, reason))
            else:
                summary.file_errors.append((path, reason))
            continue
        summary.files += 1
        for i, modules in enumerate(images):
            if isinstance(modules, FatbinError):
                where = f"{path}[image {i}]"
                if modules.cu_result != CUDA_ERROR_NO_BINARY_FOR_GPU:
                    summary.file_errors.append((where, str(modules)))
                else:  # SASS only (e.g. the static cudart's own fatbin): the driver never JITs it
                    summary.skipped_images.append((where, "SASS only, no PTX to translate"))
                continue
            for target in targets:
                jobs.append(Job(path, i, target, [m.text for m in modules], [m.name for m in modules]))
    return jobs


# --------------------------------------------------------------------------- compiling (in workers)
def _builds(job: Job, cache_dir: str | None) -> list:
    """The cache entries `zluda run` looks up for this module, built or found: on the CPU, one
    per part (cache/lazy.py) where the driver loads the module per kernel, else the whole module."""
    from zluda_py.cache import build, from_environment
    from zluda_py.cache.compile import build_parts, helpers, linked
    from zluda_py.compiler.parts import parts as parts_of

    settings = from_environment(cache_dir)
    name = ", ".join(job.names)
    helpers(job.target, settings)  # what every module of the target links to
    if job.target.per_kernel:
        module = linked(job.texts)
        parts = parts_of(module)
        if parts is not None:
            return list(zip(parts, build_parts(job.texts, parts, job.target, settings, name, module)))
    return [(None, build(job.texts, job.target, settings, name))]


def _dump(job: Job, dump_dir: str, builds: list) -> None:
    """NAME.imageI.TARGET[.PART].KEY.{ll,o|hsaco,json} for the module or each of its parts."""
    import json

    from zluda_py.compiler.parts import VARIABLES
    from zluda_py.compiler.pipeline import compile_object, compile_parts

    out = Path(dump_dir)
    out.mkdir(parents=True, exist_ok=True)
    for part, built in builds:
        ir_text = built.ir_text
        if ir_text is None:  # a cache hit holds no IR: lower it again
            from zluda_py.cache.compile import linked

            ir_text = (compile_object(job.texts, job.target) if part is None
                       else compile_parts(linked(job.texts), [part], job.target)[0])[0]
        label = "" if part is None else ".variables" if part == VARIABLES else f".{part}"
        stem = f"{Path(job.file).name}.image{job.image}.{job.target}{label}.{built.key[:12]}"
        (out / f"{stem}.ll").write_text(ir_text)
        objects = job.target.objects(built.object_code, built.metadata)  # several: a module split per kernel
        suffix = job.target.object_suffix
        for i, obj in enumerate(objects):
            (out / (f"{stem}.{suffix}" if len(objects) == 1 else f"{stem}.part{i}.{suffix}")).write_bytes(obj)
        (out / f"{stem}.json").write_text(json.dumps(built.metadata, indent=1, sort_keys=True))


def _set_threads(count: str) -> None:
    """In a worker process: how many code generation children one compile may start."""
    os.environ["ZLUDA_CPU_THREADS"] = count


def compile_job(job: Job, cache_dir: str | None, dump_dir: str | None) -> Result:
    start = time.perf_counter()
    try:
        builds = _builds(job, cache_dir)
        if dump_dir:
            _dump(job, dump_dir, builds)
    except Exception as e:  # every failure is reported in the summary, none stops the others
        where = ", ".join(job.names)
        code = getattr(e, "cu_result", None)
        kind = "" if code is not None else f"internal error {type(e).__name__}: "
        return Result(job, "failed", 0, time.perf_counter() - start, f"{where}: {kind}{e}")
    cached = all(built.cached for _, built in builds)
    kernels = sum(len(built.metadata.get("kernels", ())) for _, built in builds)
    return Result(job, "cached" if cached else "compiled", kernels, time.perf_counter() - start, entries=len(builds))


# --------------------------------------------------------------------------- reporting
class Progress:
    """A bar on a terminal (stderr), one line per module otherwise (stdout)."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.tty = sys.stderr.isatty()

    def update(self, r: Result) -> None:
        self.done += 1
        if self.tty:
            width = 30
            filled = width * self.done // max(self.total, 1)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} modules"
                             f"  {r.status:8} {Path(r.job.file).name[-30:]:30}")
            sys.stderr.flush()
            if r.status == "failed":
                sys.stderr.write(f"\n  FAILED {r.job.label}: {r.reason}\n")
        else:
            line = f"[{self.done}/{self.total}] {r.status:8} {r.job.label}"
            if r.status == "failed":
                line += f": {r.reason}"
            elif r.status == "cached":
                line += f": skipped, all {r.entries} cache entries present ({r.kernels} kernels)"
            else:
                line += f": {r.kernels} kernels in {r.entries} cache entries, {r.seconds:.2f} s"
            print(line, flush=True)

    def close(self) -> None:
        if self.tty and self.total:
            sys.stderr.write("\n")


def print_summary(s: Summary, elapsed: float) -> None:
    kernels = sum(r.kernels for r in s.results if r.status != "failed")
    print(f"files: {s.files} with CUDA code ({s.skipped} other files skipped), modules: {len(s.results)}, "
          f"kernels: {kernels}")
    print(f"newly compiled: {s.count('compiled')}, already cached: {s.count('cached')}, "
          f"failed: {s.count('failed') + len(s.file_errors)}  ({elapsed:.1f} s)")
    for image, reason in s.skipped_images:
        print(f"  skipped: {image}: {reason}")
    for target, reason in s.unavailable.items():
        print(f"target {target}: not available in this build: {reason}")
    for path, reason in s.file_errors:
        print(f"  failed: {path}: {reason}")
    for r in s.results:
        if r.status == "failed":
            print(f"  failed: {r.job.label}: {r.reason}")


# --------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zluda-compile", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to search")
    p.add_argument("--target", choices=(*names(), "all"), default="cpu", help="what to compile for (default: cpu)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes (default: one per CPU)")
    p.add_argument("--cache", metavar="DIR", help="the cache directory (default: CUDA_CACHE_PATH, "
                                                   "$XDG_CACHE_HOME/zluda or ~/.cache/zluda)")
    p.add_argument("--dump", metavar="DIR", help="also write each module's LLVM IR (.ll), object (.o) and "
                                                  "metadata (.json) here")
    return p


def _available_targets(wanted: list[str], summary: Summary) -> list[Target]:
    ok = []
    for name in wanted:
        try:
            target = get(name)
            target.check()
            ok.append(target)
        except TargetUnavailable as e:
            summary.unavailable[name] = str(e).split(": ", 1)[-1]
    return ok


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.jobs < 1:
        print("zluda-compile: -j must be at least 1", file=sys.stderr)
        return 2
    if os.environ.get("CUDA_CACHE_DISABLE", "").strip() == "1" and args.cache is None:
        print("zluda-compile: CUDA_CACHE_DISABLE=1: there is no cache to fill", file=sys.stderr)
        return 2
    from zluda_py.devinfo import compute_capability

    os.environ.setdefault("ZLUDA_PROGRESS", "0")  # the bar or per-module lines report progress here
    start = time.perf_counter()
    summary = Summary()
    targets = _available_targets(list(names()) if args.target == "all" else [args.target], summary)
    major, minor = compute_capability()
    jobs = find_jobs(args.paths, targets, major * 10 + minor, summary) if targets else []
    progress = Progress(len(jobs))
    workers = 1 if args.jobs == 1 or len(jobs) <= 1 else min(args.jobs, len(jobs))
    if workers == 1:
        for job in jobs:
            summary.results.append(compile_job(job, args.cache, args.dump))
            progress.update(summary.results[-1])
    else:
        # spawn: workers start clean (no inherited LLVM or SQLite state)
        ctx = multiprocessing.get_context("spawn")
        # -j bounds the processes: a large module's code generation runs in worker_count()
        # children (compiler/codegen.py), so each worker gets its share of the N
        share = str(max(1, args.jobs // workers))
        with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_set_threads, initargs=(share,)) as pool:
            futures = [pool.submit(compile_job, job, args.cache, args.dump) for job in jobs]
            for fut in cf.as_completed(futures):
                summary.results.append(fut.result())
                progress.update(summary.results[-1])
    progress.close()
    print_summary(summary, time.perf_counter() - start)
    if not targets:
        return 2
    return 1 if summary.file_errors or summary.count("failed") else 0
