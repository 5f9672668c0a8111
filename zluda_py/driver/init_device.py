"""Entry points: cuInit, versions, error strings and devices."""

from __future__ import annotations

import sys

from . import api, device as devices
from .. import backends, devinfo
from ..ptx import versions
from .api import entry
from ..cdata import cstr, ffi, store
from ..curesult import (CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NO_DEVICE, CudaError,
                     error_name, error_string)

# The CUDA release of the newest PTX ISA we accept: NVRTC, cudart and CuPy warn or refuse when
# the driver is older than their toolkit (cudart 13.0 needs at least 13000).
DRIVER_VERSION = versions.cuda_version(versions.NEWEST_ISA)

# cuGetErrorName/String hand out pointers that stay valid for the process
_strings: dict[str, object] = {}


def _static_cstr(text: str):
    s = _strings.get(text)
    if s is None:
        s = _strings[text] = ffi.new("char[]", text.encode())
    return s


def require(*pointers) -> None:
    """NULL output pointers are CUDA_ERROR_INVALID_VALUE."""
    for p in pointers:
        if p == ffi.NULL:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL pointer argument")


@entry("cuInit", needs_init=False)
def cuInit(flags):
    if flags != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cuInit flags must be 0, got {flags}")
    devinfo.compute_capability()  # reject a malformed ZLUDA_COMPUTE_CAPABILITY up front
    try:
        backends.select()
    except backends.BackendUnavailable as e:
        _report_once(f"zluda: {e}; cuInit returns CUDA_ERROR_NO_DEVICE (ZLUDA_BACKEND=cpu runs on the CPU)")
        raise CudaError(CUDA_ERROR_NO_DEVICE, str(e)) from None
    if not devices.devices():
        raise CudaError(CUDA_ERROR_NO_DEVICE, "CUDA_VISIBLE_DEVICES hides every device")
    api.set_initialized()


_reported: set[str] = set()


def _report_once(message: str) -> None:
    """Programs often retry cuInit; say why it fails once, on stderr."""
    if message not in _reported:
        _reported.add(message)
        print(message, file=sys.stderr, flush=True)


@entry("cuDriverGetVersion", needs_init=False)
def cuDriverGetVersion(version):
    require(version)
    store(version, DRIVER_VERSION)


@entry("cuGetErrorName", needs_init=False)
def cuGetErrorName(code, pstr):
    require(pstr)
    name = error_name(code)
    if name is None:
        pstr[0] = ffi.NULL
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown CUresult {code}")
    pstr[0] = _static_cstr(name)


@entry("cuGetErrorString", needs_init=False)
def cuGetErrorString(code, pstr):
    require(pstr)
    text = error_string(code)
    if text is None:
        pstr[0] = ffi.NULL
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"unknown CUresult {code}")
    pstr[0] = _static_cstr(text)


@entry("cuDeviceGet")
def cuDeviceGet(pdev, ordinal):
    require(pdev)
    devices.get(ordinal)
    store(pdev, ordinal)


@entry("cuDeviceGetCount")
def cuDeviceGetCount(count):
    require(count)
    store(count, len(devices.devices()))


@entry("cuDeviceGetName")
def cuDeviceGetName(name, length, dev):
    require(name)
    if length <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"name buffer length {length}")
    data = devices.get(dev).name.encode()[: length - 1] + b"\0"
    ffi.memmove(name, data, len(data))


@entry("cuDeviceGetUuid", "cuDeviceGetUuid_v2")
def cuDeviceGetUuid(uuid, dev):
    require(uuid)
    ffi.memmove(uuid, devices.get(dev).uuid, 16)


@entry("cuDeviceTotalMem_v2")
def cuDeviceTotalMem(nbytes, dev):
    require(nbytes)
    store(nbytes, devices.get(dev).total_mem)


@entry("cuDeviceGetAttribute")
def cuDeviceGetAttribute(pi, attrib, dev):
    require(pi)
    store(pi, devices.get(dev).attribute(attrib))


@entry("cuDeviceGetProperties")
def cuDeviceGetProperties(prop, dev):
    """Deprecated but still answered by NVIDIA's driver (matrixMulDynlinkJIT calls it).
    CUdevprop's 14 int fields (maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], ...,
    textureAlign) are device attributes 1-14 in the same order."""
    require(prop)
    attributes = devices.get(dev).attributes()
    for i in range(14):
        prop[i] = attributes[i + 1]


@entry("cuDeviceComputeCapability")
def cuDeviceComputeCapability(major, minor, dev):
    require(major, minor)
    devices.get(dev)
    store(major, devinfo.compute_capability()[0])
    store(minor, devinfo.compute_capability()[1])


@entry("cuDeviceGetPCIBusId")
def cuDeviceGetPCIBusId(out, length, dev):
    require(out)
    if length <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"buffer length {length}")
    data = devices.get(dev).pci_bus_id.encode()[: length - 1] + b"\0"
    ffi.memmove(out, data, len(data))


@entry("cuDeviceGetByPCIBusId")
def cuDeviceGetByPCIBusId(pdev, bus_id):
    require(pdev, bus_id)
    wanted = cstr(bus_id).lower()
    for d in devices.devices():
        # "domain:bus:device.function", "bus:device.function" and "bus:device" are accepted
        if d.pci_bus_id.endswith(wanted) or d.pci_bus_id.startswith(wanted) or d.pci_bus_id[5:].startswith(wanted):
            store(pdev, d.ordinal)
            return
    raise CudaError(CUDA_ERROR_INVALID_DEVICE, f"no device at PCI bus id {wanted!r}")


@entry("cuDeviceGetP2PAttribute")
def cuDeviceGetP2PAttribute(value, attrib, src, dst):
    require(value)
    devices.get(src)
    devices.get(dst)
    if src == dst:
        raise CudaError(CUDA_ERROR_INVALID_DEVICE, "peer attributes need two different devices")
    store(value, 0)


@entry("cuDeviceCanAccessPeer")
def cuDeviceCanAccessPeer(can, dev, peer):
    require(can)
    devices.get(dev)
    devices.get(peer)
    store(can, 0)


@entry("cuDeviceGetTexture1DLinearMaxWidth")
def cuDeviceGetTexture1DLinearMaxWidth(width, fmt, channels, dev):
    require(width)
    store(width, devices.get(dev).attribute(69))
