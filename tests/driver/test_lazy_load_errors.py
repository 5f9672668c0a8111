"""A module with an error in a function the program never uses is refused at load under
CUDA_MODULE_LOADING=LAZY as under EAGER, as NVIDIA's driver does (golden/lazy_load_probe.txt,
H100): lazy loading defers building a kernel, never finding its errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "tests" / "hardware" / "golden" / "lazy_load_probe.txt"


def codes(lines: list[str]) -> list[str]:
    """Each case's CUresults, without the JIT log (its wording is each driver's own)."""
    return [line.split(" | ")[0] for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("mode", ["LAZY", "EAGER"])
def test_load_errors_of_unused_functions_as_on_an_h100(mode, tmp_path):
    env = {**os.environ, "CUDA_MODULE_LOADING": mode, "ZLUDA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, "-m",
                        "tests.hardware.lazy_load_probe", mode], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    want = [line for line in codes(GOLDEN.read_text().splitlines()) if f" {mode}:" in line]
    assert len(want) == 12
    assert codes(p.stdout.splitlines()) == want
