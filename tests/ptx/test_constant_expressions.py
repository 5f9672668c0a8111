"""PTX constant expressions (ptx/constexpr.py) against ptxas 13.0, whose front end NVIDIA's
driver shares: which expressions it takes, and the bytes it writes for them as the initial
values of .global variables (read from the cubin's symbol table). Instruction operands use the
same evaluation; the kernels below store theirs, run here and by the reference interpreter."""

from __future__ import annotations

import io
import random
import shutil
import subprocess

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from tests.hardware.record_fuzz import _ptxas
from zluda_py import ptx
from zluda_py.compiler import compile
from zluda_py.compiler.layout import initial_value
from zluda_py import reference

pytestmark = pytest.mark.skipif(not (shutil.which("ptxas") or shutil.which("/usr/local/cuda/bin/ptxas")),
                                reason="needs ptxas, the reference")

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
EMPTY = ".visible .entry k()\n{\nret;\n}\n"

# (type, expression): the rules constexpr.py states, each where ptxas departs from C or the manual
CASES = [
    ("s64", "-5 / 2"), ("s64", "-5 % 3"), ("s64", "5 % -3"), ("s64", "-5 >> 1"), ("u64", "0xFFFFFFFFFFFFFFFF >> 1"),
    ("s64", "1 << 65"), ("s64", "256 >> 65"), ("s64", "-1 >> 64"), ("s64", "1 >> -1"), ("s64", "0x8000000000000000 / -1"),
    ("s64", "(-9223372036854775807-1) % -1"), ("s64", "9223372036854775807 + 1"), ("s64", "-1 < 0"), ("s64", "-1 < 0U"),
    ("s64", "~0 >> 63"), ("s64", "!5"), ("s64", "3 && 0"), ("s64", "0 || 7"), ("s64", "(1 ? -1 : 3U) >> 63"),
    ("s64", "(1 ? 0xFFFFFFFFFFFFFFFF : -1) >> 63"), ("s64", "(0 ? 0xFFFFFFFFFFFFFFFF : -1) >> 63"),
    ("s64", "(.u64)-1 >> 63"), ("s64", "(.s64)0xFFFFFFFFFFFFFFFF >> 63"), ("s64", "(.u64)(.s64)-1 >> 63"),
    ("s64", "7 ^ 2 | 8 & 12"), ("s64", "1 + 2 << 1"), ("s64", "1 < 2 == 1"), ("s64", "5 - 3 - 1"),
    ("s64", "0 ? 1 : 0 ? 2 : 3"), ("s64", "1 ? 0 ? 4 : 5 : 6"), ("s64", "- - 3"), ("s64", "+3"), ("s64", "9223372036854775808 >> 63"),
    ("s64", "077 + 0b101"), ("s64", "5U - 7 > 0"), ("s64", "(0 % 5) - 1 < 0"), ("s64", "1 <<3"), ("s64", "1<=3"),
    ("s64", "2 * WARP_SZ"), ("u32", "0x100000000 + 5"), ("u8", "200 + 100"), ("s8", "-1"), ("u16", "(((((7)))))"),
    ("f64", "1.0/3.0"), ("f32", "1.0/3.0"), ("f64", "0.0 * -1.0"), ("f64", "1e308*10.0"), ("f32", "1e39*1.0"),
    ("f32", "3.4028235677973366e38"), ("f32", "1.0000000596046448"), ("s64", "1.0 > 0.5"), ("s64", "-1.0 < 0.0"),
    ("f64", "(1.0)"), ("f64", "0d3FF0000000000000 * 2.0"), ("f64", "-0d3FF0000000000000"), ("f64", "(0f3F800000) * 2.0"),
    ("f64", "1.0 + (0f3F800000)"), ("f32", "(0f3F800000) + 0.0"), ("f32", "-(0f3F800000)"), ("f32", "((0f3F800000))"),
    ("f64", "0f3F800000"), ("f32", "0d3FF0000000000000"), ("b32", "1.0"), ("b64", "2.5 * 2.0"), ("s64", "1.5 == 1.5"),
    # refused by ptxas
    ("f32", "1.5*2"), ("f64", "1.0 - 1"), ("s64", "1 == 1.0"), ("s64", "1.0 && 1"), ("f64", "1 ? 1.5 : 2.5"),
    ("s64", "5 % 0"), ("s64", "5 / 0"), ("f64", "1.0/0.0"), ("s64", "1 ? 2 : 1/0"), ("s64", "0 && 1/0"), ("s64", "(.u64)1.0"),
    ("s64", "(.u32)1"), ("f32", "1.0 % 2.0"), ("f32", "0f3F800000 + 1.0"), ("f32", "1.0 + 0f3F800000"),
    ("f32", "-0f3F800000 * 1.0"), ("s64", "1 < < 3"), ("s64", "1 > = 3"), ("s64", "(1"), ("s64", "1)"), ("s64", "1 ?"),
    ("s64", "1 ? 2"), ("s64", "*1"), ("f32", "1"), ("u32", "1.5"), ("u32", "0f3F800000"),
    # initializers of .b variables from floating-point constants
    ("b16", "1.0"), ("b8", "2.0"), ("b32", "0d3FF0000000000000"), ("b64", "(0f3F800000)"), ("b32", "1.5e-45"),
    ("s64", "+(0f3F800000) > 0.0"), ("f32", "+(0f3F800000)"),
]


