"""ROCm's HIP runtime, libamdhip64.so, bound with cffi in ABI mode (nothing to build): the calls
the HIP backend makes, HIP errors as the closest CUresult, and device discovery.

Importing this module never touches ROCm; the library is opened on first use (`Hip.get()`),
and a missing ROCm gives `HipUnavailable` with the reason, never a crash.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cffi

ffi = cffi.FFI()
ffi.cdef("""
typedef int hipError_t;
typedef void* hipModule_t;
typedef void* hipFunction_t;
typedef void* hipStream_t;
hipError_t hipInit(unsigned int flags);
hipError_t hipGetDeviceCount(int* count);
hipError_t hipDeviceGetAttribute(int* value, int attr, int device);
hipError_t hipDeviceGetName(char* name, int len, int device);
hipError_t hipDeviceTotalMem(size_t* bytes, int device);
const char* hipGetErrorString(hipError_t error);
hipError_t hipMalloc(void** ptr, size_t size);
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags);
hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags);
hipError_t hipHostRegister(void* ptr, size_t size, unsigned int flags);
hipError_t hipHostUnregister(void* ptr);
hipError_t hipFree(void* ptr);
hipError_t hipHostFree(void* ptr);
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, hipStream_t stream);
hipError_t hipMemcpyHtoD(void* dst, const void* src, size_t bytes);
hipError_t hipMemcpyDtoH(void* dst, void* src, size_t bytes);
hipError_t hipMemsetD8Async(void* dst, unsigned char value, size_t count, hipStream_t stream);
hipError_t hipMemsetD16Async(void* dst, unsigned short value, size_t count, hipStream_t stream);
hipError_t hipMemsetD32Async(void* dst, int value, size_t count, hipStream_t stream);
hipError_t hipModuleLoadData(hipModule_t* module, const void* image);
hipError_t hipModuleUnload(hipModule_t module);
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* name);
hipError_t hipModuleGetGlobal(void** dptr, size_t* bytes, hipModule_t module, const char* name);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                 unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                 hipStream_t stream, void** params, void** extra);
hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                            hipStream_t stream, void** params);
hipError_t hipDeviceSetLimit(int limit, size_t value);
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
typedef struct { int type; int id; } hipMemLocation;
typedef struct {
    int type; int requestedHandleType; hipMemLocation location; void* win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; } allocFlags;
} hipMemAllocationProp;
typedef struct { hipMemLocation location; int flags; } hipMemAccessDesc;
typedef void* hipMemGenericAllocationHandle_t;
typedef struct { char reserved[64]; } hipIpcMemHandle_t;
hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr, unsigned long long flags);
hipError_t hipMemAddressFree(void* ptr, size_t size);
hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size, const hipMemAllocationProp* prop,
                        unsigned long long flags);
hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle);
hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags);
hipError_t hipMemUnmap(void* ptr, size_t size);
hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count);
hipError_t hipMemExportToShareableHandle(void* shareableHandle, hipMemGenericAllocationHandle_t handle,
                                         int handleType, unsigned long long flags);
hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle, void* osHandle, int shHandleType);
hipError_t hipMemGetAddressRange(void** pbase, size_t* psize, void* dptr);
hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr);
hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags);
hipError_t hipIpcCloseMemHandle(void* devPtr);
""")

# HIP errors whose number and meaning are CUDA's driver error of the same number.
_SAME_AS_CUDA = {0, 1, 2, 3, 4, 5, 6, 7, 8, 100, 101, 200, 201, 202, 205, 206, 207, 208, 209, 210, 211, 212, 213,
                 214, 215, 216, 217, 218, 219, 300, 301, 302, 303, 304, 400, 401, 500, 600, 700, 701, 702, 704, 705,
                 708, 709, 710, 712, 713, 719, 720, 801, 900, 901, 902, 903, 904, 905, 906, 907, 908, 910, 999}
# The rest: the closest CUresult.
_CLOSEST = {9: 1, 12: 1, 13: 500, 17: 1, 21: 1, 35: 803, 52: 1, 53: 719, 98: 400, 911: 1, 912: 1,
            1052: 2, 1053: 999}
CUDA_ERROR_UNKNOWN = 999
CUDA_ERROR_NO_DEVICE = 100
HIP_ERROR_INVALID_VALUE = 1
HIP_ERROR_NOT_SUPPORTED = 801
HIP_ERROR_OUT_OF_MEMORY = 2
HIP_STREAM_NON_BLOCKING = 1  # hipStreamNonBlocking: no implicit synchronization with the null stream
HIP_MEMCPY_DEFAULT = 4  # hipMemcpyDefault: the runtime tells host from device by address
# hipMemAllocationTypePinned, hipMemLocationTypeDevice, hipMemHandleTypePosixFileDescriptor (CUDA's numbers)
HIP_MEM_ALLOCATION_PINNED, HIP_MEM_LOCATION_DEVICE, HIP_MEM_HANDLE_POSIX_FD = 1, 1, 1
HIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
HIP_LIMIT_STACK_SIZE = 0  # hipLimitStackSize: per-thread stack of kernels with a dynamic call stack

# CU_DEVICE_ATTRIBUTE_* -> hipDeviceAttribute_t (ROCm 6 numbering).
CUDA_TO_HIP_ATTRIBUTE = {
    1: 56, 2: 26, 3: 27, 4: 28, 5: 29, 6: 30, 7: 31, 8: 74, 9: 83, 11: 58, 12: 71, 13: 5, 14: 81,
    15: 12, 16: 63, 17: 18, 18: 16, 19: 3, 20: 6, 31: 8, 32: 0, 33: 67, 34: 68, 35: 80, 36: 60,
    37: 59, 38: 19, 39: 57, 40: 2, 41: 85, 50: 69, 78: 78, 79: 14, 80: 20, 81: 76, 82: 72, 83: 24,
    84: 17, 85: 62, 95: 10, 97: 75, 106: 25,
}
CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE, LAUNCH_PARAM_END = 1, 2, 3


def cu_result(hip_error: int) -> int:
    """The CUresult closest to a hipError_t."""
    if hip_error in _SAME_AS_CUDA:
        return hip_error
    return _CLOSEST.get(hip_error, CUDA_ERROR_UNKNOWN)


class HipError(Exception):
    def __init__(self, call: str, code: int, text: str) -> None:
        super().__init__(f"{call} failed: {text} (hipError {code})")
        self.code = code
        self.cu_result = cu_result(code)


class HipUnavailable(HipError):
    """No usable ROCm: no libamdhip64.so, or no AMD GPU."""

    def __init__(self, reason: str, code: int = CUDA_ERROR_NO_DEVICE) -> None:
        Exception.__init__(self, reason)
        self.code = code
        self.cu_result = CUDA_ERROR_NO_DEVICE


def library_candidates() -> list[Path]:
    roots = [os.environ["ROCM_PATH"]] if os.environ.get("ROCM_PATH") else []
    return [Path(r) / "lib" / "libamdhip64.so" for r in [*roots, "/opt/rocm"]]


def gfx_names(nodes: Path = Path("/sys/class/kfd/kfd/topology/nodes")) -> list[str]:
    """The gfx name of each GPU in KFD order (the order HIP enumerates devices in), from the
    kernel driver's topology: no HIP struct layouts, which change between ROCm releases."""
    out = []
    for node in sorted(nodes.glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        try:
            props = dict(line.split() for line in (node / "properties").read_text().splitlines() if line.strip())
        except (OSError, ValueError):
            continue
        version = int(props.get("gfx_target_version", 0))
        if version:
            out.append(f"gfx{version // 10000}{version // 100 % 100}{version % 100:x}")
    return out


class Hip:
    """The opened HIP runtime. Every call raises HipError with the CUresult to report."""

    _lock = threading.Lock()
    _instance: "Hip | None" = None

    def __init__(self) -> None:
        self.emulated_arch: str | None = None
        choice = os.environ.get("ZLUDA_HIP", "")
        if choice == "emulator":
            self._open_emulator(os.environ.get("ZLUDA_HIP_ARCH", "") or "gfx1100")
        elif choice:
            raise HipUnavailable(f"ZLUDA_HIP={choice!r}: expected 'emulator', or unset for ROCm's libamdhip64.so")
        else:
            self._open_rocm()
        self.check("hipInit", self.lib.hipInit(0))

    def _open_emulator(self, arch: str) -> None:
        """The libamdhip64 stand-in over the ISA emulator (hip_emulator), only ever chosen by
        ZLUDA_HIP=emulator."""
        try:
            from .hip_emulator import EmulatedHipLibrary

            self.lib = EmulatedHipLibrary(arch)
        except ImportError as exc:
            raise HipUnavailable(f"ZLUDA_HIP=emulator: the emulator needs {exc.name} (pip install 'zluda-py[test]')") from None
        except ValueError as exc:
            raise HipUnavailable(str(exc)) from None
        self.path = f"the AMD GPU ISA emulator as {arch} (ZLUDA_HIP=emulator)"
        self.emulated_arch = arch

    def _open_rocm(self) -> None:
        tried = []
        for path in library_candidates():
            if path.exists():
                try:
                    self.lib = ffi.dlopen(str(path))
                    self.path = path
                    break
                except OSError as exc:
                    tried.append(f"{path}: {exc}")
            else:
                tried.append(f"{path}: not found")
        else:
            raise HipUnavailable("ROCm's HIP runtime is not available (" + "; ".join(tried) +
                                 "); install ROCm or set ROCM_PATH, or use ZLUDA_BACKEND=cpu")

    @classmethod
    def get(cls) -> "Hip":
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def check(self, call: str, code: int) -> None:
        if code != 0:
            name = ffi.string(self.lib.hipGetErrorString(code)).decode(errors="replace")
            if code == CUDA_ERROR_NO_DEVICE:
                raise HipUnavailable(f"{call}: {name}")
            raise HipError(call, code, name)

    # ------------------------------------------------------------------ devices
    def device_count(self) -> int:
        n = ffi.new("int*")
        self.check("hipGetDeviceCount", self.lib.hipGetDeviceCount(n))
        return n[0]

    def name(self, device: int) -> str:
        buf = ffi.new("char[256]")
        self.check("hipDeviceGetName", self.lib.hipDeviceGetName(buf, 256, device))
        return ffi.string(buf).decode(errors="replace")

    def total_memory(self, device: int) -> int:
        n = ffi.new("size_t*")
        self.check("hipDeviceTotalMem", self.lib.hipDeviceTotalMem(n, device))
        return n[0]

    def attribute(self, cuda_attribute: int, device: int) -> int:
        """A CU_DEVICE_ATTRIBUTE_* value. The warp is 32 threads on every AMD GPU we target
        (wave64 GPUs run two CUDA warps per wave); compute capability is the driver's choice."""
        if cuda_attribute == CU_DEVICE_ATTRIBUTE_WARP_SIZE:
            return 32
        hip_attr = CUDA_TO_HIP_ATTRIBUTE.get(cuda_attribute)
        if hip_attr is None:
            raise HipError("hipDeviceGetAttribute", HIP_ERROR_INVALID_VALUE, f"CUDA device attribute {cuda_attribute} has no HIP equivalent")
        v = ffi.new("int*")
        self.check("hipDeviceGetAttribute", self.lib.hipDeviceGetAttribute(v, hip_attr, device))
        return v[0]

    def set_stack_size(self, size: int) -> None:
        """hipDeviceSetLimit(hipLimitStackSize): each thread's stack in later launches of kernels
        with a dynamic call stack (recursion), cuCtxSetLimit(CU_LIMIT_STACK_SIZE)'s meaning."""
        self.check("hipDeviceSetLimit", self.lib.hipDeviceSetLimit(HIP_LIMIT_STACK_SIZE, size))

    # ------------------------------------------------------------------ memory
    def malloc(self, size: int) -> int:
        p = ffi.new("void**")
        self.check("hipMalloc", self.lib.hipMalloc(p, max(size, 1)))
        return int(ffi.cast("uintptr_t", p[0]))

    def host_malloc(self, size: int, flags: int) -> int:
        """Page-locked host memory; hipHostMalloc's Portable/Mapped/WriteCombined flags are
        CUDA's CU_MEMHOSTALLOC_* bits."""
        p = ffi.new("void**")
        self.check("hipHostMalloc", self.lib.hipHostMalloc(p, max(size, 1), flags))
        return int(ffi.cast("uintptr_t", p[0]))

    def malloc_managed(self, size: int, flags: int) -> int:
        """hipMemAttachGlobal/Host are CUDA's CU_MEM_ATTACH_GLOBAL/HOST values."""
        p = ffi.new("void**")
        self.check("hipMallocManaged", self.lib.hipMallocManaged(p, max(size, 1), flags))
        return int(ffi.cast("uintptr_t", p[0]))

    def host_register(self, ptr: int, size: int, flags: int) -> None:
        """hipHostRegister's flags are CUDA's CU_MEMHOSTREGISTER_* bits."""
        self.check("hipHostRegister", self.lib.hipHostRegister(ffi.cast("void*", ptr), size, flags))

    def host_unregister(self, ptr: int) -> None:
        self.check("hipHostUnregister", self.lib.hipHostUnregister(ffi.cast("void*", ptr)))

    def free(self, ptr: int) -> None:
        self.check("hipFree", self.lib.hipFree(ffi.cast("void*", ptr)))

    def host_free(self, ptr: int) -> None:
        self.check("hipHostFree", self.lib.hipHostFree(ffi.cast("void*", ptr)))

    def copy(self, dst: int, src: int, size: int, stream: int) -> None:
        """Copy between any two addresses (unified addressing tells the direction) on `stream`,
        and wait for it."""
        self.check("hipMemcpyAsync", self.lib.hipMemcpyAsync(ffi.cast("void*", dst), ffi.cast("void*", src), size,
                                                             HIP_MEMCPY_DEFAULT, ffi.cast("void*", stream)))
        self.stream_synchronize(stream)

    def fill(self, dst: int, value: int, element_size: int, count: int, stream: int) -> None:
        """Store `count` elements of 1, 2 or 4 bytes (the low bits of `value`) on `stream`, and
        wait for it."""
        d, s = ffi.cast("void*", dst), ffi.cast("void*", stream)
        if element_size == 1:
            self.check("hipMemsetD8Async", self.lib.hipMemsetD8Async(d, value & 0xFF, count, s))
        elif element_size == 2:
            self.check("hipMemsetD16Async", self.lib.hipMemsetD16Async(d, value & 0xFFFF, count, s))
        else:
            v = ffi.cast("int", value & 0xFFFFFFFF)
            self.check("hipMemsetD32Async", self.lib.hipMemsetD32Async(d, v, count, s))
        self.stream_synchronize(stream)

    def copy_to_device(self, dst: int, src: bytes, size: int) -> None:
        self.check("hipMemcpyHtoD", self.lib.hipMemcpyHtoD(ffi.cast("void*", dst), src, size))

    def read(self, src: int, size: int) -> bytes:
        buf = ffi.new("char[]", max(size, 1))
        self.check("hipMemcpyDtoH", self.lib.hipMemcpyDtoH(buf, ffi.cast("void*", src), size))
        return ffi.buffer(buf, size)[:]

    # ------------------------------------------------------------------ streams
    def stream_create(self) -> int:
        """A stream that does not synchronize implicitly with the null stream (the driver orders
        work across CUDA streams itself)."""
        s = ffi.new("hipStream_t*")
        self.check("hipStreamCreateWithFlags", self.lib.hipStreamCreateWithFlags(s, HIP_STREAM_NON_BLOCKING))
        return int(ffi.cast("uintptr_t", s[0]))

    def stream_destroy(self, stream: int) -> None:
        self.check("hipStreamDestroy", self.lib.hipStreamDestroy(ffi.cast("void*", stream)))

    def stream_synchronize(self, stream: int) -> None:
        self.check("hipStreamSynchronize", self.lib.hipStreamSynchronize(ffi.cast("void*", stream)))

    # ------------------------------------------------------------------ virtual memory, IPC
    def _call(self, name: str, *args) -> None:
        """Call entry point `name`, which an older ROCm may lack (then hipErrorNotSupported)."""
        try:
            entry = getattr(self.lib, name)
        except AttributeError:
            raise HipError(name, HIP_ERROR_NOT_SUPPORTED, f"not in {self.path}: it needs a newer ROCm") from None
        self.check(name, entry(*args))

    def mem_address_reserve(self, size: int, align: int, hint: int) -> int:
        p = ffi.new("void**")
        self._call("hipMemAddressReserve", p, size, align, ffi.cast("void*", hint), 0)
        return int(ffi.cast("uintptr_t", p[0]))

    def mem_address_free(self, base: int, size: int) -> None:
        self._call("hipMemAddressFree", ffi.cast("void*", base), size)

    def mem_create(self, size: int, device: int) -> int:
        prop = ffi.new("hipMemAllocationProp*")
        prop.type, prop.requestedHandleType = HIP_MEM_ALLOCATION_PINNED, HIP_MEM_HANDLE_POSIX_FD
        prop.location.type, prop.location.id = HIP_MEM_LOCATION_DEVICE, device
        h = ffi.new("hipMemGenericAllocationHandle_t*")
        self._call("hipMemCreate", h, size, prop, 0)
        return int(ffi.cast("uintptr_t", h[0]))

    def mem_release(self, handle: int) -> None:
        self._call("hipMemRelease", ffi.cast("void*", handle))

    def mem_map(self, ptr: int, size: int, offset: int, handle: int) -> None:
        self._call("hipMemMap", ffi.cast("void*", ptr), size, offset, ffi.cast("void*", handle), 0)

    def mem_unmap(self, ptr: int, size: int) -> None:
        self._call("hipMemUnmap", ffi.cast("void*", ptr), size)

    def mem_set_access(self, ptr: int, size: int, device: int, access: int) -> None:
        desc = ffi.new("hipMemAccessDesc*")
        desc.location.type, desc.location.id, desc.flags = HIP_MEM_LOCATION_DEVICE, device, access
        self._call("hipMemSetAccess", ffi.cast("void*", ptr), size, desc, 1)

    def mem_export_fd(self, handle: int) -> int:
        fd = ffi.new("int*")
        self._call("hipMemExportToShareableHandle", fd, ffi.cast("void*", handle), HIP_MEM_HANDLE_POSIX_FD, 0)
        return fd[0]

    def mem_import_fd(self, fd: int) -> int:
        h = ffi.new("hipMemGenericAllocationHandle_t*")
        self._call("hipMemImportFromShareableHandle", h, ffi.cast("void*", fd), HIP_MEM_HANDLE_POSIX_FD)
        return int(ffi.cast("uintptr_t", h[0]))

    def address_range(self, ptr: int) -> tuple[int, int]:
        base, size = ffi.new("void**"), ffi.new("size_t*")
        self._call("hipMemGetAddressRange", base, size, ffi.cast("void*", ptr))
        return int(ffi.cast("uintptr_t", base[0])), size[0]

    def ipc_get_handle(self, ptr: int) -> bytes:
        h = ffi.new("hipIpcMemHandle_t*")
        self._call("hipIpcGetMemHandle", h, ffi.cast("void*", ptr))
        return bytes(ffi.buffer(h))

    def ipc_open(self, handle: bytes) -> int:
        h = ffi.new("hipIpcMemHandle_t*")
        ffi.memmove(h, handle, 64)
        p = ffi.new("void**")
        self._call("hipIpcOpenMemHandle", p, h[0], HIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        return int(ffi.cast("uintptr_t", p[0]))

    def ipc_close(self, ptr: int) -> None:
        self._call("hipIpcCloseMemHandle", ffi.cast("void*", ptr))

    # ------------------------------------------------------------------ modules
    def module_load(self, code_object: bytes) -> int:
        m = ffi.new("hipModule_t*")
        image = ffi.from_buffer(code_object)
        self.check("hipModuleLoadData", self.lib.hipModuleLoadData(m, image))
        return int(ffi.cast("uintptr_t", m[0]))

    def module_unload(self, module: int) -> None:
        self.check("hipModuleUnload", self.lib.hipModuleUnload(ffi.cast("void*", module)))

    def module_function(self, module: int, name: str) -> int:
        f = ffi.new("hipFunction_t*")
        self.check("hipModuleGetFunction", self.lib.hipModuleGetFunction(f, ffi.cast("void*", module), name.encode()))
        return int(ffi.cast("uintptr_t", f[0]))

    def module_global(self, module: int, name: str) -> tuple[int, int]:
        """(device address, size) of a module variable, by name (cuModuleGetGlobal)."""
        p, n = ffi.new("void**"), ffi.new("size_t*")
        self.check("hipModuleGetGlobal", self.lib.hipModuleGetGlobal(p, n, ffi.cast("void*", module), name.encode()))
        return int(ffi.cast("uintptr_t", p[0])), n[0]

    def launch_cooperative(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                           kernargs: bytes, offsets: list[int], shared_mem: int = 0, stream: int = 0) -> None:
        """hipModuleLaunchCooperativeKernel: every block resident at once, or
        hipErrorCooperativeLaunchTooLarge. It takes one pointer per kernel argument: here into
        the packed kernarg buffer, at each argument's offset."""
        buf = ffi.new("char[]", kernargs or b"\0")
        pointers = ffi.new("void*[]", [buf + o for o in offsets] or [ffi.NULL])
        try:
            entry = self.lib.hipModuleLaunchCooperativeKernel
        except AttributeError:
            raise HipError("hipModuleLaunchCooperativeKernel", HIP_ERROR_NOT_SUPPORTED,
                           f"not in {self.path}: cooperative launches need a newer ROCm") from None
        self.check("hipModuleLaunchCooperativeKernel", entry(
            ffi.cast("void*", function), *grid, *block, shared_mem, ffi.cast("void*", stream), pointers))

    def launch(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
               shared_mem: int = 0, stream: int = 0) -> None:
        """hipModuleLaunchKernel with CUDA's packed parameter buffer as the kernarg buffer."""
        buf = ffi.new("char[]", params or b"\0")
        size = ffi.new("size_t*", len(params))
        extra = ffi.new("void*[5]", [ffi.cast("void*", LAUNCH_PARAM_BUFFER_POINTER), buf,
                                     ffi.cast("void*", LAUNCH_PARAM_BUFFER_SIZE), size,
                                     ffi.cast("void*", LAUNCH_PARAM_END)])
        self.check("hipModuleLaunchKernel", self.lib.hipModuleLaunchKernel(
            ffi.cast("void*", function), *grid, *block, shared_mem, ffi.cast("void*", stream), ffi.NULL, extra))
