"""The HIP binding without an AMD GPU: clear errors, error-code mapping, device discovery.
With ROCm and an AMD GPU present, a real launch runs too (test_hip_fake.py tests the backend
against a fake libamdhip64.so)."""

from __future__ import annotations

import pytest

from zluda_py.backends import hip, hip_runtime


@pytest.fixture
def no_rocm(monkeypatch, tmp_path):
    monkeypatch.setattr(hip_runtime, "library_candidates", lambda: [tmp_path / "lib" / "libamdhip64.so"])
    monkeypatch.setattr(hip_runtime.Hip, "_instance", None)


def test_missing_rocm_is_a_clear_error_not_a_crash(no_rocm):
    with pytest.raises(hip_runtime.HipUnavailable) as err:
        hip_runtime.Hip.get()
    assert "libamdhip64.so: not found" in str(err.value)
    assert "ZLUDA_BACKEND=cpu" in str(err.value)
    assert err.value.cu_result == 100  # CUDA_ERROR_NO_DEVICE
    assert hip.available() is False


def test_rocm_path_is_searched_first(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    assert hip_runtime.library_candidates()[0] == tmp_path / "lib" / "libamdhip64.so"
    assert hip_runtime.library_candidates()[-1].as_posix() == "/opt/rocm/lib/libamdhip64.so"


@pytest.mark.parametrize("code, expected", [(0, 0), (1, 1), (2, 2), (98, 400), (13, 500), (200, 200),
                                            (218, 218), (700, 700), (719, 719), (53, 719), (424242, 999)])
def test_hip_errors_map_to_the_closest_curesult(code, expected):
    assert hip_runtime.cu_result(code) == expected


def test_gfx_names_from_the_kfd_topology(tmp_path):
    for node, version in [(0, 0), (1, 90402), (2, 90010), (10, 110000), (3, 120001)]:
        d = tmp_path / str(node)
        d.mkdir()
        (d / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\n")
    assert hip_runtime.gfx_names(tmp_path) == ["gfx942", "gfx90a", "gfx1201", "gfx1100"]


def test_warp_size_is_always_32_without_asking_the_device():
    h = object.__new__(hip_runtime.Hip)  # no library needed for this attribute
    assert h.attribute(hip_runtime.CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0) == 32


@pytest.mark.skipif(not hip.available(), reason="needs ROCm and an AMD GPU")
def test_vector_add_on_a_real_gpu():
    import struct

    from zluda_py.compiler.amdgpu import compile_code_object
    from zluda_py.ptx import parse

    ptx = """.version 8.0\n.target sm_80\n.address_size 64
.visible .entry inc(.param .u64 p)
{ .reg .b32 %r<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p]; mov.u32 %r1, %tid.x; mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3]; add.s32 %r2, %r2, %r1; st.global.u32 [%rd3], %r2; ret; }"""
    h = hip_runtime.Hip.get()
    gfx = hip_runtime.gfx_names()[0]
    co, meta = compile_code_object(parse(ptx), gfx)
    mod = hip.HipModule.load(co, meta)
    buf = h.malloc(256)
    h.copy_to_device(buf, struct.pack("<64I", *range(64)), 256)
    mod.launch("inc", (1, 1, 1), (64, 1, 1), struct.pack("<Q", buf))
    assert struct.unpack("<64I", h.read(buf, 256)) == tuple(2 * i for i in range(64))


@pytest.mark.parametrize("override, gfx", [("9.0.10", "gfx90a"), ("9.4.2", "gfx942"), ("11.0.0", "gfx1100"),
                                           ("12.0.1", "gfx1201")])
def test_hsa_override_gfx_version_names_the_target(monkeypatch, override, gfx):
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", override)
    assert hip.device_gfx(0) == gfx


def test_malformed_hsa_override_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "gfx942")
    with pytest.raises(hip_runtime.HipUnavailable, match="expected major.minor.stepping"):
        hip.device_gfx(0)
