"""numba-cuda's own test suite (its CUDA-target tests, shipped in its wheel) under `zluda run`:
the CI subset (numba_suite.SHARDS, one subprocess per shard, a worker each) must match the
expected failures of numba_expected_failures.txt exactly: no other test fails, none of the
listed ones passes. `python -m tests.thirdparty.numba_suite --all` runs the whole suite."""

from __future__ import annotations

import pytest

from tests.thirdparty import numba_suite


@pytest.mark.parametrize("shard", [pytest.param(s, id=f"shard{i}", marks=pytest.mark.xdist_group(f"numba-{i}"))
                                   for i, s in enumerate(numba_suite.SHARDS)])
def test_numba_cuda_suite_subset(shard, tmp_path):
    outcome = numba_suite.run(list(shard), tmp_path, timeout=3000)
    text, ok = numba_suite.report(outcome, numba_suite.load_expected())
    print(text)
    assert outcome.passed, text
    assert ok, text
