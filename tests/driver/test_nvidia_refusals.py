"""Valid PTX that NVIDIA's driver will not load is refused here the same way: each texture and
surface form of tests/hardware/ptx_forms_probe.py, loaded through our driver, gives the module
load's CUresult an NVIDIA H100 gave (tests/hardware/golden/ptx_forms_probe.txt, its `jit` column).
Not compared: the H100 loads kernels using txq's non-size queries on a texture object but then
has no such kernel (cuModuleGetFunction: 500); we build and run them (docs/semantics.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.driver.conftest import shim_path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "hardware" / "golden" / "ptx_forms_probe.txt"


def _jit_column(text: str) -> dict[str, str]:
    """form -> the result of loading it as PTX (`0`, or `801 CUDA_ERROR_NOT_SUPPORTED`)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ": jit " in line:
            form, rest = line.split(": jit ", 1)
            out[form] = rest.split(";")[0].split(", cuModuleGetFunction")[0]
    return out


def test_forms_load_or_fail_as_on_an_h100(tmp_path: Path) -> None:
    golden = _jit_column(GOLDEN.read_text())
    assert sum(v.startswith("801") for v in golden.values()) >= 4  # the refused suq queries
    env = {"LD_LIBRARY_PATH": str(Path(shim_path()).parent), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "CUDA_CACHE_PATH": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "tests.hardware.ptx_forms_probe"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    ours = _jit_column(r.stdout)
    assert ours.keys() == golden.keys()
    differ = {form: (ours[form], golden[form]) for form in golden if ours[form] != golden[form]}
    assert not differ, differ
