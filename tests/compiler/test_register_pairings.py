"""Register pairings ptxas takes that the checker used to refuse or read otherwise
(tests/ptx/test_ptxas_forms.py has ptxas' verdicts): an integer instruction on .f16x2 registers, a
cvt with bit-size registers wider than its f16/f32 type, a float vector access into integer
registers, and a vector of a .f32 and a .b32 register for a .u32 access. Expected values follow
the PTX ISA's rules for operands wider than the instruction type ("Operand Size Exceeding
Instruction-Type Size": a source is cut to the type's size, a result zero-extended), worked out by
hand; the compiler and the reference interpreter must both give them."""

from __future__ import annotations

import numpy as np

from zluda_py import reference
from zluda_py.compiler import compile

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
  .reg .f16x2 %x<4>;
  .reg .b32 %b<4>;
  .reg .b64 %d<5>;
  .reg .u32 %u<3>;
  .reg .f32 %f<2>;
  ld.param.u64 %d1, [pin];
  ld.param.u64 %d2, [pout];
  ld.global.b32 %x1, [%d1];
  ld.global.b32 %x2, [%d1+4];
  add.u32 %x3, %x1, %x2;
  st.global.b32 [%d2], %x3;
  ld.global.b32 %b1, [%d1+8];
  cvt.f16.f16 %b2, %b1;
  st.global.b32 [%d2+4], %b2;
  ld.global.b64 %d3, [%d1+16];
  cvt.f32.f32 %d4, %d3;
  st.global.b64 [%d2+8], %d4;
  ld.global.v2.f32 {%u1, %u2}, [%d1+24];
  st.global.v2.f32 [%d2+16], {%u2, %u1};
  ld.global.v2.u32 {%f1, %b3}, [%d1+24];
  st.global.b32 [%d2+24], %f1;
  st.global.b32 [%d2+28], %b3;
  ret;
}
"""
IN = np.array([0x0001_0002, 0x0003_0004, 0xABCD_3C00, 0, 0x1122_3344, 0x3F80_0000, 0x4000_0000, 0xC0A0_0000],
              np.uint32)
WANT = np.array([
    0x0004_0006,  # add.u32 of the two registers' bits
    0x0000_3C00,  # cvt.f16.f16 of the low half (1.0), zero-extended
    0x1122_3344, 0,  # cvt.f32.f32 of the low word (a normal f32: itself), zero-extended to 64 bits
    0xC0A0_0000, 0x4000_0000,  # the f32 pair through integer registers, swapped
    0x4000_0000, 0xC0A0_0000,  # the u32 pair through a .f32 and a .b32 register
], np.uint32)


def test_pairings_ptxas_takes_compile_and_run():
    out = np.full(8, 0xEEEE_EEEE, np.uint32)
    compile(PTX).launch("k", (1,), (1,), [IN, out])
    np.testing.assert_array_equal(out, WANT)


def test_the_reference_interpreter_agrees():
    out = np.full(8, 0xEEEE_EEEE, np.uint32)
    reference.run(PTX, "k", (1,), (1,), [IN, out])
    np.testing.assert_array_equal(out, WANT)
