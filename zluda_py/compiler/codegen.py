"""LLVM code generation in child processes, for every target.

LLVM aborts (rather than raising) on some code generation failures, and an abort would kill
the host program; llvmlite also serializes every LLVM call behind one lock, so threads cannot
generate code in parallel. `emit_objects` therefore runs jobs in child Python processes, as
many at once as asked, each job parsed afresh (code generation rewrites a module in place).

A child runs this process's interpreter and imports from this process's sys.path (plus the
directory holding zluda_py), whatever the host is: the driver may run inside a C program, or
inside a Python of another venv that lacks zluda_py's packages, under any PATH and PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import msgpack

from zluda_py.compiler.errors import CodegenError

# (LLVM IR text, the target's name, optimisation level): names cross to the children
Job = tuple[str, str, int]


def emit(ir_text: str, target: str, level: int) -> bytes:
    """One object, in this process."""
    from zluda_py.compiler.target import get

    return get(target).emit(ir_text, level)


def _shares(jobs: list[Job], n: int) -> list[list[int]]:
    """Job indices for n children, biggest jobs first, each to the least loaded child (code
    generation time grows with the IR's size)."""
    shares: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0])):
        k = load.index(min(load))
        shares[k].append(i)
        load[k] += len(jobs[i][0])
    return [s for s in shares if s]


def emit_objects(jobs: list[Job], isolate: bool = True, workers: int = 1) -> list[bytes]:
    """Objects for the jobs, in order. With `isolate`, up to `workers` child processes run
    them; if one dies, each of its jobs is retried alone so the error names the job that
    killed it."""
    if not isolate:
        return [emit(*job) for job in jobs]
    shares = _shares(jobs, max(1, min(workers, len(jobs))))
    try:
        with ThreadPoolExecutor(len(shares)) as pool:  # threads only wait for the children
            results = list(pool.map(lambda idx: _run_child([jobs[i] for i in idx]), shares))
    except OSError as e:  # no child could start (no Python executable to run): here, without isolation
        sys.stderr.write(f"zluda: code generation runs in this process: cannot start a child ({e})\n")
        return [emit(*job) for job in jobs]
    out: list[bytes | None] = [None] * len(jobs)
    for idx, res in zip(shares, results):
        if res is None:
            if len(idx) == 1:
                raise CodegenError(jobs[idx[0]][1], "LLVM aborted (see stderr)")
            res = [emit_objects([jobs[i]])[0] for i in idx]
        for i, r in zip(idx, res):
            if isinstance(r, str):
                raise CodegenError(jobs[i][1], r)
            out[i] = r
    return out  # type: ignore[return-value]


def interpreter() -> str:
    """The Python a child runs: this process's (in a C host the shim starts Python as the
    interpreter zluda-py was installed with), else the one of this Python's installation.
    Raises OSError when there is none."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable] if os.path.basename(sys.executable).startswith("python") else []
    candidates += [os.path.join(prefix, "bin", version) for prefix in (sys.exec_prefix, sys.base_exec_prefix)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise OSError(f"no {version} executable (sys.executable is {sys.executable!r})")


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> str:
    """Python that makes a child die (SIGKILL) when its parent does, however it dies: a killed
    host must not leave children generating code for minutes. Linux signals the death of the
    parent *thread*; ours wait in subprocess.run for as long as the child runs. Checking the
    parent after setting the signal closes the race with a parent that died before."""
    return (f"import ctypes, os; ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}); "
            f"os.getppid() == {os.getpid()} or os._exit(1); ")


def guarded_command(argv: list[str]) -> list[str]:
    """argv (any program: a linker) run so that it dies with this process (_die_with_parent);
    the signal to send survives exec."""
    code = _die_with_parent() + "import sys; os.execv(sys.argv[1], sys.argv[1:])"
    return [interpreter(), "-I", "-S", "-c", code, *argv]


def child_command() -> list[str]:
    """Isolated (-I: no PYTHON* variables, no user site, not the working directory), so that
    the child imports exactly what this process imports; it dies with this process."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = sys.path + ([package_parent] if package_parent not in sys.path else [])
    code = (_die_with_parent() + "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
            "from zluda_py.compiler.codegen import _child; _child()")
    return [interpreter(), "-I", "-c", code, json.dumps(path)]


def _run_child(jobs: list[Job]) -> list[bytes | str] | None:
    res = subprocess.run(child_command(), input=msgpack.packb([list(j) for j in jobs]), capture_output=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace")[-4000:])
        return None
    return msgpack.unpackb(res.stdout)


def _child() -> None:
    jobs = msgpack.unpackb(sys.stdin.buffer.read())
    out: list[bytes | str] = []
    for text, target, level in jobs:
        try:
            out.append(emit(text, target, level))
        except Exception as exc:  # reported to the parent, which raises CodegenError
            out.append(f"{type(exc).__name__}: {exc}")
    sys.stdout.buffer.write(msgpack.packb(out))
