"""The dispatcher's loop carries `llvm.licm.disable` (FunctionLowering._keep_dispatcher_loop).

LICM hoisted every loop-invariant value of a warp function above the dispatcher, where it was
spilled and paid for at each entry and resume (docs/cpu_target.md); the hint must sit on the
edges back to `dispatch` and on nothing else, and the kernel must still compute the same result.
"""

from __future__ import annotations

import re

import numpy as np

from zluda_py.compiler import compile
from zluda_py.compiler.pipeline import lower
from zluda_py.ptx import parse

PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry odd_sum(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<3>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, 0;
  mov.u32 %r4, 0;
LOOP:
  setp.ge.u32 %p1, %r4, %r2;
  @%p1 bra DONE;
  and.b32 %r5, %r4, 1;
  setp.eq.u32 %p2, %r5, 0;
  @%p2 bra NEXT;
  add.u32 %r3, %r3, %r4;
NEXT:
  add.u32 %r4, %r4, 1;
  bra.uni LOOP;
DONE:
  add.u32 %r3, %r3, %r1;
  mul.wide.u32 %rd2, %r2, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""


def test_only_edges_back_to_the_dispatcher_carry_the_hint() -> None:
    text, _ = lower(parse(PTX))
    loop_id = re.search(r'^(!\d+) = !\{ ?(!\d+), (!\d+) ?\}$', text, re.M)
    assert loop_id and loop_id.group(1) == loop_id.group(2), "a self-referencing loop ID"
    assert re.search(rf'^{loop_id.group(3)} = !\{{ ?!"llvm.licm.disable" ?\}}$', text, re.M)
    tagged = [line for line in text.splitlines() if "!llvm.loop" in line]
    assert tagged and all(line.lstrip().startswith("br ") and 'label %"dispatch"' in line for line in tagged), tagged


def test_result_unchanged() -> None:
    out = np.zeros(64, np.uint32)
    compile(PTX).launch("odd_sum", (1,), (64,), [out, np.uint32(1000)])
    t = np.arange(64)
    expected = np.array([sum(k for k in range(i) if k % 2) for i in t]) + 1000
    np.testing.assert_array_equal(out, expected.astype(np.uint32))
