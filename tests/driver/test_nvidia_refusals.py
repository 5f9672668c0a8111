"""Valid PTX that NVIDIA's driver will not load is refused here the same way: each texture and
surface form of tests/hardware/ptx_forms_probe.py, loaded through our driver, gives the module
load's CUresult an NVIDIA H100 gave (tests/hardware/golden/ptx_forms_probe.txt, its `jit` column),
and cuModuleGetFunction's where the module loads without its kernel (txq's non-size queries on a
texture object: 500)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.driver.conftest import shim_path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "hardware" / "golden" / "ptx_forms_probe.txt"


def _jit_column(text: str) -> dict[str, str]:
    """form -> the result of loading it as PTX (`0`, `801 CUDA_ERROR_NOT_SUPPORTED`, or
    `0, cuModuleGetFunction 500 CUDA_ERROR_NOT_FOUND`)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ": jit " in line:
            form, rest = line.split(": jit ", 1)
            out[form] = rest.split(";")[0]
    return out


def test_forms_load_or_fail_as_on_an_h100(tmp_path: Path) -> None:
    golden = _jit_column(GOLDEN.read_text())
    assert sum(v.startswith("801") for v in golden.values()) >= 4  # the refused suq queries
    assert sum("cuModuleGetFunction 500" in v for v in golden.values()) >= 10  # the absent txq kernels
    env = {"LD_LIBRARY_PATH": str(Path(shim_path()).parent), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "CUDA_CACHE_PATH": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "tests.hardware.ptx_forms_probe"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    ours = _jit_column(r.stdout)
    assert ours.keys() == golden.keys()
    differ = {form: (ours[form], golden[form]) for form in golden if ours[form] != golden[form]}
    assert not differ, differ


ABSENT_PTX = b"""
.version 8.0
.target sm_80
.address_size 64
.global .texref ref;
.func (.reg .b32 mode) address_mode(.reg .u64 tex)
{
  txq.addr_mode_0.b32 mode, [tex];
  ret;
}
.visible .entry queries_a_handle(.param .u64 tex, .param .u64 out)
{
  .reg .u64 %t, %o; .reg .b32 %r;
  ld.param.u64 %t, [tex]; ld.param.u64 %o, [out];
  txq.filter_mode.b32 %r, [%t];
  st.global.u32 [%o], %r;
  ret;
}
.visible .entry calls_a_query(.param .u64 tex, .param .u64 out)
{
  .reg .u64 %t, %o; .reg .b32 %r;
  ld.param.u64 %t, [tex]; ld.param.u64 %o, [out];
  call (%r), address_mode, (%t);
  st.global.u32 [%o], %r;
  ret;
}
.visible .entry queries_a_reference(.param .u64 out)
{
  .reg .u64 %o; .reg .b32 %r;
  ld.param.u64 %o, [out];
  txq.filter_mode.b32 %r, [ref];
  st.global.u32 [%o], %r;
  ret;
}
.visible .entry stores(.param .u64 out)
{
  .reg .u64 %o;
  ld.param.u64 %o, [out];
  st.global.u32 [%o], 42;
  ret;
}
\0"""


def test_kernels_querying_a_handle_are_left_out_and_the_rest_work(cu) -> None:
    import ctypes
    from ctypes import byref, c_uint, c_void_p

    module = c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(module), ABSENT_PTX))
    fn = c_void_p()
    for name in (b"queries_a_handle", b"calls_a_query"):
        assert cu.cuModuleGetFunction(byref(fn), module, name) == 500, name  # CUDA_ERROR_NOT_FOUND
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"queries_a_reference"))  # not probed: kept
    cu.ok(cu.cuModuleGetFunction(byref(fn), module, b"stores"))
    out = ctypes.c_uint64()
    cu.ok(cu.cuMemAlloc_v2(byref(out), ctypes.c_size_t(4)))
    params = (c_void_p * 1)(ctypes.cast(byref(out), c_void_p))
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    got = c_uint()
    cu.ok(cu.cuMemcpyDtoH_v2(byref(got), out, ctypes.c_size_t(4)))
    assert got.value == 42
    cu.ok(cu.cuMemFree_v2(out))
    cu.ok(cu.cuModuleUnload(module))
