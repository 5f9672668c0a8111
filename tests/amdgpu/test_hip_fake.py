"""The HIP backend wired to the driver, tested against a fake libamdhip64.so (fake_hip.c, built
here with cc): host memory stands in for device memory, launches are recorded instead of run.
What is checked is what crosses the HIP API: which calls, with which bytes, and how HIP's
answers become CUresults."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from zluda_py import backends
from zluda_py.backends import cpu, hip, hip_runtime

HERE = Path(__file__).parent
PTX = """.version 8.0
.target sm_80
.address_size 64
.global .u32 counter = 7;
.global .align 8 .b8 table[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
.visible .entry scale(.param .u64 p, .param .u32 n, .param .f64 x, .param .align 16 .b8 v[12])
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>; .reg .f64 %fd<3>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n]; ld.param.f64 %fd1, [x];
  cvt.rn.f64.u32 %fd2, %r1; mul.f64 %fd2, %fd2, %fd1; st.global.f64 [%rd1], %fd2;
  ret;
}
"""
SYNC_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry synced(.param .u32 a)
{
  .reg .b32 %r<3>;
  mov.u32 %r1, %envreg1; mov.u32 %r2, %envreg2; ld.param.u32 %r0, [a];
  ret;
}
"""


@pytest.fixture(scope="session")
def fake_rocm(tmp_path_factory) -> Path:
    """A ROCm root whose lib/libamdhip64.so is the fake."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("a C compiler (cc) is needed to build the fake libamdhip64.so")
    root = tmp_path_factory.mktemp("rocm")
    (root / "lib").mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(root / "lib" / "libamdhip64.so"),
                    str(HERE / "fake_hip.c")], check=True)
    return root


def _environment(fake_rocm: Path, tmp_path: Path) -> dict[str, str]:
    return {"ROCM_PATH": str(fake_rocm), "HSA_OVERRIDE_GFX_VERSION": "9.4.2", "FAKE_HIP_LOG": str(tmp_path / "hip.log"),
            "FAKE_HIP_MEMORY": "65536", "CUDA_CACHE_PATH": str(tmp_path / "cache")}


@pytest.fixture
def fake(monkeypatch, fake_rocm, tmp_path):
    """The fake as this process's HIP runtime; returns a function giving the calls logged so far."""
    for name, value in _environment(fake_rocm, tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(hip_runtime.Hip, "_instance", None)
    log = tmp_path / "hip.log"
    return lambda: log.read_text().splitlines() if log.exists() else []


def _host(size: int) -> tuple[ctypes.Array, int]:
    buf = ctypes.create_string_buffer(size)
    return buf, ctypes.addressof(buf)


def test_zluda_backend_hip_selects_it_and_auto_prefers_it(fake):
    assert backends.choose("hip") is hip
    assert backends.choose("auto") is hip


def test_no_gpu_is_cuda_error_no_device_with_the_reason(fake, monkeypatch):
    monkeypatch.setenv("FAKE_HIP_DEVICES", "0")
    with pytest.raises(backends.BackendUnavailable) as err:
        backends.choose("hip")
    assert err.value.cu_result == 100
    assert "hip backend found no device" in str(err.value) and "hipGetDeviceCount" in str(err.value)
    assert "libamdhip64.so" in str(err.value)
    assert backends.choose("auto") is cpu


def test_alloc_copy_fill_free_round_trips(fake):
    m = hip.memory
    blocks = {kind: m.allocate(64, kind, flags, None) for kind, flags in (("device", 0), ("host", 0), ("managed", 1))}
    expected = bytearray(struct.pack("<I", 0xDEADBEEF) * 16)
    expected[6:12] = struct.pack("<H", 0x1234) * 3
    expected[13:15] = b"\xa5\xa5"
    for a in blocks.values():
        m.fill(a.base, 0xDEADBEEF, 4, 16)
        m.fill(a.base + 6, 0xBEEF1234, 2, 3)  # only the low 16 bits are stored
        m.fill(a.base + 13, 0x1A5, 1, 2)  # only the low 8 bits
        m.fill(a.base + 20, 7, 4, 0)  # nothing at all
        host, address = _host(64)
        m.copy(address, a.base, 64)
        assert host.raw == bytes(expected)
    # host -> device, device -> device, device -> host
    src, src_address = _host(64)
    src.raw = bytes(range(64))
    dev, other = blocks["device"], blocks["managed"]
    m.copy(dev.base, src_address, 64)
    m.copy(other.base + 8, dev.base, 32)
    back, back_address = _host(64)
    m.copy(back_address, other.base, 64)
    assert back.raw == bytes(expected[:8]) + bytes(range(32)) + bytes(expected[40:])
    pinned, pinned_address = _host(4096)
    reg = m.register(pinned_address, 4096, 0, None)
    assert m.find(pinned_address + 100) is reg
    for a in [*blocks.values(), reg]:
        assert m.release(a.base) is a
    assert m.find(dev.base) is None
    log = fake()
    assert log[:3] == ["device 64", "host 64", "managed 64"]
    # on this thread's own HIP stream, which does not synchronize with the null stream
    n = hip.thread_stream()
    assert f"stream {n} flags 1" in log
    for call, count in (("hipMemsetD32Async 16", 3), ("hipMemsetD16Async 3", 3), ("hipMemsetD8Async 2", 3),
                        ("hipMemcpyAsync 64", 5), ("hipMemcpyAsync 32", 1)):
        assert log.count(f"{call} stream {n}") == count, call
    assert not any("Memset" in line and " 0 stream" in line for line in log)  # empty fills never reach HIP
    assert log[-4:] == ["free device 64", "free host 64", "free managed 64", "free registered 4096"]


def test_a_thread_gives_its_hip_stream_back_when_it_ends(fake):
    block = hip.memory.allocate(16, "device", 0, None)
    used = []
    worker = threading.Thread(target=lambda: (hip.memory.fill(block.base, 1, 4, 4), used.append(hip.thread_stream())))
    worker.start()
    worker.join()
    del worker
    gc.collect()
    assert used[0] != hip.thread_stream()  # this thread has a stream of its own
    log = fake()
    assert log.index(f"hipMemsetD32Async 4 stream {used[0]}") < log.index(f"stream {used[0]} destroyed")
    hip.memory.release(block.base)


def test_hip_failures_carry_their_curesult(fake):
    with pytest.raises(MemoryError):  # hipErrorOutOfMemory: the driver answers CUDA_ERROR_OUT_OF_MEMORY
        hip.memory.allocate(1 << 20, "device", 0, None)
    h = hip_runtime.Hip.get()
    with pytest.raises(hip_runtime.HipError) as err:
        h.free(0x1000)  # not an allocation: hipErrorInvalidValue
    assert (err.value.code, err.value.cu_result) == (1, 1)
    with pytest.raises(hip_runtime.HipError) as err:
        h.host_unregister(0x1000)
    assert (err.value.code, err.value.cu_result) == (713, 713)  # CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
    with pytest.raises(hip_runtime.HipError) as err:  # an x86-64 ELF is no AMDGPU code object
        h.module_load(Path(sys.executable).read_bytes()[:4096])
    assert err.value.cu_result == 200  # CUDA_ERROR_INVALID_IMAGE
    assert "hipModuleLoadData rejected" in fake()


def test_module_load_get_function_and_launch_pass_the_parameter_buffer_exactly(fake):
    module = hip.load([PTX])
    assert [line for line in fake() if line.startswith("hipModuleLoadData")] != []  # the fake checked the ELF
    info = module.kernels["scale"]
    assert [(p.name, p.offset, p.size) for p in info.params] == [("p", 0, 8), ("n", 8, 4), ("x", 16, 8), ("v", 32, 12)]
    assert info.param_size == 44 and info.max_threads == 1024 and info.static_shared == 0
    # module variables: found by name, with their initial contents, tracked as device memory
    for name, contents in (("counter", struct.pack("<I", 7)), ("table", bytes(range(1, 17)))):
        g = module.globals[name]
        assert g.size == len(contents) and hip.memory.find(g.address).kind == "global"
        host, address = _host(g.size)
        hip.memory.copy(address, g.address, g.size)
        assert host.raw == contents
    params = struct.pack("<QI4xd8x", 0x123456789ABC, 3, 2.5) + bytes(range(100, 112))
    hip.launch(module, "scale", (4, 2, 1), (32, 2, 1), params, 128)
    # grid.sync() modules take the workspace pointer after the parameters (0 when not cooperative)
    synced = hip.load([SYNC_PTX])
    hip.launch(synced, "synced", (1, 1, 1), (64, 1, 1), struct.pack("<I", 0xA1B2C3D4), 0, grid_workspace=0x1122334455667788)
    launches = [line.split() for line in fake() if line.startswith("launch")]
    assert launches[0][:12] == ["launch", "scale", "grid", "4", "2", "1", "block", "32", "2", "1", "shared", "128"]
    assert launches[0][12:14] == ["stream", str(hip.thread_stream())] and bytes.fromhex(launches[0][15]) == params
    # a cooperative launch goes through hipModuleLaunchCooperativeKernel (HIP checks that every
    # block is resident), one pointer per argument: the parameter, then the workspace at offset 8
    cooperative = [line.split() for line in fake() if line.startswith("cooperative")]
    assert cooperative[0][:11] == ["cooperative", "synced", "grid", "1", "1", "1", "block", "64", "1", "1", "shared"]
    assert cooperative[0][15:] == ["+0:00000000a1b2c3d4", "+8:1122334455667788"]  # u32, padding
    hip.launch(synced, "synced", (2, 1, 1), (64, 1, 1), struct.pack("<I", 5), 0)  # not cooperative: workspace 0
    plain = [line.split() for line in fake() if line.startswith("launch")][-1]
    assert plain[1] == "synced" and bytes.fromhex(plain[15]) == struct.pack("<I4xQ", 5, 0)
    with pytest.raises(hip_runtime.HipError) as err:
        module.function("missing")
    assert err.value.cu_result == 500  # hipErrorNotFound: CUDA_ERROR_NOT_FOUND


def test_the_stack_size_limit_goes_to_hip_when_it_changes(fake):
    """cuCtxSetLimit(CU_LIMIT_STACK_SIZE), which the driver passes with each launch, is
    hipDeviceSetLimit(hipLimitStackSize) before the first launch that sees a new value."""
    module = hip.load([PTX])
    params = struct.pack("<QI4xd8x", 0, 0, 0.0) + bytes(12)
    for size in (4096, 4096, 1024):
        hip.launch(module, "scale", (1, 1, 1), (32, 1, 1), params, 0, stack_size=size)
    log = [" ".join(line.split()[:2]) for line in fake() if line.startswith(("launch", "limit"))]
    assert log[-5:] == ["limit stack", "launch scale", "launch scale", "limit stack", "launch scale"]
    assert [line for line in fake() if line.startswith("limit")][-2:] == ["limit stack 4096", "limit stack 1024"]
    for g in module.globals.values():  # as the driver's cuModuleUnload does
        hip.memory.release(g.address)
    hip.unload(module)
    assert fake()[-1] == "hipModuleUnload"


def test_a_gpu_the_compiler_does_not_know_is_no_binary_for_gpu(fake, monkeypatch):
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.1.0")  # gfx1010: not a target we build for
    with pytest.raises(hip.NoBinaryForGpu, match="gfx1010") as err:
        hip.load([SYNC_PTX])
    assert err.value.cu_result == 209  # CUDA_ERROR_NO_BINARY_FOR_GPU


def _scenario(step: str, fake_rocm: Path, tmp_path: Path, **extra: str) -> tuple[dict, list[str], str]:
    env = dict(os.environ, ZLUDA_BACKEND="hip", FAKE_HIP_FAULT="fault", **_environment(fake_rocm, tmp_path), **extra)
    res = subprocess.run([sys.executable, str(HERE / "hip_driver_scenario.py"), step], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    log = tmp_path / "hip.log"
    return json.loads(res.stdout), log.read_text().splitlines() if log.exists() else [], res.stderr


def test_driver_memory_entry_points_go_through_hip(fake_rocm, tmp_path):
    out, log, _ = _scenario("memory", fake_rocm, tmp_path)
    rc = out["rc"]
    assert all(v == [0] for k, v in rc.items() if k not in ("cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyDtoH_v2"))
    assert rc["cuMemAlloc_v2"] == [0, 2]  # the second asks for more than the fake has: CUDA_ERROR_OUT_OF_MEMORY
    assert rc["cuMemFree_v2"] == [0, 0, 1]  # freeing twice: CUDA_ERROR_INVALID_VALUE
    expected = bytearray(struct.pack("<I", 0xDEADBEEF) * 16)
    expected[8:18] = struct.pack("<H", 0x1234) * 5
    expected[30:33] = b"\xa5" * 3
    assert bytes.fromhex(out["after_sets"]) == bytes(expected)
    expected[0:16] = bytes(range(16))
    expected[48:64] = bytes(range(16))
    assert bytes.fromhex(out["after_copies"]) == bytes(expected)
    # synchronous calls run on the calling thread, on its own non-blocking HIP stream (1: the first)
    assert log == ["device 64", "stream 1 flags 1", "hipMemsetD32Async 16 stream 1", "hipMemsetD16Async 5 stream 1",
                   "hipMemsetD8Async 3 stream 1", "hipMemcpyAsync 64 stream 1", "host 16", "hipMemcpyAsync 16 stream 1",
                   "hipMemcpyAsync 16 stream 1", "hipMemcpyAsync 64 stream 1", "free host 16", "managed 32",
                   "free managed 32", "registered 4096 flags 0", "free registered 4096", "free device 64"]


def test_driver_module_and_launch_go_through_hip(fake_rocm, tmp_path):
    out, log, stderr = _scenario("launch", fake_rocm, tmp_path)
    rc = out["rc"]
    assert rc["cuModuleLoadData"] == [0, 0]
    assert rc["cuModuleGetFunction"] == [0, 500, 0]  # "missing": CUDA_ERROR_NOT_FOUND
    assert rc["cuModuleUnload"] == [0] and out["distinct_globals"]
    assert sum(line.startswith("hipModuleLoadData ") for line in log) == 2
    assert log.count("hipModuleUnload") == 1  # cuModuleUnload gives the code object back
    assert rc["cuMemcpyDtoH_v2"] == [0, 0]  # the first module's variable outlives the second
    assert rc["cuLaunchKernel"] == [0, 0]
    assert rc["cuCtxSynchronize"] == [0, 700]  # the fake's hipErrorIllegalAddress: CUDA_ERROR_ILLEGAL_ADDRESS
    assert "hipStreamSynchronize failed: an illegal memory access" in stderr
    assert out["counter"] == [4, 7]  # cuModuleGetGlobal: hipModuleGetGlobal's address, read with hipMemcpy
    launches = [line.split() for line in log if line.startswith("launch")]
    assert launches[0][:12] == ["launch", "scale", "grid", "4", "2", "1", "block", "32", "2", "1", "shared", "128"]
    assert bytes.fromhex(launches[0][15]) == struct.pack("<QI4xd", out["device_pointer"], 3, 2.5)
    assert launches[1][1] == "fault" and len(launches[1]) == 15  # no parameters: an empty kernarg buffer


def test_each_cuda_stream_runs_on_a_hip_stream_of_its_own(fake_rocm, tmp_path):
    out, log, _ = _scenario("streams", fake_rocm, tmp_path)
    assert all(rc == 0 for calls in out["rc"].values() for rc in calls), out["rc"]
    created = [line.split() for line in log if line.startswith("stream ") and "flags" in line]
    assert created and all(words[3] == "1" for words in created)  # hipStreamNonBlocking: no null-stream syncs
    on, work = {}, {}  # kernel argument n -> its launch's HIP stream; HIP stream -> what ran on it
    for line in log:
        words = line.split()
        if words[0] == "launch":
            n = struct.unpack_from("<I", bytes.fromhex(words[15]), 8)[0]
            on[n] = words[13]
            work.setdefault(words[13], []).append(f"kernel {n}")
        elif line.startswith("hipMemcpyAsync 8 "):  # the copies back (the uploads are 16 bytes)
            work.setdefault(words[-1], []).append("copy")
    assert sorted(on) == [1, 2, 3] and "0" not in work  # nothing goes to HIP's blocking null stream
    # the CUDA streams' kernels can overlap on the GPU: each has a HIP stream of its own, where
    # the stream's copy back follows its kernel
    assert len(set(on.values())) == 3
    assert all(work[on[n]] == [f"kernel {n}", "copy"] for n in on), work
    assert out["results"] == [2.5, 5.0, 7.5]


def test_devices_are_the_gpus_hip_sees_with_their_attributes(fake_rocm, tmp_path):
    out, _, stderr = _scenario("devices", fake_rocm, tmp_path, FAKE_HIP_DEVICES="2")
    assert out["count"] == 2
    assert all(rc == 0 for calls in out["rc"].values() for rc in calls)
    for d, (name, total, attributes) in enumerate(out["devices"]):
        assert name == f"Fake AMD GPU {d}" and total == (d + 1) << 34
        # the fake answers attribute a with 1000 * (device + 1) + a: 16 (SM count) is HIP's 63
        assert attributes["16"] == 1000 * (d + 1) + 63
        assert attributes["10"] == 32  # a CUDA warp, on wave64 GPUs too
        # no HIP equivalent: the driver's own values (compute capability 8.6 by default)
        assert attributes["75"] == 8 and attributes["111"] == 1024
    # a context on GPU 1 is CUDA_ERROR_NOT_SUPPORTED, not work silently run on GPU 0
    assert out["retain"] == [0, 801] and out["create"] == [0, 801]
    assert stderr.count("device 1 (Fake AMD GPU 1): the HIP backend runs work on device 0 only") == 1


def test_cuinit_without_a_gpu_is_no_device_and_says_why(fake_rocm, tmp_path):
    out, _, stderr = _scenario("init", fake_rocm, tmp_path, FAKE_HIP_DEVICES="0")
    assert out["rc"] == {"cuInit": [100]}  # CUDA_ERROR_NO_DEVICE
    assert "reports no AMD GPU" in stderr or "hipGetDeviceCount" in stderr
    assert "ZLUDA_BACKEND=cpu" in stderr
