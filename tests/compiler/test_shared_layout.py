"""Per-kernel .shared layout: each kernel of a module reports (and gets) only the shared memory
it uses, with a helper .func's shared array at one offset valid under every kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import compile

N_A, N_B, THREADS = 10240, 5120, 256
HELPER_BYTES = 256 * 4


def hoisted(ptx: str) -> str:
    """The PTX with every function-scope .shared declaration moved to module scope (the form
    nvcc gives modules such as Thrust's/CUB's)."""
    decls = re.findall(r"^\s*(\.shared [^;]*;)\n", ptx, flags=re.M)
    body = re.sub(r"^\s*\.shared [^;]*;\n", "", ptx, flags=re.M)
    first = re.search(r"^\.(visible |weak )?(func|entry)|^\.func", body, flags=re.M).start()
    return body[:first] + "\n".join(decls) + "\n\n" + body[first:]


@pytest.fixture(scope="module", params=["function_scope", "module_scope"])
def module(request, nvcc):
    ptx = nvcc(["shared_per_kernel.cu"], ["-ptx", "-arch=sm_80"], ".ptx").read_text()
    if request.param == "module_scope":
        ptx = hoisted(ptx)
        assert re.search(r"^\.shared \.align 4 \.b8 _ZZ8kernel_aE1a\[40960\];", ptx, flags=re.M)
    return compile(ptx)


def test_static_shared_is_per_kernel(module):
    # each kernel: its own 40 KB array plus the helper's 1 KB (any .func's arrays come first)
    assert module.kernels["kernel_a"].static_shared == HELPER_BYTES + N_A * 4
    assert module.kernels["kernel_b"].static_shared == HELPER_BYTES + N_B * 8
    assert module.kernels["kernel_dyn"].static_shared == HELPER_BYTES + 16


def test_kernels_with_large_shared_arrays_and_a_shared_helper(module):
    rng = np.random.default_rng(7)
    fin = rng.standard_normal(N_A).astype(np.float32)
    fout = np.zeros(N_A + THREADS, np.float32)
    module.launch("kernel_a", 2, THREADS, [fin, fout])
    np.testing.assert_array_equal(fout[:N_A], (2 * fin)[::-1])
    np.testing.assert_array_equal(fout[N_A:], 3 * np.arange(THREADS, dtype=np.float32) + 1)

    din = rng.standard_normal(N_B)
    dout = np.zeros(N_B + THREADS)
    module.launch("kernel_b", 3, THREADS, [din, dout])
    np.testing.assert_array_equal(dout[:N_B], (din + 0.5)[::-1])
    np.testing.assert_array_equal(dout[N_B:], 3 * (np.arange(THREADS) + 1000) + 1.0)


def test_dynamic_shared_follows_the_kernels_own_static_part(module):
    n = 64
    src = np.arange(n, dtype=np.int32) * 7 - 100
    out = np.zeros(n, np.int32)
    module.launch("kernel_dyn", 1, n, [src, out], shared_mem=n * 4)
    expected = src[::-1] * 10 + 100 * (np.arange(n) % 4 + 1)
    np.testing.assert_array_equal(out, expected)
