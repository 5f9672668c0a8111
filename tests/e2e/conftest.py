"""End-to-end: nvcc-built programs run unmodified under `zluda run`."""

from __future__ import annotations

import subprocess
import sys

import pytest


def zluda_run(program, *args: str, env_extra: dict | None = None, timeout: int = 300, run_args=()):
    import os

    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())", "run", *run_args, "--", str(program), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def run():
    return zluda_run
