"""Runs hostile cases through the driver, each in a child process under a memory and CPU-time
ceiling, and classifies what happened.

The runner imports the driver, compiler and fatbin reader once, then forks a child per case
(up to `jobs` at a time): a child starts in milliseconds instead of the seconds an import
takes. Nothing here calls the driver before forking, so each child is the first process to
start it (the shim refuses every call in a child forked after it started). The child loads
libcuda.so.1 with ctypes, as a Python host program does, creates a context, hands the case's
image to its entry point (placed just before an unmapped page: a read past the image faults
there, at the same place each run, instead of reading whatever the heap holds next) and
launches the case's kernel, if it has one, <<<1, 1>>>.

Outcomes:
* `ok`: every call returned CUDA_SUCCESS, for an input that may be valid;
* `error`: a call returned an error: with a message in the JIT error log where the entry point
  has one, and nothing but one-line messages on stderr;
* `crash`: a signal, a Python traceback or a driver `internal error` on stderr, no result;
* `hang`: the CPU-time ceiling, or the wall-clock one (a child that waits forever);
* `wrong`: success for an input known to be invalid, an error for one known to be valid, or
  an error without its message.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import mmap
import os
import resource
import signal
import struct
import tempfile
import time
import traceback
from pathlib import Path
from typing import Iterable, Iterator, NoReturn

from zluda_py.fuzz.hostile.cases import Case

OUTCOMES = ("ok", "error", "crash", "hang", "wrong")
SHIM = Path(__file__).resolve().parents[2] / "_shim" / "libcuda.so.1"
# a child's environment: eager loading compiles every kernel at load (what the compiler makes
# of the input is tested, not only the parser); no cache, so no case depends on another
CHILD_ENV = {"CUDA_MODULE_LOADING": "EAGER", "CUDA_CACHE_DISABLE": "1", "ZLUDA_CPU_THREADS": "1",
             "ZLUDA_PROGRESS": "0", "ZLUDA_DEBUG": "0"}
LOG_SIZE = 4096
_WRAPPER = struct.Struct("<IIQQ")  # magic, version, fatbin, filename (docs/fatbin.md)
_WRAPPER_MAGIC = 0x466243B1
_CU_JIT_ERROR_LOG_BUFFER, _CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass
class Limits:
    memory: int = 2 << 30  # RLIMIT_AS, bytes (0: none; NVIDIA's driver reserves far more address space)
    cpu: int = 20  # RLIMIT_CPU, seconds
    wall: float = 300.0  # seconds; generous: on a loaded machine a child gets a fraction of a core


@dataclasses.dataclass
class Result:
    case: Case
    outcome: str
    detail: str  # the failing call and its message, the signal, or why the outcome is wrong
    cpu: float  # seconds of CPU, the child's children included
    rss: int  # peak resident set, bytes
    steps: list = dataclasses.field(default_factory=list)  # (driver call, CUresult) in order, if it finished


def prepare() -> None:
    """Set the children's environment and import what a child runs (before any fork)."""
    os.environ.update(CHILD_ENV)
    import zluda_py.backends.cpu  # noqa: F401
    import zluda_py.cache.lazy  # noqa: F401
    import zluda_py.compiler.cpu.target  # noqa: F401
    import zluda_py.driver.shim_bridge  # noqa: F401
    import zluda_py.fatbin  # noqa: F401


def run(cases: Iterable[Case], jobs: int = 1, limits: Limits = Limits(), library: Path | str = SHIM) -> Iterator[Result]:
    """The result of each case, in the order the children finish, through the CUDA driver at
    `library` (ours; NVIDIA's to record its answers, tests/hardware/record_hostile.py)."""
    running: dict[int, _Child] = {}
    pending = iter(cases)
    with tempfile.TemporaryDirectory(prefix="zluda-hostile-") as scratch:
        while True:
            while len(running) < jobs and (case := next(pending, None)) is not None:
                child = _Child.start(case, limits, Path(scratch), library)
                running[child.pid] = child
            if not running:
                return
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for child in running.values():
                    if now > child.deadline and not child.killed:
                        os.kill(child.pid, signal.SIGKILL)
                        child.killed = True
                time.sleep(0.01)
                continue
            yield running.pop(pid).finish(status, usage, limits)


class _Child:
    def __init__(self, case: Case, pid: int, deadline: float, result, stderr) -> None:
        self.case, self.pid, self.deadline = case, pid, deadline
        self.result, self.stderr = result, stderr  # temporary files the child writes
        self.killed = False

    @classmethod
    def start(cls, case: Case, limits: Limits, scratch: Path, library: Path | str) -> "_Child":
        result, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:
            _child(case, limits, scratch, result.fileno(), stderr.fileno(), library)
        return cls(case, pid, time.monotonic() + limits.wall, result, stderr)

    def finish(self, status: int, usage: resource.struct_rusage, limits: Limits) -> Result:
        cpu = usage.ru_utime + usage.ru_stime
        rss = usage.ru_maxrss << 10
        outcome, detail, steps = self._classify(status, cpu, limits)
        self.result.close()
        self.stderr.close()
        # without its image: what this process holds counts against every later child's RLIMIT_AS
        return Result(dataclasses.replace(self.case, image=b""), outcome, detail, cpu, rss, steps)

    def _classify(self, status: int, cpu: float, limits: Limits) -> tuple[str, str, list]:
        self.stderr.seek(0)
        err = self.stderr.read().decode(errors="replace")
        self.result.seek(0)
        raw = self.result.read()
        if self.killed:
            return "hang", f"no result after {limits.wall:.0f} s of wall time ({cpu:.1f} s of CPU)", []
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu):
                return "hang", f"{limits.cpu} s of CPU time", []
            return "crash", f"signal {signal.Signals(sig).name}; stderr: {_tail(err)}", []
        if "Traceback (most recent call last)" in err:
            return "crash", f"traceback: {_tail(err)}", []
        if "internal error" in err:
            return "crash", _tail(err), []
        if os.WEXITSTATUS(status) != 0 or not raw:
            return "crash", f"exit status {os.WEXITSTATUS(status)} without a result; stderr: {_tail(err)}", []
        result = json.loads(raw)
        return (*_judge(self.case, result), [tuple(step) for step in result["steps"]])


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:]) or "(empty)"


