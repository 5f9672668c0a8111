"""Device printf, assert and trap."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from zluda_py.compiler import LaunchError


def run_child(code: str) -> subprocess.CompletedProcess:
    """printf writes to fd 1, so it is observed from a child process."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=root, timeout=300)


def test_printf_output_in_lane_order(nvcc):
    ptx = nvcc(["compiler_control.cu"], ["-ptx", "-arch=sm_80"], ".ptx")
    res = run_child(f"""
        from zluda_py.compiler import compile
        m = compile(open({str(ptx)!r}).read())
        m.launch("_Z5helloi", (1,), (40,), [35])
        print("after launch", flush=True)
    """)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines == [f"hello from thread {i} of block 0: {i * 0.5:f} ok" for i in range(35)] + ["after launch"]


def test_failed_assert_raises_710(cuda_module):
    import numpy as np

    m = cuda_module("compiler_control.cu")
    ok = np.arange(64, dtype=np.int32)
    m.launch("_Z14failing_assertPKi", (1,), (64,), [ok])
    bad = ok.copy()
    bad[37] = -1
    with pytest.raises(LaunchError) as e:
        m.launch("_Z14failing_assertPKi", (1,), (64,), [bad])
    assert e.value.cu_result == 710


def test_trap_raises_719_and_module_stays_usable(cuda_module):
    m = cuda_module("compiler_control.cu")
    with pytest.raises(LaunchError) as e:
        m.launch("_Z8trappingi", (3,), (64,), [40])
    assert e.value.cu_result == 719
    m.launch("_Z8trappingi", (3,), (64,), [1000])  # no thread traps
