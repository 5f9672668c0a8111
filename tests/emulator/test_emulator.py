"""The AMD GPU ISA emulator runs code objects from our AMDGPU target (kernels.cu -> kernels.ptx ->
gfx1100 / gfx950) and gives the results numpy computes here."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

from zluda_py.emulator import EmulatorError, Memory, compile_ptx, launch, run_ptx  # noqa: E402

PTX = (Path(__file__).parent / "kernels" / "kernels.ptx").read_text()
ARCHS = ["gfx1100", "gfx950"]  # wave32, and wave64 with two CUDA warps per wave


pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add(arch: str) -> None:
    n = 1000  # not a multiple of the block: the last block's tail lanes are off
    a = np.arange(n, dtype=np.float32) * 0.5
    b = 1000.0 - np.arange(n, dtype=np.float32)
    out = run_ptx(PTX, "vector_add", (n + 255) // 256, 256, [a, b, np.full(n, -1, np.float32), np.int32(n)], arch)
    np.testing.assert_array_equal(out[2], a + b)


@pytest.mark.parametrize("arch", ARCHS)
def test_if_else_divergence(arch: str) -> None:
    n = 300
    x = np.random.default_rng(1).integers(0, 1000, n).astype(np.int32)
    y = run_ptx(PTX, "diverge", (n + 63) // 64, 64, [x, np.full(n, -7, np.int32), np.int32(n)], arch)[1]
    np.testing.assert_array_equal(y, np.where(x & 1, x * 3 + 1, x >> 1))


def _collatz_steps(v: int) -> int:
    steps = 0
    while v != 1:
        v = 3 * v + 1 if v & 1 else v // 2
        steps += 1
    return steps


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_with_per_lane_trip_count(arch: str) -> None:
    x = np.random.default_rng(2).integers(1, 200, 100).astype(np.uint32)
    y = run_ptx(PTX, "collatz", 2, 64, [x, np.zeros(100, np.uint32), np.int32(100)], arch)[1]
    np.testing.assert_array_equal(y, [_collatz_steps(int(v)) for v in x])


@pytest.mark.parametrize("arch", ARCHS)
def test_shared_memory_across_waves(arch: str) -> None:
    x = np.random.default_rng(3).integers(0, 1 << 30, 512).astype(np.int32)
    y = run_ptx(PTX, "block_reverse", 2, 256, [x, np.zeros(512, np.int32)], arch)[1]
    np.testing.assert_array_equal(y, x.reshape(2, 256)[:, ::-1].ravel())


@pytest.mark.parametrize("arch", ARCHS)
def test_barrier_in_a_loop(arch: str) -> None:
    x = np.random.default_rng(4).integers(0, 100, 512).astype(np.float32)  # integer sums: exact
    out = run_ptx(PTX, "block_sum", 2, 256, [x, np.zeros(2, np.float32)], arch)[1]
    np.testing.assert_array_equal(out, x.reshape(2, 256).sum(1))


@pytest.mark.parametrize("arch", ARCHS)
def test_shuffles_and_ballot(arch: str) -> None:
    x = np.random.default_rng(5).integers(-50, 50, 128).astype(np.int32)
    out = run_ptx(PTX, "warp_ops", 2, 64, [x, np.zeros(128, np.int32), np.zeros(128, np.int32),
                                          np.zeros(128, np.uint32)], arch)
    warps = x.reshape(4, 32)
    # shfl.down by 1: the last lane of each warp keeps its own value
    np.testing.assert_array_equal(out[1], np.concatenate([warps[:, 1:], warps[:, 31:]], 1).ravel())
    np.testing.assert_array_equal(out[2], np.repeat(warps.sum(1), 32))
    ballots = [sum(1 << i for i in range(32) if w[i] > 0) for w in warps]
    np.testing.assert_array_equal(out[3], np.repeat(np.array(ballots, np.uint32), 32))


@pytest.mark.parametrize("arch", ARCHS)
def test_global_atomic_add(arch: str) -> None:
    x = np.random.default_rng(6).integers(0, 16, 1000).astype(np.int32)
    bins = run_ptx(PTX, "histogram", 4, 256, [x, np.zeros(16, np.uint32), np.int32(1000)], arch)[1]
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=16))


def test_unimplemented_instruction_names_itself_and_its_address() -> None:
    from elftools.elf.elffile import ELFFile

    from zluda_py.emulator import loader

    code_object, metadata = compile_ptx(PTX, "gfx1100")
    memory = Memory()
    kernel = loader.Image(code_object, memory).kernel("vector_add", "gfx1100")
    text = ELFFile(io.BytesIO(code_object)).get_section_by_name(".text")
    at = text["sh_offset"] + kernel.entry - kernel.text_base
    patched = bytearray(code_object)
    patched[at:at + 4] = bytes.fromhex("004a80be")  # s_rfe_b64 s[0:1]: a trap handler's return
    with pytest.raises(EmulatorError, match=rf"s_rfe_b64.* \(kernel offset {kernel.entry - kernel.text_base:#x}\)"):
        launch(bytes(patched), "vector_add", 1, 32, bytes(metadata["kernels"]["vector_add"]["param_size"]),
               memory, "gfx1100")


def test_out_of_bounds_access_faults() -> None:
    n = 64
    a = np.zeros(n, np.float32)
    with pytest.raises(EmulatorError, match="memory fault"):
        run_ptx(PTX, "vector_add", 1, 64, [a, a, np.zeros(1, np.float32), np.int32(n)], "gfx1100")


def _reconvergence_ptx() -> str:
    import importlib.util

    path = Path(__file__).parent.parent / "compiler" / "test_reconvergence.py"
    spec = importlib.util.spec_from_file_location("_reconvergence_patterns", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.PTX


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_tail_barrier_waits_for_the_looping_lane(arch: str) -> None:
    """tests/compiler/test_reconvergence.py's loop with a separate latch, on AMD code: lanes that
    skip the loop must not pass the barrier while one lane is still looping."""
    ptx = _reconvergence_ptx()
    for looper in (0, 32, 33):
        out = run_ptx(ptx, "tail_barrier", 1, 64, [np.zeros(1, np.uint32), np.uint32(64 - looper), np.uint32(looper)], arch)[0]
        assert out[0] == 64 - looper, f"looper {looper}"


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_tail_ballot_sees_the_whole_warp(arch: str) -> None:
    out = run_ptx(_reconvergence_ptx(), "tail_ballot", 1, 64, [np.zeros((64, 2), np.uint32), np.uint32(10)], arch)[0]
    assert (out[:, 0] == 0xFFFFFFFF).all(), [hex(v) for v in out[:, 0]]
    assert out[0, 1] == sum(range(1, 10)) and (out[1:, 1] == 0).all()


@pytest.mark.parametrize("arch", ARCHS)
def test_scratch_array(arch: str) -> None:
    a = np.arange(64, dtype=np.int32) * 5
    c = run_ptx(PTX, "local_array", 1, 64, [a, np.zeros(64, np.int32)], arch)[1]
    np.testing.assert_array_equal(c, a + (a & 15))


HALVES = """.version 8.0
.target sm_80
.address_size 64
.visible .entry halves(.param .u64 x, .param .u64 y)
{
  .reg .b32 %r<4>; .reg .b64 %rd<5>; .reg .b16 %h<6>;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4; add.u64 %rd4, %rd1, %rd3; ld.global.u32 %r2, [%rd4];
  mov.b32 {%h0, %h1}, %r2;
  add.rn.f16 %h2, %h1, %h0; mul.rn.f16 %h3, %h1, %h1; max.f16 %h4, %h0, %h1;
  mov.b32 %r3, {%h2, %h3};
  add.u64 %rd4, %rd2, %rd3; st.global.u32 [%rd4], %r3;
  cvt.u32.u16 %r3, %h4;
  add.u64 %rd4, %rd4, 128; st.global.u32 [%rd4], %r3;
  ret;
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_16_bit_operands_in_register_halves(arch: str) -> None:
    """gfx1100's 16-bit instructions name register halves (v5.h: bit 7 of a VOP1/VOP2 VGPR
    field, opsel in VOP3) and keep the other half; the emulator once read v133 and zeroed it."""
    from zluda_py.compiler import compile as compile_cpu

    x = np.random.default_rng(3).integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
    want = np.zeros(64, np.uint32)
    compile_cpu(HALVES).launch("halves", 1, 32, [x, want])  # the CPU target: bit-exact f16 per PTX
    got = run_ptx(HALVES, "halves", 1, 32, [x, np.zeros(64, np.uint32)], arch)[1]
    np.testing.assert_array_equal(got, want)


GENERIC_LOAD = """.version 8.0
.target sm_80
.address_size 64
.visible .entry generic_load(.param .u64 x, .param .u64 y)
{
  .reg .b32 %r<3>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4; add.u64 %rd4, %rd1, %rd3; ld.u32 %r2, [%rd4];
  add.u64 %rd4, %rd2, %rd3; st.u32 [%rd4], %r2;
  ret;
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_flat_access_ignores_the_saddr_field(arch: str) -> None:
    """flat_load/flat_store have no SADDR operand; LLVM encodes the field as 0 (s0) on gfx9, which
    the emulator once added to the address on gfx950."""
    x = np.arange(64, dtype=np.uint32) * 7
    np.testing.assert_array_equal(run_ptx(GENERIC_LOAD, "generic_load", 1, 64, [x, np.zeros(64, np.uint32)], arch)[1], x)


SMALL_REM = """.version 8.0
.target sm_80
.address_size 64
.visible .entry small_rem(.param .u64 out)
.maxntid 70, 1, 1
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x;
  add.u32 %r2, %r1, 55; rem.u32 %r2, %r2, 70;
  mul.wide.u32 %rd2, %r1, 4; add.u64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r2;
  ret;
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_sdwa_operand_in_an_sgpr(arch: str) -> None:
    """gfx950 computes this remainder in 16 bits with `v_mul_lo_u16_sdwa v2, v2, s2` (SDWA's s1
    bit: src1 is an SGPR); the emulator once read v2 there (found by the fuzzer, seed 34)."""
    out = run_ptx(SMALL_REM, "small_rem", 1, 70, [np.zeros(70, np.uint32)], arch)[0]
    np.testing.assert_array_equal(out, (np.arange(70) + 55) % 70)


DIVISION = """.version 8.0
.target sm_80
.address_size 64
.visible .entry division(.param .u64 a, .param .u64 b, .param .u64 q, .param .u64 c, .param .u64 d, .param .u64 r)
{
  .reg .b32 %r<2>; .reg .b64 %rd<12>; .reg .f32 %f<4>; .reg .f64 %fd<4>;
  ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [q];
  ld.param.u64 %rd4, [c]; ld.param.u64 %rd5, [d]; ld.param.u64 %rd6, [r];
  mov.u32 %r1, %tid.x; mul.wide.u32 %rd7, %r1, 4; mul.wide.u32 %rd8, %r1, 8;
  add.u64 %rd9, %rd1, %rd7; ld.global.f32 %f1, [%rd9];
  add.u64 %rd9, %rd2, %rd7; ld.global.f32 %f2, [%rd9];
  div.rn.f32 %f3, %f1, %f2;
  add.u64 %rd9, %rd3, %rd7; st.global.f32 [%rd9], %f3;
  add.u64 %rd9, %rd4, %rd8; ld.global.f64 %fd1, [%rd9];
  add.u64 %rd9, %rd5, %rd8; ld.global.f64 %fd2, [%rd9];
  div.rn.f64 %fd3, %fd1, %fd2;
  add.u64 %rd9, %rd6, %rd8; st.global.f64 [%rd9], %fd3;
  ret;
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_division_corners(arch: str) -> None:
    """LLVM's division (V_DIV_SCALE, V_RCP, Newton steps, V_DIV_FMAS, V_DIV_FIXUP) correctly
    rounded where the quotient overflows, where the reciprocal of the divisor is a denormal and
    where both it and the quotient are (execute._div_scale_text, _div_fixup_text): the manual's
    text read literally gave NaN for the first and last and 1.0 for max / (max - ulp)."""
    f32 = [(0x7F7FFFFF, 0x00000001), (0x7F7FFFFF, 0x00800000), (0xFF7FFFFE, 0x00000002),
           (0x6DA590D0, 0x82745A80), (0x7F7FFFFF, 0x7F7FFFFE), (0x3F800000, 0x7F7FFFFF),
           (0x00000001, 0x7F7FFFFF), (0x40400000, 0x3F800001), (0x00000003, 0x40000000)]
    f64 = [(0x3FF0000000000000, 0x7FEFFFFFFFFFFFFF), (0x7FEFFFFFFFFFFFFF, 0x0000000000000001),
           (0x7FEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFE), (0x4008000000000000, 0xFFEFFFFFFFFFFFFF),
           (0x0000000000000001, 0x3FE0000000000000), (0x4008000000000000, 0x3FF0000000000001)]
    n = max(len(f32), len(f64))
    f32 += [(0x3F800000, 0x3F800000)] * (n - len(f32))
    f64 += [(0x3FF0000000000000, 0x3FF0000000000000)] * (n - len(f64))
    a, b = (np.array(col, np.uint32).view(np.float32) for col in zip(*f32))
    c, d = (np.array(col, np.uint64).view(np.float64) for col in zip(*f64))
    with np.errstate(all="ignore"):  # numpy's IEEE division: correctly rounded, overflow to inf
        want32, want64 = a / b, c / d
    out = run_ptx(DIVISION, "division", 1, n,
                  [a, b, np.zeros(n, np.float32), c, d, np.zeros(n, np.float64)], arch)
    np.testing.assert_array_equal(out[2].view(np.uint32), want32.view(np.uint32))
    np.testing.assert_array_equal(out[5].view(np.uint64), want64.view(np.uint64))


# gfx942 (CDNA3) and gfx90a (CDNA2) share gfx950's tables (tinygrad's cdna); gfx90a has no
# architected flat scratch: its kernels take the private segment buffer and reach scratch with
# MUBUF (`buffer_store_dword v1, off, s[0:3], 0 offset:4`), the lane's own scratch here. gfx1200
# (RDNA4, tinygrad's rdna4): VGLOBAL/VFLAT/VSCRATCH and SMEM with 24-bit ioffsets, workgroup ids
# in TTMP9/TTMP7, split barriers (s_barrier_signal/s_barrier_wait), v_mad_co_u64_u32.
OTHER_TARGETS = ["gfx942", "gfx90a", "gfx1200"]
ON_OTHER_TARGETS = ["vector_add", "if_else_divergence", "barrier_in_a_loop", "shuffles_and_ballot", "global_atomic_add",
                    "scratch_array", "division_corners", "loop_tail_ballot_sees_the_whole_warp"]


@pytest.mark.parametrize("arch", OTHER_TARGETS)
@pytest.mark.parametrize("name", ON_OTHER_TARGETS)
def test_other_targets(arch: str, name: str) -> None:
    globals()[f"test_{name}"](arch)


RESERVED_SMEM_PTX = """.version 8.0
.target sm_80
.address_size 64
.shared .align 4 .b32 own[64];
.visible .entry reserved(.param .u64 out)
{
  .reg .b32 %r<9>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %reserved_smem_offset_begin; mov.u32 %r2, %reserved_smem_offset_end;
  mov.u32 %r3, %reserved_smem_offset_1; mov.u32 %r4, %reserved_smem_offset_cap; mov.u32 %r6, own;
  st.shared.u32 [%r3], 85; st.shared.u32 [own+252], 7; bar.sync 0;
  ld.shared.u32 %r8, [%r3];
  st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4}; st.global.v2.u32 [%rd1+16], {%r6, %r8};
  ret;
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_reserved_shared_memory(arch: str) -> None:
    """%reserved_smem_offset_* (nvcc's cooperative groups under -G for sm_80 read _1; the AMDGPU
    target once refused the module) name 1 KiB of shared memory of its own, as
    CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK says on sm_80+: _end - _begin = _cap = 1024,
    _1 starts its second half, and it does not overlap the kernel's own shared memory."""
    begin, end, half, cap, own, back = run_ptx(RESERVED_SMEM_PTX, "reserved", 1, 1, [np.zeros(6, np.uint32)], arch)[0]
    assert (end - begin, half - begin, cap) == (1024, 512, 1024)
    assert own + 256 <= begin or end <= own
    assert back == 85  # the store into the region, not overwritten by the one into `own`


# VOP3A encodings (gfx950, gfx942 and gfx90a share them and tinygrad's cdna tables): llvm-mc 19
# -mcpu=gfx942, except op_sel on v_mad_legacy_u16, which it does not accept: bit 3 of the op_sel
# field (bits 11-14) set by hand, as the manual's pseudocode for the instruction reads it.
MAD_16 = {
    "v_mad_legacy_u16 v3, v0, v1, v2": ("0300ebd1 00030a04", 0),
    "v_mad_legacy_u16 v3, v0, v1, v2 op_sel:[0,0,0,1]": ("0340ebd1 00030a04", 8),
    "v_mad_u16 v3, v0, v1, v2 op_sel:[1,0,1,1]": ("036804d2 00030a04", 13),
}


@pytest.mark.parametrize("asm", MAD_16)
def test_mad_u16_op_sel(asm: str) -> None:
    """GFX9 VOP3 op_sel: bits 0-2 read the high half of src0-2, bit 3 puts the 16-bit result in
    the high half of vdst and keeps the low half; without it the result is zero-extended.
    V_MAD_LEGACY_U16's pseudocode reads OPSEL itself (the emulator once could not bind it)."""
    from zluda_py.emulator.execute import Program, Wave, step
    from zluda_py.emulator.launch import Workgroup

    encoding, opsel = MAD_16[asm]
    code = bytes.fromhex(encoding.replace(" ", "") + "000081bf")  # then s_endpgm
    w = Wave(Program(code, 0x1000, "cdna"), 64, Workgroup(Memory(), 0), 0, 0)
    w.pc = 0x1000
    regs = np.random.default_rng(7).integers(0, 1 << 32, (4, 64), dtype=np.uint64)
    w.vgpr[:4] = regs.astype(np.uint32)
    w.set_mask(126, (1 << 64) - 1)
    step(w)
    a, b, c = ((regs[i] >> np.uint64(16 * (opsel >> i & 1))) & np.uint64(0xFFFF) for i in range(3))
    result = (a * b + c) & np.uint64(0xFFFF)
    want = result << np.uint64(16) | regs[3] & np.uint64(0xFFFF) if opsel & 8 else result
    np.testing.assert_array_equal(w.vgpr[3], want.astype(np.uint32))
