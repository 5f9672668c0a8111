"""The driver tested through its real ABI: libcuda.so.1 loaded with ctypes into the test
process (the 'host is already Python' case of the cffi embedding)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The start of a ctypes child script (argv: the shim, the case; stdin: the PTX): a context and
# the module, with `ok` for results that must be CUDA_SUCCESS.
CHILD_SETUP = r"""def ok(rc):
    assert rc == 0, rc
ok(cu.cuInit(0))
ctx = c_void_p()
ok(cu.cuCtxCreate_v2(byref(ctx), 0, 0))
mod = c_void_p()
ok(cu.cuModuleLoadData(byref(mod), sys.stdin.buffer.read() + b"\0"))
"""


def shim_path(tmp_factory=None) -> Path:
    """The installed shim (pip install -e .), else one built for the test session."""
    installed = ROOT / "zluda_py" / "_shim" / "libcuda.so.1"
    if installed.exists():
        return installed
    sys.path.insert(0, str(ROOT / "libcuda_shim"))
    import build_shim

    return build_shim.build(tmp_factory.mktemp("shim"))


class Driver:
    """ctypes access to the shim; attribute access returns the C function, `ok` checks."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def ok(self, rc: int) -> None:
        assert rc == 0, f"CUresult {rc}"


@pytest.fixture(scope="session")
def cu(tmp_path_factory) -> Driver:
    lib = ctypes.CDLL(str(shim_path(tmp_path_factory)))
    d = Driver(lib)
    d.ok(lib.cuInit(0))
    ctx = ctypes.c_void_p()
    d.ok(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
    d.ok(lib.cuCtxSetCurrent(ctx))
    d.ctx = ctx
    return d
