"""nvcc-built CUDA programs under `zluda run`; each program checks its own results against
host-computed references and prints PASSED."""

from __future__ import annotations

import pytest

# build variants: shared/static cudart, per-thread default stream, PTX-only vs SASS+PTX, and
# every fatbin compression mode (zstd is nvcc 13's default for PTX)
VARIANTS = {
    "static": ["-cudart", "static"],
    "shared": ["-cudart", "shared"],
    "per-thread": ["--default-stream", "per-thread"],
}
KERNEL_VARIANTS = {
    **VARIANTS,
    "ptx-only": ["-gencode", "arch=compute_75,code=compute_75"],
    "sass+ptx": ["-gencode", "arch=compute_86,code=[sm_86,compute_86]"],
    # PTX only for a newer target than the 8.6 device (CuPy's CUB): the closest newer PTX is used
    "ptx-120-only": ["-gencode", "arch=compute_120,code=compute_120"],
    "lz4": ["-compress-mode=speed"],
    "uncompressed": ["--no-compress"],
    "compress-all": ["-Xfatbin", "-compress-all"],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_runtime_api_program(nvcc, run, variant):
    exe = nvcc(["e2e_runtime_api.cu"], VARIANTS[variant], "")
    r = run(exe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runtime api: PASSED" in r.stdout


@pytest.mark.parametrize("variant", KERNEL_VARIANTS)
def test_vector_add_quick_start(nvcc, run, variant):
    exe = nvcc(["vector_add.cu"], KERNEL_VARIANTS[variant], "")
    r = run(exe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vector_add of 1048576 elements: PASSED" in r.stdout
