"""Block barriers inside device functions that nvcc keeps as calls (tests/cuda/e2e_func_barrier.cu)
under `zluda run`: `__noinline__` functions in an optimised build, and every function of a `-G`
build. The program checks its results against host-computed references, prints
`func barriers: PASSED` and exits 0, or names the failed check on stderr and exits 1."""

from __future__ import annotations

import pytest

BUILDS = {
    "noinline-with-cooperative-groups": (["-DWITH_CG"], ()),
    "debug-G": (["-G"], ()),
    "debug-G-with-cooperative-groups": (["-G", "-DWITH_CG"], ()),
    # under -G for sm_80, cooperative_groups::this_thread_block() reads %reserved_smem_offset_1
    "debug-G-sm80-with-cooperative-groups": (["-G", "-DWITH_CG", "-arch=sm_80"], ()),
}


@pytest.mark.parametrize("build", [pytest.param(k, marks=v[1]) for k, v in BUILDS.items()])
def test_barriers_in_called_functions(nvcc, run, build):
    r = run(nvcc(["e2e_func_barrier.cu"], BUILDS[build][0], ""))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("func barriers: PASSED"), \
        r.stdout[-2000:] + r.stderr[-4000:]
