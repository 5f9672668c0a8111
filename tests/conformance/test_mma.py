"""The warp-level matrix instructions (targets/mma.py) one kernel each, on the chosen target:
`--target cpu` (default) through our compiler, `--target cuda` on an NVIDIA GPU, whose results
must meet the same references (tests/hardware/README.md); the AMDGPU targets refuse them."""

from __future__ import annotations

import pytest

from conformance.harness import EMULATED, Runner, compile_module
from conformance.target_forms import target_forms
from conformance.targets import mma
from zluda_py.compiler import UnsupportedError

INSTANCES = [inst for tf in target_forms() if tf.opcode in mma.OPCODES for inst in mma.instances(tf)]


def test_every_family_has_instances():
    assert {inst.name.split("_")[0] for inst in INSTANCES} == {op.split(".")[0] for op in mma.OPCODES}


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_matrix_instruction(inst, run: Runner):
    target = run.target if run.target in (*EMULATED, "cuda") else "cpu"
    text = f".version 8.7\n.target {inst.target}\n.address_size 64\n{inst.decls}\n{inst.entry}"
    if inst.refused and target == "cuda":
        pytest.skip("a form the CPU target refuses: no reference to check the GPU against")
    if inst.refused or target in EMULATED:
        with pytest.raises(UnsupportedError, match=inst.refused or r"unsupported: (w?mma|ldmatrix|stmatrix|movmatrix)"):
            compile_module(text, target)
        return
    if target == "cuda":
        from hardware.cudadrv import driver

        if driver().compute_capability() < mma.NEEDS[inst.name]:
            pytest.skip(f"{inst.name} needs compute capability {mma.NEEDS[inst.name]}")
    inst.check(compile_module(text, target), inst.name)
