"""Texture and surface references on the HIP backend over the emulator's libamdhip64 stand-in:
the driver-API programs of tests/driver/test_texrefs.py (module .texref/.surfref variables bound
through cuModuleGetTexRef/cuTexRefSet*/cuModuleGetSurfRef/cuSurfRefSetArray to arrays, linear,
pitch-linear memory and a mipmapped array, sRGB reads; the state getters and errors),
tests/driver/test_texture_params.py (.texref/.surfref kernel parameters) and
tests/driver/test_legacy_launch.py (cuParamSetTexRef among the launch API of CUDA < 4.0), with their expectations
(the programming guide's rules written out there), run unchanged with the driver on the HIP
backend: the references are module globals of the code object holding the bound object's
descriptor address (compiler/amdgpu/module.py), which the driver writes (driver/texrefs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ["tests/driver/test_texrefs.py", "tests/driver/test_texture_params.py", "tests/driver/test_legacy_launch.py"]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx950"])
def test_reference_programs_on_the_emulator(arch: str, tmp_path) -> None:
    """The driver tests' own process (their ctypes libcuda.so.1) with the HIP backend selected;
    every test of both files must pass, none skipped."""
    env = dict(os.environ, ZLUDA_BACKEND="hip", ZLUDA_HIP="emulator", ZLUDA_HIP_ARCH=arch,
               CUDA_CACHE_PATH=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *PROGRAMS],
                       cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert re.fullmatch(r"\d+ passed(, \d+ warnings?)? in .*", summary), summary  # none skipped or failed
