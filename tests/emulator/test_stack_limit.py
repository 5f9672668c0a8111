"""cuCtxSetLimit(CU_LIMIT_STACK_SIZE) on the HIP backend over the emulator: the driver passes the
limit to HIP (hipDeviceSetLimit(hipLimitStackSize)), and the emulator gives a kernel with a
dynamic call stack that much stack per lane. The cases of tests/driver/test_stack_limit.py (its
PTX and its child program), with the CUresults NVIDIA's driver documents: recursion deeper than
the limit allows fails the launch with 719, and raising the limit lets it through."""

from __future__ import annotations

import pytest

from tests.driver.test_stack_limit import _run

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx950"])
def test_recursion_fails_or_passes_according_to_the_limit(arch: str) -> None:
    env = {"ZLUDA_BACKEND": "hip", "ZLUDA_HIP": "emulator", "ZLUDA_HIP_ARCH": arch}
    got, err = _run("default-8", **env)  # 9 frames of over 512 bytes in a 1024-byte stack
    assert got["sync"] == "719"
    assert "hipLimitStackSize" in err, err
    got, _ = _run("raised-8", **env)  # 16 KiB
    assert got["sync"] == "0"
    assert got["value"] == str(sum(range(9)))  # r(n) = n + r(n - 1), r(0) = 0
    assert got["limit_after"] == "16384"
