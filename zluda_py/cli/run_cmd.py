"""`zluda run [--backend cpu|hip|auto] [--trace DIR] -- PROGRAM ARGS...`: run a CUDA program
on our driver. Our libcuda.so.1 goes first on LD_LIBRARY_PATH (programs that dlopen
"libcuda.so.1", as cudart does) and into LD_PRELOAD (programs linked against libcuda with an
RPATH: the loader then reuses the preloaded library, whose soname matches)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent.parent / "_shim"


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a CUDA program on zluda-py's driver",
                              description="Run an unmodified CUDA program with zluda-py's libcuda.so.1.")
    p.add_argument("--backend", choices=("cpu", "hip", "auto"), default=os.environ.get("ZLUDA_BACKEND", "cpu"),
                   help="where kernels run (default: cpu)")
    p.add_argument("--trace", metavar="DIR", help="log every driver call and save each module's PTX in DIR")
    p.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments (after --)")
    p.set_defaults(func=run)


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _uses_cuda(path: str) -> bool:
    """Whether the binary can reach the driver: it carries CUDA device code or names
    libcuda/libcudart. Scripts (#!) are given the benefit of the doubt."""
    if not _is_elf(path):
        return True
    with open(path, "rb") as f:
        data = f.read()
    return any(marker in data for marker in (b".nv_fatbin", b"libcuda.so", b"libcudart", b"cuInit", b"cuGetProcAddress"))


def environment(backend: str, trace: str | None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    shim = SHIM_DIR / "libcuda.so.1"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), env.get("LD_LIBRARY_PATH")) if p)
    env["LD_PRELOAD"] = " ".join(p for p in (str(shim), env.get("LD_PRELOAD")) if p)
    env["ZLUDA_BACKEND"] = backend
    if trace:
        env["ZLUDA_TRACE"] = os.path.abspath(trace)
    return env


def run(args: argparse.Namespace) -> int:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        print("zluda run: no program given; usage: zluda run [--backend B] [--trace DIR] -- PROGRAM ARGS...",
              file=sys.stderr)
        return 2
    if not (SHIM_DIR / "libcuda.so.1").exists():
        print(f"zluda run: {SHIM_DIR / 'libcuda.so.1'} is missing; reinstall zluda-py (pip install .)", file=sys.stderr)
        return 2
    path = program[0] if os.sep in program[0] else shutil.which(program[0])
    if path is None or not os.path.exists(path):
        print(f"zluda run: {program[0]}: no such program", file=sys.stderr)
        return 127
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        print(f"zluda run: {program[0]}: not an executable file", file=sys.stderr)
        return 126
    if not _uses_cuda(path):
        print(f"zluda run: warning: {program[0]} does not look like a CUDA program (no device code, does not "
              f"use libcuda or libcudart); running it anyway", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(path, program, environment(args.backend, args.trace))
    except OSError as e:
        print(f"zluda run: cannot execute {program[0]}: {e.strerror}", file=sys.stderr)
        return 126
