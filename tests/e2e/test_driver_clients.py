"""Programs that reach the driver without cudart: a C program that dlopens libcuda itself (by
bare name, by NVIDIA's absolute path, or linked with -lcuda and an RPATH) and JIT-loads PTX
text; and the dlopen interposer's rules, checked from a Python host."""

from __future__ import annotations

import sys

import pytest

from zluda_py.cli.run_cmd import SHIM_DIR

NVIDIA_PATH = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"  # absent here: only the interposer can satisfy it


@pytest.fixture(scope="module")
def dlopen_client(nvcc):
    return nvcc(["e2e_dlopen_jit.c"], ["-cudart", "none", "-ldl"], "")


@pytest.mark.parametrize("library", ["libcuda.so.1", "libcuda.so", NVIDIA_PATH, "/opt/nvidia/lib64/libcuda.so.580.65.06"])
def test_c_client_dlopens_driver_and_jit_loads_ptx(run, dlopen_client, library):
    r = run(dlopen_client, library)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["driver: zluda", "dlopen jit: PASSED"]


def test_c_client_linked_with_rpath_to_another_driver(nvcc, run):
    """Linked with -lcuda and an RPATH naming another driver's directory: the loader's
    DT_NEEDED libcuda.so.1 is satisfied by our preloaded library, whose soname matches.
    (Linked against our library for its symbols: the toolkit here has no libcuda stub.)"""
    exe = nvcc(["e2e_dlopen_jit.c"], ["-cudart", "none", "-ldl", f"-L{SHIM_DIR}", "-lcuda",
                                      "-Xlinker", "-rpath=/usr/lib/nvidia-elsewhere"], "")
    r = run(exe, "linked")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["driver: zluda", "dlopen jit: PASSED"]


def test_interposer_redirects_only_the_driver(run):
    code = ("import ctypes\n"
            "ours = ctypes.CDLL('/nonexistent/dir/libcuda.so.1')\n"
            "print(hasattr(ours, 'zluda_shim_path'))\n"
            "print(ctypes.CDLL('libm.so.6').cos is not None)\n"
            "for name in ('/nonexistent/dir/libcudart.so.13', '/nonexistent/libcuda.so.1.bak'):\n"
            "    try:\n"
            "        ctypes.CDLL(name)\n"
            "        print('loaded', name)\n"
            "    except OSError:\n"
            "        print('not found')\n")
    r = run(sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["True", "True", "not found", "not found"], r.stdout + r.stderr


def test_without_zluda_run_an_absolute_path_is_not_ours(dlopen_client):
    import subprocess

    r = subprocess.run([str(dlopen_client), NVIDIA_PATH], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot open shared object file" in r.stderr
