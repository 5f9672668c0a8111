"""The lowering's printing shortcuts print what llvmlite prints: vector constants shared between
their uses (compiler/vector_constants.py), the builder's `not_` with a shared all-ones vector
(cpu/values.Builder) and split's printer of a function's body (cpu/split.py `_text`). The
reference is llvmlite's own formatting of fresh objects."""

from __future__ import annotations

import math

import pytest
from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.split import _text
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.vector_constants import int_vector, splat_vector
from zluda_py.ptx import parse

I1, I8, I32, I64 = (ir.IntType(n) for n in (1, 8, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()

SPLATS = [(I1, 1), (I1, -1), (I1, True), (I1, False), (I8, -128), (I32, 0), (I32, -1), (I64, 2**63 - 1),
          (I64, -(2**63)), (F16, 1.5), (F32, 0.1), (F32, -0.0), (F32, 0.0), (F64, -0.0), (F64, math.inf),
          (F64, math.nan), (F64, 1e-310)]


@pytest.mark.parametrize("count", [1, 2, 32, 64])
@pytest.mark.parametrize("element,value", SPLATS)
def test_splat_text_is_llvmlites(element: ir.Type, value: int | float, count: int) -> None:
    ty = ir.VectorType(element, count)
    fresh = ir.Constant(ir.VectorType(element, count), [ir.Constant(element, value)] * count)
    shared = splat_vector(ty, value)
    assert str(shared) == str(fresh)
    assert shared.get_reference() == fresh.get_reference()
    assert splat_vector(ir.VectorType(element, count), value) is shared  # made once


def test_splats_of_equal_numbers_with_other_text_differ() -> None:
    # -0.0 == 0.0 and True == 1 in Python, but LLVM's text (and for floats the value) differ
    assert "0x8000000000000000" in str(splat_vector(ir.VectorType(F64, 4), -0.0))
    assert "0x8000000000000000" not in str(splat_vector(ir.VectorType(F64, 4), 0.0))
    assert "i1 true" in str(splat_vector(ir.VectorType(I1, 4), True))
    assert "i1 1" in str(splat_vector(ir.VectorType(I1, 4), 1))


@pytest.mark.parametrize("values", [list(range(32)), [0] * 32, [k % 2 for k in range(32)],
                                    [31 - k for k in range(32)], [3, -1, 7, 0]])
@pytest.mark.parametrize("element", [I1, I32, I64])
def test_int_vector_text_is_llvmlites(element: ir.Type, values: list[int]) -> None:
    ty = ir.VectorType(element, len(values))
    fresh = ir.Constant(ir.VectorType(element, len(values)), [ir.Constant(element, v) for v in values])
    assert str(int_vector(ty, values)) == str(fresh)
    assert int_vector(ty, iter(values)) is int_vector(ty, values)


@pytest.mark.parametrize("ty", [ir.VectorType(I1, 32), ir.VectorType(I32, 32), ir.VectorType(I64, 8), I32])
def test_builder_not_is_llvmlites(ty: ir.Type) -> None:
    def negated(builder_class: type[ir.IRBuilder]) -> str:
        module = ir.Module()
        fn = ir.Function(module, ir.FunctionType(ty, [ty]), "f")
        b = builder_class(fn.append_basic_block("entry"))
        b.ret(b.not_(fn.args[0], "n"))
        return str(module)

    assert negated(V.Builder) == negated(ir.IRBuilder)


HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
# loads and stores of several widths, shuffles, compares, selects, conversions, branches, a
# barrier (phis and a switch in the runner) and a .func call: most instruction kinds
KERNEL = HEAD + r"""
.func (.reg .f32 r) half(.reg .f32 x)
{
  mul.f32 r, x, 0f3F000000;
  ret;
}

.visible .entry kinds(.param .u64 out, .param .u64 in, .param .u32 n)
{
  .reg .pred %p<3>; .reg .b16 %h<2>; .reg .b32 %r<9>; .reg .f32 %f<4>; .reg .b64 %rd<6>;
  .shared .align 4 .b32 sh[64];
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [in];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd3, %r2, 4;
  add.u64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  ld.global.u16 %h1, [%rd4];
  cvt.u32.u16 %r8, %h1;
  call (%f2), half, (%f1);
  shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
  not.b32 %r4, %r3;
  mov.u32 %r5, sh;
  shl.b32 %r6, %r2, 2;
  add.u32 %r5, %r5, %r6;
  st.shared.u32 [%r5], %r4;
  bar.sync 0;
  ld.shared.u32 %r7, [%r5];
  setp.lt.s32 %p2, %r7, 0;
  selp.b32 %r7, %r7, %r8, %p2;
  cvt.rn.f32.s32 %f3, %r7;
  add.f32 %f3, %f3, %f2;
  add.u64 %rd5, %rd1, %rd3;
  st.global.f32 [%rd5], %f3;
DONE:
  ret;
}
"""


def test_function_text_is_llvmlites() -> None:
    module, _ = CPU._lower(parse(KERNEL))
    bodies = [v for v in module.globals.values() if isinstance(v, ir.Function) and v.blocks]
    assert len(bodies) >= 3  # the warp function, its .func, the block runner
    for v in module.globals.values():
        assert _text(v) == str(v)  # `_text` first: str's caches do not serve it
