"""The HIP backend over the libamdhip64 stand-in that runs kernels on the ISA emulator
(ZLUDA_HIP=emulator): selection, memory at host addresses, modules with variables, launches,
and kernel faults as HIP errors."""

from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np
import pytest

from zluda_py.backends import hip, hip_runtime

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

PTX = """.version 8.0
.target sm_80
.address_size 64
.global .u32 bias = 5;
.global .u64 bias_address = generic(bias);
.visible .entry scaled(.param .u64 out, .param .u32 n, .param .f32 x)
{
  .reg .b32 %r<6>; .reg .b64 %rd<6>; .reg .f32 %f<3>; .reg .pred %p;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n]; ld.param.f32 %f1, [x];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mad.lo.u32 %r2, %r3, %r4, %r2;
  setp.ge.u32 %p, %r2, %r1; @%p bra done;
  ld.global.u64 %rd2, [bias_address]; ld.u32 %r5, [%rd2];
  cvt.rn.f32.u32 %f2, %r2; mul.rn.f32 %f2, %f2, %f1; cvt.rzi.u32.f32 %r3, %f2; add.u32 %r3, %r3, %r5;
  mul.wide.u32 %rd3, %r2, 4; add.u64 %rd4, %rd1, %rd3; st.global.u32 [%rd4], %r3;
done:
  ret;
}
"""


