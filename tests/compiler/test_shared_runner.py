"""The loop over a launch's blocks is compiled once, with the shared helpers (`block_runner.py`):
a kernel's runner is one call of `zluda.run_blocks` with its block function, or of
`zluda.run_general` with its warp function and frame size. Under each of the three schedules
(no barriers, lockstep rounds, the general one) every block of a 3-D grid gets its own %ctaid,
every warp runs, and a fault names the block it happened in. Expected values come from numpy
and the grid's arithmetic, not from our output.
"""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.target import CPU, host_layout
from zluda_py.compiler.cpu.module import helpers_ir
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
# out[global thread] = ctaid.x | ctaid.y << 8 | ctaid.z << 16 | tid.x << 24; the block whose
# linear index is `bad` traps first
KERNEL = HEAD + """
.visible .entry where(.param .u64 out, .param .u32 bad)
{
  .reg .pred %p<2>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ctaid.y;
  mov.u32 %r3, %ctaid.z;
  mov.u32 %r4, %nctaid.x;
  mov.u32 %r5, %nctaid.y;
  mad.lo.s32 %r6, %r3, %r5, %r2;
  mad.lo.s32 %r6, %r6, %r4, %r1;
  ld.param.u32 %r7, [bad];
  setp.eq.u32 %p1, %r6, %r7;
  @%p1 trap;
  BARRIER
  mov.u32 %r8, %tid.x;
  mov.u32 %r9, %ntid.x;
  mad.lo.s32 %r10, %r6, %r9, %r8;
  shl.b32 %r11, %r2, 8;
  or.b32 %r11, %r11, %r1;
  shl.b32 %r12, %r3, 16;
  or.b32 %r11, %r11, %r12;
  shl.b32 %r13, %r8, 24;
  or.b32 %r11, %r11, %r13;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r10, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r11;
  ret;
}
"""
SCHEDULES = {"none": "", "lockstep": "bar.sync 0;", "general": "bar.sync 1, 96;"}
GRID, THREADS = (3, 2, 4), 96  # three warps per block
NO_FAULT = 0xFFFFFFFF


def _expected() -> np.ndarray:
    gx, gy, gz = GRID
    z, y, x, t = np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), np.arange(THREADS), indexing="ij")
    return (x | y << 8 | z << 16 | t << 24).astype(np.uint32).ravel()


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_the_block_loop_is_shared(schedule: str) -> None:
    """No %ctaid divisions or stop-flag test in the kernel's module (fails before: each runner
    held its own block loop): a barrier-free runner is one loop over its warps that calls
    zluda.next_block after a block's last warp; the others are one call of a shared runner."""
    text = CPU.lower_part(parse(KERNEL.replace("BARRIER", SCHEDULES[schedule])), "where").text
    runner = text.split('define i32 @"zluda_run.where"', 1)[1].split("\n}", 1)[0]
    calls = [line for line in runner.splitlines() if " call " in line]
    assert "urem" not in runner  # %ctaid of a block's index
    if schedule == "none":
        assert len(calls) == 2 and '@"zluda.next_block"' in calls[0] and '@"where.warp"' in calls[1]
        assert runner.count("phi") == 2  # blocks and warps
    else:
        shared = "zluda.run_general" if schedule == "general" else "zluda.run_blocks"
        assert len(calls) == 1 and f'@"{shared}"' in calls[0]
        assert ('@"zluda_block.where"' in calls[0]) == (schedule == "lockstep")
    defined = [line for line in helpers_ir(*host_layout()).splitlines() if line.startswith("define ")]
    for name in ("zluda.run_blocks", "zluda.run_general", "zluda.next_block"):
        assert any(f'@"{name}"(' in line for line in defined)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_every_block_and_warp_runs_with_its_ctaid(schedule: str) -> None:
    module = compile(KERNEL.replace("BARRIER", SCHEDULES[schedule]))
    out = np.zeros(int(np.prod(GRID)) * THREADS, np.uint32)
    module.launch("where", GRID, (THREADS,), [out, np.uint32(NO_FAULT)])
    np.testing.assert_array_equal(out, _expected())


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("bad", [0, 7, 23])
def test_a_fault_names_its_block(schedule: str, bad: int) -> None:
    module = compile(KERNEL.replace("BARRIER", SCHEDULES[schedule]))
    out = np.zeros(int(np.prod(GRID)) * THREADS, np.uint32)
    with pytest.raises(LaunchError) as e:
        module.launch("where", GRID, (THREADS,), [out, np.uint32(bad)])
    gx, gy = GRID[0], GRID[1]
    assert f"block ({bad % gx},{bad // gx % gy},{bad // (gx * gy)}), warp 0" in str(e.value)
    assert "trap" in str(e.value)


def test_runners_passing_their_functions_still_split(monkeypatch) -> None:
    """A module with a kernel under each schedule is split per kernel (cpu/split.py): the block
    and warp functions whose addresses the runners pass are each held by one runner (without
    split.py's rule for them, any taken address kept the module whole). Each kernel runs there."""
    from zluda_py.compiler import pipeline
    from zluda_py.compiler.cpu import target as cpu_target
    from zluda_py.compiler.cpu.split import split
    monkeypatch.setattr(cpu_target, "SPLIT_IR_LINES", 0)
    body = KERNEL[len(HEAD):]
    ptx = HEAD + "".join(body.replace("where", f"where_{name}").replace("BARRIER", SCHEDULES[name])
                         for name in sorted(SCHEDULES))
    lowered = CPU.lower(parse(ptx))
    assert split(lowered.module, [k["runner"] for k in lowered.metadata["kernels"].values()]) is not None
    _, object_code, metadata = pipeline.compile_object(ptx)
    assert len(metadata["objects"]) == 1 + len(SCHEDULES)
    module = pipeline.load(object_code, metadata)
    for name in sorted(SCHEDULES):
        out = np.zeros(int(np.prod(GRID)) * THREADS, np.uint32)
        module.launch(f"where_{name}", GRID, (THREADS,), [out, np.uint32(NO_FAULT)])
        np.testing.assert_array_equal(out, _expected())


def test_the_lockstep_frame_set_up_is_a_plain_loop() -> None:
    """The loops over a block's warps carry loop metadata that keeps O3 from vectorising or
    unrolling them (fails before: the lockstep block function's frame set-up loop became masked
    scatters with an epilogue, a runtime check and an 8x unrolled remainder)."""
    import llvmlite.binding as llvm
    from zluda_py.compiler.cpu import target as cpu_target
    text = CPU.lower_part(parse(KERNEL.replace("BARRIER", SCHEDULES["lockstep"])), "where").text
    assert '!{ !"llvm.loop.vectorize.enable", i1 0 }' in text and '!{ !"llvm.loop.unroll.disable" }' in text
    mod = llvm.parse_assembly(text)
    cpu_target.optimise(mod, 3)
    block = str(mod.get_function("zluda_block.where"))
    assert "vector.body" not in block and "masked.scatter" not in block and ".prol" not in block
