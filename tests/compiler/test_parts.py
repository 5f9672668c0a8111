"""Which modules the lazy loader may build per kernel (`parts.whole_reason`): a function's
address taken anywhere in an instruction keeps the module whole, a direct call does not."""

from __future__ import annotations

import pytest

from zluda_py.compiler.parts import whole_reason
from zluda_py.ptx import parse

MODULE = """.version 8.0
.target sm_80
.address_size 64
.func (.reg .u64 r) ident(.reg .u64 a)
{
  mov.u64 r, a;
  ret;
}
.func other()
{
  ret;
}
.visible .entry k(.param .u64 buf)
{
  .reg .b64 %p, %q;
  ld.param.u64 %p, [buf];
  BODY
  st.global.u64 [%p], %q;
  ret;
}
"""


@pytest.mark.parametrize("body", [
    "call (%q), ident, (%p);",             # a direct call names its callee: not an address
    "@%p1 bra DONE;\nDONE:\n  mov.u64 %q, %p;",
])
def test_calls_and_plain_code_can_be_split(body: str) -> None:
    text = MODULE.replace("BODY", body).replace(".reg .b64 %p, %q;", ".reg .b64 %p, %q; .reg .pred %p1;")
    assert whole_reason(parse(text)) is None


@pytest.mark.parametrize("body", [
    "mov.u64 %q, ident;",                   # a plain operand
    "{\n  mov.u64 %q, ident;\n  }",         # inside a nested block
    "call (%q), other, (ident);",           # a call's argument, beside the callee
    "call (%q), ident, (ident);",           # an argument naming the callee itself
])
def test_an_address_taken_keeps_the_module_whole(body: str) -> None:
    assert whole_reason(parse(MODULE.replace("BODY", body))) == "the address of ident is taken in k"
