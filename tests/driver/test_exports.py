"""The library's ABI against NVIDIA's: every symbol cuda.h (and cudaProfiler.h) makes a program
link against is exported, unimplemented ones answer an error; the profiler calls succeed."""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "libcuda_shim"))
import nvidia_exports  # noqa: E402

CUDA_INCLUDE = nvidia_exports.DEFAULT_INCLUDE
CUDA_SUCCESS, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_SUPPORTED = 0, 201, 801
needs_header = pytest.mark.skipif(not (CUDA_INCLUDE / "cuda.h").exists(), reason="no CUDA toolkit headers")


def dynamic_symbols(library: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@needs_header
def test_every_symbol_of_the_headers_is_exported(cu):
    wanted = nvidia_exports.header_exports(CUDA_INCLUDE)
    # the derivation itself: API names map to versioned and per-thread ABI symbols, old names stay
    assert {"cuArrayCreate_v2", "cuArrayCreate", "cuMemcpyHtoD_v2_ptds", "cuMemcpy_ptds", "cuMemAlloc",
            "cuDeviceGetProperties", "cuProfilerInitialize", "cuGraphInstantiate_v2"} <= wanted
    assert "cuGetProcAddress_v2_ptsz" not in wanted  # a static inline helper of the header
    missing = wanted - dynamic_symbols(Path(cu.lib._name))
    assert not missing, sorted(missing)
    assert set(nvidia_exports.listed_exports()) >= wanted, "rerun libcuda_shim/nvidia_exports.py"


@pytest.mark.parametrize("name", ["cuMipmappedArrayGetSparseProperties", "cuMemAlloc", "cuProfilerInitialize"])
def test_unimplemented_symbols_answer_not_supported(cu, name):
    assert getattr(cu, name)() == CUDA_ERROR_NOT_SUPPORTED


def test_profiler_start_stop_succeed_in_a_context(cu):
    assert cu.cuProfilerStart() == CUDA_SUCCESS
    assert cu.cuProfilerStart() == CUDA_SUCCESS  # already enabled: no effect
    assert cu.cuProfilerStop() == CUDA_SUCCESS
    assert cu.cuProfilerStop() == CUDA_SUCCESS
    saved = ctypes.c_void_p()
    cu.ok(cu.cuCtxPopCurrent_v2(ctypes.byref(saved)))
    try:
        assert cu.cuProfilerStart() == CUDA_ERROR_INVALID_CONTEXT
        assert cu.cuProfilerStop() == CUDA_ERROR_INVALID_CONTEXT
    finally:
        cu.ok(cu.cuCtxPushCurrent_v2(saved))


@needs_header
def test_c_program_linked_with_lcuda_resolves_unimplemented_entry_points(cu, tmp_path):
    library = Path(cu.lib._name)
    exe = tmp_path / "abi_exports"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    build = subprocess.run([*cc, "-o", str(exe), str(ROOT / "tests" / "cuda" / "abi_exports.c"), f"-I{CUDA_INCLUDE}",
                            f"-L{library.parent}", "-lcuda", "-ldl"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr  # before the stubs: undefined reference to cuArrayCreate_v2
    env = dict(os.environ, LD_LIBRARY_PATH=str(library.parent))
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [f"cuMipmappedArrayGetSparseProperties {CUDA_ERROR_NOT_SUPPORTED}",
                                     "cuDeviceGetProperties 0 1024 64 32 65536",
                                     "cuProfilerStart 0", "cuProfilerStop 0"]
    assert "cuMipmappedArrayGetSparseProperties is not implemented" in r.stderr
