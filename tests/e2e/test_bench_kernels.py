"""Smoke test of bench/kernels.py: its arguments, and tiny sizes of the C and zluda-py sides
running to a table with agreeing checksums (no timings are asserted; POCL is not needed)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernels.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_kernels", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_arguments():
    bench = _bench()
    args = bench.parse(["--only", "saxpy,scan", "--impl", "zluda,c", "--threads", "1,2", "--tiny"])
    assert args.only == ["saxpy", "scan"] and args.impl == ["zluda", "c"] and args.threads == [1, 2] and args.tiny
    assert bench.parse([]).impl == ["zluda", "pocl", "c"]
    for bad in (["--only", "nope"], ["--impl", "cuda"], ["--impl", "base"]):
        with pytest.raises(SystemExit):
            bench.parse(bad)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
def test_tiny_run(tmp_path):
    impls = "zluda,c" if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists() else "c"
    env = {**os.environ, "ZLUDA_TEST_BUILD_CACHE": str(tmp_path),
           "PATH": os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/cuda/bin"])}
    res = subprocess.run([sys.executable, str(BENCH), "--tiny", "--reps", "1", "--threads", "1", "--only-kernels",
                          "--only", "saxpy,block_reduce,histogram", "--impl", impls],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [line.split("|")[0].strip() for line in res.stdout.splitlines()]
    assert {"saxpy", "block_reduce", "histogram"} <= set(rows)
    assert "MISMATCH" not in res.stdout

