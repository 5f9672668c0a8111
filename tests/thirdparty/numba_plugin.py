"""pytest plugin for running numba-cuda's own suite (`numba.cuda.tests`, shipped in its wheel).

The wheel's `CUDATestCase` uses a class fixture and an option that numba-cuda defines in the
conftest.py of its source tree (testing/), which the wheel does not ship; this plugin supplies
them so the installed suite runs as it does in numba-cuda's CI (`-p tests.thirdparty.numba_plugin`).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="numba-cuda: write reproducers for failed FileCheck assertions")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request: pytest.FixtureRequest) -> None:
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
