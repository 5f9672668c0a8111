"""Converged clones (cpu/function.py, CLONE_LIMIT = 300): a function above the limit is lowered
without them, a small one with them, and both compute what the reference interpreter does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py import reference
from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse


def kernel(steps: int) -> str:
    """out[tid] = a chain of `steps` add/xor steps on in[tid], a different chain for odd lanes
    (a divergent branch), so the kernel has about 2 * steps + 15 PTX instructions."""
    even = "\n".join(f"  add.u32 %r2, %r2, {k * 7919 + 1};\n  xor.b32 %r2, %r2, {k};" for k in range(steps // 2))
    odd = "\n".join(f"  xor.b32 %r2, %r2, {k * 104729};\n  add.u32 %r2, %r2, {k + 3};" for k in range(steps // 2))
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry chain(.param .u64 pin, .param .u64 pout)
{{
  .reg .pred %p<2>; .reg .u32 %r<4>; .reg .u64 %rd<6>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  and.b32 %r3, %r1, 1;
  setp.ne.u32 %p1, %r3, 0;
  @%p1 bra ODD;
{even}
  bra.uni DONE;
ODD:
{odd}
DONE:
  add.u64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r2;
  ret;
}}
"""


def converged_blocks(text: str) -> int:
    return len(re.findall(r"^all\d+:", text, re.M))


# 40 steps: ~95 instructions, a bench/cuda/suite.cu-sized kernel (20-130); 300: ~615, between the
# limit and cub's scan kernels (~910), which compiled 4x faster without clones
@pytest.mark.parametrize("steps, cloned", [(40, True), (300, False)])
def test_clones_only_below_the_limit(steps: int, cloned: bool) -> None:
    text = kernel(steps)
    assert (converged_blocks(CPU.lower_part(link([parse(text)]), "chain").text) > 0) is cloned
    a = np.random.default_rng(14).integers(0, 2**32, 64, dtype=np.uint32)
    ref, cpu = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    reference.run(text, "chain", (1,), (64,), [a.copy(), ref])
    compile(text).launch("chain", (1,), (64,), [a.copy(), cpu])
    np.testing.assert_array_equal(cpu, ref)

