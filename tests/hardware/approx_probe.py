"""Measure the error of the `.approx` f32 functions on a CUDA GPU over whole input ranges.

PTX documents a bound for each (lg2: 2^-22.6 absolute on [0.5, 2], ...), and the conformance
suite's references (tests/conformance/models/floating.py) accept what that bound allows. A
random sample can miss the worst input, so this walks every bit pattern of a range (or every
STEP-th one), computes the exact value in float64 on the host, and prints per range the largest
absolute error, relative error and error in ulps, each with its input and the GPU's output bits:

    python3 -m tests.hardware.approx_probe > approx_bounds.txt     (on an NVIDIA machine)

The output becomes tests/hardware/golden/approx_bounds.txt; tests/conformance/test_approx_golden.py
checks that the references accept every worst case recorded there.
"""

from __future__ import annotations

import ctypes
import math
import sys

import numpy as np

from tests.hardware.cudadrv import driver

# (instruction, first bits, end bits (exclusive), step): f32 bit patterns, walked as unsigned
RANGES = [
    ("lg2.approx.f32", 0x3F000000, 0x40000000, 1),      # [0.5, 2): every input
    ("lg2.approx.f32", 0x00800000, 0x7F800000, 61),     # every positive normal, sampled
    ("ex2.approx.f32", 0x00000000, 0x43000000, 7),      # [0, 128)
    ("ex2.approx.f32", 0x80000000, 0xC2FC0000, 7),      # (-126, 0]
    ("rsqrt.approx.f32", 0x3F800000, 0x40800000, 1),    # [1, 4): every input (the rest scales)
    ("rcp.approx.f32", 0x3F800000, 0x40000000, 1),      # [1, 2): every input
    ("sqrt.approx.f32", 0x3F800000, 0x40800000, 1),     # [1, 4): every input
    ("sin.approx.f32", 0x00000000, 0x40490FDC, 61),     # [0, pi]
    ("sin.approx.f32", 0x80000000, 0xC0490FDC, 61),     # [-pi, 0]
    ("cos.approx.f32", 0x00000000, 0x40490FDC, 61),
    ("cos.approx.f32", 0x80000000, 0xC0490FDC, 61),
    ("tanh.approx.f32", 0x00000000, 0x7F800000, 127),   # every positive finite value, sampled
]
EXACT = {"lg2": np.log2, "ex2": np.exp2, "rsqrt": lambda x: 1.0 / np.sqrt(x), "rcp": lambda x: 1.0 / x,
         "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}
CHUNK = 1 << 24

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 base, .param .u32 step, .param .u32 n)
{
  .reg .b32 %i, %t, %x, %d, %n, %s;
  .reg .b64 %p, %o;
  .reg .pred %q;
  mov.u32 %i, %ctaid.x;
  mov.u32 %t, %ntid.x;
  mov.u32 %x, %tid.x;
  mad.lo.u32 %i, %i, %t, %x;
  ld.param.u32 %n, [n];
  setp.ge.u32 %q, %i, %n;
  @%q bra DONE;
  ld.param.u32 %s, [step];
  ld.param.u32 %x, [base];
  mad.lo.u32 %x, %i, %s, %x;
  INSN %d, %x;
  ld.param.u64 %p, [out];
  mul.wide.u32 %o, %i, 4;
  add.u64 %p, %p, %o;
  st.global.u32 [%p], %d;
DONE:
  ret;
}
"""


def ulp(v: np.ndarray) -> np.ndarray:
    """The f32 ulp at each exact value (subnormal spacing below the smallest normal)."""
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0 ** -126)))
    return 2.0 ** (e - 23)


def measure(insn: str, first: int, end: int, step: int) -> str:
    d = driver()
    mod = d.load(PTX.replace("INSN", insn))
    total = (end - first + step - 1) // step
    worst = {"abs": (-1.0, 0, 0), "rel": (-1.0, 0, 0), "ulp": (-1.0, 0, 0)}
    out = np.zeros(CHUNK, np.uint32)
    ptr = d.alloc(out.nbytes)
    try:
        for start in range(0, total, CHUNK):
            n = min(CHUNK, total - start)
            base = first + start * step
            params = [ctypes.c_uint64(ptr), ctypes.c_uint32(base), ctypes.c_uint32(step), ctypes.c_uint32(n)]
            d.check("launch", mod.launch_status("k", ((n + 255) // 256, 1, 1), (256, 1, 1), params))
            d.to_host(out, ptr)
            xbits = (np.arange(n, dtype=np.uint64) * step + base).astype(np.uint32)
            x = xbits.view(np.float32).astype(np.float64)
            got = out[:n].view(np.float32).astype(np.float64)
            with np.errstate(all="ignore"):
                exact = EXACT[insn.split(".")[0]](x)
                ok = np.isfinite(exact) & np.isfinite(got)
                err = np.where(ok, np.abs(got - exact), 0.0)
                kinds = {"abs": err, "rel": np.where(ok & (exact != 0), err / np.abs(exact), 0.0),
                         "ulp": np.where(ok, err / ulp(exact), 0.0)}
            for kind, e in kinds.items():
                i = int(np.argmax(e))
                if e[i] > worst[kind][0]:
                    worst[kind] = (float(e[i]), int(xbits[i]), int(out[i]))
    finally:
        d.free(ptr)
    cells = []
    for kind in ("abs", "rel", "ulp"):
        e, xb, gb = worst[kind]
        size = f"{e:.4g}" if kind == "ulp" else (f"2^{math.log2(e):.3f}" if e > 0 else "0")
        cells.append(f"{kind} {size} at {xb:#010x} -> {gb:#010x}")
    return f"{insn} {first:#010x}-{end:#010x} step {step} ({total} inputs): " + "; ".join(cells)


def main() -> None:
    for r in RANGES:
        print(measure(*r), flush=True)


if __name__ == "__main__":
    sys.exit(main())
