"""NVIDIA's JIT toolchains over the HIP backend on the emulator: tests/e2e/test_toolchains.py's
NVRTC program (C++ compiled to a cubin file, read back and launched) and nvJitLink clients (a
linked cubin loaded and launched in another process; NVRTC LTO-IR linked with -lto, then
launched), each run with the emulator as the backend of every process it starts."""

from __future__ import annotations

import pytest

from tests.e2e import test_toolchains as toolchains
from tests.e2e.conftest import zluda_run
from tests.emulator.cached_objects import assert_amdgpu_only

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


@pytest.fixture(params=["gfx1100", "gfx950"])
def emulated(request, monkeypatch, tmp_path) -> str:
    """Every `zluda run` and driver process the test starts runs on the emulated GPU."""
    for name, value in (("ZLUDA_BACKEND", "hip"), ("ZLUDA_HIP", "emulator"), ("ZLUDA_HIP_ARCH", request.param),
                        ("CUDA_CACHE_PATH", str(tmp_path / "cache"))):
        monkeypatch.setenv(name, value)
    return request.param


def test_nvrtc_cubin_written_read_back_and_launched(emulated, nvcc, tmp_path) -> None:
    toolchains.test_nvrtc_sm_86_cubin_written_read_back_and_launched(nvcc, zluda_run, tmp_path)
    assert_amdgpu_only(tmp_path / "cache")


def test_nvjitlink_cubin_loaded_in_another_process(emulated, tmp_path) -> None:
    toolchains.test_nvjitlink_cubin_copied_and_loaded_in_another_process(zluda_run, tmp_path)
    assert_amdgpu_only(tmp_path / "cache")


def test_nvjitlink_lto_of_nvrtc_ltoir(emulated, tmp_path) -> None:
    toolchains.test_nvjitlink_lto_of_nvrtc_ltoir(tmp_path)
    assert_amdgpu_only(tmp_path / "cache")
