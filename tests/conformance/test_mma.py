"""The warp-level matrix instructions (targets/mma.py) one kernel each, on the chosen target:
`--target cpu` (default) through our compiler, `--target gfx1100`/`gfx950` (...) compiled for
AMDGPU on the ISA emulator, `--target cuda` on an NVIDIA GPU, whose results must meet the same
references (tests/hardware/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.harness import EMULATED, Runner, compile_module
from conformance.target_forms import target_forms
from conformance.targets import Instance, mma
from zluda_py.compiler import UnsupportedError

INSTANCES = [inst for tf in target_forms() if tf.opcode in mma.OPCODES for inst in mma.instances(tf)]
FAULTS = mma.fault_instances()
TESTS = Path(__file__).resolve().parents[1]


def test_every_family_has_instances():
    assert {inst.name.split("_")[0] for inst in INSTANCES} == {op.split(".")[0] for op in mma.OPCODES}


def _target(run: Runner, inst: Instance) -> str | None:
    """Where `inst` runs (None: it is refused there, as checked), skipping a form newer than the GPU."""
    target = run.target if run.target in (*EMULATED, "cuda") else "cpu"
    if inst.refused and target == "cuda":
        pytest.skip("a form our targets refuse: no reference to check the GPU against")
    if inst.refused:
        with pytest.raises(UnsupportedError, match=inst.refused):
            compile_module(mma.module_text(inst), target)
        return None
    if target == "cuda":
        from hardware.cudadrv import driver

        if driver().compute_capability() < mma.NEEDS[inst.name]:
            pytest.skip(f"{inst.name} needs compute capability {mma.NEEDS[inst.name]}")
    return target


class _AgainstCpu:
    """An emulated module whose launches also run on the CPU target, on copies of the arguments:
    the AMDGPU lowering must leave every output bit as the CPU target does (their shared order
    and rounding, compiler/matrix_values.py), beyond the references' error bounds."""

    def __init__(self, emulated, cpu) -> None:
        self.emulated, self.cpu = emulated, cpu

    def launch(self, kernel: str, grid, block, args: list, shared_mem: int = 0) -> None:
        copies = [_same_alignment(a) if isinstance(a, np.ndarray) else a for a in args]
        self.cpu.launch(kernel, grid, block, copies, shared_mem)
        self.emulated.launch(kernel, grid, block, args, shared_mem)
        for k, (a, c) in enumerate(zip(args, copies)):
            if isinstance(a, np.ndarray):
                assert a.tobytes() == c.tobytes(), f"{kernel}: argument {k} differs from the CPU target's"


def _same_alignment(a: np.ndarray) -> np.ndarray:
    """A copy of `a` as far past a 256-byte boundary as `a` is (wmma's alignment checks)."""
    raw = np.zeros(a.nbytes + 512, np.uint8)
    start = (a.ctypes.data - raw.ctypes.data) % 256
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def check_on(inst: Instance, target: str) -> None:
    """Run `inst` on `target` against its reference (on an emulated target, and bit for bit
    against the CPU target)."""
    text = mma.module_text(inst)
    module = compile_module(text, target)
    inst.check(_AgainstCpu(module, compile_module(text, "cpu")) if target in EMULATED else module, inst.name)


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_matrix_instruction(inst, run: Runner):
    target = _target(run, inst)
    if target:
        check_on(inst, target)


@pytest.mark.parametrize("inst", FAULTS, ids=[i.name for i in FAULTS])
def test_misaligned_address_faults(inst, run: Runner):
    """Row addresses, wmma bases and strides the manual forbids: the launch fails with 716 (700 on
    the AMDGPU targets, HIP having no misaligned-address error; docs/amdgpu.md). On a
    CUDA driver that error is sticky (every later call in the context fails), so the kernel runs
    in a child process of its own there, leaving this process's context to the other tests."""
    target = _target(run, inst)
    if target == "cuda":
        path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
        env = dict(os.environ, PYTHONPATH=path)
        code = "import sys; from conformance.targets import mma; mma.run_fault(sys.argv[1], 'cuda')"
        child = subprocess.run([sys.executable, "-c", code, inst.name], env=env, capture_output=True, text=True,
                               timeout=600)
        assert child.returncode == 0, child.stdout + child.stderr
    elif target:
        mma.run_fault(inst.name, target)
