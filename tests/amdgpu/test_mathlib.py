"""The AMDGPU target's f32 replacements for the f64 math the .approx semantics use
(zluda_py/compiler/amdgpu/mathlib.py). The formulas (tanh composed from exp2 and a series, the
f32 round trip) are checked here on the host CPU, where LLVM calls libm's f32 functions in place
of AMDGPU's hardware ones, against Python's math over a sweep of f32 inputs; the bounds are
PTX's documented ones."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler.amdgpu.mathlib import AmdgpuLanes
from zluda_py.compiler.cpu.runtime import target_machine

F64 = ir.DoubleType()


@pytest.fixture(scope="module")
def functions():
    """name -> a host function double(double) built with AmdgpuLanes.math."""
    module = ir.Module("mathlib")
    module.triple = llvm.get_process_triple()
    names = ("exp2", "log2", "sin", "cos", "tanh")
    for name in names:
        fn = ir.Function(module, ir.FunctionType(F64, [F64]), f"m_{name}")
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(AmdgpuLanes(b, 1).math(name, fn.args[0]))
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), target_machine())
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    yield {name: proto(engine.get_function_address(f"m_{name}")) for name in names}
    del engine


def _inputs(lo: float, hi: float, n: int = 20000) -> list[float]:
    """f32 values spread over [lo, hi], plus both signs of tiny and subnormal magnitudes."""
    xs = np.linspace(lo, hi, n, dtype=np.float32).tolist()
    return xs + [s * v for s in (1.0, -1.0) for v in (0.0, 1e-40, 2.0 ** -126, 1e-10, 1e-4, 0.0624, 0.0626)]


def test_tanh_is_within_ptx_relative_bound(functions):
    worst = 0.0
    for x in _inputs(-12.0, 12.0):
        want = math.tanh(x)
        got = functions["tanh"](x)
        assert math.copysign(1.0, got) == math.copysign(1.0, want), x
        if want != 0.0:
            worst = max(worst, abs(got - want) / abs(want))
    assert worst <= 2.0 ** -16, worst  # PTX: 2^-11 for tanh.approx.f32
    assert functions["tanh"](math.inf) == 1.0 and functions["tanh"](-math.inf) == -1.0
    assert math.isnan(functions["tanh"](math.nan))


@pytest.mark.parametrize("name, lo, hi, bound", [
    ("exp2", -120.0, 120.0, 2.0 ** -22),  # relative: 2 f32 ulp
    ("log2", 1e-30, 1e30, 2.0 ** -22),
])
def test_exp2_and_log2_relative(functions, name, lo, hi, bound):
    ref = {"exp2": lambda x: 2.0 ** x, "log2": math.log2}[name]
    for x in _inputs(lo, hi):
        if name == "log2" and x <= 0:
            continue
        want, got = ref(x), functions[name](x)
        assert abs(got - want) <= bound * abs(want) + 2.0 ** -149, (x, got, want)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_absolute_on_minus_pi_to_pi(functions, name):
    ref = getattr(math, name)
    for x in _inputs(-math.pi, math.pi):
        assert abs(functions[name](x) - ref(x)) <= 2.0 ** -20.5, x  # PTX's bound for sin/cos.approx.f32
