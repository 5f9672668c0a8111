"""Whole-warp accesses without converged clones (`MemoryMixin._whole_fits`): a function between
CLONE_LIMIT and WHOLE_WARP_LIMIT (cub's 400-450-instruction reduce kernels) tests each `ends` /
`check` access for a whole warp on its line, aligned and in range, and moves it inline; any other
case (a partial warp, lanes off the line, a fault) goes through the per-lane helper, which names
the faulting lane. Results against numpy: contiguous, strided and permuted lanes, a partial
warp, and faults of the first misaligned or out-of-range lane."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu import function
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

PADDING = 180  # add/xor pairs: ~400 instructions, between CLONE_LIMIT and WHOLE_WARP_LIMIT
THREADS = 48  # the second warp is partial: lanes 0-15


def kernel(padding: int = PADDING) -> str:
    """whole(in, out, base, step, gap, jump, flip): lane t reads a = in[base + t] (`ends`: a
    widened sum) and c = in[base + t*step + (t >= jump ? gap : 0)] (`check`: no form), stores a
    to s[t] in .shared and reads back d = s[t ^ flip] (`check`), then writes
    out[base + t] = a * 3 + c + d + chain(t) (`ends`)."""
    steps = "\n".join(f"  add.u32 %r9, %r9, {k * 7919 + 1};\n  xor.b32 %r9, %r9, {k};" for k in range(padding))
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry whole(.param .u64 pin, .param .u64 pout, .param .u32 base, .param .u32 step, .param .u32 gap,
                      .param .u32 jump, .param .u32 flip)
{{
  .reg .pred %p<3>; .reg .b32 %r<30>; .reg .b64 %rd<10>;
  .shared .align 4 .b8 s[256];
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  ld.param.u32 %r2, [base];
  ld.param.u32 %r3, [step];
  ld.param.u32 %r4, [gap];
  ld.param.u32 %r5, [jump];
  ld.param.u32 %r6, [flip];
  mov.u32 %r1, %tid.x;
  mov.u32 %r9, %r1;
{steps}
  add.u32 %r10, %r1, %r2;
  mul.wide.u32 %rd3, %r10, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r11, [%rd4];
  mul.lo.u32 %r12, %r1, %r3;
  setp.ge.u32 %p1, %r1, %r5;
  selp.u32 %r13, %r4, 0, %p1;
  add.u32 %r14, %r12, %r2;
  add.u32 %r14, %r14, %r13;
  mul.wide.u32 %rd5, %r14, 4;
  add.u64 %rd6, %rd1, %rd5;
  ld.global.u32 %r15, [%rd6];
  mov.u32 %r16, s;
  shl.b32 %r17, %r1, 2;
  add.u32 %r18, %r16, %r17;
  st.shared.u32 [%r18], %r11;
  xor.b32 %r19, %r1, %r6;
  shl.b32 %r20, %r19, 2;
  add.u32 %r21, %r16, %r20;
  ld.shared.u32 %r22, [%r21];
  mad.lo.u32 %r23, %r11, 3, %r15;
  add.u32 %r23, %r23, %r22;
  add.u32 %r23, %r23, %r9;
  add.u64 %rd7, %rd2, %rd3;
  st.global.u32 [%rd7], %r23;
  ret;
}}
"""


def chain(tid: np.ndarray) -> np.ndarray:
    r = tid.astype(np.uint32)
    for k in range(PADDING):
        r = (r + np.uint32(k * 7919 + 1)) ^ np.uint32(k)
    return r


def warp_function(text: str) -> str:
    return re.search(r'define [^\n]*"whole\.warp"\(.*?\n}', text, re.S).group(0)


@pytest.fixture(scope="module")
def module():
    return compile(kernel())


def test_a_whole_warp_moves_inline_without_clones():
    body = warp_function(CPU.lower_part(link([parse(kernel())]), "whole").text)
    assert not re.search(r"^all\d+:", body, re.M)  # no converged clones
    # the two global loads, the shared load and the two stores: one masked vector op each
    assert len(re.findall(r"call <32 x i32> @\"?llvm\.masked\.load\.v32i32", body)) == 3
    assert len(re.findall(r"call void @\"?llvm\.masked\.store\.v32i32", body)) == 2
    # and the per-lane helper where the whole-warp test fails
    assert re.search(r'call i32 @"zluda\.gather\.i32\.x1"', body) and re.search(r'call i32 @"zluda\.scatter\.i32\.x1"', body)


def test_above_the_whole_warp_limit_the_helper_moves_every_lane():
    text = kernel(function.WHOLE_WARP_LIMIT // 2)
    body = warp_function(CPU.lower_part(link([parse(text)]), "whole").text)
    assert "llvm.masked.load.v32i32" not in body and "llvm.masked.store.v32i32" not in body


@pytest.mark.parametrize("base, step, gap, jump, flip", [
    (0, 1, 0, THREADS, 0),  # every access contiguous: the inline moves
    (5, 1, 0, THREADS, 0),  # the same from an offset
    (0, 2, 0, THREADS, 0),  # strided: the check load per lane
    (3, 1, 7, 20, 0),  # lanes 20 on off the line
    (0, 0, 0, THREADS, 1),  # one address for all (step 0), pairs swapped in .shared
    (9, 3, 40, 0, 3),  # all off the line
])
def test_results_match_numpy(module, base, step, gap, jump, flip):
    rng = np.random.default_rng(base * 1000 + step * 100 + gap * 10 + jump + flip)
    tid = np.arange(THREADS)
    far = base + tid * step + np.where(tid >= jump, gap, 0)
    size = max(base + THREADS, int(far.max()) + 1)
    a = rng.integers(0, 2**32, size, dtype=np.uint32)
    out = np.full(size, 0xDEADBEEF, np.uint32)
    module.launch("whole", 1, THREADS, [a, out, base, step, gap, jump, flip])
    mine = a[base + tid]
    # s[t ^ flip]: within the thread's warp (flip < 32); the partial warp's missing lanes
    # (t ^ flip >= THREADS) never occur for the flips used here
    want = np.full_like(out, 0xDEADBEEF)
    want[base + tid] = mine * np.uint32(3) + a[far] + mine[tid ^ flip] + chain(tid)
    np.testing.assert_array_equal(out, want)


def test_the_last_lane_of_a_whole_warp_outside_faults_with_its_lane(module):
    a = np.ones(31, np.uint32)  # warp 0, lane 31 reads one past the end
    out = np.zeros(THREADS, np.uint32)
    with pytest.raises(LaunchError) as e:
        module.launch("whole", 1, THREADS, [a, out, 0, 1, 0, THREADS, 0])
    assert e.value.cu_result == 700, str(e.value)
    address = a.ctypes.data + 4 * 31
    assert "warp 0, lane 31 " in str(e.value) and f"0x{address:x}" in str(e.value), str(e.value)


def test_a_misaligned_whole_warp_faults_with_its_first_lane(module):
    raw = np.zeros(4 * THREADS + 8, np.uint8)
    a = raw[2:2 + 4 * THREADS].view(np.uint32)  # every lane 2 bytes off
    out = np.zeros(THREADS, np.uint32)
    with pytest.raises(LaunchError) as e:
        module.launch("whole", 1, THREADS, [a, out, 0, 1, 0, THREADS, 0])
    assert e.value.cu_result == 716, str(e.value)
    assert "warp 0, lane 0 " in str(e.value) and f"0x{raw.ctypes.data + 2:x}" in str(e.value), str(e.value)
