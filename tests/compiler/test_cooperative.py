"""Cooperative launches on the CPU target: %envreg1/%envreg2 read the grid workspace, every
block of a cooperative grid runs at once (blocks wait for each other across OS threads), a
fault in one block ends the others' waits, and a grid whose threads cannot all start fails
with COOPERATIVE_LAUNCH_TOO_LARGE. Expected values are computed here with numpy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.cpu import bounds
from zluda_py.compiler.cpu.runtime import worker_count
from zluda_py.compiler.errors import LaunchError

HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n"
# out[4*b + k] = %envreg<k> for k = 0..3, from thread 0 of block b
ENVREGS = HEADER + """
.visible .entry envregs(.param .u64 out)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p1;
  ld.param.u64 %rd1, [out];
  mov.u32 %r5, %tid.x;
  setp.ne.u32 %p1, %r5, 0;
  @%p1 bra done;
  mov.u32 %r6, %ctaid.x;
  mul.wide.u32 %rd2, %r6, 16;
  add.s64 %rd3, %rd1, %rd2;
  mov.u32 %r1, %envreg0; mov.u32 %r2, %envreg1; mov.u32 %r3, %envreg2; mov.u32 %r4, %envreg3;
  st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
done:
  ret;
}
"""
# A one-shot grid barrier as nvcc's grid.sync() builds it (thread 0 of each block counts its
# block in the workspace's second word and spins until every block has), then every thread
# reads what the next block wrote before the barrier: out[n + i] = out[(i + ntid) % n].
EXCHANGE = HEADER + """
.visible .entry exchange(.param .u64 out, .param .u32 trap_block)
{
  .reg .b32 %r<20>; .reg .b64 %rd<12>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %envreg1; mov.u32 %r2, %envreg2;
  cvt.u64.u32 %rd2, %r1; cvt.u64.u32 %rd3, %r2;
  shl.b64 %rd2, %rd2, 32; or.b64 %rd4, %rd2, %rd3;
  add.s64 %rd4, %rd4, 4;
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %nctaid.x; mov.u32 %r5, %tid.x; mov.u32 %r6, %ntid.x;
  mad.lo.s32 %r7, %r3, %r6, %r5;
  mul.lo.s32 %r8, %r4, %r6;
  mad.lo.s32 %r9, %r7, 7, 3;
  mul.wide.u32 %rd5, %r7, 4; add.s64 %rd6, %rd1, %rd5;
  st.global.u32 [%rd6], %r9;
  ld.param.u32 %r10, [trap_block];
  setp.eq.u32 %p3, %r3, %r10;
  @%p3 trap;
  bar.sync 0;
  setp.ne.u32 %p1, %r5, 0;
  @%p1 bra waited;
  atom.add.release.gpu.u32 %r11, [%rd4], 1;
spin:
  ld.acquire.gpu.u32 %r12, [%rd4];
  setp.lt.u32 %p2, %r12, %r4;
  @%p2 bra spin;
waited:
  bar.sync 0;
  add.s32 %r13, %r7, %r6;
  rem.u32 %r13, %r13, %r8;
  mul.wide.u32 %rd7, %r13, 4; add.s64 %rd8, %rd1, %rd7;
  ld.global.u32 %r14, [%rd8];
  add.s32 %r15, %r7, %r8;
  mul.wide.u32 %rd9, %r15, 4; add.s64 %rd10, %rd1, %rd9;
  st.global.u32 [%rd10], %r14;
  ret;
}
"""
NO_TRAP = 0xFFFFFFFF


@pytest.fixture(scope="module")
def envregs():
    return compile(ENVREGS)


@pytest.fixture(scope="module")
def exchange():
    return compile(EXCHANGE)


def _finishes(fn, seconds: float = 120) -> list:
    """fn() on a thread of its own; fails (instead of hanging the suite) if it does not return."""
    outcome: list = []

    def body() -> None:
        try:
            outcome.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the launch did not finish within {seconds} s"
    return outcome


def _exchange(module, nblocks: int, threads: int, trap_block: int = NO_TRAP):
    n = nblocks * threads
    out = np.zeros(2 * n, np.uint32)
    workspace = np.zeros(2, np.uint32)
    params = out.ctypes.data.to_bytes(8, "little") + trap_block.to_bytes(4, "little")
    with bounds.registered(out, workspace):
        result = _finishes(lambda: module.launch_raw("exchange", (nblocks, 1, 1), (threads, 1, 1), params,
                                                     grid_workspace=workspace.ctypes.data))
    return out, workspace, result[0]


def test_envregs_read_the_workspace_address_only_in_cooperative_launches(envregs):
    out = np.full(3 * 4, 0xDEADBEEF, np.uint32)
    workspace = np.zeros(2, np.uint32)
    address = workspace.ctypes.data
    with bounds.registered(out, workspace):
        envregs.launch_raw("envregs", (3, 1, 1), (32, 1, 1), out.ctypes.data.to_bytes(8, "little"),
                           grid_workspace=address)
        assert out.reshape(3, 4).tolist() == [[0, address >> 32, address & 0xFFFFFFFF, 0]] * 3
        envregs.launch_raw("envregs", (3, 1, 1), (32, 1, 1), out.ctypes.data.to_bytes(8, "little"))
        assert out.tolist() == [0] * 12


@pytest.mark.parametrize("threads", [32, 96])
def test_grid_barrier_with_more_blocks_than_the_worker_pool_runs_at_once(exchange, threads):
    nblocks = 4 * worker_count() + 5  # the pool runs at most 4 x workers chunks: waiting would deadlock there
    out, workspace, error = _exchange(exchange, nblocks, threads)
    assert error is None
    n = nblocks * threads
    written = np.arange(n, dtype=np.uint32) * 7 + 3
    assert out[:n].tolist() == written.tolist()
    assert out[n:].tolist() == written[(np.arange(n) + threads) % n].tolist()
    assert workspace.tolist() == [0, nblocks]


def test_a_trap_in_one_block_ends_the_other_blocks_wait(exchange):
    out, workspace, error = _exchange(exchange, 6, 64, trap_block=2)
    assert isinstance(error, LaunchError) and error.cu_result == 719, error
    assert "block (2,0,0)" in str(error)
    assert workspace[1] < 6  # block 2 never arrived


def test_a_grid_whose_threads_cannot_all_start_fails_with_720_before_any_block_runs(exchange, monkeypatch):
    started = []
    real_start = threading.Thread.start

    def start(self):
        if self.name.startswith("zluda-coop-"):
            if len(started) == 3:
                raise RuntimeError("can't start new thread")
            started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    out, workspace, error = _exchange(exchange, 8, 32)
    assert isinstance(error, LaunchError) and error.cu_result == 720, error
    assert not out.any() and not workspace.any()  # no block ran
