"""Cooperative launches at their limits (tests/cuda/e2e_grid_sync_limits.cu) under `zluda run`:
the largest grid the occupancy API reports runs with every block resident at once (its
blocks wait for each other in grid.sync()), one block more fails with
cudaErrorCooperativeLaunchTooLarge, and a block that traps does not leave the others waiting."""

from __future__ import annotations

import pytest

SECTIONS = ["largest", "launch-ex", "too-large", "not-cooperative", "trap"]


@pytest.mark.parametrize("section", SECTIONS)
def test_grid_sync_limits(nvcc, run, section):
    r = run(nvcc(["e2e_grid_sync_limits.cu"], [], ""), section, timeout=600)
    assert r.returncode == 0 and r.stdout.rstrip().endswith(f"grid sync {section}: PASSED"), \
        r.stdout[-2000:] + r.stderr[-4000:]
