"""Ctrl-C in the middle of a kernel on the HIP backend over the emulator, as
tests/e2e/test_process_life.py checks it on the CPU backend (its program and its timing): the
emulated kernel runs in the program's process, and SIGINT still ends the program at once, or
runs the program's own handler."""

from __future__ import annotations

import os
import signal

import pytest

from tests.e2e.test_process_life import _interrupt_while_spinning

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx950"])
def test_ctrl_c_stops_an_emulated_kernel_or_runs_the_programs_handler(nvcc, tmp_path, arch: str) -> None:
    program = nvcc(["e2e_process_life.c"], ["-cudart", "none", "-ldl"], "")
    env = dict(os.environ, ZLUDA_BACKEND="hip", ZLUDA_HIP="emulator", ZLUDA_HIP_ARCH=arch,
               CUDA_CACHE_PATH=str(tmp_path / "cache"))
    rc, out, err, took = _interrupt_while_spinning(program, "spin", env)
    assert rc == -signal.SIGINT, (rc, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert took < 2, took
    rc, out, err, _ = _interrupt_while_spinning(program, "spin-handler", env)
    assert (rc, out) == (42, "handler\n"), (rc, out, err)
    assert "Traceback" not in err, err
