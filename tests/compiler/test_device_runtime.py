"""The device runtime functions the driver links in (compiler/device_runtime.py), called as
numba-cuda's `cg.this_grid().sync()` calls them: cudaCGGetIntrinsicHandle and cudaCGSynchronize
declared `.extern` and defined nowhere in the program. Expected values are computed here with
numpy; the handle and status values are those CUDA's device runtime API documents
(cuda_device_runtime_api.h: cudaCGScopeGrid = 1, cudaErrorUnknown = 999)."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import UnsupportedError, compile
from zluda_py.compiler.cpu import bounds

# Every thread writes vals[i], syncs the grid, copies the next block's value into nxt[i],
# syncs again (the barrier reused), then reads its neighbour's nxt into fin[i]. Each thread
# stores both statuses and its grid handle; thread 0 also the handle of scope 2 (multi-grid).
EXCHANGE = """.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 scope);
.extern .func (.param .b32 s) cudaCGSynchronize(.param .b64 handle, .param .b32 flags);

.visible .entry exchange(.param .u64 vals, .param .u64 nxt, .param .u64 fin, .param .u64 status,
                         .param .u64 handles, .param .u64 other_scope)
{
  .reg .b32 %r<24>; .reg .b64 %rd<24>; .reg .pred %p1;
  mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %ntid.x; mov.u32 %r4, %ntid.y;
  mov.u32 %r5, %ctaid.x; mov.u32 %r6, %ctaid.y; mov.u32 %r7, %nctaid.x; mov.u32 %r8, %nctaid.y;
  mad.lo.u32 %r9, %r2, %r3, %r1;          // thread in block
  mul.lo.u32 %r10, %r3, %r4;              // block size
  mad.lo.u32 %r11, %r6, %r7, %r5;         // block in grid
  mad.lo.u32 %r12, %r11, %r10, %r9;       // i
  mul.lo.u32 %r13, %r7, %r8;
  mul.lo.u32 %r13, %r13, %r10;            // n
  ld.param.u64 %rd1, [vals]; ld.param.u64 %rd2, [nxt]; ld.param.u64 %rd3, [fin];
  ld.param.u64 %rd4, [status]; ld.param.u64 %rd5, [handles];
  mul.wide.u32 %rd6, %r12, 4;
  mad.lo.u32 %r14, %r12, 7, 3;
  add.s64 %rd7, %rd1, %rd6;
  st.global.u32 [%rd7], %r14;
  {
    .param .b32 a0; .param .b64 r0;
    st.param.b32 [a0], 1;
    call.uni (r0), cudaCGGetIntrinsicHandle, (a0);
    ld.param.b64 %rd8, [r0];
  }
  mul.wide.u32 %rd9, %r12, 8;
  add.s64 %rd9, %rd5, %rd9;
  st.global.u64 [%rd9], %rd8;
  {
    .param .b64 a0; .param .b32 a1; .param .b32 r0;
    st.param.b64 [a0], %rd8; st.param.b32 [a1], 0;
    call.uni (r0), cudaCGSynchronize, (a0, a1);
    ld.param.b32 %r15, [r0];
  }
  add.u32 %r16, %r12, %r10;
  rem.u32 %r16, %r16, %r13;
  mul.wide.u32 %rd10, %r16, 4;
  add.s64 %rd10, %rd1, %rd10;
  ld.global.u32 %r17, [%rd10];
  add.s64 %rd11, %rd2, %rd6;
  st.global.u32 [%rd11], %r17;
  {
    .param .b64 a0; .param .b32 a1; .param .b32 r0;
    st.param.b64 [a0], %rd8; st.param.b32 [a1], 0;
    call.uni (r0), cudaCGSynchronize, (a0, a1);
    ld.param.b32 %r18, [r0];
  }
  add.u32 %r19, %r12, 1;
  rem.u32 %r19, %r19, %r13;
  mul.wide.u32 %rd12, %r19, 4;
  add.s64 %rd12, %rd2, %rd12;
  ld.global.u32 %r20, [%rd12];
  add.s64 %rd13, %rd3, %rd6;
  st.global.u32 [%rd13], %r20;
  mul.wide.u32 %rd14, %r12, 8;
  add.s64 %rd14, %rd4, %rd14;
  st.global.v2.u32 [%rd14], {%r15, %r18};
  setp.ne.u32 %p1, %r12, 0;
  @%p1 bra done;
  {
    .param .b32 a0; .param .b64 r0;
    st.param.b32 [a0], 2;
    call.uni (r0), cudaCGGetIntrinsicHandle, (a0);
    ld.param.b64 %rd15, [r0];
  }
  ld.param.u64 %rd16, [other_scope];
  st.global.u64 [%rd16], %rd15;
done:
  ret;
}
"""
GRID, BLOCK = (5, 2, 1), (32, 3, 1)


@pytest.fixture(scope="module")
def exchange():
    return compile(EXCHANGE)


def _launch(module, cooperative: bool):
    n = GRID[0] * GRID[1] * BLOCK[0] * BLOCK[1]
    vals, nxt, fin = (np.zeros(n, np.uint32) for _ in range(3))
    status = np.full((n, 2), 0xDEAD, np.uint32)
    handles = np.full(n, 0xDEAD, np.uint64)
    other_scope = np.full(1, 0xDEAD, np.uint64)
    workspace = np.zeros(2, np.uint32)
    arrays = (vals, nxt, fin, status, handles, other_scope)
    params = b"".join(a.ctypes.data.to_bytes(8, "little") for a in arrays)
    with bounds.registered(*arrays, workspace):
        module.launch_raw("exchange", GRID, BLOCK, params, grid_workspace=workspace.ctypes.data if cooperative else 0)
    return n, vals, nxt, fin, status, handles, other_scope[0], workspace


def test_grid_handle_and_two_grid_barriers_in_a_cooperative_launch(exchange):
    n, vals, nxt, fin, status, handles, other_scope, workspace = _launch(exchange, cooperative=True)
    block = BLOCK[0] * BLOCK[1]
    i = np.arange(n)
    expected_vals = (i * 7 + 3).astype(np.uint32)
    expected_nxt = expected_vals[(i + block) % n]
    assert vals.tolist() == expected_vals.tolist()
    assert nxt.tolist() == expected_nxt.tolist()
    assert fin.tolist() == expected_nxt[(i + 1) % n].tolist()
    assert status.tolist() == [[0, 0]] * n
    assert set(handles.tolist()) == {workspace.ctypes.data}
    assert other_scope == 0
    # nvcc's grid.sync() counts in the same word: each barrier adds 0x80000000 in all
    assert workspace.tolist() == [0, 0]


def test_outside_a_cooperative_launch_the_handle_is_0_and_sync_answers_999(exchange):
    n, vals, nxt, fin, status, handles, other_scope, workspace = _launch(exchange, cooperative=False)
    assert status.tolist() == [[999, 999]] * n
    assert handles.tolist() == [0] * n
    assert vals.tolist() == (np.arange(n) * 7 + 3).tolist()


def test_other_undefined_functions_stay_unresolved():
    ptx = EXCHANGE.replace("cudaCGSynchronize", "cudaCGSynchronizeGrid")
    with pytest.raises(UnsupportedError, match=r"unresolved \.extern \.func cudaCGSynchronizeGrid"):
        compile(ptx)


def test_a_program_defining_the_functions_keeps_its_own():
    own = """
.visible .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 scope)
{ st.param.b64 [h], 77; ret; }
.visible .func (.param .b32 s) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)
{ st.param.b32 [s], 5; ret; }
"""
    module = compile(EXCHANGE.replace(".extern .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 scope);\n", "")
                     .replace(".extern .func (.param .b32 s) cudaCGSynchronize(.param .b64 handle, .param .b32 flags);\n", own))
    n, _, _, _, status, handles, other_scope, _ = _launch(module, cooperative=True)
    assert status.tolist() == [[5, 5]] * n
    assert handles.tolist() == [77] * n and other_scope == 77
