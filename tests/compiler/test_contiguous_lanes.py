"""The per-lane helpers' contiguous move (`memory._contiguous_move`): once the active lanes are
checked, lanes at consecutive elements move with one masked vector load/store instead of a
gather/scatter. A kernel above the clone limit (cub's scan and radix sort kernels) takes the
helper at every non-uniform access, so its tile loads and stores go this way: results against
numpy with partial warps, divergent lanes and lanes off the line, and a fault of the last lane
still named exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.module import helpers_ir
from zluda_py.compiler.cpu.target import CPU, target_machine
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

PADDING = 260  # add/xor pairs: ~540 instructions, above CLONE_LIMIT
THREADS = 48  # the second warp is partial: lanes 0-15


def kernel() -> str:
    """tiles(in, out, base, gap, jump): lane i of the block reads in[base + i] (i + gap from lane
    `jump` on), and where that value is odd writes value * 3 + padding chain to out[base + i]
    (the same index); lanes with an even value write nothing."""
    steps = "\n".join(f"  add.u32 %r9, %r9, {k * 7919 + 1};\n  xor.b32 %r9, %r9, {k};" for k in range(PADDING))
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry tiles(.param .u64 pin, .param .u64 pout, .param .u32 base, .param .u32 gap, .param .u32 jump)
{{
  .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  ld.param.u32 %r2, [base];
  ld.param.u32 %r3, [gap];
  ld.param.u32 %r4, [jump];
  mov.u32 %r1, %tid.x;
  mov.u32 %r9, %r1;
{steps}
  setp.ge.u32 %p1, %r1, %r4;
  selp.u32 %r5, %r3, 0, %p1;
  add.u32 %r6, %r1, %r2;
  add.u32 %r6, %r6, %r5;
  mul.wide.u32 %rd3, %r6, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r7, [%rd4];
  and.b32 %r8, %r7, 1;
  setp.ne.u32 %p2, %r8, 0;
  mad.lo.u32 %r10, %r7, 3, %r9;
  add.u64 %rd5, %rd2, %rd3;
  @%p2 st.global.u32 [%rd5], %r10;
  ret;
}}
"""


def chain(tid: np.ndarray) -> np.ndarray:
    r = tid.astype(np.uint32)
    for k in range(PADDING):
        r = (r + np.uint32(k * 7919 + 1)) ^ np.uint32(k)
    return r


@pytest.fixture(scope="module")
def module():
    text = kernel()
    assert not re.search(r"^all\d+:", CPU.lower_part(link([parse(text)]), "tiles").text, re.M)  # no clones
    return compile(text)


def test_the_helpers_move_consecutive_lanes_with_one_masked_vector_op():
    tm = target_machine()
    text = helpers_ir(tm.triple, str(tm.target_data))
    for kind, op in (("gather", "load"), ("scatter", "store")):
        body = re.search(rf'define [^\n]*"zluda\.{kind}\.i32\.x1"\(.*?\n}}', text, re.S).group(0)
        assert f"llvm.masked.{op}.v32i32.p0" in body, kind


@pytest.mark.parametrize("base, gap, jump", [(0, 0, THREADS), (5, 0, THREADS), (3, 7, 20), (0, 1, 47), (9, 40, 0)])
def test_results_match_numpy(module, base, gap, jump):
    rng = np.random.default_rng(base * 1000 + gap * 10 + jump)
    size = base + THREADS + gap
    a = rng.integers(0, 2**32, size, dtype=np.uint32)
    out = np.full(size + gap, 0xDEADBEEF, np.uint32)
    module.launch("tiles", 1, THREADS, [a, out, base, gap, jump])
    tid = np.arange(THREADS)
    idx = base + tid + np.where(tid >= jump, gap, 0)
    want = np.full_like(out, 0xDEADBEEF)
    odd = (a[idx] & 1) == 1
    want[idx[odd]] = (a[idx] * np.uint32(3) + chain(tid))[odd]
    np.testing.assert_array_equal(out, want)


def test_the_last_lane_outside_faults_with_its_lane(module):
    a = np.ones(THREADS - 1, np.uint32)  # lane 15 of the partial warp reads one past the end
    out = np.zeros(THREADS, np.uint32)
    with pytest.raises(LaunchError) as e:
        module.launch("tiles", 1, THREADS, [a, out, 0, 0, THREADS])
    assert e.value.cu_result == 700, str(e.value)
    address = a.ctypes.data + 4 * (THREADS - 1)
    assert "lane 15 " in str(e.value) and f"0x{address:x}" in str(e.value), str(e.value)
