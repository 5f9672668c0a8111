"""The .approx functions on AMDGPU, which has no f64 transcendentals (LLVM aborts in instruction
selection: "no libcall available for fexp2"). The shared semantics ask `Lanes.math` for an f64
function of a value that is exactly an f32 (or narrower); here it is computed with the f32
hardware functions LLVM selects (v_exp_f32, v_log_f32, v_sin_f32/v_cos_f32 after range
reduction), which are within about an f32 ulp, inside PTX's bounds for the .approx forms
(ex2/lg2 2 ulp, sin/cos absolute 2^-20.5 on [-pi, pi], tanh relative 2^-11). tanh has no
hardware function and is composed from exp2.
"""

from __future__ import annotations

import math

from llvmlite import ir

from zluda_py.compiler.lanes import Lanes

F32 = ir.FloatType()
TANH_SERIES_BELOW = 0.0625  # under this |x| the series' first three terms are exact to 2^-36


class AmdgpuLanes(Lanes):
    def math(self, name: str, x: ir.Value) -> ir.Value:
        b = self.b
        x32 = b.fptrunc(x, self.retype(x, F32))  # exact: the value came from an f32 or narrower
        y = self._tanh(x32) if name == "tanh" else self.intrinsic(name, x32.type, [x32])
        return b.fpext(y, x.type)

    def _tanh(self, x: ir.Value) -> ir.Value:
        """tanh(|x|) = 1 - 2 / (2^(2|x| log2 e) + 1), with the sign of x; below 1/16 the series
        x - x^3/3 + 2x^5/15 avoids the subtraction's cancellation. Both are within 2^-16
        relative; infinities give +-1 and NaN stays NaN."""
        b = self.b
        ax = self.intrinsic("fabs", x.type, [x])
        e = self.intrinsic("exp2", x.type, [b.fmul(ax, self.like(x, 2 * math.log2(math.e)))])
        far = b.fsub(self.like(x, 1.0), b.fdiv(self.like(x, 2.0), b.fadd(e, self.like(x, 1.0))))
        x2 = b.fmul(x, x)
        poly = b.fadd(self.like(x, -1 / 3), b.fmul(x2, self.like(x, 2 / 15)))
        near = b.fmul(x, b.fadd(self.like(x, 1.0), b.fmul(x2, poly)))  # x * (...): keeps -0
        signed_far = self.intrinsic("copysign", x.type, [far, x])
        small = b.fcmp_unordered("<", ax, self.like(x, TANH_SERIES_BELOW))  # NaN takes the series: NaN
        return self.select(small, near, signed_far)
