"""Texture references on the HIP backend: a module declaring one is refused when it is loaded,
with CUDA_ERROR_INVALID_PTX (218, the code of PTX the target does not translate) and a log line
naming the declaration and its line (docs/amdgpu.md: texture references are refused), not an
internal error (999). The driver runs over the emulator's libamdhip64 stand-in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

SCRIPT = r"""
import ctypes
from ctypes import byref, c_size_t, c_uint, c_void_p
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ctx = c_void_p()
assert cu.cuCtxCreate_v2(byref(ctx), 0, 0) == 0
PTX = b'''.version 6.0
.target sm_80
.address_size 64
.global .texref tex;

.visible .entry read(.param .u64 out)
{
  .reg .b32 %r<2>; .reg .f32 %f<4>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  tex.1d.v4.f32.s32 {%f0, %f1, %f2, %f3}, [tex, {%r1}];
  st.global.f32 [%rd1], %f0;
  ret;
}
'''
it = c_uint()
assert cu.cuLogsCurrent(byref(it), 0) == 0
module = c_void_p()
print(cu.cuModuleLoadData(byref(module), PTX + b"\0"))
log = ctypes.create_string_buffer(4096)
size = c_size_t(4096)
assert cu.cuLogsDumpToMemory(byref(it), log, byref(size), 0) == 0
print(log.value.decode())
"""


def test_a_texture_reference_is_refused_at_load(tmp_path) -> None:
    env = dict(os.environ, ZLUDA_HIP="emulator", ZLUDA_HIP_ARCH="gfx1100", CUDA_CACHE_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())",
                        "run", "--backend", "hip", "--", sys.executable, "-c", SCRIPT],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    code, log = r.stdout.split("\n", 1)
    assert code == "218", r.stdout + r.stderr
    line = log.splitlines()[0]  # the load's failure, the one call logged since the iterator was taken
    assert line.startswith("cuModuleLoadData: CUDA_ERROR_INVALID_PTX: unsupported: .global .texref tex "), log
    assert line.endswith(" at <ptx>:4"), log
