"""Where CPU-target compile time goes: parse, lower (Python), LLVM optimiser, code generation.

    python bench/cpu_compile.py                 # a generated module of 96 trivial kernels
    python bench/cpu_compile.py FILE.ptx        # any PTX module (e.g. nvcc -ptx of tests/cuda/corpus_thrust.cu)
    python bench/cpu_compile.py FILE.ptx --codegen 0   # try another back-end level
    python bench/cpu_compile.py --setp 48       # the conformance harness's kernel of 48 setp ops
                                                # (144 loads/stores of lane-consecutive elements)
    python bench/cpu_compile.py FILE.ptx --parallel  # wall clock of pipeline.compile_object with the
                                                # module split per kernel (parallel code generation)
                                                # against the whole module, and their ratio

Times are process CPU time (meaningful on a shared machine), per step of `pipeline.compile`,
except with --parallel, whose point is the wall clock.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import llvmlite.binding as llvm

from zluda_py.compiler import pipeline
from zluda_py.compiler.cpu import target as cpu_target
from zluda_py.compiler.cpu.runtime import target_machine, worker_count
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

TRIVIAL = """
.visible .entry k{i}(.param .u64 p0, .param .u64 p1, .param .u32 n)
{{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<3>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0]; ld.param.u64 %rd2, [p1]; ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra $L{i};
    cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4; add.s64 %rd6, %rd3, %rd5; add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f1, [%rd6]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd7], %f2;
$L{i}:
    ret;
}}"""


def trivial_module(n: int) -> str:
    return ".version 8.0\n.target sm_80\n.address_size 64\n" + "".join(TRIVIAL.format(i=i) for i in range(n))


def setp_module(n: int) -> str:
    """tests/conformance/harness.py's kernel over n setp instructions (3 ld/st each)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.conformance.harness import make_op, ptx_kernel

    ops = [make_op(f"setp.{c}.{t}", [0, 0], False)
           for t in ("s32", "u32", "s64", "u64", "s16", "u16", "f32", "f64") for c in ("eq", "ne", "lt", "le", "gt", "ge")]
    return ptx_kernel(ops[:n])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx", nargs="?", help="PTX file (default: 96 generated trivial kernels)")
    ap.add_argument("--opt", type=int, help="optimiser level (default: what the pipeline picks)")
    ap.add_argument("--codegen", type=int, help="back-end level (default: what the pipeline picks)")
    ap.add_argument("--setp", type=int, help="compile the conformance harness's kernel of this many setp ops")
    ap.add_argument("--parallel", action="store_true", help="split (parallel code generation) against whole, wall clock")
    a = ap.parse_args()
    text = Path(a.ptx).read_text() if a.ptx else setp_module(a.setp) if a.setp else trivial_module(96)
    if a.parallel:
        parallel(text)
        return
    clock = time.process_time
    t0 = clock()
    module = link([parse(text)])
    t1 = clock()
    ir_text, _ = pipeline.lower(module)
    t2 = clock()
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    t3 = clock()
    lines = ir_text.count("\n")
    level = a.opt if a.opt is not None else cpu_target.opt_level(lines)
    cpu_target.optimise(mod, level)
    t4 = clock()
    cpu_target.set_backend_options()
    obj = target_machine(min(level, cpu_target.CODEGEN_LEVEL) if a.codegen is None else a.codegen).emit_object(mod)
    t5 = clock()
    print(f"parse {t1 - t0:.2f} s | lower {t2 - t1:.2f} s ({len(ir_text) / 1e6:.1f} MB, {lines} lines) | "
          f"parse IR {t3 - t2:.2f} s | opt O{level} {t4 - t3:.2f} s | codegen {t5 - t4:.2f} s "
          f"({len(obj) / 1e6:.1f} MB) | total {t5 - t0:.2f} s")


def parallel(text: str) -> None:
    """pipeline.compile_object with its usual choice (split per kernel above SPLIT_IR_LINES),
    then with the module kept whole; wall clock, same process, same input."""
    times = {}
    for mode in ("split", "whole"):
        if mode == "whole":
            cpu_target.SPLIT_IR_LINES = 1 << 62
        start = time.perf_counter()
        _, obj, metadata = pipeline.compile_object(text)
        times[mode] = time.perf_counter() - start
        parts = len(metadata.get("objects", [obj]))
        print(f"{mode}: {times[mode]:.1f} s wall, {parts} object(s), {len(obj) / 1e6:.1f} MB", flush=True)
    print(f"whole / split: {times['whole'] / times['split']:.2f}x with {worker_count()} workers")


if __name__ == "__main__":
    main()
