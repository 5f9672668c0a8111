"""Rounding an f64 value to nearest even into f32, f16 or bf16 (`rounding.narrow` with rn, which
cvt.rn from f64, every f16/bf16 arithmetic result and the widening cvt.f32.f16 go through) emits
an IEEE conversion (f32) or a short pattern rounding (`rounding._nearest`), not `round_pack`'s
generic integer rounding: the lowered kernels hold no vector ctlz. The values: every rounding
boundary of f16 (each value, each midpoint to its neighbour and one f64 ulp either side), the
overflow threshold, subnormals, infinities and NaNs, against numpy's conversions and the
conformance model (`f2f_ref`) for bf16 and NaN payloads."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.models.convert import f2f_ref
from conformance.refs import BF16, F16, F64
from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"


def _kernel(name: str, in_bits: int, out_bits: int, body: str, nsrc: int = 1) -> str:
    """dst[i] = body(src0[i], src1[i]) over n elements; %a, %b the sources, %d the result."""
    params = ", ".join(f".param .u64 s{k}" for k in range(nsrc))
    loads = "\n".join(f"ld.param.u64 %rd{k + 3}, [s{k}]; add.s64 %rd{k + 3}, %rd{k + 3}, %rd{k + 6};"
                      f" ld.global.b{in_bits} %{'ab'[k]}, [%rd{k + 3}];" for k in range(nsrc))
    return HEAD + f"""
