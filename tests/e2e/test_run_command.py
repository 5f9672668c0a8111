"""`zluda run` itself: exit codes, messages, tracing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


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


def test_the_launcher_does_not_load_the_cpu_backend(tmp_path):
    """`zluda run` only sets the program up; the CPU backend (the compiler, LLVM, NumPy) is
    imported by the program's own process, at cuInit."""
    script = tmp_path / "exit0.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "zluda_py.cli", "run", "--backend", "cpu", "--",
                        str(script)], capture_output=True, text=True, timeout=120)
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert r.returncode == 0 and "zluda_py.cli.elf_imports" in imported, r.stderr  # its checks ran
    assert not {"zluda_py.backends.cpu", "zluda_py.compiler", "llvmlite", "numpy"} & imported


def test_library_comes_first_for_dlopen_by_bare_name(run, tmp_path):
    code = ("import ctypes; lib = ctypes.CDLL('libcuda.so.1'); v = ctypes.c_int(); "
            "print(lib.cuDriverGetVersion(ctypes.byref(v)), v.value, hasattr(lib, 'zluda_shim_path'))")
    r = run(sys.executable, "-c", code)
    from zluda_py.driver.init_device import DRIVER_VERSION
    assert r.stdout.split() == ["0", str(DRIVER_VERSION), "True"], r.stderr


def test_trace_logs_calls_with_results(nvcc, run, tmp_path):
    exe = nvcc(["e2e_runtime_api.cu"], [], "")
    r = run(exe, run_args=("--trace", str(tmp_path / "trace")))
    assert r.returncode == 0, r.stderr
    log = "".join(p.read_text() for p in (tmp_path / "trace").glob("calls-*.log"))
    assert "cuInit(0) -> CUDA_SUCCESS" in log
    assert "cuMemAlloc_v2(" in log and "cuMemFree_v2(" in log
    assert "CUDA_ERROR_INVALID_VALUE" in log  # the program's deliberate bogus free


def test_python_dash_m_runs_the_cli(tmp_path):
    import subprocess

    script = tmp_path / "exit5.sh"
    script.write_text("#!/bin/sh\nexit 5\n")
    script.chmod(0o755)
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", str(script)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 5, r.stderr
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "run" in r.stdout


CUINIT = "import ctypes; print(ctypes.CDLL('libcuda.so.1').cuInit(0))"


def test_backend_auto_falls_back_to_cpu_without_rocm(run):
    r = run(sys.executable, "-c", CUINIT, run_args=("--backend", "auto"))
    assert r.stdout.split() == ["0"], r.stderr


def test_backend_hip_without_a_usable_hip_is_no_device_with_a_reason(run):
    from zluda_py import backends

    try:
        backends.choose("hip")
    except backends.BackendUnavailable:
        pass
    else:
        import pytest
        pytest.skip("a usable hip backend is present on this machine")
    r = run(sys.executable, "-c", CUINIT, run_args=("--backend", "hip"))
    assert r.stdout.split() == ["100"], r.stderr  # CUDA_ERROR_NO_DEVICE
    assert "zluda run: --backend hip: the hip backend" in r.stderr
    assert "cuInit returns CUDA_ERROR_NO_DEVICE" in r.stderr


def test_environment_backend_is_validated(run):
    r = run(sys.executable, "-c", CUINIT, env_extra={"ZLUDA_BACKEND": "gpu"})
    assert r.stdout.split() == ["100"]
    assert "ZLUDA_BACKEND='gpu': expected one of cpu, hip, auto" in r.stderr


def test_an_interpreter_is_not_warned_about(run):
    # python reaches libcuda through the frameworks it loads (CuPy, numba-cuda): libpython
    # calls dlopen, which is what tells it apart from /bin/true
    r = run(os.path.realpath(sys.executable), "-c", "pass")
    assert r.returncode == 0 and "does not look like a CUDA program" not in r.stderr


@pytest.mark.parametrize("calls_dlopen", [True, False])
def test_a_program_that_loads_libraries_is_not_warned_about(run, tmp_path, calls_dlopen):
    body = 'return dlopen("libm.so.6", RTLD_NOW) ? 0 : 1;' if calls_dlopen else "return 0;"
    src = tmp_path / "p.c"
    src.write_text(f"#include <dlfcn.h>\nint main(void) {{ {body} }}\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "p"), str(src)], check=True)
    r = run(tmp_path / "p")
    assert r.returncode == 0
    assert ("does not look like a CUDA program" in r.stderr) is not calls_dlopen


def test_a_malformed_elf_gives_a_message_not_a_traceback(run, tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)
    bad.chmod(0o755)
    r = run(bad)
    assert r.returncode == 126 and "cannot execute" in r.stderr and "Traceback" not in r.stderr
