"""A `.extern .func` that nothing calls or takes the address of needs no definition: ptxas leaves
it out and NVIDIA's driver loads the module (tests/ptx_corpus/isa70_misc.ptx declares `abort_all`
and never calls it: refused with 218 here before, loaded on an H100, golden/hostile_nvidia.txt).
One that is called still fails loudly, naming the function."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.amdgpu import lower
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.ptx import parse

HEAD = ".version 7.0\n.target sm_70\n.address_size 64\n.extern .func abort_all\n()\n.noreturn;\n"
KERNEL = """.visible .entry k(.param .u64 out)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  st.global.u32 [%rd1], %r1;
  %s
  ret;
}
"""


@pytest.mark.parametrize("target", ["cpu", "gfx1100"])
def test_an_unused_extern_function_needs_no_definition(target):
    text = HEAD + KERNEL.replace("%s", "")
    if target == "cpu":
        out = np.zeros(1, np.uint32)
        compile(text).launch("k", (1,), (1,), [out])
        assert out[0] == 0
    else:
        ir_text, _ = lower(parse(text), "gfx1100")
        assert "@\"k\"" in ir_text and "abort_all" not in ir_text


def test_a_called_unresolved_extern_function_is_refused_by_name():
    text = HEAD + KERNEL.replace("%s", "call.uni abort_all, ();")
    with pytest.raises(UnsupportedError, match=r"unresolved \.extern \.func abort_all"):
        compile(text)
    with pytest.raises(UnsupportedError, match=r"unresolved \.extern \.func abort_all"):
        lower(parse(text), "gfx1100")