.visible .entry {name}({params}, .param .u64 d, .param .u32 n)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<10>;
    .reg .b{in_bits} %a, %b;
    .reg .b{out_bits} %d;
    .reg .f32 %f<2>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r1, %r1, %r2, %r3;
    ld.param.u32 %r2, [n];
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    mul.wide.u32 %rd6, %r1, {in_bits // 8};
    mul.wide.u32 %rd7, %r1, {out_bits // 8};
    {loads}
    {body}
    ld.param.u64 %rd2, [d];
    add.s64 %rd2, %rd2, %rd7;
    st.global.b{out_bits} [%rd2], %d;
DONE:
    ret;
}}
"""


CASES = {
    "cvt_f16_f64": (64, 16, "cvt.rn.f16.f64 %d, %a;", 1),
    "cvt_bf16_f64": (64, 16, "cvt.rn.bf16.f64 %d, %a;", 1),
    "cvt_f32_f64": (64, 32, "cvt.rn.f32.f64 %d, %a;", 1),
    "cvt_f32_f16": (16, 32, "cvt.f32.f16 %f1, %a; mov.b32 %d, %f1;", 1),
    "add_f16": (16, 16, "add.f16 %d, %a, %b;", 2),
    "mul_f16": (16, 16, "mul.f16 %d, %a, %b;", 2),
}


@pytest.fixture(scope="module")
def mods():
    return {name: compile(_kernel(name, *spec)) for name, spec in CASES.items()}


def _run(mods, name: str, srcs: list[np.ndarray], out_dtype) -> np.ndarray:
    n = len(srcs[0])
    out = np.zeros(n, out_dtype)
    mods[name].launch(name, ((n + 127) // 128,), (128,), [*srcs, out, np.uint32(n)])
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_rounding_to_nearest_has_no_generic_rounding(name):
    """round_pack counts leading zeros of the 64-bit significand; the rn paths do not."""
    ir = CPU.lower_part(parse(_kernel(name, *CASES[name])), name).text
    assert "llvm.ctlz.v" not in ir
    if name.startswith("cvt_f32"):
        assert "fptrunc" in ir


def _f16_boundaries() -> np.ndarray:
    """Every finite f16 magnitude, the midpoints to the next one and one f64 ulp either side,
    both signs; then overflow, f64 subnormals, infinities."""
    h = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = np.arange(1, 0x7C01, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (h + nxt) / 2  # exact: both have at most 11 significant bits
    vals = np.concatenate([h, mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf)])
    extra = [65504.0, 65519.99999999999, 65520.0, 65536.0, 1e300, 5e-324, 2.0 ** -1022, 2.0 ** -25,
             np.nextafter(2.0 ** -25, 0), np.nextafter(2.0 ** -25, 1), np.inf, 2.0 ** -14, 3.0 * 2.0 ** -26]
    vals = np.concatenate([vals, extra])
    return np.concatenate([vals, -vals])


def test_f64_to_f16_and_f32_match_numpy(mods):
    x = _f16_boundaries()
    got16 = _run(mods, "cvt_f16_f64", [x], np.uint16)
    with np.errstate(over="ignore"):
        assert np.array_equal(got16, x.astype(np.float16).view(np.uint16))
    # f32's own boundaries: f32 values and midpoints scaled over the whole range
    f = np.random.default_rng(7).integers(0, 0x7F800000, 20000, dtype=np.uint32).view(np.float32).astype(np.float64)
    y = np.concatenate([x, f, f * (1 + 2.0 ** -24), np.nextafter(f * (1 + 2.0 ** -24), 0),
                        np.array([3.4028235677973366e38, 3.4028235677973362e38, 2.0 ** -150, 2.0 ** -149 * 1.5])])
    got32 = _run(mods, "cvt_f32_f64", [y], np.uint32)
    with np.errstate(over="ignore"):
        assert np.array_equal(got32, y.astype(np.float32).view(np.uint32))


def test_f64_to_bf16_and_nans_match_the_model(mods):
    x = _f16_boundaries()
    with np.errstate(over="ignore"):  # bf16's top (past f64's range is infinity), bottom, subnormals
        scaled = np.concatenate([x * 2.0 ** 112, x * 2.0 ** -119, x * 2.0 ** -133])
    nans = np.array([0x7FF8000000000000, 0xFFF0000000000001, 0x7FF4000000000000, 0x7FFFFFFFFFFFFFFF],
                    np.uint64).view(np.float64)
    y = np.concatenate([x, scaled, nans])
    bits = y.view(np.uint64).tolist()
    got = _run(mods, "cvt_bf16_f64", [y], np.uint16)
    assert got.tolist() == [f2f_ref(v, F64, BF16, "rn") for v in bits]
    got16 = _run(mods, "cvt_f16_f64", [nans], np.uint16)
    assert got16.tolist() == [f2f_ref(v, F64, F16, "rn") for v in nans.view(np.uint64).tolist()]


def test_f16_widening_and_arithmetic_match_numpy(mods):
    a = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    finite = (a & 0x7C00) != 0x7C00
    got = _run(mods, "cvt_f32_f16", [a], np.uint32)
    assert np.array_equal(got[finite], a[finite].view(np.float16).astype(np.float32).view(np.uint32))
    assert np.all(got[~finite & ((a & 0x3FF) != 0)] == 0x7FFFFFFF)  # NaN: the canonical f32 NaN
    # pairs over every f16 pattern: sums and products around subnormals, cancellation, overflow
    rng = np.random.default_rng(11)
    x = rng.integers(0, 65536, 60000).astype(np.uint16)
    y = np.concatenate([rng.integers(0, 65536, 40000), x[40000:] ^ 0x8000]).astype(np.uint16)
    ok = ((x & 0x7C00) != 0x7C00) & ((y & 0x7C00) != 0x7C00)
    x, y = x[ok], y[ok]
    with np.errstate(over="ignore"):
        # numpy rounds in f32 first; 24 >= 2*11 + 2 bits make that second rounding exact
        want_add = (x.view(np.float16) + y.view(np.float16)).view(np.uint16)
        want_mul = (x.view(np.float16) * y.view(np.float16)).view(np.uint16)
    assert np.array_equal(_run(mods, "add_f16", [x, y], np.uint16), want_add)
    assert np.array_equal(_run(mods, "mul_f16", [x, y], np.uint16), want_mul)
