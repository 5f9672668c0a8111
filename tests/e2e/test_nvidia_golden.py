"""Our driver against outputs recorded on NVIDIA hardware (tests/hardware/golden, recorded with
tests/hardware/run_nvidia.sh): the same program must print the same lines."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parents[1] / "hardware" / "golden"


def test_launch_configuration_codes_match_nvidia(nvcc, run):
    """What an invalid launch configuration gives each caller: cudart (<<<>>>, cudaLaunchKernel)
    and the driver (cuLaunchKernel, from dlsym and from cuGetProcAddress, cuLaunchKernelEx).
    On the H200 the driver answered cudart's cuLaunchKernel with CUDA_ERROR_INVALID_VALUE too
    (the interposer's lines), so cudaGetLastError is cudaErrorInvalidValue. The `attr` lines:
    cudaFuncAttributes.constSizeBytes is the module's whole __constant__ size for every kernel."""
    golden = [ln for ln in (GOLDEN / "launch_probe.txt").read_text().splitlines()
              if ln.startswith(("runtime ", "driver ", "attr "))]
    cudart_saw = [ln for ln in (GOLDEN / "launch_probe.txt").read_text().splitlines() if ln.startswith("[interpose]")]
    assert any("block (2048,1,1) shared 0 -> 1" in ln for ln in cudart_saw)  # the record holds what it claims
    probe = Path(__file__).parents[1] / "hardware" / "launch_probe.cu"
    r = run(nvcc([probe], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == golden, r.stdout


def test_texture_fetches_match_nvidia(nvcc, run):
    """Every texture fetch and surface access of texture_probe.cu gives the bits the GPU gave:
    address modes, filtering and its weights (trilinear's eight corners one by one), layers, cube
    faces, tld4, boundary modes."""
    recorded = GOLDEN / "texture_probe.txt"
    if not recorded.exists():
        pytest.skip("golden/texture_probe.txt not recorded yet: tests/hardware/run_nvidia.sh on an NVIDIA GPU writes it")
    golden = [ln for ln in recorded.read_text().splitlines() if not ln.startswith("#")]
    r = run(nvcc([Path(__file__).parents[1] / "hardware" / "texture_probe.cu"], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    ours = r.stdout.splitlines()
    differ = [f"nvidia {g}\nours   {o}" for g, o in zip(golden, ours) if g != o]
    assert len(ours) == len(golden) and not differ, f"{len(differ)} of {len(golden)} lines differ:\n" + "\n".join(differ[:40])


def test_driver_choices_match_nvidia(nvcc, run):
    """Behaviours the documentation leaves open: a pool's maxSize (not enforced), IPC handles
    opened in their own process (CUDA_ERROR_INVALID_CONTEXT), an event handle of an event
    without the interprocess flag (CUDA_ERROR_INVALID_HANDLE)."""
    golden = [ln for ln in (GOLDEN / "api_probe.txt").read_text().splitlines() if not ln.startswith("#")]
    r = run(nvcc([Path(__file__).parents[1] / "hardware" / "api_probe.cu"], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == golden, r.stdout