def ptxas_accepts(text: str) -> bytes | None:
    """The cubin ptxas makes of `text`, None if it refuses it."""
    try:
        return _ptxas(text, "sm_80")
    except subprocess.CalledProcessError:
        return None


def symbol_bytes(cubin: bytes, names: list[str]) -> dict[str, bytes]:
    elf = ELFFile(io.BytesIO(cubin))
    out = {}
    for sym in elf.get_section_by_name(".symtab").iter_symbols():
        if sym.name in names:
            data = elf.get_section(sym["st_shndx"]).data()
            out[sym.name] = data[sym["st_value"]:sym["st_value"] + sym["st_size"]]
    return out


def declarations(cases: list[tuple[str, str]]) -> str:
    return "".join(f".global .{t} g{k} = {e};\n" for k, (t, e) in enumerate(cases))


def our_bytes(text: str) -> dict[str, bytes] | None:
    """Each variable's initial bytes as our compiler lays them out, None if we refuse `text`."""
    try:
        module = ptx.parse(text)
    except ptx.PtxError as e:
        assert e.cu_result == 218
        return None
    return {v.name: bytes(initial_value(v, None).constant) for v in module.variables()}


def compare(cases: list[tuple[str, str]]) -> list[str]:
    """The cases where our verdict or bytes differ from ptxas's; accepted ones in one module."""
    wrong, taken = [], []
    for t, e in cases:
        text = HEAD + declarations([(t, e)]) + EMPTY
        if our_bytes(text) is None:
            if ptxas_accepts(text) is not None:
                wrong.append(f".{t} = {e}: ptxas takes it, we refuse it")
        else:
            taken.append((t, e))
    text = HEAD + declarations(taken) + EMPTY
    cubin = ptxas_accepts(text)
    if cubin is None:
        return wrong + [f".{t} = {e}: we take it, ptxas refuses it" for t, e in taken
                        if ptxas_accepts(HEAD + declarations([(t, e)]) + EMPTY) is None]
    names = [f"g{k}" for k in range(len(taken))]
    theirs, ours = symbol_bytes(cubin, names), our_bytes(text)
    return wrong + [f".{t} = {e}: ptxas {theirs[n].hex()}, ours {ours[n].hex()}"
                    for n, (t, e) in zip(names, taken) if theirs[n] != ours[n]]


def test_the_rules_are_ptxas_rules():
    assert compare(CASES) == []


# ---- random expressions: integer and floating-point trees of every operator
_INT_OPS = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "<", ">", "<=", ">=", "==", "!=", "&&", "||"]
_FLOAT_OPS = ["+", "-", "*", "/"]
_INT_LEAVES = ["0", "1", "7", "-1", "3U", "0x7FFFFFFFFFFFFFFF", "0x8000000000000000", "0xFFFFFFFFFFFFFFFF",
               "-9223372036854775807", "12345678901", "0b1011", "017", "63", "64", "WARP_SZ"]
_FLOAT_LEAVES = ["1.0", "0.5", "-2.25", "3.0e10", "1e-300", "1e300", "0d4009000000000000", "(0f3FC00000)", "7.0"]


def _int_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(_INT_LEAVES)
    r = rng.random()
    if r < 0.15:
        return rng.choice(["-", "~", "!", "(.u64)", "(.s64)", "+"]) + "(" + _int_expr(rng, depth - 1) + ")"
    if r < 0.25:
        return f"({_int_expr(rng, depth - 1)} ? {_int_expr(rng, depth - 1)} : {_int_expr(rng, depth - 1)})"
    if r < 0.35:
        return f"({_float_expr(rng, depth - 1)} {rng.choice(['<', '>', '<=', '>=', '==', '!='])} {_float_expr(rng, depth - 1)})"
    op = rng.choice(_INT_OPS)
    right = rng.choice(["3", "7U", "0xFFFFFFFFFFFFFFF1", "13"]) if op in ("/", "%") else _int_expr(rng, depth - 1)
    return f"({_int_expr(rng, depth - 1)} {op} {right})"


