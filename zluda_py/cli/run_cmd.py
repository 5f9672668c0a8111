"""`zluda run [--backend cpu|hip|auto] [--trace DIR] -- PROGRAM ARGS...`: run a CUDA program
on our driver. Our libcuda.so.1 goes first on LD_LIBRARY_PATH (programs that dlopen
"libcuda.so.1", as cudart does) and into LD_PRELOAD (programs linked against libcuda with an
RPATH: the loader then reuses the preloaded library, whose soname matches), after the
interposer libzluda_preload.so (programs that dlopen libcuda by an absolute path; NVRTC and
nvJitLink, whose "cubins" then hold PTX). Triton is pointed at our ptxas stand-in, which
writes such a cubin (docs/toolchains.md)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from .. import backends
from .elf_imports import loads_libraries

SHIM_DIR = Path(__file__).resolve().parent.parent / "_shim"
# where Triton looks for ptxas (the second for sm_100 and newer); a user's choice is kept
TRITON_PTXAS = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a CUDA program on zluda-py's driver",
                              description="Run an unmodified CUDA program with zluda-py's libcuda.so.1.")
    p.add_argument("--backend", choices=backends.CHOICES, default=os.environ.get("ZLUDA_BACKEND", "cpu"),
                   help="where kernels run: cpu, hip (AMD GPUs through ROCm) or auto (hip when usable, else cpu); "
                        "default: $ZLUDA_BACKEND or cpu")
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
    preload = [str(SHIM_DIR / name) for name in ("libzluda_preload.so", "libcuda.so.1")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), env.get("LD_LIBRARY_PATH")) if p)
    env["LD_PRELOAD"] = " ".join(p for p in (*preload, env.get("LD_PRELOAD")) if p)
    env["ZLUDA_BACKEND"] = backend
    for name in TRITON_PTXAS:
        env.setdefault(name, str(SHIM_DIR / "ptxas"))
    if trace:
        env["ZLUDA_TRACE"] = os.path.abspath(trace)
    return env


def run(args: argparse.Namespace) -> int:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        print("zluda run: no program given; usage: zluda run [--backend B] [--trace DIR] -- PROGRAM ARGS...",
              file=sys.stderr)
        return 2
    missing = [name for name in ("libcuda.so.1", "libzluda_preload.so") if not (SHIM_DIR / name).exists()]
    if missing:
        print(f"zluda run: {', '.join(str(SHIM_DIR / m) for m in missing)} missing; reinstall zluda-py (pip install .)",
              file=sys.stderr)
        return 2
    path = program[0] if os.sep in program[0] else shutil.which(program[0])
    if path is None or not os.path.exists(path):
        print(f"zluda run: {program[0]}: no such program", file=sys.stderr)
        return 127
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        print(f"zluda run: {program[0]}: not an executable file", file=sys.stderr)
        return 126
    if args.backend != "cpu":  # the host CPU is always there: importing its backend (LLVM, NumPy) here
        try:                    # cost 0.4 s of CPU per run, and cuInit reports a broken install anyway
            backends.choose(args.backend)
        except backends.BackendUnavailable as e:
            print(f"zluda run: --backend {args.backend}: {e}; the program will see CUDA_ERROR_NO_DEVICE",
                  file=sys.stderr)
    if not _uses_cuda(path) and not loads_libraries(path):
        print(f"zluda run: warning: {program[0]} does not look like a CUDA program (no device code, does not "
              f"use libcuda or libcudart, loads no libraries at run time); running it anyway", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: the
    # program starts with the defaults, as from a shell (what subprocess's restore_signals does)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execve(path, program, environment(args.backend, args.trace))
    except OSError as e:
        print(f"zluda run: cannot execute {program[0]}: {e.strerror}", file=sys.stderr)
        return 126
