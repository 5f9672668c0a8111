"""Cooperative launches at their limits (tests/cuda/e2e_grid_sync_limits.cu) under `zluda run`:
the largest grid the occupancy API reports runs with every block resident at once (its
blocks wait for each other in grid.sync()), one block more fails with
cudaErrorCooperativeLaunchTooLarge, and a block that traps does not leave the others waiting.
Each section passed natively on an NVIDIA H100 too (tests/hardware/golden/programs.txt)."""

from __future__ import annotations

import pytest

from tests.e2e.test_kernel_programs import _h200_stdout

SECTIONS = ["largest", "launch-ex", "too-large", "not-cooperative", "trap"]


@pytest.mark.parametrize("section", SECTIONS)
def test_grid_sync_limits(nvcc, run, section):
    r = run(nvcc(["e2e_grid_sync_limits.cu"], [], ""), section, timeout=600)
    assert r.returncode == 0 and r.stdout.rstrip().endswith(f"grid sync {section}: PASSED"), \
        r.stdout[-2000:] + r.stderr[-4000:]
    nvidia = _h200_stdout("grid_sync_" + section.replace("-", "_"))  # the same program on an H100
    assert nvidia is not None and r.stdout.splitlines() == nvidia
