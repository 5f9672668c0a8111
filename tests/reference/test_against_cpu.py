"""nvcc-built programs run on the reference and on the CPU target: the results must agree."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py import reference
from zluda_py.compiler import compile as compile_ptx


@pytest.fixture(scope="module")
def programs(nvcc):
    """source -> (PTX text, CompiledModule for the CPU target)."""
    built = {}
    for source in ("compiler_control.cu", "compiler_sync.cu"):
        text = nvcc([source], ["-ptx", "-arch=sm_80"], ".ptx").read_text()
        built[source] = (text, compile_ptx(text))
    return built


def both(programs, source: str, kernel: str, grid, block, args: list,
         shared_mem: int = 0) -> tuple[list, list]:
    """The array arguments after a run on the reference and after one on the CPU target."""
    text, module = programs[source]
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    reference.run(text, kernel, grid, block, ref, shared_mem=shared_mem)
    module.launch(kernel, grid, block, cpu, shared_mem=shared_mem)
    return ([a for a in ref if isinstance(a, np.ndarray)], [a for a in cpu if isinstance(a, np.ndarray)])


def agree(result: tuple[list, list]) -> None:
    for r, c in zip(*result):
        np.testing.assert_array_equal(r, c)


rng = np.random.default_rng(11)


def test_divergence_and_calls(programs):
    n = 150
    x = rng.integers(-5, 300, n).astype(np.int32)
    src = "compiler_control.cu"
    agree(both(programs, src, "_Z7collatzPKiPii", (2,), (96,), [x, np.zeros(n, np.int32), np.int32(n)]))
    agree(both(programs, src, "_Z8branchesPKiPii", (3,), (50,), [x, np.zeros(n, np.int32), np.int32(n)]))
    agree(both(programs, src, "_Z5callsPii", (2,), (40,), [np.zeros(n, np.int32), np.int32(70)]))
    agree(both(programs, src, "_Z8indirectPKiPii", (1,), (64,), [x, np.zeros(n, np.int32), np.int32(60)]))
    agree(both(programs, src, "_Z7recursePii", (1,), (8,), [np.zeros(8, np.int32), np.int32(3)]))


def test_shared_memory_barriers_and_atomics(programs):
    x = rng.random(300).astype(np.float32)
    src = "compiler_sync.cu"
    agree(both(programs, src, "_Z9block_sumPKfPfi", (2,), (128,), [x, np.zeros(2, np.float32), np.int32(200)]))
    data = rng.integers(0, 1000, 192).astype(np.int32)
    agree(both(programs, src, "_Z11reverse_dynPi", (3,), (64,), [data], shared_mem=64 * 4))
    v = rng.integers(-100, 100, 100).astype(np.int32)
    agree(both(programs, src, "_Z7atomicsPKiPiPfPji", (1,), (128,),
               [v, np.zeros(3, np.int32), np.zeros(1, np.float32), np.zeros(1, np.uint32), np.int32(100)]))


def test_warp_collectives(programs):
    v = rng.integers(0, 100, 64).astype(np.int32)
    src = "compiler_sync.cu"
    agree(both(programs, src, "_Z8warp_opsPKiPi", (2,), (32,), [v, np.zeros(64 * 6, np.int32)]))
    agree(both(programs, src, "_Z12warp_partialPKiPi", (1,), (32,), [v[:32].copy(), np.zeros(32, np.int32)]))


def test_faults_agree(programs):
    text, module = programs["compiler_control.cu"]
    with pytest.raises(reference.ReferenceFault) as e:
        reference.run(text, "_Z8trappingi", (1,), (32,), [np.int32(5)])
    assert e.value.cu_result == 719
    with pytest.raises(reference.ReferenceFault) as e:  # deep recursion overflows the 1 KiB stack
        reference.run(text, "_Z7recursePii", (1,), (4,), [np.zeros(4, np.int32), np.int32(40)])
    assert e.value.cu_result == 719