def _judge(case: Case, result: dict) -> tuple[str, str]:
    failed = next(((name, rc) for name, rc in result["steps"] if rc != 0), None)
    if failed is None:
        if case.expect == "error":
            return "wrong", "CUDA_SUCCESS for an invalid input"
        return "ok", ""
    name, rc = failed
    log = result.get("log", "")
    detail = f"{name}: {rc}" + (f": {log.splitlines()[0]}" if log else "")
    if case.expect == "ok":
        return "wrong", f"an error for a valid input: {detail}"
    if name == "cuModuleLoadDataEx" and not log.strip():
        return "wrong", f"an error without a message in the JIT error log: {detail}"
    return "error", detail


# ---- the child ----
def _child(case: Case, limits: Limits, scratch: Path, result_fd: int, stderr_fd: int, library: Path | str) -> NoReturn:
    """Runs in the forked child; never returns into the parent's code."""
    status = 70
    try:
        if limits.memory:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu, limits.cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # a killed runner leaves no case running
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # device printf
        os.dup2(stderr_fd, 2)
        os.write(result_fd, json.dumps(_drive(case, scratch, library)).encode())
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def _placed(image: bytes) -> int:
    """The address of a copy of `image` that ends where an unmapped page begins."""
    page = mmap.PAGESIZE
    size = -(-max(len(image), 1) // page) * page
    region = mmap.mmap(-1, size + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    if libc.munmap(base + size, page) != 0:
        raise OSError(ctypes.get_errno(), "munmap")
    start = base + size - len(image)
    ctypes.memmove(start, image, len(image))
    _keep.append(region)
    return start


_keep: list[mmap.mmap] = []  # the placed images live as long as the child


def _drive(case: Case, scratch: Path, library: Path | str) -> dict:
    cu = ctypes.CDLL(str(library))
    p = ctypes.c_void_p
    steps: list[tuple[str, int]] = []
    out: dict = {"steps": steps}

    def call(name: str, *args) -> bool:
        fn = getattr(cu, name)
        steps.append((name, fn(*args)))
        return steps[-1][1] == 0

    ctx, module = p(), p()
    if not (call("cuInit", 0) and call("cuCtxCreate_v2", ctypes.byref(ctx), 0, 0)):
        return out
    image = _placed(case.image)
    if case.entry == "cuModuleLoadDataEx":
        log = ctypes.create_string_buffer(LOG_SIZE)
        options = (ctypes.c_int * 2)(_CU_JIT_ERROR_LOG_BUFFER, _CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (p * 2)(ctypes.addressof(log), LOG_SIZE)
        loaded = call(case.entry, ctypes.byref(module), p(image), 2, options, values)
        out["log"] = log.value.decode(errors="replace")
    elif case.entry == "cuLibraryLoadData":
        loaded = call(case.entry, ctypes.byref(module), p(image), None, None, 0, None, None, 0)
    elif case.entry == "cuModuleLoad":
        path = scratch / f"{case.seed}.bin"
        path.write_bytes(case.image)
        loaded = call(case.entry, ctypes.byref(module), str(path).encode())
    elif case.entry == "wrapper":
        wrapper = ctypes.create_string_buffer(_WRAPPER.pack(_WRAPPER_MAGIC, 1, image, 0))
        loaded = call("cuModuleLoadFatBinary", ctypes.byref(module), wrapper)
    else:
        loaded = call(case.entry, ctypes.byref(module), p(image))
    if not loaded or not case.launch:
        return out
    fn = p()
    if case.entry == "cuLibraryLoadData":
        found = call("cuLibraryGetKernel", ctypes.byref(fn), module, case.launch.encode())
    else:
        found = call("cuModuleGetFunction", ctypes.byref(fn), module, case.launch.encode())
    if found and call("cuLaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, None, None, None):
        call("cuCtxSynchronize")
    return out


def summary(results: list[Result]) -> dict:
    """Per category: cases, each outcome's count, the most CPU seconds and resident MiB of a case."""
    table: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: r.case.seed):
        row = table.setdefault(r.case.category, {"cases": 0, **{o: 0 for o in OUTCOMES}, "max_cpu_s": 0.0,
                                                 "max_rss_mib": 0.0})
        row["cases"] += 1
        row[r.outcome] += 1
        row["max_cpu_s"] = round(max(row["max_cpu_s"], r.cpu), 2)
        row["max_rss_mib"] = round(max(row["max_rss_mib"], r.rss / (1 << 20)), 1)
    return table