@pytest.fixture(params=["gfx1100", "gfx950"])
def emulated(request, monkeypatch, tmp_path, lld) -> str:
    monkeypatch.setenv("ZLUDA_HIP", "emulator")
    monkeypatch.setenv("ZLUDA_HIP_ARCH", request.param)
    monkeypatch.setenv("CUDA_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setattr(hip_runtime.Hip, "_instance", None)
    monkeypatch.setattr(hip, "_local", threading.local())  # thread streams and devices of an earlier runtime
    monkeypatch.setattr(hip, "_devices", [])
    return request.param


def test_only_zluda_hip_selects_it(monkeypatch, emulated):
    assert hip.available() and hip.device_gfx(0) == emulated
    assert hip.devices()[0].name == f"ZLUDA emulated AMD GPU ({emulated})"
    monkeypatch.setenv("ZLUDA_HIP", "emulated")  # a misspelling is an error, never ROCm or a guess
    monkeypatch.setattr(hip_runtime.Hip, "_instance", None)
    with pytest.raises(hip_runtime.HipUnavailable, match="expected 'emulator'"):
        hip_runtime.Hip.get()
    monkeypatch.setenv("ZLUDA_HIP", "emulator")
    monkeypatch.setenv("ZLUDA_HIP_ARCH", "gfx1010")
    with pytest.raises(hip_runtime.HipUnavailable, match="gfx1010"):
        hip_runtime.Hip.get()


def test_the_device_has_hip_compute_units_not_host_cpus(emulated):
    """The cooperative launch limit multiplies by the device's `cores`: it once was the host's CPU
    count, so the largest grid the occupancy API promised (blocks per CU x HIP's 4 CUs) was refused."""
    from zluda_py.backends.hip_emulator import COMPUTE_UNITS

    device = hip.devices()[0]
    assert device.cores == COMPUTE_UNITS == device.attribute(16)  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT


def test_device_memory_is_host_memory_the_copies_reach(emulated):
    m = hip.memory
    block = m.allocate(64, "device", 0, None)
    host = ctypes.create_string_buffer(bytes(range(64)), 64)
    m.copy(block.base, ctypes.addressof(host), 64)
    m.fill(block.base + 8, 0xDEADBEEF, 4, 2)
    assert ctypes.string_at(block.base, 16) == bytes(range(8)) + struct.pack("<II", 0xDEADBEEF, 0xDEADBEEF)
    with pytest.raises(hip_runtime.HipError) as err:  # runs past the end of the allocation
        m.copy(ctypes.addressof(host), block.base + 32, 64)
    assert err.value.cu_result == 1
    m.release(block.base)


def test_a_module_with_variables_runs_and_its_variables_are_device_memory(emulated):
    # gfx950 loads through the variable's address with flat_load_dword, whose SADDR field LLVM
    # encodes as 0 (s0): the emulator once added s0 to the address
    module = hip.load([PTX])
    bias = module.globals["bias"]
    assert ctypes.string_at(bias.address, 4) == struct.pack("<I", 5)  # initialized at its address
    hip.memory.copy(bias.address, ctypes.addressof(ctypes.c_uint32(100)), 4)
    n = 300
    out = hip.memory.allocate(4 * n, "device", 0, None)
    hip.launch(module, "scaled", (3, 1, 1), (128, 1, 1), struct.pack("<QIf", out.base, n, 0.25), 0)
    got = np.frombuffer(ctypes.string_at(out.base, 4 * n), np.uint32)
    np.testing.assert_array_equal(got, (np.arange(n, dtype=np.float32) * np.float32(0.25)).astype(np.uint32) + 100)
    hip.memory.release(out.base)
    hip.unload(module)


MANAGED = """.version 8.0
.target sm_80
.address_size 64
.global .attribute(.managed) .align 4 .u32 counts[3] = {10, 20, 30};
.global .attribute(.managed) .align 8 .u64 total;
.visible .entry add_tid()
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x; mov.u64 %rd1, counts; mul.wide.u32 %rd2, %r1, 4; add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3]; add.u32 %r3, %r2, %r1; st.global.u32 [%rd3], %r3;
  cvt.u64.u32 %rd2, %r3; atom.global.add.u64 %rd1, [total], %rd2;
  ret;
}
"""


def test_managed_variables_are_managed_allocations(emulated):
    """A __managed__ variable is managed memory (hipMallocManaged) holding its initializer, which
    the host reads and writes at the address cuModuleGetGlobal gives and kernels reach through the
    code object's pointer to it; unloading the module frees it. It was once the code object's own
    (device) memory, so cuMemAdvise refused it."""
    module = hip.load([MANAGED])
    counts, total = module.globals["counts"], module.globals["total"]
    assert counts.managed and total.managed and (counts.size, total.size) == (12, 8)
    assert hip.memory.find(counts.address).kind == "managed" == hip.memory.find(total.address).kind
    assert ctypes.string_at(counts.address, 12) == struct.pack("<3I", 10, 20, 30)
    assert ctypes.string_at(total.address, 8) == bytes(8)
    ctypes.memmove(counts.address + 8, struct.pack("<I", 300), 4)  # the host writes it in place
    hip.launch(module, "add_tid", (1, 1, 1), (3, 1, 1), b"", 0)
    assert ctypes.string_at(counts.address, 12) == struct.pack("<3I", 10, 21, 302)
    assert ctypes.string_at(total.address, 8) == struct.pack("<Q", 10 + 21 + 302)
    for g in (counts, total):  # what the driver does at cuModuleUnload (driver/module.py)
        hip.memory.release(g.address)
    hip.unload(module)
    assert hip.memory.find(counts.address) is None


def test_a_kernel_fault_is_an_illegal_address_at_synchronize(emulated, capfd):
    module = hip.load([PTX])
    with pytest.raises(hip_runtime.HipError) as err:  # `out` points nowhere the device can reach
        hip.launch(module, "scaled", (1, 1, 1), (32, 1, 1), struct.pack("<QIf", 0x1000, 32, 1.0), 0)
    assert err.value.cu_result == 700 and "hipStreamSynchronize" in str(err.value)
    stderr = capfd.readouterr().err  # as ROCm reports GPU faults: a line naming the instruction
    assert "zluda emulator: scaled: " in stderr and "memory fault" in stderr
    hip.unload(module)


DIVISION = """.version 8.0
.target sm_80
.address_size 64
.visible .entry quotient(.param .u64 x, .param .u64 q)
{
  .reg .b32 %r<2>; .reg .b64 %rd<6>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd4, [q]; mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4; add.u64 %rd3, %rd1, %rd2; ld.global.f32 %f1, [%rd3];
  div.rn.f32 %f2, %f1, 0f40400000;
  add.u64 %rd5, %rd4, %rd2; st.global.f32 [%rd5], %f2;
  ret;
}
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx950"])
def test_f32_division(arch, lld):
    """div.rn.f32: v_div_scale (lane-varying ifs), v_rcp, v_fma, v_div_fmas (VCC, not src2, in its
    VOP3 form), v_div_fixup."""
    from zluda_py.emulator import run_ptx

    x = (np.arange(64, dtype=np.float32) - 20) * np.float32(1.7)
    out = run_ptx(DIVISION, "quotient", 1, 64, [x, np.zeros(64, np.float32)], arch)[1]
    np.testing.assert_array_equal(out, x / np.float32(3))
