"""mbarrier waits make progress, on the CPU target (cpu/mbarrier.py, function.py `park`) and on
AMDGPU code run by the ISA emulator (amdgpu/mbarrier.py; gfx1100 wave32, gfx950 wave64 with two
CUDA warps a wave): a warp spinning on try_wait/test_wait lets the block's other warps run, lanes
of one warp waiting on lanes of the same warp let those run first, and a wait in a `.func` is
inlined (CPU) or called (AMDGPU). Also: arrivals of a warp's lanes apply in lane order, a bulk
copy outside memory faults with 700, and a wait nobody completes fails the CPU launch."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.errors import UnsupportedError

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"

# Warp 0 waits (try_wait loop) for warp 1, which writes data[32 + lane] and arrives; the block
# runner starts warp 0 first, so warp 0 must yield for warp 1 to run at all.
PRODUCER_CONSUMER = HEAD + """
.shared .align 8 .b64 bar;
.shared .align 4 .b32 data[64];
.visible .entry pc(.param .u64 out_p)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @!%p1 mbarrier.init.shared.b64 [%r2], 32;
  bar.sync 0;
  setp.lt.u32 %p2, %r1, 32;
  @%p2 bra CONSUME;
  mul.lo.u32 %r3, %r1, 3;
  mov.u32 %r4, data;
  shl.b32 %r5, %r1, 2;
  add.u32 %r4, %r4, %r5;
  st.shared.u32 [%r4], %r3;
  mbarrier.arrive.shared.b64 %rd1, [%r2];
  bra.uni DONE;
CONSUME:
  mov.u32 %r6, 0;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], %r6;
  @!%p3 bra WAIT;
  mov.u32 %r4, data;
  shl.b32 %r5, %r1, 2;
  add.u32 %r4, %r4, %r5;
  ld.shared.u32 %r7, [%r4+128];
  ld.param.u64 %rd2, [out_p];
  cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r7;
DONE:
  ret;
}
"""


# One warp: lane 0 waits for phase 0 (laid out before the other lanes' code), lanes 1..31
# each add their id to a shared sum and arrive; the barrier expects those 31 arrivals.
INTRA_WARP = HEAD + """
.shared .align 8 .b64 bar;
.shared .align 4 .b32 sum;
.visible .entry iw(.param .u64 out_p)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  mov.u32 %r3, 0;
  @!%p1 st.shared.u32 [sum], %r3;
  @!%p1 mbarrier.init.shared.b64 [%r2], 31;
  bar.sync 0;
  @%p1 bra ARRIVE;
  mov.u32 %r6, 0;
WAIT:
  mbarrier.test_wait.parity.shared.b64 %p3, [%r2], %r6;
  @!%p3 bra WAIT;
  ld.shared.u32 %r7, [sum];
  ld.param.u64 %rd2, [out_p];
  cvta.to.global.u64 %rd2, %rd2;
  st.global.u32 [%rd2], %r7;
  bra.uni DONE;
ARRIVE:
  atom.shared.add.u32 %r4, [sum], %r1;
  mbarrier.arrive.release.cta.shared::cta.b64 %rd1, [%r2];
DONE:
  ret;
}
"""


# A `.func` that spins on try_wait (as libcu++'s barrier::wait in a -G build) is inlined.
IN_FUNC = PRODUCER_CONSUMER.replace(".visible .entry pc", """.func wait_phase(.reg .b32 addr, .reg .b32 parity)
{
  .reg .pred %q;
AGAIN:
  mbarrier.try_wait.parity.shared::cta.b64 %q, [addr], parity, 20000;
  @!%q bra AGAIN;
  ret;
}
.visible .entry pc""").replace("""WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], %r6;
  @!%p3 bra WAIT;""", """  call wait_phase, (%r2, %r6);""")


# Every lane arrives once on a barrier expecting 40: the states, read with pending_count, show
# the lanes arriving in lane order (40 pending before lane 0, 9 before lane 31); then lanes
# 0..7 arrive again, and the eighth of those completes phase 0.
LANE_ORDER = HEAD + """
.shared .align 8 .b64 bar;
.visible .entry lo(.param .u64 out_p)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @!%p1 mbarrier.init.shared::cta.b64 [%r2], 40;
  bar.sync 0;
  mbarrier.arrive.shared.b64 %rd1, [%r2];
  mbarrier.pending_count.b64 %r3, %rd1;
  setp.lt.u32 %p2, %r1, 8;
  @%p2 mbarrier.arrive.shared.b64 %rd4, [%r2];
  mbarrier.test_wait.shared.b64 %p3, [%r2], %rd1;
  selp.u32 %r4, 1, 0, %p3;
  ld.param.u64 %rd2, [out_p];
  cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r1, 8;
  add.u64 %rd2, %rd2, %rd3;
  st.global.v2.u32 [%rd2], {%r3, %r4};
  ret;
}
"""


BULK_OOB = HEAD + """
.shared .align 8 .b64 bar;
.shared .align 128 .b8 buf[256];
.visible .entry oob(.param .u64 in_p)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .reg .pred %p1;
  ld.param.u64 %rd3, [in_p];
  add.u64 %rd1, %rd3, 0x100000000000;
  mov.u32 %r1, bar;
  mov.u32 %r2, buf;
  mbarrier.init.shared.b64 [%r1], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r1], 256;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 256, [%r1];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p1, [%r1], 0;
  @!%p1 bra WAIT;
  ld.shared.u32 %r3, [%r2];
  st.global.u32 [%rd3], %r3;
  ret;
}
"""


# Warps 0 (lanes 0..31) and 1 (32..63): warp 1 leaves with arrive_drop while warp 0 arrives and
# waits, on a barrier expecting all 64. On wave64 both warps are one wave, so the dropping lanes
# must run before the waiting ones (amdgpu/mbarrier.py `first_sides`).
DROP = HEAD + """
.shared .align 8 .b64 bar;
.visible .entry drop(.param .u64 out_p)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @!%p1 mbarrier.init.shared.b64 [%r2], 64;
  bar.sync 0;
  ld.param.u64 %rd2, [out_p];
  cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd2, %rd2, %rd3;
  setp.gt.s32 %p2, %r1, 31;
  @%p2 bra DROP;
  mbarrier.arrive.shared.b64 %rd1, [%r2];
