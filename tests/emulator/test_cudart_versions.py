"""Every CUDA runtime release of tests/driver/test_cudart_versions.py (the dlopen probe
cudart_versions.c: memory, streams, events, a registered kernel) over the HIP backend on the
emulator. The releases differ in what they ask of the driver, not of the GPU, so each runs on
one target, the two taking turns."""

from __future__ import annotations

import pytest

from tests.driver import test_cudart_versions as versions
from tests.emulator.cached_objects import assert_amdgpu_only
from tests.driver.test_cudart_versions import probe  # noqa: F401  (the probe's build, a fixture)

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)

CASES = [(release, ("gfx1100", "gfx950")[i % 2]) for i, release in enumerate(versions.RELEASES)]


@pytest.mark.parametrize("release, arch", CASES, ids=[f"{r}-{a}" for r, a in CASES])
def test_runtime_probe_on_the_emulator(release: str, arch: str, probe, nvcc, tmp_path,  # noqa: F811
                                       monkeypatch) -> None:
    for name, value in (("ZLUDA_BACKEND", "hip"), ("ZLUDA_HIP", "emulator"), ("ZLUDA_HIP_ARCH", arch),
                        ("CUDA_CACHE_PATH", str(tmp_path / "cache"))):
        monkeypatch.setenv(name, value)
    versions.test_runtime_probe(release, probe, nvcc, tmp_path)
    assert_amdgpu_only(tmp_path / "cache")  # its kernel ran as an AMDGPU code object
