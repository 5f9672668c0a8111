"""The conformance sweeps on the emulated AMDGPU targets, the part CI runs: our AMDGPU code objects
(gfx1100 wave32, gfx950 wave64) on the ISA emulator, with the CPU target's expectations.

The whole sweeps take too long for CI (the emulator is Python): `python -m pytest -q
tests/conformance/test_sweep.py tests/conformance/test_target_sweep.py --target gfx1100` (and
`--target gfx950`) run them; docs/amdgpu.md lists what fails there and why. Here: a few forms of
every opcode of the value sweep on gfx1100 and one on gfx950, the forms that once found emulator
or lowering bugs, and the warp collectives, the mbarrier family (mbarrier objects, cp.async
.mbarrier.arrive, bulk copies) and the texture family's implemented slice of the target sweep on
both (on wave64 a hardware wave holds two CUDA warps), and a sample of the warp-level matrix
instructions (test_mma.py; all of them: `python -m pytest -q tests/conformance/test_mma.py
--target gfx1100`).
"""

from __future__ import annotations

import pytest

from conformance.forms import supported_forms
from conformance.harness import Runner, compile_module
from conformance.models import case_for
from conformance.test_sweep import _failures
from conformance.targets import mbarrier, mma, texture
from conformance.test_mma import FAULTS, INSTANCES, check_on
from conformance.test_target_sweep import _module_text, all_instances, sweep_chunk
from zluda_py.compiler import UnsupportedError

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

FORMS_PER_OPCODE = {"gfx1100": 2, "gfx950": 1}
# forms whose failures were emulator or lowering bugs (docs/amdgpu.md), run on both targets
REGRESSIONS = ["add.rp.f32", "add.rn.sat.f16", "add.sat.s32", "abs.bf16", "cos.approx.f32", "cvt.rni.f32.f32",
               "cvt.rni.u32.f32", "cvt.ftz.sat.f64.f32", "cvt.u64.u16", "max.f32", "prmt.b32.f4e",
               "fma.rn.f32", "min.s16", "dp4a.u32.u32", "cvt.rm.f32.s16",
               "vsub2.s32.s32.s32.sat",
               # division corners (V_DIV_SCALE/V_DIV_FIXUP read where the manual's text cannot mean it)
               "div.rn.f32", "div.rn.ftz.f32", "div.full.f32", "div.full.ftz.f32", "div.rn.f64", "rcp.rn.f64",
               "rcp.approx.ftz.f64"]
WARP = {"shfl", "vote", "match", "redux.sync", "elect.sync", "activemask", "bar.warp.sync"}
CHUNK = 32


pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


