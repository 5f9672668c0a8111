"""The target sweep: every form line the CPU target translates itself (target_forms.py) runs with
every modifier value, and without every optional modifier, in a kernel checked against a
reference. Instances come from the family modules in targets/; kernels are compiled in chunks
of the same .target, and every chunk is also fed to ptxas, so the sweep never tests PTX that
NVIDIA's assembler would reject.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
from functools import lru_cache

import pytest

from conformance import targets
from conformance.harness import EMULATED, Runner, compile_module
from conformance.target_forms import ABSENT, TargetForm, target_forms
from conformance.targets import Instance
from zluda_py.compiler import UnsupportedError
from zluda_py.compiler.coverage import cpu_support
from zluda_py.emulator.errors import EmulatorError
from zluda_py.ptx.checks import NVIDIA_ABSENT_TXQ, NVIDIA_REFUSED_SUQ

CHUNK = 24  # kernels per compiled module
XDIST_INDEPENDENT = True  # chunks compile their own modules: spread them over the workers
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


@lru_cache(maxsize=1)
def families() -> dict[str, object]:
    """grammar opcode -> the family module that answers for it."""
    out: dict[str, object] = {}
    for info in pkgutil.iter_modules(targets.__path__):
        module = importlib.import_module(f"conformance.targets.{info.name}")
        for opcode in module.OPCODES:
            assert opcode not in out, f"{opcode} claimed by two families"
            out[opcode] = module
    return out


@lru_cache(maxsize=1)
def all_instances() -> tuple[tuple[TargetForm, Instance], ...]:
    out = []
    for tf in target_forms():
        family = families().get(tf.opcode)
        if family is not None:
            out += [(tf, inst) for inst in family.instances(tf)]
    return tuple(out)


def _module_text(insts: list[Instance]) -> str:
    head = f".version {insts[0].version}\n.target {insts[0].target}\n.address_size {insts[0].address_size}\n"
    return head + "\n".join(i.decls + "\n" + i.entry for i in insts)


def _chunks() -> list[tuple[str, list[Instance]]]:
    by_head: dict[tuple[str, str], list[Instance]] = {}
    alone = []
    for _, inst in all_instances():
        if inst.refused:
            alone.append((f"refused-{inst.name}", [inst]))
        else:
            by_head.setdefault((inst.version, inst.target, inst.address_size), []).append(inst)
    chunks = [(f"{t}-{v}-{bits}bit-{lo // CHUNK}", insts[lo:lo + CHUNK])
              for (v, t, bits), insts in sorted(by_head.items()) for lo in range(0, len(insts), CHUNK)]
    return chunks + alone


def test_every_target_form_value_is_swept():
    missing = []
    for tf in target_forms():
        if tf.opcode not in families():
            missing.append(f"{tf.syntax}: no family in targets/ answers for {tf.opcode}")
            continue
        covered: set[tuple[int, str]] = set()
        for form, inst in all_instances():
            if form == tf:
                got = tf.covered_by(inst.mods)
                assert got is not None, f"{inst.name}: {inst.mods} is not a modifier list of {tf.syntax}"
                covered |= got
        if tf.opcode in ("suq", "txq"):  # modules (kernels) with these do not load, as on NVIDIA: test_nvidia_refusals.py
            left_out = NVIDIA_REFUSED_SUQ if tf.opcode == "suq" else NVIDIA_ABSENT_TXQ
            covered |= {(slot, v) for slot, v in tf.requirements() if v in left_out}
        for slot, value in sorted(tf.requirements() - covered):
            what = "without its optional slot" if value == ABSENT else f".{value}"
            missing.append(f"{tf.syntax}: slot {slot} {what}")
    assert not missing, f"{len(missing)} uncovered:\n" + "\n".join(missing)


def test_instance_names_are_unique():
    names = [inst.name for _, inst in all_instances()]
    assert len(names) == len(set(names))


def test_refusals_agree_with_the_coverage_report():
    """An instance the compiler refuses must be one `zluda ptx coverage` reports as unsupported,
    and the other way round: the report is what users read."""
    wrong = []
    for tf, inst in all_instances():
        claimed = cpu_support(tf.opcode, inst.mods) is not None
        if claimed == bool(inst.refused):
            wrong.append(f"{inst.name}: coverage says {'supported' if claimed else 'unsupported'}")
    assert not wrong, "\n".join(wrong)


CHUNKS = _chunks()

# Forms the AMDGPU target refuses (the CPU target translates them), as `unsupported: ...` says:
# (pattern of the message, why). Every refusal must be one of these, so a new one is noticed.
AMDGPU_REFUSALS = [
    (r"\(128-bit atomic\)", "atom .b128: LLVM's AMDGPU backend has no 128-bit atomics"),
]


def _compile_amdgpu(insts: list[Instance], target: str) -> tuple[object, list[Instance], list[str]]:
    """The chunk's module for an AMDGPU target without the instances it refuses: (module, the
    instances that compiled, a failure for each refusal AMDGPU_REFUSALS does not expect). The
    refused instance is found by the line the error names, and the rest compiled again."""
    failures = []
    while True:
        text = _module_text(insts)
        try:
            return compile_module(text, target), insts, failures
        except UnsupportedError as err:
            line = re.search(r"at <ptx>:(\d+)", str(err))
            culprit = _instance_at(insts, int(line.group(1))) if line else None
            if culprit is None:
                raise
            if not any(re.search(pattern, str(err)) for pattern, _ in AMDGPU_REFUSALS):
                failures.append(f"{culprit.name}: refused on {target} unexpectedly: {err}")
            insts = [i for i in insts if i is not culprit]
            if not insts:
                return None, insts, failures


def _instance_at(insts: list[Instance], line: int) -> Instance | None:
    """The instance whose text holds 1-based `line` of `_module_text(insts)`."""
    start = 4  # after the three header lines
    for inst in insts:
        end = start + (inst.decls + "\n" + inst.entry).count("\n") + 1
        if start <= line < end:
            return inst
        start = end
    return None


@pytest.mark.parametrize("name,insts", CHUNKS, ids=[c[0] for c in CHUNKS])
def test_target_sweep(name: str, insts: list[Instance], tmp_path, run: Runner):
    text = _module_text(insts)
    if os.path.exists(PTXAS) and insts[0].address_size == 64:  # ptxas 13 assembles 64-bit modules only
        src = tmp_path / "sweep.ptx"
        src.write_text(text)
        arch = insts[0].target
        res = subprocess.run([PTXAS, f"-arch={arch}", str(src), "-o", str(tmp_path / "out.cubin")],
                             capture_output=True, text=True)
        assert res.returncode == 0, f"ptxas rejects the sweep's PTX:\n{res.stderr}"
    target = run.target if run.target in EMULATED else "cpu"  # the semantics targets run no whole kernels
    if insts[0].refused:
        with pytest.raises(UnsupportedError, match=insts[0].refused):
            compile_module(text, target)
        return
    failures = sweep_chunk(insts, target)
    assert not failures, "\n".join(failures)


def sweep_chunk(insts: list[Instance], target: str) -> list[str]:
    """Compile the instances as one module for `target` and check each: the failures."""
    if target == "cpu":
        module, failures = compile_module(_module_text(insts), target), []
    else:
        module, insts, failures = _compile_amdgpu(insts, target)
    for inst in insts:
        try:
            inst.check(module, inst.name)
        except (AssertionError, EmulatorError) as err:  # an emulator gap fails its instance, not the chunk
            failures.append(f"{inst.name} ({'.'.join(inst.mods)}): {err}")
    return failures
