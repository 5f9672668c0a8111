"""mma.sync throughput on the CPU target: one warp runs N back-to-back mma (each accumulating
into the last one's D) for a few forms; prints compile time, time per mma and GFLOP/s
(2*M*N*K per mma). ZLUDA_CPU_THREADS=1 keeps it to one worker.

    python bench/cpu_mma.py [n]
"""

from __future__ import annotations

import re
import sys
import time

import numpy as np

from zluda_py.compiler import compile as compile_ptx

# form, A/B/C registers, register width
FORMS = [("m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4), 32), ("m16n8k8.row.col.f32.tf32.tf32.f32", (4, 2, 4), 32),
         ("m16n8k16.row.col.f32.bf16.bf16.f32", (4, 2, 4), 32), ("m16n8k32.row.col.s32.s8.s8.s32", (4, 2, 4), 32),
         ("m8n8k4.row.col.f64.f64.f64.f64", (1, 1, 2), 64), ("m16n8k16.row.col.f64.f64.f64.f64", (8, 4, 4), 64)]


def kernel(form: str, counts: tuple[int, int, int], width: int) -> str:
    na, nb, nc = counts
    vec = lambda p, n: "{" + ", ".join(f"%{p}{i}" for i in range(n)) + "}"  # noqa: E731
    init = [f"cvt.u{width}.u32 %a{i}, %t;" if width == 64 else f"add.u32 %a{i}, %t, {i};" for i in range(na)]
    init += [f"cvt.u{width}.u32 %b{i}, %t;" if width == 64 else f"add.u32 %b{i}, %t, {7 * i};" for i in range(nb)]
    init += [f"mov.b{width} %c{i}, 0;" for i in range(nc)]
    body = [f".reg .b{width} %a<{na}>, %b<{nb}>, %c<{nc}>;", ".reg .b32 %i, %n, %t;", ".reg .b64 %p, %q;",
            ".reg .pred %pr;", "mov.u32 %t, %tid.x;", *init, "ld.param.u32 %n, [n];", "mov.u32 %i, 0;", "L:",
            f"mma.sync.aligned.{form} {vec('c', nc)}, {vec('a', na)}, {vec('b', nb)}, {vec('c', nc)};",
            "add.u32 %i, %i, 1;", "setp.lt.u32 %pr, %i, %n;", "@%pr bra L;", "ld.param.u64 %p, [out];",
            "cvta.to.global.u64 %p, %p;", f"mul.wide.u32 %q, %t, {width // 8};", "add.u64 %p, %p, %q;",
            f"st.global.b{width} [%p], %c0;"]
    return (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 out, .param .u32 n)\n{\n  "
            + "\n  ".join(body) + "\n  ret;\n}\n")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    out = np.zeros(32, np.uint64)
    for form, counts, width in FORMS:
        start = time.process_time()
        module = compile_ptx(kernel(form, counts, width))
        compiled = time.process_time() - start
        module.launch("k", (1,), (32,), [out, np.uint32(1)])
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            module.launch("k", (1,), (32,), [out, np.uint32(n)])
            best = min(best, time.perf_counter() - start)
        m, nn, k = (int(x) for x in re.findall(r"\d+", form.split(".")[0]))
        print(f"{form:36s} compile {compiled:5.2f} s  {best / n * 1e6:6.2f} us/mma  {2 * m * nn * k * n / best / 1e9:5.2f} GFLOP/s")


if __name__ == "__main__":
    main()
