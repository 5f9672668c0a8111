"""NaN results left as computed where no use reads their bits (semantics/nan_payload.py).

Each kernel feeds non-canonical NaNs (signalling, negative, with low payload bits) through a chain
of instructions; the CPU target's output bits must equal the reference interpreter's, and the
hand-computed canonical patterns where a use observes them. The IR checks show that the
canonicalising select is gone where nothing reads a NaN's bits and still there where something does.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py import reference
from zluda_py.compiler import cfg, compile
from zluda_py.compiler.pipeline import lower
from zluda_py.compiler.semantics import SEMANTICS, nan_payload
from zluda_py.ptx import ast, parse

HEAD = ".version 8.0\n.target sm_86\n.address_size 64\n"
NAN = 0x7FFFFFFF  # the canonical f32 NaN


def kernel(name: str, body: str, out: str = "u32", extra: str = "") -> str:
    """A kernel reading f32 bits a, b, c, d at %tid.x (%f1..%f4) and storing `out` at its index."""
    width = 8 if out.endswith("64") else 4
    return HEAD + extra + f"""
.visible .entry {name}(.param .u64 pa, .param .u64 pout)
{{
  .reg .pred %p<4>;
  .reg .f32 %f<16>;
  .reg .b32 %r<16>;
  .reg .f64 %fd<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.u64 %rd3, %rd1, %rd3;
  ld.global.v4.f32 {{%f1, %f2, %f3, %f4}}, [%rd3];
  mul.wide.u32 %rd4, %r1, {width};
  add.u64 %rd4, %rd2, %rd4;
{body}
  ret;
}}
"""


KERNELS = {
    # add -> add -> st: the first add is free, the stored one canonical
    "add_add": kernel("add_add", "add.f32 %f5, %f1, %f2;\n add.f32 %f6, %f5, %f3;\n st.global.f32 [%rd4], %f6;"),
    # add -> shfl -> add -> st, as in a warp reduction
    "add_shfl": kernel("add_shfl", """
  add.f32 %f5, %f1, %f2;
  mov.b32 %r2, %f5;
  shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
  mov.b32 %f6, %r3;
  add.f32 %f7, %f5, %f6;
  st.global.f32 [%rd4], %f7;"""),
    # add -> mov.b32 -> st.u32: the bits are stored
    "add_mov": kernel("add_mov", "add.f32 %f5, %f1, %f2;\n mov.b32 %r2, %f5;\n st.global.u32 [%rd4], %r2;"),
    # add -> mov.b32 -> and.b32: an integer operation reads the bits
    "add_bits": kernel("add_bits", "add.f32 %f5, %f1, %f2;\n mov.b32 %r2, %f5;\n and.b32 %r3, %r2, 0xffff;\n"
                                   " st.global.u32 [%rd4], %r3;"),
    # add -> mov.b32 -> a shuffle's lane operand: the bits pick the source lane
    "add_lane": kernel("add_lane", "add.f32 %f5, %f1, %f2;\n mov.b32 %r2, %f5;\n"
                                   " shfl.sync.idx.b32 %r3, %r1, %r2, 31, -1;\n st.global.u32 [%rd4], %r3;"),
    # add -> cvt.f64.f32: the conversion keeps the payload
    "add_cvt": kernel("add_cvt", "add.f32 %f5, %f1, %f2;\n cvt.f64.f32 %fd1, %f5;\n st.global.f64 [%rd4], %fd1;",
                      out="u64"),
    # fma -> min -> st: one NaN operand gives the other, two the canonical NaN
    "fma_min": kernel("fma_min", "fma.rn.f32 %f5, %f1, %f2, %f3;\n min.f32 %f6, %f5, %f4;\n"
                                 " st.global.f32 [%rd4], %f6;"),
    # mul -> max.xorsign.abs: the NaN's sign goes into the result
    "mul_xorsign": kernel("mul_xorsign", "mul.f32 %f5, %f1, %f2;\n max.xorsign.abs.f32 %f6, %f5, %f4;\n"
                                         " st.global.f32 [%rd4], %f6;"),
    # sub -> setp -> selp of integers
    "sub_setp": kernel("sub_setp", "sub.f32 %f5, %f1, %f2;\n setp.equ.f32 %p1, %f5, %f3;\n"
                                   " selp.u32 %r2, 1, 0, %p1;\n st.global.u32 [%rd4], %r2;"),
    # add -> abs/neg -> add -> st; abs -> mov.b32 -> st
    "add_abs": kernel("add_abs", "add.f32 %f5, %f1, %f2;\n abs.f32 %f6, %f5;\n neg.f32 %f7, %f6;\n"
                                 " add.f32 %f8, %f7, %f3;\n st.global.f32 [%rd4], %f8;"),
    # add -> copysign: b's magnitude (a NaN's payload) is kept
    "add_copysign": kernel("add_copysign", "add.f32 %f5, %f1, %f2;\n copysign.f32 %f6, %f3, %f5;\n"
                                           " st.global.f32 [%rd4], %f6;"),
    # f64: add -> add -> st is free; add -> abs.f64 keeps the operand's payload (quieted)
    "add_f64": kernel("add_f64", "cvt.f64.f32 %fd1, %f1;\n add.f64 %fd2, %fd1, %fd1;\n"
                                 " add.f64 %fd3, %fd2, 0d3FF0000000000000;\n st.global.f64 [%rd4], %fd3;", out="u64"),
    "abs_f64": kernel("abs_f64", "cvt.f64.f32 %fd1, %f1;\n add.f64 %fd2, %fd1, %fd1;\n abs.f64 %fd3, %fd2;\n"
                                 " st.global.f64 [%rd4], %fd3;", out="u64"),
    # a register with two definitions, one of them stored through selp
    "two_defs": kernel("two_defs", """
  add.f32 %f5, %f1, %f2;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra SKIP;
  mul.f32 %f5, %f5, %f3;
