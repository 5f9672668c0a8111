"""The driver's version follows the newest PTX ISA the front end accepts (one place:
zluda_py.ptx.versions); newer PTX is refused with NVIDIA's code for it."""

from __future__ import annotations

import ctypes

import pytest

from zluda_py.ptx import parse, versions
from zluda_py.ptx.errors import PtxError

CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222


def module_text(version: str) -> bytes:
    return (f".version {version}\n.target sm_80\n.address_size 64\n"
            ".visible .entry k()\n{\n  ret;\n}\n").encode()


def newer_than_newest() -> str:
    major, minor = versions.NEWEST_ISA
    return f"{major}.{minor + 1}"


def test_cuda_release_of_ptx_isa_9():
    # the PTX ISA manual's release history: ISA 9.0 came with CUDA 13.0, 9.1 with 13.1, ...
    assert versions.cuda_version((9, 0)) == 13000
    assert versions.cuda_version((9, 1)) == 13010
    assert versions.NEWEST_ISA >= (9, 5)  # NVRTC 13.5 writes .version 9.5


def test_driver_version_is_the_release_of_the_newest_accepted_ptx(cu):
    v = ctypes.c_int()
    cu.ok(cu.cuDriverGetVersion(ctypes.byref(v)))
    assert v.value == versions.cuda_version(versions.NEWEST_ISA) >= 13050


def test_newest_ptx_loads_and_newer_is_unsupported_ptx_version(cu):
    newest = "{}.{}".format(*versions.NEWEST_ISA)
    mod = ctypes.c_void_p()
    cu.ok(cu.cuModuleLoadData(ctypes.byref(mod), module_text(newest)))
    cu.ok(cu.cuModuleUnload(mod))
    assert cu.cuModuleLoadData(ctypes.byref(mod), module_text(newer_than_newest())) == CUDA_ERROR_UNSUPPORTED_PTX_VERSION


def test_newer_ptx_is_refused_at_its_version_directive():
    with pytest.raises(PtxError) as err:
        parse(module_text(newer_than_newest()).decode(), "new.ptx")
    assert str(err.value).startswith(f"new.ptx:1:10: error: PTX ISA {newer_than_newest()} is newer than this driver accepts")
    assert err.value.cu_result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
