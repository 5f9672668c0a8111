"""A small ctypes client of a CUDA driver: NVIDIA's libcuda.so.1 on a real GPU (where the
recorders in this folder take ground truth), or ours under `zluda run` (where they are tested).
It does what the recorders need: load PTX or a cubin, copy, launch, and carry on after a
faulting kernel by resetting the primary context."""

from __future__ import annotations

import ctypes
import time
from typing import Any, Sequence

import numpy as np

CUDA_ERROR_NOT_READY = 600
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CudaError(Exception):
    def __init__(self, call: str, code: int, detail: str = "") -> None:
        super().__init__(f"{call}: CUresult {code}" + (f": {detail}" if detail else ""))
        self.call, self.code = call, code


class Driver:
    """Device 0's primary context, current on the calling thread."""

    def __init__(self, path: str = "libcuda.so.1") -> None:
        self.lib = ctypes.CDLL(path)
        self.lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self.check("cuInit", self.lib.cuInit(0))
        self.dev = ctypes.c_int()
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(self.dev), 0))
        self.ctx = ctypes.c_void_p()
        self._retain()

    def _retain(self) -> None:
        self.check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev))
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(self.ctx))

    def check(self, call: str, code: int, detail: str = "") -> None:
        if code != 0:
            raise CudaError(call, code, detail or self.error_name(code))

    def error_name(self, code: int) -> str:
        name = ctypes.c_char_p()
        return name.value.decode() if self.lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value else "?"

    def reset(self) -> None:
        """A fresh primary context after a sticky error (every module and allocation is lost)."""
        self.lib.cuDevicePrimaryCtxRelease_v2(self.dev)
        self.check("cuDevicePrimaryCtxReset", self.lib.cuDevicePrimaryCtxReset_v2(self.dev))
        self._retain()

    def describe(self) -> dict[str, Any]:
        name = ctypes.create_string_buffer(256)
        self.check("cuDeviceGetName", self.lib.cuDeviceGetName(name, 256, self.dev))
        version = ctypes.c_int()
        self.check("cuDriverGetVersion", self.lib.cuDriverGetVersion(ctypes.byref(version)))
        return {"name": name.value.decode(), "compute_capability": self.compute_capability(),
                "driver_api_version": version.value}

    def compute_capability(self) -> tuple[int, int]:
        out = []
        for attr in (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR):
            v = ctypes.c_int()
            self.check("cuDeviceGetAttribute", self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, self.dev))
            out.append(v.value)
        return out[0], out[1]

    def load(self, image: str | bytes) -> "Module":
        """PTX text or a cubin; a JIT failure raises CudaError carrying the compiler's log."""
        data = image.encode() + b"\0" if isinstance(image, str) else image
        log = ctypes.create_string_buffer(1 << 16)
        opts = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
        handle = ctypes.c_void_p()
        code = self.lib.cuModuleLoadDataEx(ctypes.byref(handle), ctypes.c_char_p(data), 2, opts, vals)
        self.check("cuModuleLoadDataEx", code, log.value.decode(errors="replace").strip())
        return Module(self, handle)

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.check("cuMemAlloc", self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))))
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def to_device(self, ptr: int, a: np.ndarray) -> None:
        self.check("cuMemcpyHtoD", self.lib.cuMemcpyHtoD_v2(ctypes.c_uint64(ptr), a.ctypes.data_as(ctypes.c_void_p),
                                                             ctypes.c_size_t(a.nbytes)))

    def to_host(self, a: np.ndarray, ptr: int) -> None:
        self.check("cuMemcpyDtoH", self.lib.cuMemcpyDtoH_v2(a.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr),
                                                             ctypes.c_size_t(a.nbytes)))


class Module:
    def __init__(self, driver: Driver, handle: ctypes.c_void_p) -> None:
        self.driver, self.handle = driver, handle
        self.functions: dict[str, ctypes.c_void_p] = {}

    def function(self, name: str) -> ctypes.c_void_p:
        f = self.functions.get(name)
        if f is None:
            f = ctypes.c_void_p()
            self.driver.check("cuModuleGetFunction",
                              self.driver.lib.cuModuleGetFunction(ctypes.byref(f), self.handle, name.encode()))
            self.functions[name] = f
        return f

    def launch_status(self, name: str, grid: Sequence[int], block: Sequence[int], params: list[Any],
                      shared_mem: int = 0, limit: float | None = None) -> int:
        """Launch and wait; the first non-zero CUresult (0 when the kernel finished), or
        CUDA_ERROR_NOT_READY when it still runs after `limit` seconds (a hung kernel)."""
        lib = self.driver.lib
        ptrs = (ctypes.c_void_p * max(len(params), 1))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in params])
        code = lib.cuLaunchKernel(self.function(name), *map(ctypes.c_uint, grid), *map(ctypes.c_uint, block),
                                  ctypes.c_uint(shared_mem), None, ptrs, None)
        if code or limit is None:
            return code or lib.cuCtxSynchronize()
        deadline = time.monotonic() + limit
        while (code := lib.cuStreamQuery(None)) == CUDA_ERROR_NOT_READY and time.monotonic() < deadline:
            time.sleep(0.0002)
        return code

    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], args: list[Any], shared_mem: int = 0) -> None:
        """Like the CPU target's CompiledModule.launch: numpy arrays are copied to the device and
        back around the launch, numpy scalars are passed by value."""
        d = self.driver
        params: list[Any] = []
        buffers: list[tuple[np.ndarray, int]] = []
        try:
            for a in args:
                if isinstance(a, np.ndarray):
                    ptr = d.alloc(a.nbytes)
                    buffers.append((a, ptr))
                    d.to_device(ptr, a)
                    params.append(ctypes.c_uint64(ptr))
                else:
                    params.append(np.ctypeslib.as_ctypes_type(np.asarray(a).dtype)(a))
            d.check("launch " + name, self.launch_status(name, grid, block, params, shared_mem))
            for a, ptr in buffers:
                d.to_host(a, ptr)
        finally:
            for _, ptr in buffers:
                d.free(ptr)


_DRIVER: Driver | None = None


def driver() -> Driver:
    """The process's one Driver (loaded on first use)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = Driver()
    return _DRIVER
