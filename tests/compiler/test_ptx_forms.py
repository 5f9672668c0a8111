"""Hand-written PTX for forms nvcc rarely emits: warp collectives, bar.red, brx.idx, barriers after
early exit, special registers, and refused instructions."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import UnsupportedError, compile
from zluda_py.ptx import PtxError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

WARP_FORMS = HEAD.replace("sm_80", "sm_90") + """
.visible .entry forms(.param .u64 out)
{
  .reg .b32 %r<12>; .reg .b64 %rd<4>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 32;
  add.s64 %rd3, %rd1, %rd2;
  and.b32 %r2, %r1, 3;
  activemask.b32 %r8;
  match.any.sync.b32 %r3, %r2, %r8;
  redux.sync.add.u32 %r4, %r1, %r8;
  redux.sync.max.s32 %r5, %r2, %r8;
  elect.sync %r6|%p1, %r8;
  selp.u32 %r7, 1, 0, %p1;
  mov.u32 %r9, %laneid;
  mov.u32 %r10, %lanemask_lt;
  st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r6};
  st.global.v4.u32 [%rd3+16], {%r7, %r8, %r9, %r10};
  ret;
}
"""


def test_warp_collectives_on_full_and_partial_warps():
    m = compile(WARP_FORMS)
    threads = 48  # one full warp and one of 16 lanes
    out = np.zeros((threads, 8), np.uint32)
    m.launch("forms", (1,), (threads,), [out])
    for w in range(2):
        tids = np.arange(w * 32, min(threads, w * 32 + 32))
        active = sum(1 << (t - w * 32) for t in tids)
        for t in tids:
            lane = t - w * 32
            same = sum(1 << (u - w * 32) for u in tids if u % 4 == t % 4)
            row = out[t]
            assert row[0] == same
            assert row[1] == tids.sum()
            assert row[2] == max(u % 4 for u in tids)
            assert row[3] == 0  # the elected leader is the lowest active lane
            assert row[4] == (lane == 0)
            assert row[5] == active
            assert row[6] == lane
            assert row[7] == (1 << lane) - 1


BAR_RED = HEAD + """
.visible .entry barred(.param .u64 out, .param .u32 lim)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r5, [lim];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, %r5;
  bar.red.popc.u32 %r2, 0, %p1;
  bar.red.and.pred %p2, 1, %p1;
  bar.red.or.pred %p3, 2, !%p1;
  selp.u32 %r3, 1, 0, %p2;
  selp.u32 %r4, 1, 0, %p3;
  mul.wide.u32 %rd2, %r1, 12;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  st.global.u32 [%rd3+4], %r3;
  st.global.u32 [%rd3+8], %r4;
  ret;
}
"""


@pytest.mark.parametrize("lim", [0, 37, 100, 500])
def test_bar_red_across_warps(lim):
    m = compile(BAR_RED)
    threads = 100
    out = np.zeros((threads, 3), np.uint32)
    m.launch("barred", (2,), (threads,), [out, lim])
    np.testing.assert_array_equal(out[:, 0], min(lim, threads))
    np.testing.assert_array_equal(out[:, 1], int(lim >= threads))
    np.testing.assert_array_equal(out[:, 2], int(lim < threads))


BRX_AND_EXIT = HEAD + """
.visible .entry brx(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .b64 %rd<4>; .reg .pred %p<2>;
  .shared .align 4 .b32 smem[64];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 40;
  @%p1 bra DONE;
  and.b32 %r2, %r1, 3;
  ts: .branchtargets L0, L1, L2, L3;
  brx.idx %r2, ts;
L0: mov.u32 %r3, 100; bra.uni JOIN;
L1: mov.u32 %r3, 200; bra.uni JOIN;
L2: mov.u32 %r3, 300; bra.uni JOIN;
L3: mov.u32 %r3, 400;
JOIN:
  add.u32 %r3, %r3, %r1;
  shl.b32 %r4, %r1, 2;
  mov.u32 %r5, smem;
  add.u32 %r4, %r4, %r5;
  st.shared.u32 [%r4], %r3;
  bar.sync 0;
  sub.u32 %r5, 39, %r1;
  shl.b32 %r5, %r5, 2;
  mov.u32 %r4, smem;
  add.u32 %r4, %r4, %r5;
  ld.shared.u32 %r3, [%r4];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
DONE:
  ret;
}
"""


def test_brx_idx_and_barrier_after_early_exit():
    try:
        m = compile(BRX_AND_EXIT)
    except UnsupportedError:
        pytest.fail("brx.idx must be supported")
    out = np.full(64, -1, np.int32)
    m.launch("brx", (1,), (64,), [out])
    t = np.arange(40)
    value = (t % 4 + 1) * 100 + t
    np.testing.assert_array_equal(out[:40], value[39 - t])
    assert (out[40:] == -1).all()


@pytest.mark.parametrize("text, what", [
    # a texture instruction naming a surface reference and the other way round
    ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [sx, {%f1, %f2}];",
     "tex.2d.v4.f32.f32 (sx is not a .texref)"),
    ("suld.b.1d.v4.b32.trap {%r1, %r2, %r3, %r4}, [tx, {%r1}];",
     "suld.b.1d.v4.b32.trap (tx is not a .surfref)"),
])
def test_refused_instructions_name_the_form_and_line(text, what):
    src = HEAD + f""".global .texref tx;
