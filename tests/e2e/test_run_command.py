"""`zluda run` itself: exit codes, messages, tracing."""

from __future__ import annotations

import sys


def test_exit_code_is_the_programs(run, tmp_path):
    script = tmp_path / "exit3.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    assert run(script).returncode == 3


def test_missing_program_is_named(run, tmp_path):
    r = run(tmp_path / "nope")
    assert r.returncode == 127 and "nope: no such program" in r.stderr


def test_non_cuda_program_is_warned_about(run):
    r = run("/bin/true")
    assert r.returncode == 0 and "does not look like a CUDA program" in r.stderr


def test_library_comes_first_for_dlopen_by_bare_name(run, tmp_path):
    code = ("import ctypes; lib = ctypes.CDLL('libcuda.so.1'); v = ctypes.c_int(); "
            "print(lib.cuDriverGetVersion(ctypes.byref(v)), v.value, hasattr(lib, 'zluda_shim_path'))")
    r = run(sys.executable, "-c", code)
    assert r.stdout.split() == ["0", "13000", "True"], r.stderr


def test_trace_logs_calls_with_results(nvcc, run, tmp_path):
    exe = nvcc(["e2e_runtime_api.cu"], [], "")
    r = run(exe, run_args=("--trace", str(tmp_path / "trace")))
    assert r.returncode == 0, r.stderr
    log = "".join(p.read_text() for p in (tmp_path / "trace").glob("calls-*.log"))
    assert "cuInit(0) -> CUDA_SUCCESS" in log
    assert "cuMemAlloc_v2(" in log and "cuMemFree_v2(" in log
    assert "CUDA_ERROR_INVALID_VALUE" in log  # the program's deliberate bogus free
