"""The CPU lowering's output depends only on its input: not on PYTHONHASHSEED (iteration over
sets of names), which changes between processes. Cache entries and `zluda-compile` objects
are only reproducible if it holds."""

from __future__ import annotations

import os
import subprocess
import sys

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# many warp-uniform registers (parameters and what is computed from them and %ctaid): their
# slots were created in the order of a set of names
UNIFORM = HEAD + """
.visible .entry uniform(.param .u64 out, .param .u32 a, .param .u32 b, .param .u32 c, .param .u32 d)
{
  .reg .b32 %r<12>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [a];
  ld.param.u32 %r2, [b];
  ld.param.u32 %r3, [c];
  ld.param.u32 %r4, [d];
  mov.u32 %r5, %ctaid.x;
  add.u32 %r6, %r1, %r2;
  mul.lo.u32 %r7, %r3, %r4;
  xor.b32 %r8, %r6, %r7;
  add.u32 %r9, %r8, %r5;
  mov.u32 %r10, %tid.x;
  add.u32 %r11, %r10, %r9;
  mul.wide.u32 %rd2, %r10, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r11;
  ret;
}
"""

LOWER = """
import sys
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse
module = link([parse(sys.stdin.read())])
sys.stdout.write(CPU.lower(module).text + CPU.lower_part(module, "uniform").text)
"""


def _lowered(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-c", LOWER], input=UNIFORM, env=env, capture_output=True, text=True,
                          check=True).stdout


def test_lowering_does_not_depend_on_the_hash_seed() -> None:
    first = _lowered("1")
    assert "uniform.warp" in first
    for seed in ("2", "3"):
        assert _lowered(seed) == first, f"PYTHONHASHSEED={seed} lowered the module differently"