def _sample(arch: str) -> list[str]:
    """Evenly spaced forms of each opcode (different ones per target), then the regressions."""
    by_opcode: dict[str, list[str]] = {}
    for (opcode, *_), mods in sorted(supported_forms().items(), key=lambda kv: (kv[0][0], kv[1])):
        by_opcode.setdefault(opcode, []).append(".".join((opcode, *mods)))
    k = FORMS_PER_OPCODE[arch]
    offset = 0 if arch == "gfx1100" else 1
    picked = [forms[(len(forms) * (2 * i + 1) // (2 * k) + offset) % len(forms)]
              for forms in by_opcode.values() for i in range(k)]
    return list(dict.fromkeys(picked + REGRESSIONS))


VALUE_CHUNKS = [(arch, forms[lo:lo + CHUNK]) for arch in FORMS_PER_OPCODE
                for forms in [_sample(arch)] for lo in range(0, len(forms), CHUNK)]


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch,texts", VALUE_CHUNKS, ids=[f"{a}-{i}" for i, (a, _) in enumerate(VALUE_CHUNKS)])
def test_value_forms_on_the_emulator(arch: str, texts: list[str]) -> None:
    cases = {}
    for text in texts:
        opcode, *mods = text.split(".")
        cases[text] = case_for(opcode, tuple(mods))
        assert cases[text] is not None, f"no model for {text}"
    outs = Runner(arch).batch({t: (t, c.srcs, c.pred_out) for t, c in cases.items()}, group=CHUNK)
    failures = [msg for t, c in cases.items() for msg in _failures(t, c, outs[t])]
    assert not failures, "\n".join(failures)


def _family_chunks(opcodes: set[str], names: set[str] | None = None) -> list[list]:
    """The family's instances the target translates (those of `names` only, if given), in
    modules of one header and 24 kernels."""
    by_head: dict[tuple, list] = {}
    for tf, inst in all_instances():
        if tf.opcode in opcodes and not inst.refused and (names is None or inst.name in names):
            by_head.setdefault((inst.version, inst.target, inst.address_size), []).append(inst)
    return [insts[lo:lo + 24] for insts in by_head.values() for lo in range(0, len(insts), 24)]


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch", list(FORMS_PER_OPCODE))
def test_warp_collectives_on_the_emulator(arch: str) -> None:
    failures = [f for insts in _family_chunks(WARP) for f in sweep_chunk(insts, arch)]
    assert not failures, "\n".join(failures)


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch", list(FORMS_PER_OPCODE))
def test_mbarrier_family_on_the_emulator(arch: str) -> None:
    """Every instance of targets/mbarrier.py: the scripts on one object against the manual's
    model, bulk copies in each direction; the forms it refuses (multicast, byte masks) refuse on
    this target too, by name."""
    failures = [f for insts in _family_chunks(mbarrier.OPCODES) for f in sweep_chunk(insts, arch)]
    for tf, inst in all_instances():
        if tf.opcode in mbarrier.OPCODES and inst.refused:
            with pytest.raises(UnsupportedError, match=inst.refused):
                compile_module(_module_text([inst]), arch)
    assert not failures, "\n".join(failures)


# Forms the AMDGPU target refused until issue 17 (the CPU target's semantics): one or two of each
SHARED_FORMS = {"ld1_0_b128", "ld5_0_acquire_cluster_b128", "st_bulk_plain", "st_bulk_shared_cta",
                "atom12_1_acquire_gpu_add_noftz_v4_f16", "red7_0_relaxed_cta_global_add_L2_cache_hint_v2_f32",
                "atom10_1_acquire_gpu_shared_add_noftz_bf16x2", "red8_2_sys_global_max_noftz_L2_cache_hint_v8_bf16",
                "cvta0_param_entry", "cvta1_param", "isspacep_param", "isspacep_const", "ctl_bar1_0_cta_arrive",
                "ctl_barrier0_1_sync", "ctl_bar3_0_cta_red_and_pred", "ctl_exit0_0_plain"}


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch", list(FORMS_PER_OPCODE))
def test_shared_forms_on_the_emulator(arch: str) -> None:
    """.b128 ld/st, st.bulk, vector and bf16 atomics, cvta.param and isspacep.param/.const,
    bar.arrive and barriers (bar.red too) with a thread count, exit inside a .func (redux.sync on
    f32 is in the warp collectives)."""
    opcodes = {"ld", "st.bulk", "atom", "red", "cvta", "isspacep", "bar", "barrier", "exit"}
    chunks = _family_chunks(opcodes, SHARED_FORMS)
    assert {i.name for insts in chunks for i in insts} == SHARED_FORMS
    failures = [f for insts in chunks for f in sweep_chunk(insts, arch)]
    assert not failures, "\n".join(failures)


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch", list(FORMS_PER_OPCODE))
def test_texture_family_on_the_emulator(arch: str) -> None:
    """targets/texture.py's instances that the AMDGPU target implements (every one but the
    separate-sampler forms: tex, tld4 on every geometry, cubemaps too, suld/sust/sured, every
    query, istypep) against its model; those it refuses refuse by name."""
    failures = [f for insts in _family_chunks(texture.OPCODES) for f in sweep_chunk(insts, arch)]
    assert not failures, "\n".join(failures)


# test_mma.py's instances CI runs (the whole file takes about 1 CPU-minute per target): every
# shape class and element type once over the two targets, the quad-pair m8n8k4 forms whose
# registers differ per lane and the matrix moves on both, one misaligned-address fault of each kind
MATRIX_SAMPLE = {
    "gfx1100": ["mma_m16n8k16_row_col_f32_f16_f16_f32", "mma_m8n8k4_col_row_f16_f16_f16_f16",
                "mma_m16n8k8_row_col_f32_tf32_tf32_f32", "mma_m16n8k16_row_col_f64_f64_f64_f64",
                "mma_m16n8k32_row_col_satfinite_s32_u8_u8_s32", "ldmatrix_m8n8_x4_trans_shared_b16",
                "stmatrix_m8n8_x1_trans_b16", "movmatrix_m8n8_trans_b16", "wmma_mma_mma_w2", "wmma_mma_mma_i3",
                "wmma_mma_mma_t4", "ldmatrix_m8n8_x1_shared_b16_pitch24", "wmma_load_a_abase2"],
    "gfx950": ["mma_m16n8k16_row_col_f16_f16_f16_f16", "mma_m8n8k4_row_row_f32_f16_f16_f16",
               "mma_m16n8k16_row_col_f32_bf16_bf16_f32", "mma_m8n8k4_row_col_f64_f64_f64_f64",
               "mma_m16n8k16_row_col_satfinite_s32_u8_s8_s32", "ldmatrix_m8n8_x2_trans_shared_cta_b16",
               "stmatrix_m8n8_x4_b16", "movmatrix_m8n8_trans_b16", "wmma_mma_mma_w4", "wmma_mma_mma_b2",
               "wmma_mma_mma_d2", "stmatrix_m8n8_x4_trans_shared_b16_pitch24", "wmma_store_d_dbase2"],
}


@pytest.mark.xdist_group("emulator-conformance")
@pytest.mark.parametrize("arch", list(MATRIX_SAMPLE))
def test_matrix_instructions_on_the_emulator(arch: str) -> None:
    faults = {inst.name for inst in FAULTS}
    instances = {inst.name: inst for inst in INSTANCES}
    for name in MATRIX_SAMPLE[arch]:
        if name in faults:
            mma.run_fault(name, arch)
        else:
            check_on(instances[name], arch)
