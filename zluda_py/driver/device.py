"""The devices of the backend in use, by ordinal (what a device is: zluda_py/devinfo.py)."""

from __future__ import annotations

from ..curesult import CUDA_ERROR_INVALID_DEVICE, CudaError
from ..devinfo import Device


def devices() -> list[Device]:
    """The backend's devices (the CPU backend: `devinfo.cpu_devices()`)."""
    from .. import backends

    return backends.select().devices()


def get(ordinal: int) -> Device:
    devs = devices()
    if not 0 <= ordinal < len(devs):
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"device {ordinal} (there are {len(devs)})")
    return devs[ordinal]