SKIP:
  add.f32 %f6, %f5, %f4;
  selp.f32 %f7, %f5, %f6, %p1;
  st.global.f32 [%rd4], %f7;"""),
    # a loop-carried sum: the last definition is stored
    "loop": kernel("loop", """
  mov.f32 %f5, %f1;
  mov.u32 %r2, 0;
LOOP:
  add.f32 %f5, %f5, %f2;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, 3;
  @%p1 bra LOOP;
  st.global.f32 [%rd4], %f5;"""),
    # a .func's register result is read by its caller
    "func_result": kernel("func_result", """
  call.uni (%f5), twice, (%f1);
  st.global.f32 [%rd4], %f5;""", extra="""
.func (.reg .f32 %x) twice(.reg .f32 %y)
{
  add.f32 %x, %y, %y;
  ret;
}
"""),
}

# Inputs: signalling, negative and low-payload NaNs, infinities and ordinary values, 64 threads.
SPECIAL = [0x7FA00000, 0xFFC00001, 0x7F800001, 0xFFFFFFFF, 0x7F800000, 0xFF800000, 0x3F800000, 0xC0000000,
           0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF]


def inputs() -> np.ndarray:
    rng = np.random.default_rng(18)
    return rng.choice(np.array(SPECIAL, np.uint32), size=(64, 4))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_bits_match_the_reference(name: str) -> None:
    text = KERNELS[name]
    a = inputs()
    dtype = np.uint64 if "st.global.f64" in text else np.uint32
    ref, cpu = np.zeros(64, dtype), np.zeros(64, dtype)
    reference.run(text, name, (1,), (64,), [a.copy(), ref])
    compile(text).launch(name, (1,), (64,), [a.copy(), cpu])
    np.testing.assert_array_equal(cpu, ref)


def run(name: str, a: np.ndarray) -> np.ndarray:
    out = np.zeros(64, np.uint64 if "st.global.f64" in KERNELS[name] else np.uint32)
    compile(KERNELS[name]).launch(name, (1,), (64,), [a, out])
    return out


def nan_in(a: int, b: int) -> np.ndarray:
    """Inputs where every thread adds the NaN bits a to b (c = 1.0, d = 2.0)."""
    return np.tile(np.array([a, b, 0x3F800000, 0x40000000], np.uint32), (64, 1))


@pytest.mark.parametrize("nan", [0x7FA00000, 0xFFC00001, 0x7F800001])
def test_observed_nans_are_canonical(nan: int) -> None:
    """Hand-computed: the canonical NaN, as f64 0x7fffffffe0000000, its low half 0xffff."""
    a = nan_in(nan, 0x3F800000)
    assert (run("add_add", a) == NAN).all()
    assert (run("add_shfl", a) == NAN).all()
    assert (run("add_mov", a) == NAN).all()
    assert (run("add_bits", a) == 0xFFFF).all()
    assert (run("add_lane", a) == np.repeat([31, 63], 32)).all()  # lane 0x7fffffff & 31 of each warp
    assert (run("add_cvt", a) == 0x7FFFFFFFE0000000).all()
    assert (run("fma_min", a) == 0x40000000).all()  # min(NaN, 2.0) = 2.0
    assert (run("mul_xorsign", a) == 0x40000000).all()  # |2.0| with the canonical NaN's sign (+)
    assert (run("sub_setp", a) == 1).all()
    assert (run("add_abs", a) == NAN).all()
    assert (run("add_copysign", a) == NAN).all()
    assert (run("func_result", a) == NAN).all()
    assert (run("add_f64", a) == 0x7FFFFFFFFFFFFFFF).all()
    assert (run("abs_f64", a) == 0x7FFFFFFFFFFFFFFF).all()  # abs of the canonical f64 NaN


def canonical_selects(text: str) -> int:
    """The selects `floating.canonical_nan` emits for f32: the canonical NaN where the value is
    unordered with itself."""
    is_nan = set(re.findall(r'(%"?[\w.]+"?) = fcmp uno (?:<32 x float>|float) ', text))
    picks = re.findall(r'= select\s+(?:<32 x i1>|i1) (%"?[\w.]+"?), (?:<32 x i32> <)?i32 2147483647', text)
    return sum(name in is_nan for name in picks)


def chain(store_each: bool) -> str:
    """Five dependent add.f32 through shuffles, as in a warp reduction; the last stored, or every one."""
    steps = []
    for i in range(5):
        src = f"%f{5 + i}" if i else "%f1"
        steps.append(f"mov.b32 %r{2 + i}, {src};\n shfl.sync.down.b32 %r{8 + i}, %r{2 + i}, {16 >> i}, 31, -1;\n"
                     f" mov.b32 %f{11 + i}, %r{8 + i};\n add.f32 %f{6 + i}, {src}, %f{11 + i};")
        if store_each and i < 4:
            steps.append(f"st.global.f32 [%rd4+{4 * i}], %f{6 + i};")
    return kernel("chain", "\n".join(steps) + "\n st.global.f32 [%rd4], %f10;")


ARITH_TYPES = (("f32",), ("f64",))


def free_arith(text: str) -> list[list[bool]]:
    """Per function of `text`, whether each f32/f64 add/sub/mul/fma may leave its NaN as computed."""
    out = []
    for fn in parse(text).items:
        if isinstance(fn, ast.Function) and fn.body:
            insts = [i for blk in cfg.build(fn.body, keep=lambda op: op in SEMANTICS).blocks for i in blk.insts]
            found = nan_payload.free_results(insts, [v.name for v in (*fn.params, *fn.returns)])
            arith = [i for i in insts if i.opcode in ("add", "sub", "mul", "fma") and i.types[-1:] in ARITH_TYPES]
            out.append([id(i) in found for i in arith])
    return out


def test_selects_gone_where_no_use_reads_the_bits() -> None:
    assert free_arith(chain(store_each=False)) == [[True, True, True, True, False]]
    assert free_arith(KERNELS["fma_min"]) == [[True]]
    assert free_arith(KERNELS["add_abs"]) == [[True, False]]
    assert free_arith(KERNELS["add_f64"]) == [[True, False]]
    lean, full = canonical_selects(lower(parse(chain(False)))[0]), canonical_selects(lower(parse(chain(True)))[0])
    assert lean > 0 and full == 5 * lean


@pytest.mark.parametrize("name", ["add_mov", "add_bits", "add_lane", "add_cvt", "mul_xorsign", "add_copysign", "abs_f64",
                                  "two_defs", "loop", "func_result"])
def test_selects_stay_where_a_use_reads_the_bits(name: str) -> None:
    assert not any(any(free) for free in free_arith(KERNELS[name]))
