"""cuda.core / cuda-bindings (PyPI cuda-core, cuda-bindings; numba-cuda's dependencies) under
`zluda run`: NVRTC to PTX and to a cubin (ours holds PTX), modules and libraries loaded from
both, launches on a stream, timed events; results against numpy."""

from __future__ import annotations

from tests.thirdparty.clients import run_script

XDIST_INDEPENDENT = True

SCRIPT = r'''
import numpy as np
from cuda.bindings import driver as cu
from cuda.core import Device, EventOptions, LaunchConfig, ObjectCode, Program, ProgramOptions, launch

SOURCE = """
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

def check(result):
    err, *rest = result
    assert err == cu.CUresult.CUDA_SUCCESS, err
    return rest[0] if len(rest) == 1 else rest

dev = Device()
dev.set_current()
stream = dev.create_stream()
n = 1000
x = np.arange(n, dtype=np.float32)
y0 = np.full(n, 3, dtype=np.float32)
options = ProgramOptions(arch=f"sm_{dev.arch}")
ptx = Program(SOURCE, code_type="c++", options=options).compile("ptx")
cubin = Program(SOURCE, code_type="c++", options=options).compile("cubin")
assert b".entry saxpy" in bytes(ptx.code)

def saxpy_with(kernel):
    dx, dy = dev.allocate(x.nbytes, stream=stream), dev.allocate(y0.nbytes, stream=stream)
    check(cu.cuMemcpyHtoD(int(dx.handle), x.ctypes.data, x.nbytes))
    check(cu.cuMemcpyHtoD(int(dy.handle), y0.ctypes.data, y0.nbytes))
    start = stream.record(options=EventOptions(timing_enabled=True))
    launch(stream, LaunchConfig(grid=(n + 127) // 128, block=128), kernel, np.float32(2), dx, dy, np.int32(n))
    end = stream.record(options=EventOptions(timing_enabled=True))
    end.sync()
    assert end.is_done and end - start >= 0
    out = np.empty_like(y0)
    check(cu.cuMemcpyDtoH(out.ctypes.data, int(dy.handle), out.nbytes))
    np.testing.assert_array_equal(out, 2 * x + y0)
    dx.close(stream)
    dy.close(stream)

# cuda.core's ObjectCode: what NVRTC gave, and the same bytes handed back as cubin and as PTX
for obj in (ptx, cubin, ObjectCode.from_cubin(bytes(cubin.code)), ObjectCode.from_ptx(bytes(ptx.code))):
    saxpy_with(obj.get_kernel("saxpy"))

# the driver's library API through cuda.bindings: the cubin loaded, its kernel launched
lib = check(cu.cuLibraryLoadData(bytes(cubin.code), None, None, 0, None, None, 0))
assert check(cu.cuLibraryGetKernelCount(lib)) == 1
kernel = check(cu.cuLibraryGetKernel(lib, b"saxpy"))
func = check(cu.cuKernelGetFunction(kernel))
dx, dy = check(cu.cuMemAlloc(x.nbytes)), check(cu.cuMemAlloc(y0.nbytes))
check(cu.cuMemcpyHtoD(dx, x.ctypes.data, x.nbytes))
check(cu.cuMemcpyHtoD(dy, y0.ctypes.data, y0.nbytes))
args = (np.array([2], np.float32), np.array([int(dx)], np.uint64), np.array([int(dy)], np.uint64), np.array([n], np.int32))
params = np.array([a.ctypes.data for a in args], dtype=np.uint64)
check(cu.cuLaunchKernel(func, (n + 255) // 256, 1, 1, 256, 1, 1, 0, 0, params.ctypes.data, 0))
out = np.empty_like(y0)
check(cu.cuMemcpyDtoH(out.ctypes.data, dy, out.nbytes))
np.testing.assert_array_equal(out, 2 * x + y0)
check(cu.cuLibraryUnload(lib))
print("ok")
'''


def test_nvrtc_ptx_and_cubin_library_launch_events(tmp_path):
    run_script(SCRIPT, tmp_path)
