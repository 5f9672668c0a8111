"""NVIDIA Warp (PyPI warp-lang) under `zluda run`: its static cudart (13.4) asks for the dark
API tables, NVRTC compiles its kernels to PTX for sm_86, and its arrays come from numpy
temporaries (copied with cuMemcpyHtoDAsync from pageable memory, freed at once)."""

from __future__ import annotations

from tests.thirdparty.clients import run_script

XDIST_INDEPENDENT = True

SCRIPT = r'''
import numpy as np
import warp as wp

wp.config.quiet = True
wp.init()
assert wp.is_cuda_available() and wp.get_cuda_device_count() == 1
device = wp.get_device("cuda:0")
assert device.is_cuda, device

@wp.kernel
def saxpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]

@wp.kernel
def lengths(v: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.length(v[i])

n = 1000
x = wp.array(np.arange(n, dtype=np.float32), device="cuda:0")
y = wp.array(np.ones(n, dtype=np.float32), device="cuda:0")
wp.launch(saxpy, dim=n, inputs=[2.0, x, y], device="cuda:0")
np.testing.assert_array_equal(y.numpy(), 2 * np.arange(n, dtype=np.float32) + 1)

v = np.random.default_rng(3).standard_normal((n, 3)).astype(np.float32)
dv = wp.array(v, dtype=wp.vec3, device="cuda:0")
out = wp.zeros(n, dtype=float, device="cuda:0")
wp.launch(lengths, dim=n, inputs=[dv, out], device="cuda:0")
np.testing.assert_allclose(out.numpy(), np.linalg.norm(v, axis=1), rtol=1e-5)

host = wp.empty(n, dtype=float, device="cpu")
wp.copy(host, y)  # device to host through Warp's own copy
wp.synchronize_device("cuda:0")
np.testing.assert_array_equal(host.numpy(), 2 * np.arange(n, dtype=np.float32) + 1)
print("ok")
'''


def test_init_arrays_launch_copy_back(tmp_path):
    run_script(SCRIPT, tmp_path)
