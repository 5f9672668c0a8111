"""Warp-uniform registers held as one scalar on the CPU target (`affine.warp_uniform`).

A register may be a scalar only if every live lane holds its value whenever it is read: each
write computes one value from uniform sources, in a block all live lanes of the warp run
together. The kernels below break each half of that rule; an analysis that admitted them would
give some lanes another lane's value. Expected outputs come from numpy models of the PTX.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import cfg, compile
from zluda_py.compiler.cpu import affine, function
from zluda_py.compiler.cpu.abi import FRAME_HEADER
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# c counts up to %tid.x in a loop whose exit is divergent: c's write `add c, c, 7` is a uniform
# operation on a uniform-looking value, but lanes leave the loop at different iterations.
DIVERGENT_LOOP = HEAD + """
.visible .entry divergent_loop(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  setp.ge.u32 %p1, %r3, %r1;
  @%p1 bra DONE;
  add.u32 %r2, %r2, 7;
  add.u32 %r3, %r3, 1;
  bra.uni LOOP;
DONE:
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""

# r gets one of two kernel parameters on the two sides of a divergent branch.
TWO_PATHS = HEAD + """
.visible .entry two_paths(.param .u64 out, .param .u32 a, .param .u32 b)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 1;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra EVEN;
  ld.param.u32 %r3, [a];
  bra.uni JOIN;
EVEN:
  ld.param.u32 %r3, [b];
JOIN:
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""

# A uniform loop (trip count from a parameter) around a barrier and a divergent body: the counter
# %r4, the sum %r5 and their predicate stay scalar; each thread with %tid.x < k adds the counter
# to its slot every iteration; %r6 is written inside the divergent side and must stay a vector.
UNIFORM_LOOP = HEAD + """
.visible .entry uniform_loop(.param .u64 out, .param .u32 n, .param .u32 k)
{
  .reg .pred %p<3>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b32 sm[64];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [k];
  mov.u32 %r3, %tid.x;
  shl.b32 %r7, %r3, 2;
  mov.u32 %r8, sm;
  add.u32 %r8, %r8, %r7;
  st.shared.u32 [%r8], 0;
  mov.u32 %r4, 0;
  mov.u32 %r5, 0;
  mov.u32 %r6, 0;
LOOP:
  bar.sync 0;
  setp.ge.u32 %p1, %r3, %r2;
  @%p1 bra SKIP;
  ld.shared.u32 %r9, [%r8];
  add.u32 %r9, %r9, %r4;
  st.shared.u32 [%r8], %r9;
  add.u32 %r6, %r6, 1;
SKIP:
  add.u32 %r5, %r5, %r4;
  add.u32 %r4, %r4, 1;
  setp.lt.u32 %p2, %r4, %r1;
  @%p2 bra LOOP;
  bar.sync 0;
  ld.shared.u32 %r9, [%r8];
  add.u32 %r9, %r9, %r5;
  add.u32 %r9, %r9, %r6;
  mul.wide.u32 %rd2, %r3, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}
"""


def _uniform(src: str) -> set[str]:
    f = parse(src).kernels()[0]
    body = cfg.build(f.body or [], keep=lambda op: op in SEMANTICS)
    regs = {v.name: ptx_bits(v.type) for v in body.variables if v.space == "reg" and v.vector is None}
    params = {p.name for p in f.params}
    return affine.warp_uniform(body, regs, lambda _: True, params.__contains__)


@pytest.mark.parametrize("src, expected", [
    # %r2, %r3: written in a loop that lanes leave at different times
    pytest.param(DIVERGENT_LOOP, {"%rd1"}, id="divergent_loop"),
    pytest.param(TWO_PATHS, {"%rd1"}, id="two_paths"),  # %r3: written on both sides of a divergent branch
    # %r6: written on the divergent side; %r8: per lane
    pytest.param(UNIFORM_LOOP, {"%rd1", "%r1", "%r2", "%r4", "%r5", "%p2"}, id="uniform_loop"),
])
def test_which_registers_are_uniform(src: str, expected: set[str]) -> None:
    assert _uniform(src) == expected


def test_divergent_loop_counter() -> None:
    out = np.zeros(40, np.uint32)
    compile(DIVERGENT_LOOP).launch("divergent_loop", (1,), (40,), [out])
    np.testing.assert_array_equal(out, 7 * np.arange(40, dtype=np.uint32))


def test_values_from_two_paths() -> None:
    out = np.zeros(64, np.uint32)
    compile(TWO_PATHS).launch("two_paths", (1,), (64,), [out, np.uint32(11), np.uint32(22)])
    np.testing.assert_array_equal(out, np.where(np.arange(64) % 2 == 1, 11, 22).astype(np.uint32))


@pytest.mark.parametrize("block", [64, 40])
def test_uniform_loop_with_barrier_and_divergent_body(block: int) -> None:
    n, k = 5, 37
    out = np.zeros(block, np.uint32)
    compile(UNIFORM_LOOP).launch("uniform_loop", (1,), (block,), [out, np.uint32(n), np.uint32(k)])
    total = sum(range(n))  # the counter summed over the iterations
    tid = np.arange(block)
    expected = total + np.where(tid < k, total + n, 0)  # slot sum + %r5 + %r6
    np.testing.assert_array_equal(out, expected.astype(np.uint32))


def _scalar_frame_stores(ir_text: str) -> int:
    """Stores of one i32 into a register's place in the warp frame (past its header)."""
    frame = re.search(r'^define internal i32 @"[^"]+\.warp"\(ptr %"[^"]+", ptr (%"[^"]+")', ir_text, re.M).group(1)
    frame_regs = re.findall(rf'^\s+(%"[^"]+") = getelementptr i8, ptr {re.escape(frame)}, i64 ([0-9]+)$', ir_text, re.M)
    places = {name for name, offset in frame_regs if int(offset) >= FRAME_HEADER}
    return sum(1 for dest in re.findall(r'^\s+store i32 %"[^"]+", ptr (%"[^"]+")$', ir_text, re.M) if dest in places)


@pytest.fixture
def registers_in_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel keeps its registers in the warp frame, as those above FRAME_REGS_LIMIT do
    (cub's 3k-instruction radix sort kernel)."""
    monkeypatch.setattr(function, "FRAME_REGS_LIMIT", 0)


def test_frame_kernels_keep_uniform_registers_as_scalars(registers_in_frame: None) -> None:
    text = CPU.lower_part(link([parse(UNIFORM_LOOP)]), "uniform_loop").text
    # %r1, %r2 (parameters), the counter %r4 and the sum %r5, each written as one i32 in its place
    assert _scalar_frame_stores(text) >= 4


@pytest.mark.parametrize("block", [64, 40])
def test_frame_kernel_with_uniform_loop_barrier_and_divergent_body(registers_in_frame: None, block: int) -> None:
    test_uniform_loop_with_barrier_and_divergent_body(block)


def test_frame_kernels_divergent_registers_stay_vectors(registers_in_frame: None) -> None:
    test_divergent_loop_counter()
    test_values_from_two_paths()
