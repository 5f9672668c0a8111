"""Linking AMDGPU relocatable objects into the shared objects ROCm loads, with ld.lld.

ld.lld is looked up in this order: $ZLUDA_LLD, /opt/rocm/llvm/bin/ld.lld, ld.lld-NN on PATH
(newest first), ld.lld on PATH, then `python -m ziglang ld.lld`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from zluda_py.compiler.codegen import guarded_command
from zluda_py.compiler.errors import PtxError

ROCM_LLD = "/opt/rocm/llvm/bin/ld.lld"
INSTALL_HINT = ("no ld.lld found to link AMDGPU code objects; install one of: ROCm (/opt/rocm/llvm/bin/ld.lld), "
                "Debian/Ubuntu `apt-get install lld-19`, or `pip install ziglang`; "
                "or point $ZLUDA_LLD at an ld.lld binary")


class LinkerError(PtxError):
    """ld.lld is missing or failed. Not a PTX problem, but reported through the same channel."""

    cu_result = 218

    def __init__(self, message: str) -> None:
        super().__init__(message, "<amdgpu>", 0, 0)

    def __str__(self) -> str:
        return self.message


def find_lld() -> list[str]:
    """The command that runs ld.lld; raises LinkerError with install instructions when none exists."""
    env = os.environ.get("ZLUDA_LLD")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise LinkerError(f"$ZLUDA_LLD={env} is not an executable file")
        return [env]
    if os.access(ROCM_LLD, os.X_OK):
        return [ROCM_LLD]
    for version in range(30, 14, -1):
        found = shutil.which(f"ld.lld-{version}")
        if found:
            return [found]
    found = shutil.which("ld.lld")
    if found:
        return [found]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "ld.lld"]
    raise LinkerError(INSTALL_HINT)


def link(objects: list[bytes]) -> bytes:
    """`ld.lld -shared --no-undefined` the objects into one code object."""
    lld = find_lld()
    with tempfile.TemporaryDirectory(prefix="zluda-lld-") as d:
        inputs = []
        for i, obj in enumerate(objects):
            path = os.path.join(d, f"k{i}.o")
            with open(path, "wb") as f:
                f.write(obj)
            inputs.append(path)
        out = os.path.join(d, "k.hsaco")
        # it dies with this process (a killed host leaves no linker behind)
        res = subprocess.run(guarded_command([*lld, "-shared", "--no-undefined", "-o", out, *inputs]),
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise LinkerError(f"ld.lld failed ({' '.join(lld)}): {res.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()
