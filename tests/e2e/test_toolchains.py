"""Run-time toolchains under `zluda run`: the "cubins" NVRTC, nvJitLink and (for Triton) ptxas
hand out hold PTX (a PTX cubin, docs/toolchains.md), which loads after a copy, from a file and
in another process. NVRTC and nvJitLink are the PyPI wheels (nvidia-cuda-nvrtc,
nvidia-nvjitlink); numba-cuda and CuPy run end to end when installed."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.driver.conftest import shim_path
from tests.e2e.test_python_client import PTX
from zluda_py.cli import run_cmd
from zluda_py.fatbin import ptx_cubin

XDIST_INDEPENDENT = True


def _wheel_dir() -> Path:
    """nvidia/cu13 of the nvidia-cuda-nvrtc / nvidia-nvjitlink wheels."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        if (Path(root) / "cu13" / "lib").is_dir():
            return Path(root) / "cu13"
    pytest.skip("the nvidia-cuda-nvrtc/nvidia-nvjitlink wheels are not installed (pip install -e '.[test]')")


# process B: loads a "cubin" file with cuModuleLoadData (a buffer of its own), cuModuleLoad and
# cuLibraryLoadData, and launches `fill` (tests/e2e/test_python_client.py) from each
LOADER = r"""
import ctypes, sys
from ctypes import byref, c_void_p, c_ulonglong, c_uint
lib = ctypes.CDLL(sys.argv[1])
path = sys.argv[2]
def ok(rc, what):
    if rc:
        sys.exit(f"{what}: CUresult {rc}")
ok(lib.cuInit(0), "cuInit")
ctx = c_void_p(); ok(lib.cuDevicePrimaryCtxRetain(byref(ctx), 0), "retain"); ok(lib.cuCtxSetCurrent(ctx), "set")
image = ctypes.create_string_buffer(open(path, "rb").read())
fns = []
mod = c_void_p(); ok(lib.cuModuleLoadData(byref(mod), image), "cuModuleLoadData")
fn = c_void_p(); ok(lib.cuModuleGetFunction(byref(fn), mod, b"fill"), "cuModuleGetFunction"); fns.append(fn)
mod = c_void_p(); ok(lib.cuModuleLoad(byref(mod), path.encode()), "cuModuleLoad")
fn = c_void_p(); ok(lib.cuModuleGetFunction(byref(fn), mod, b"fill"), "cuModuleGetFunction"); fns.append(fn)
library = c_void_p(); ok(lib.cuLibraryLoadData(byref(library), image, None, None, 0, None, None, 0), "cuLibraryLoadData")
kernel = c_void_p(); ok(lib.cuLibraryGetKernel(byref(kernel), library, b"fill"), "cuLibraryGetKernel"); fns.append(kernel)
for i, fn in enumerate(fns):
    d = c_ulonglong(); ok(lib.cuMemAlloc_v2(byref(d), 256 * 4), "cuMemAlloc")
    out, k = c_ulonglong(d.value), c_uint(i)
    params = (c_void_p * 2)(ctypes.addressof(out), ctypes.addressof(k))
    ok(lib.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, None, params, None), "cuLaunchKernel")
    host = (ctypes.c_uint32 * 256)()
    ok(lib.cuMemcpyDtoH_v2(host, d, 256 * 4), "cuMemcpyDtoH")
    if list(host) != [t + i for t in range(256)]:
        sys.exit(f"launch {i}: wrong result {list(host)[:4]}")
print("ok")
"""