def _float_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(_FLOAT_LEAVES)
    if rng.random() < 0.15:
        return "-(" + _float_expr(rng, depth - 1) + ")"
    op = rng.choice(_FLOAT_OPS)
    right = rng.choice(["3.0", "-0.1", "1e-5"]) if op == "/" else _float_expr(rng, depth - 1)
    return f"({_float_expr(rng, depth - 1)} {op} {right})"


def test_random_expressions_match_ptxas_bit_for_bit():
    rng = random.Random(2026_11_27)
    cases = [(rng.choice(["s64", "u64", "u32", "s16", "u8", "b64"]), _int_expr(rng, 4)) for _ in range(300)]
    cases += [(rng.choice(["f64", "f32", "b64"]), _float_expr(rng, 4)) for _ in range(200)]
    assert compare(cases) == []


def test_nesting_is_bounded_as_ptxas_bounds_it_without_recursion():
    """ptxas's parser stack takes 9,978 parentheses around an operand and not 9,979; a million
    are refused at once, not by a RecursionError."""
    def kernel(depth: int) -> str:
        return HEAD + ".visible .entry k()\n{\n.reg .b32 %r;\nmov.u32 %r, " + "(" * depth + "1" + ")" * depth + ";\nret;\n}\n"

    for depth, accepted in ((9978, True), (9979, False)):
        assert (ptxas_accepts(kernel(depth)) is not None) == accepted
        assert (our_bytes(kernel(depth)) is not None) == accepted
    with pytest.raises(ptx.PtxError, match="nested too deeply"):
        ptx.parse(kernel(1_000_000))


OPERANDS = HEAD + """
.global .f64 gi = 0f3F800000;
.global .b32 gb[2] = {1.5, (.s64)-3 >> 1};
.visible .entry k(.param .u64 out)
{
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
.reg .f32 %f<4>;
.reg .f64 %fd<4>;
.reg .pred %p<2>;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd1, %rd1;
mov.u32 %r1, (1 + 2) * 3 - ~0;
add.u32 %r2, %r1, -5 / 2 << 4;
st.global.u32 [%rd1], %r1;
st.global.u32 [%rd1+4*1], %r2;
mov.u64 %rd2, (.u64)-1 >> 60 | 0x8000000000000000;
st.global.u64 [%rd1+(2*4)], %rd2;
mov.f32 %f1, 1.0 / 3.0;
st.global.f32 [%rd1+16], %f1;
mov.f64 %fd1, -(0d3FF0000000000000 * 2.5) / 7.0;
st.global.f64 [%rd1+24-0], %fd1;
setp.lt.s32 %p1, %r1, WARP_SZ * 2 ? 100 : 0;
selp.u32 %r3, 1, 0, %p1;
st.global.u32 [%rd1+32], %r3;
ld.global.f64 %fd2, [gi];
st.global.f64 [%rd1+40], %fd2;
ld.global.u32 %r4, [gb+4];
ld.global.u32 %r5, [gb];
st.global.u32 [%rd1+48], %r5;
st.global.u32 [%rd1+52], %r4;
ret;
}
"""
# the same expressions as ptxas lays them out in initializers (an operand takes the value
# converted to its type, as an initializer does)
OPERAND_VALUES = [("u32", "(1 + 2) * 3 - ~0"), ("u32", "(1 + 2) * 3 - ~0 + (-5 / 2 << 4)"),
                  ("u64", "(.u64)-1 >> 60 | 0x8000000000000000"), ("f32", "1.0 / 3.0"),
                  ("f64", "-(0d3FF0000000000000 * 2.5) / 7.0"), ("u32", "(1 + 2) * 3 - ~0 < (WARP_SZ * 2 ? 100 : 0)")]


def test_operands_hold_the_values_ptxas_gives_the_same_expressions():
    cubin = ptxas_accepts(HEAD + declarations(OPERAND_VALUES) + EMPTY)
    assert ptxas_accepts(OPERANDS) is not None
    theirs = symbol_bytes(cubin, [f"g{k}" for k in range(len(OPERAND_VALUES))])
    inits = symbol_bytes(ptxas_accepts(OPERANDS), ["gi", "gb"])
    want = (b"".join(theirs[f"g{k}"] for k in range(4)) + bytes(4) + theirs["g4"] + theirs["g5"] + bytes(4)
            + inits["gi"] + inits["gb"])
    for run in (lambda out: compile(OPERANDS).launch("k", (1,), (1,), [out]),
                lambda out: reference.run(OPERANDS, "k", (1,), (1,), [out])):
        out = np.zeros(56, np.uint8)
        run(out)
        assert out.tobytes() == want
