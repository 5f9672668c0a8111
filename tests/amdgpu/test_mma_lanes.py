"""amdgpu/mma.py's per-lane tables as %laneid arithmetic (`MmaMixin.lane_function`), run on the
host: the IR it builds for a table, compiled by LLVM for this CPU with %laneid as the argument,
must give every lane its entry. The tables are the fragment layouts' (compiler/matrix.py) and
random ones, whose bits are no moved %laneid bit (the mask lookup)."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from zluda_py.compiler.amdgpu.mma import MmaMixin
from zluda_py.compiler.matrix import WARP, fragment, matrix_rows, movmatrix_source, wmma_fragment

I32 = ir.IntType(32)


class _OneFunction(MmaMixin):
    """lane_function's builder and %laneid: the argument of `f(i32 lane) -> i32`."""

    def __init__(self, module: ir.Module) -> None:
        self.fn = ir.Function(module, ir.FunctionType(I32, [I32]), "f")
        self.b = ir.IRBuilder(self.fn.append_basic_block())

    def lane(self) -> ir.Value:
        return self.fn.args[0]


def _evaluate(table: tuple[int, ...]) -> list[int]:
    module = ir.Module()
    module.triple = llvm.get_process_triple()
    one = _OneFunction(module)
    one.b.ret(one.lane_function(table))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), machine)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)(engine.get_function_address("f"))
    return [f(lane) for lane in range(WARP)]


LAYOUT_TABLES = [
    tuple(cells[e][axis] for cells in fragment(16, 8, 16, "a", "f16")) for e in range(8) for axis in (0, 1)] + [
    tuple(cells[3][axis] for cells in wmma_fragment(16, 16)) for axis in (0, 1)] + [
    *matrix_rows(1, False), *matrix_rows(3, True, 1), tuple(src for src, _ in movmatrix_source(1)),
    tuple(16 * half for _, half in movmatrix_source(0)), (5,) * WARP, tuple(range(WARP))]
RANDOM_TABLES = [tuple(int(v) for v in np.random.default_rng(seed).integers(0, 64, WARP)) for seed in range(4)]


@pytest.mark.parametrize("table", LAYOUT_TABLES + RANDOM_TABLES)
def test_lane_function_gives_each_lane_its_entry(table: tuple[int, ...]) -> None:
    assert _evaluate(table) == list(table)