def _load_elsewhere(cubin: Path) -> None:
    """Load and run the cubin file in a fresh process (not under `zluda run`)."""
    r = subprocess.run([sys.executable, "-c", LOADER, str(shim_path()), str(cubin)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def _elf_machine(path: Path) -> int:
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", data[:16]
    return int.from_bytes(data[18:20], "little")


def test_nvrtc_sm_86_cubin_written_read_back_and_launched(nvcc, run, tmp_path):
    """A C program linked against libnvrtc compiles C++ (with a header it supplies) for
    -arch=sm_86 and loads nvrtcGetCUBIN's output from a file; a compile error keeps its log."""
    wheel = _wheel_dir()
    exe = nvcc(["e2e_nvrtc.c"], ["-cudart", "none", f"-I{wheel / 'include'}", f"-L{wheel / 'lib'}", "-l:libnvrtc.so.13",
                                 "-Xlinker", f"-rpath,{wheel / 'lib'}", f"-L{run_cmd.SHIM_DIR}", "-lcuda"], "")
    r = run(exe, str(tmp_path / "scale.cubin"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["bad program: NVRTC_ERROR_COMPILATION, log names it: yes",
                                     "cubin: ELF machine 190", "ok"], r.stdout + r.stderr


# process A, under `zluda run`: links PTX and a PTX cubin file (as NVRTC makes) with nvJitLink
# (dlopened by path, as cuda-python and CuPy do; one call through a versioned symbol, as code
# built with nvJitLink.h makes) and writes a copy of the linked cubin to a file
NVJITLINK_CLIENT = r"""
import ctypes, sys
from ctypes import byref, c_char_p, c_size_t, c_void_p
jl = ctypes.CDLL(sys.argv[1])
ptx = sys.stdin.buffer.read()
def ok(rc, what):
    if rc:
        sys.exit(f"{what}: nvJitLinkResult {rc}")
h = c_void_p()
ok(jl.nvJitLinkCreate(byref(h), 1, (c_char_p * 1)(b"-arch=sm_86")), "create")
ok(jl["__nvJitLinkAddData_13_0"](h, 2, ptx, c_size_t(len(ptx)), b"fill.ptx"), "add")
ok(jl.nvJitLinkAddFile(h, 1, sys.argv[3].encode()), "add file")
ok(jl.nvJitLinkComplete(h), "complete")
size = c_size_t(); ok(jl.nvJitLinkGetLinkedCubinSize(h, byref(size)), "size")
buf = ctypes.create_string_buffer(size.value); ok(jl.nvJitLinkGetLinkedCubin(h, buf), "cubin")
copy = bytes(buf.raw)
ok(jl.nvJitLinkDestroy(byref(h)), "destroy")
open(sys.argv[2], "wb").write(copy)
"""


OTHER = ".version 7.5\n.target sm_75\n.address_size 64\n.visible .entry other() { ret; }\n"


def test_nvjitlink_cubin_copied_and_loaded_in_another_process(run, tmp_path):
    lib = _wheel_dir() / "lib" / "libnvJitLink.so.13"
    cubin, other = tmp_path / "fill.cubin", tmp_path / "other.cubin"
    other.write_bytes(ptx_cubin.pack([OTHER], 86))
    script = tmp_path / "link.py"
    script.write_text(NVJITLINK_CLIENT)
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, str(script), str(lib),
                        str(cubin), str(other)], input=PTX, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _elf_machine(cubin) == 190
    assert [text for _, text in ptx_cubin.parts(cubin.read_bytes())] == [PTX.encode() + b"\0", OTHER.encode() + b"\0"]
    _load_elsewhere(cubin)


# NVRTC -dlto gives LTO-IR, which nvJitLink -lto links: its linked PTX goes into the cubin
LTO_CLIENT = r"""
import ctypes, sys
from ctypes import byref, c_char_p, c_size_t, c_void_p
rtc, jl = ctypes.CDLL(sys.argv[1] + "/libnvrtc.so.13"), ctypes.CDLL(sys.argv[1] + "/libnvJitLink.so.13")
def ok(rc, what):
    if rc:
        sys.exit(f"{what}: {rc}")
src = b'extern "C" __global__ void fill(unsigned *out, unsigned k) { out[threadIdx.x] = threadIdx.x + k; }'
prog = c_void_p(); ok(rtc.nvrtcCreateProgram(byref(prog), src, b"fill.cu", 0, None, None), "nvrtcCreateProgram")
ok(rtc.nvrtcCompileProgram(prog, 2, (c_char_p * 2)(b"-arch=sm_86", b"-dlto")), "nvrtcCompileProgram")
size = c_size_t(); ok(rtc.nvrtcGetLTOIRSize(prog, byref(size)), "nvrtcGetLTOIRSize")
ir = ctypes.create_string_buffer(size.value); ok(rtc.nvrtcGetLTOIR(prog, ir), "nvrtcGetLTOIR")
h = c_void_p(); ok(jl.nvJitLinkCreate(byref(h), 2, (c_char_p * 2)(b"-arch=sm_86", b"-lto")), "create")
ok(jl.nvJitLinkAddData(h, 3, ir, size, b"fill.ltoir"), "add")
ok(jl.nvJitLinkComplete(h), "complete")
ok(jl.nvJitLinkGetLinkedCubinSize(h, byref(size)), "size")
cubin = ctypes.create_string_buffer(size.value); ok(jl.nvJitLinkGetLinkedCubin(h, cubin), "cubin")
open(sys.argv[2], "wb").write(cubin.raw)
"""


def test_nvjitlink_lto_of_nvrtc_ltoir(tmp_path):
    cubin = tmp_path / "fill.cubin"
    script = tmp_path / "lto.py"
    script.write_text(LTO_CLIENT)
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, str(script),
                        str(_wheel_dir() / "lib"), str(cubin)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _elf_machine(cubin) == 190
    _load_elsewhere(cubin)


# A grid barrier through the device runtime API, linked with libcudadevrt.a as numba-cuda links
# cg.this_grid().sync(): NVRTC LTO-IR with nvJitLink -lto, or PTX with a plain link. The wrapper
# leaves the archive out and the driver provides the functions; a cooperative launch checks them.
DEVRT_CLIENT = r"""
import ctypes, sys
from ctypes import byref, c_char_p, c_size_t, c_void_p, c_ulonglong
rtc, jl = ctypes.CDLL(sys.argv[1] + "/libnvrtc.so.13"), ctypes.CDLL(sys.argv[1] + "/libnvJitLink.so.13")
cuda, devrt, lto = ctypes.CDLL("libcuda.so.1"), sys.argv[2].encode(), sys.argv[3] == "lto"
def ok(rc, what):
    if rc:
        sys.exit(f"{what}: {rc}")
src = (b'extern "C" __global__ void exchange(unsigned *a, unsigned *b, int *status) {'
       b'    unsigned n = gridDim.x * blockDim.x, i = blockIdx.x * blockDim.x + threadIdx.x;'
       b'    a[i] = i * 3 + 1;'
       b'    status[i] = cudaCGSynchronize(cudaCGGetIntrinsicHandle(cudaCGScopeGrid), 0);'
       b'    b[i] = a[(i + blockDim.x) % n];'
       b'}')
prog = c_void_p(); ok(rtc.nvrtcCreateProgram(byref(prog), src, b"exchange.cu", 0, None, None), "nvrtcCreateProgram")
opts = [b"-arch=sm_86", b"-rdc=true"] + ([b"-dlto"] if lto else [])
ok(rtc.nvrtcCompileProgram(prog, len(opts), (c_char_p * len(opts))(*opts)), "nvrtcCompileProgram")
get_size, get = (rtc.nvrtcGetLTOIRSize, rtc.nvrtcGetLTOIR) if lto else (rtc.nvrtcGetPTXSize, rtc.nvrtcGetPTX)
size = c_size_t(); ok(get_size(prog, byref(size)), "size")
code = ctypes.create_string_buffer(size.value); ok(get(prog, code), "code")
opts = [b"-arch=sm_86"] + ([b"-lto"] if lto else [])
h = c_void_p(); ok(jl.nvJitLinkCreate(byref(h), len(opts), (c_char_p * len(opts))(*opts)), "create")
ok(jl.nvJitLinkAddData(h, 3 if lto else 2, code, size, b"exchange"), "add")
ok(jl.nvJitLinkAddFile(h, 6, devrt), "add libcudadevrt.a")  # NVJITLINK_INPUT_LIBRARY
ok(jl.nvJitLinkComplete(h), "complete")
ok(jl.nvJitLinkGetLinkedCubinSize(h, byref(size)), "size")
cubin = ctypes.create_string_buffer(size.value); ok(jl.nvJitLinkGetLinkedCubin(h, cubin), "cubin")
ok(cuda.cuInit(0), "cuInit")
ctx = c_void_p(); ok(cuda.cuDevicePrimaryCtxRetain(byref(ctx), 0), "retain"); ok(cuda.cuCtxSetCurrent(ctx), "set")
mod, fn = c_void_p(), c_void_p()
ok(cuda.cuModuleLoadData(byref(mod), cubin), "cuModuleLoadData")
ok(cuda.cuModuleGetFunction(byref(fn), mod, b"exchange"), "cuModuleGetFunction")
blocks, threads = 4, 64
n = blocks * threads
bufs = [c_ulonglong() for _ in range(3)]
for d in bufs:
    ok(cuda.cuMemAlloc_v2(byref(d), n * 4), "cuMemAlloc")
params = (c_void_p * 3)(*(ctypes.addressof(d) for d in bufs))
ok(cuda.cuLaunchCooperativeKernel(fn, blocks, 1, 1, threads, 1, 1, 0, None, params), "cuLaunchCooperativeKernel")
b, status = (ctypes.c_uint32 * n)(), (ctypes.c_int32 * n)()
ok(cuda.cuMemcpyDtoH_v2(b, bufs[1], n * 4), "b"); ok(cuda.cuMemcpyDtoH_v2(status, bufs[2], n * 4), "status")
print("ok" if list(b) == [(i + threads) % n * 3 + 1 for i in range(n)] and not any(status) else list(status)[:4])
"""


@pytest.mark.parametrize("form", ["lto", "ptx"])
def test_nvjitlink_leaves_libcudadevrt_to_the_driver(form, tmp_path):
    devrt = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64" / "libcudadevrt.a"
    if not devrt.exists():
        pytest.skip(f"{devrt} (the CUDA toolkit's device runtime) is not installed")
    script = tmp_path / "devrt.py"
    script.write_text(DEVRT_CLIENT)
    r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, str(script),
                        str(_wheel_dir() / "lib"), str(devrt), form], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_ptxas_stand_in_run_as_triton_runs_it(tmp_path):
    """Triton (third_party/nvidia/backend/compiler.py) runs `ptxas --version` for the CUDA
    release, then `ptxas -lineinfo -v --gpu-name=sm_86 x.ptx -o x.ptx.o` and loads the output."""
    ptxas = run_cmd.SHIM_DIR / "ptxas"
    version = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, check=True).stdout
    release = re.search(r".*release (\d+\.\d+).*", version)
    assert release and release.group(1) == "13.5", version  # the driver's cuDriverGetVersion, 13050
    src = tmp_path / "fill.ptx"
    src.write_text(PTX)
    out = Path(f"{src}.o")
    r = subprocess.run([str(ptxas), "-lineinfo", "--fmad=false", "-v", "--opt-level", "0", "--gpu-name=sm_86", str(src),
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _elf_machine(out) == 190 and out.read_bytes()[48:52] == (86 << 8).to_bytes(4, "little")  # e_flags: sm_86
    _load_elsewhere(out)
    bad = tmp_path / "bad.ptx"
    bad.write_text("not ptx")
    r = subprocess.run([str(ptxas), "--gpu-name=sm_86", str(bad), "-o", str(tmp_path / "bad.o")], capture_output=True,
                       text=True)
    assert r.returncode == 255 and "ptxas fatal" in r.stderr


def test_zluda_run_points_triton_at_the_stand_in_unless_the_user_chose():
    env = run_cmd.environment("cpu", None, {"TRITON_PTXAS_BLACKWELL_PATH": "/opt/ptxas"})
    assert env["TRITON_PTXAS_PATH"] == str(run_cmd.SHIM_DIR / "ptxas")
    assert env["TRITON_PTXAS_BLACKWELL_PATH"] == "/opt/ptxas"


NUMBA = """
import numpy as np
from numba import cuda
@cuda.jit(cache=True)
def add(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + y[i]
x = np.arange(1000, dtype=np.float32)
out = cuda.device_array_like(x)
add[4, 256](cuda.to_device(x), cuda.to_device(2 * x), out)
print("numba", bool(np.array_equal(out.copy_to_host(), 3 * x)))
"""

CUPY = """
import cupy
print("cupy", int(cupy.arange(10).sum()))
"""


@pytest.mark.parametrize("package, script, expected", [("numba_cuda", NUMBA, "numba True"), ("cupy", CUPY, "cupy 45")],
                         ids=["numba-cuda", "cupy"])
def test_framework_default_install(package, script, expected, tmp_path):
    """numba-cuda links every kernel with nvJitLink; CuPy compiles with NVRTC for sm_XX: both
    by default, under `zluda run`. The second run loads the cubin from their disk caches."""
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    path = tmp_path / "client.py"
    path.write_text(script)
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cupy-cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    for attempt in ("compiled", "from the disk cache"):
        r = subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, str(path)],
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0 and expected in r.stdout.splitlines(), f"{attempt}: {r.stdout}{r.stderr}"