WAIT:
  mbarrier.try_wait.shared.b64 %p3, [%r2], %rd1;
  @!%p3 bra WAIT;
  mov.u32 %r5, 9;
  st.global.u32 [%rd2], %r5;
  bra.uni END;
DROP:
  mbarrier.arrive_drop.shared.b64 _, [%r2];
  mov.u32 %r5, 7;
  st.global.u32 [%rd2], %r5;
END:
  ret;
}
"""

# One warp, as cuda::barrier's arrive(2) does for another thread: lane 1 does not arrive and
# waits by parity; lane 0 arrives for itself and lane 1 (count 2) after writing both lanes'
# slots, the others write theirs, arrive and wait on their state. Each lane then reads its
# neighbour's slot.
ARRIVE_FOR_ANOTHER = HEAD + """
.shared .align 8 .b64 bar;
.shared .align 4 .b32 slot[32];
.visible .entry af(.param .u64 out_p)
{
  .reg .b32 %r<12>;
  .reg .b64 %rd<6>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, slot;
  setp.ne.u32 %p1, %r1, 0;
  @!%p1 mbarrier.init.shared.b64 [%r2], 32;
  bar.sync 0;
  setp.eq.u32 %p2, %r1, 1;
  @%p2 bra PARITY;
  mul.lo.u32 %r4, %r1, 5;
  shl.b32 %r5, %r1, 2;
  add.u32 %r6, %r3, %r5;
  st.shared.u32 [%r6], %r4;
  selp.u32 %r7, 1, 2, %p1;
  mov.u32 %r11, 5;
  @!%p1 st.shared.u32 [%r3+4], %r11;
  mbarrier.arrive.shared.b64 %rd1, [%r2], %r7;
STATE:
  mbarrier.try_wait.shared.b64 %p3, [%r2], %rd1;
  @!%p3 bra STATE;
  bra.uni READ;
PARITY:
  mov.u32 %r8, 0;
SPIN:
  mbarrier.test_wait.parity.shared.b64 %p3, [%r2], %r8;
  @!%p3 bra SPIN;
READ:
  add.u32 %r9, %r1, 1;
  and.b32 %r9, %r9, 31;
  shl.b32 %r9, %r9, 2;
  add.u32 %r9, %r3, %r9;
  ld.shared.u32 %r10, [%r9];
  ld.param.u64 %rd2, [out_p];
  cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r10;
  ret;
}
"""

# name: (PTX, kernel, grid, block, output words, the output the program's logic gives)
CASES = {
    "waiting-warp-yields-to-the-producer-warp": (PRODUCER_CONSUMER, "pc", 3, 64, 32, 3 * (np.arange(32) + 32)),
    "lanes-waiting-on-their-own-warp-let-it-arrive": (INTRA_WARP, "iw", 2, 32, 1, [sum(range(1, 32))]),
    "wait-inside-a-function": (IN_FUNC, "pc", 1, 64, 32, 3 * (np.arange(32) + 32)),
    "arrivals-apply-in-lane-order": (LANE_ORDER, "lo", 1, 32, 64,
                                     np.stack([40 - np.arange(32), np.ones(32)], axis=1).ravel()),
    "arrive-drop-beside-waiting-lanes": (DROP, "drop", 1, 64, 64, np.repeat([9, 7], 32)),
    "arrive-for-another-lane": (ARRIVE_FOR_ANOTHER, "af", 1, 32, 32, (np.arange(1, 33) % 32) * 5),
}
TARGETS = ["cpu", "gfx1100", "gfx950"]


def _module(text: str, target: str):
    if target == "cpu":
        return compile(text)
    pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
    from zluda_py.compiler.amdgpu_link import LinkerError, find_lld
    from zluda_py.emulator.module import EmulatedModule
    try:
        find_lld()
    except LinkerError as exc:
        pytest.skip(f"AMDGPU code objects need ld.lld: {exc}")
    return EmulatedModule.from_ptx(text, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_waits_make_progress(case: str, target: str) -> None:
    text, kernel, grid, block, words, want = CASES[case]
    out = np.zeros(words, np.uint32)
    _module(text, target).launch(kernel, (grid,), (block,), [out])
    np.testing.assert_array_equal(out, np.asarray(want, np.uint32))


@pytest.mark.parametrize("target", TARGETS)
def test_bulk_copy_outside_memory_faults(target: str) -> None:
    from zluda_py.compiler.errors import LaunchError
    with pytest.raises(LaunchError) as err:
        _module(BULK_OOB, target).launch("oob", (1,), (1,), [np.zeros(64, np.uint8)])
    assert err.value.cu_result == 700


def test_amdgpu_refuses_async_stores_by_name() -> None:
    from zluda_py.compiler.pipeline import compile_object
    from zluda_py.compiler.target import get
    text = BULK_OOB.replace(".version 8.0", ".version 8.1").replace("  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 256, [%r1];",
                            "  st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r2], %r1, [%r1];")
    line = next(i + 1 for i, s in enumerate(text.splitlines()) if "st.async" in s)
    with pytest.raises(UnsupportedError, match=rf"st\.async.*another CTA.*:{line}") as err:
        compile_object(text, get("gfx1100"))
    assert err.value.cu_result == 218


# Warp 1 waits for an arrival nobody makes, warp 0 has finished: on a GPU this hangs; here the
# block runner sees rounds in which the only warp left yields at a failed wait and no mbarrier
# changes, and after abi.STALLED_ROUNDS of them fails the launch with 719.
DEADLOCK = HEAD + """
.shared .align 8 .b64 bar;
.visible .entry dl()
{
  .reg .b32 %r<4>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @!%p1 mbarrier.init.shared.b64 [%r2], 64;
  bar.sync 0;
  setp.lt.u32 %p2, %r1, 32;
  @%p2 bra DONE;
  mov.u32 %r3, 0;
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [%r2], %r3;
  @!%p3 bra WAIT;
DONE:
  ret;
}
"""


def test_a_wait_nobody_completes_fails_the_launch():
    from zluda_py.compiler.errors import LaunchError
    with pytest.raises(LaunchError) as err:
        compile(DEADLOCK).launch("dl", (1,), (64,), [])
    assert err.value.cu_result == 719


def test_reference_interpreter_refuses_by_name():
    from zluda_py.reference import run
    for body, name in [("mbarrier.try_wait.parity.shared.b64 %p3, [%r2], %r3;", "mbarrier.try_wait"),
                       ("cp.async.mbarrier.arrive.noinc.shared.b64 [%r2];", "cp.async.mbarrier.arrive"),
                       ("cp.async.bulk.commit_group;", "cp.async.bulk.commit_group")]:
        text = DEADLOCK.replace("  @!%p1 mbarrier.init.shared.b64 [%r2], 64;\n", "").replace(
            "  mbarrier.try_wait.parity.shared.b64 %p3, [%r2], %r3;", "  " + body)
        with pytest.raises(NotImplementedError, match=rf"reference: {name}.* at <ptx>:\d+"):
            run(text, "dl", (1,), (64,), [])


@pytest.mark.parametrize("text, branch_to, first", [(DROP, "DROP", "DROP"), (INTRA_WARP, "ARRIVE", "ARRIVE"),
                                                     (ARRIVE_FOR_ANOTHER, "PARITY", None)],
                         ids=["drop", "intra-warp", "arrive-for-another"])
def test_amdgpu_runs_the_arriving_side_of_a_branch_first(text: str, branch_to: str, first: str | None) -> None:
    """amdgpu/mbarrier.first_sides: at `@p bra branch_to`, the side that arrives (or never waits)
    runs first: the label `first`, or None for the fall-through."""
    from zluda_py.compiler import cfg
    from zluda_py.compiler.amdgpu.mbarrier import first_sides
    from zluda_py.compiler.semantics import SEMANTICS
    from zluda_py.ptx import parse
    body = cfg.build(parse(text).functions()[0].body, keep=lambda op: op in SEMANTICS)
    block = next(b for b in body.blocks if b.insts and b.insts[-1].opcode == "bra"
                 and b.insts[-1].guard is not None and b.insts[-1].operands[0].name == branch_to)
    want = body.labels[first] if first else block.fallthrough
    assert first_sides(body).get(block.index) == want