.global .surfref sx;
.visible .entry k()
{{
  .reg .f32 %f<5>; .reg .b32 %r<5>;
  {text}
  ret;
}}
"""
    with pytest.raises(UnsupportedError) as e:
        compile(src)
    assert str(e.value) == f"unsupported: {what} at <ptx>:9"
    assert e.value.cu_result == 218


SREGS = HEAD.replace("sm_80", "sm_90") + """
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<12>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r9, %ctaid.x;
  mul.wide.u32 %rd4, %r9, 48;  // rows of 48 bytes: the .v4 stores stay 16-byte aligned
  add.s64 %rd1, %rd1, %rd4;
  mov.u32 %r1, %clusterid.x;
  mov.u32 %r2, %nclusterid.x;
  mov.u32 %r3, %cluster_ctarank;
  mov.u32 %r4, %cluster_nctarank;
  mov.u32 %r5, %dynamic_smem_size;
  mov.u32 %r6, %total_smem_size;
  mov.u32 %r7, %lanemask_ge;
  mov.u32 %r8, %nsmid;
  mov.u64 %rd2, %globaltimer;
  st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};
  st.global.v4.u32 [%rd1+16], {%r5, %r6, %r7, %r8};
  st.global.u64 [%rd1+32], %rd2;
  ret;
}
"""


def test_cluster_smem_and_timer_special_registers():
    import time

    from zluda_py.compiler.cpu.runtime import worker_count

    out = np.zeros((3, 6), np.uint64)
    before = time.time_ns()
    compile(SREGS).launch("k", (3,), (1,), [out], shared_mem=100)
    after = time.time_ns()
    for blk in range(3):
        words = out[blk, :4].view(np.uint32)
        assert words.tolist() == [blk, 3, 0, 1, 100, 100, 0xFFFFFFFF, worker_count()]
        assert before <= out[blk, 4] <= after  # %globaltimer counts nanoseconds of real time


EXIT_IN_FUNC = HEAD + """
.func maybe_exit(.param .b32 x)
{
  .reg .b32 %r<3>; .reg .pred %p<2>;
  ld.param.b32 %r1, [x];
  and.b32 %r2, %r1, 1;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 exit;
  ret;
}
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  {
    .param .b32 a;
    st.param.b32 [a], %r1;
    call maybe_exit, (a);
  }
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  add.u32 %r2, %r1, 1000;
  st.global.u32 [%rd3], %r2;
  bar.sync 0;
  ret;
}
"""


def test_exit_inside_a_function_ends_only_those_threads():
    out = np.zeros(70, np.int32)
    compile(EXIT_IN_FUNC).launch("k", (1,), (70,), [out])  # the barrier must not wait for them
    t = np.arange(70)
    np.testing.assert_array_equal(out, np.where(t % 2 == 0, t + 1000, 0))


LEGACY_MAD = """.version {version}
.target sm_10, map_f64_to_f32
.entry k(.param .u64 out, .param .f32 a, .param .f32 c)
{{
  .reg .u64 %rd<2>; .reg .f32 %f<4>;
  ld.param.u64 %rd1, [out];
  ld.param.f32 %f1, [a];
  ld.param.f32 %f2, [c];
  mad.f32 %f3, %f1, %f1, %f2;
  st.global.f32 [%rd1], %f3;
  exit;
}}
"""


def test_legacy_mad_without_rounding_is_mad_rn():
    """PTX before ISA 3.2 (CUDA 4's nvopencc, cuda-samples' matrixMulDynlinkJIT) writes mad.f32
    without a rounding modifier: ptxas takes it as mad.rn.f32, fused; from 3.2 on it is refused."""
    a = np.float32(1 + 2.0 ** -12)
    out = np.zeros(1, np.float32)
    compile(LEGACY_MAD.format(version="1.4")).launch("k", (1,), (1,), [out, a, np.float32(-1)])
    assert out[0] == np.float32(2.0 ** -11 + 2.0 ** -24)  # a*a-1 unrounded; mul then add gives 2^-11
    with pytest.raises(PtxError, match=r"'mad\.f32' needs one of: \.rm \.rn \.rp \.rz") as refused:
        compile(LEGACY_MAD.format(version="3.2"))  # ptxas: "Rounding modifier required"
    assert refused.value.cu_result == 218
