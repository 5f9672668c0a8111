"""A libamdhip64 stand-in whose GPU is the ISA emulator (`zluda_py.emulator`), selected with
ZLUDA_HIP=emulator (and ZLUDA_HIP_ARCH, default gfx1100) in place of ROCm's library.

`EmulatedHipLibrary` answers the calls `hip_runtime.Hip` makes on `ffi.dlopen`'s library object,
with the same cffi arguments and hipError_t results, so everything above it (the binding's
marshalling, the backend, the driver) runs as it would on ROCm. Device memory is host memory:
hipMalloc hands out emulator memory at real addresses, so copies are memmove and the driver's
host pointers work as they do with unified addressing; virtual memory management and IPC
memory handles map and share host pages as the CPU backend does (backends/hostshare.py). Launches run to completion in the
caller (one at a time: the emulator is one GPU that runs one kernel; a cooperative launch has all
its workgroups resident and interleaved, so grid.sync() completes); a kernel's failure is
printed on stderr, as ROCm prints GPU faults, and answered by the stream's next synchronize.
"""

from __future__ import annotations

import ctypes
import mmap
import struct
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from zluda_py.compiler.amdgpu.targets import TARGETS
from zluda_py.emulator import loader
from zluda_py.emulator.errors import EmulatorError, MemoryFault
from zluda_py.emulator.launch import launch
from zluda_py.emulator.memory import Memory, host_view

from ..curesult import CudaError
from .hip_runtime import (HIP_LIMIT_STACK_SIZE, HIP_MEM_ALLOCATION_PINNED, HIP_MEM_HANDLE_POSIX_FD, HIP_MEM_LOCATION_DEVICE,
                          LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE, LAUNCH_PARAM_END, ffi)
from .hostshare import HostIpc, HostVmm

TEXTURE_ALIGNMENT = 512  # bytes: CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT as the driver reports it (driver/textures.py)
# hipError_t values the stand-in answers
SUCCESS, INVALID_VALUE, OUT_OF_MEMORY, INVALID_IMAGE, INVALID_HANDLE = 0, 1, 2, 200, 400
NO_BINARY_FOR_GPU, NOT_FOUND, NOT_SUPPORTED, ILLEGAL_ADDRESS, HOST_MEMORY_NOT_REGISTERED = 209, 500, 801, 700, 713
ASSERT, LAUNCH_FAILURE, COOPERATIVE_LAUNCH_TOO_LARGE = 710, 719, 720
_NAMES = {SUCCESS: "no error", INVALID_VALUE: "invalid argument", OUT_OF_MEMORY: "out of memory",
          INVALID_IMAGE: "device kernel image is invalid", INVALID_HANDLE: "invalid resource handle",
          NO_BINARY_FOR_GPU: "no kernel image is available for execution on the device",
          NOT_FOUND: "named symbol not found", NOT_SUPPORTED: "operation not supported",
          ILLEGAL_ADDRESS: "an illegal memory access was encountered",
          HOST_MEMORY_NOT_REGISTERED: "pointer does not correspond to a registered memory region",
          ASSERT: "device-side assert triggered", LAUNCH_FAILURE: "unspecified launch failure",
          COOPERATIVE_LAUNCH_TOO_LARGE: "too many blocks in cooperative launch"}
MEMORY_BYTES = 16 << 30  # what hipDeviceTotalMem reports; allocations are host memory
COMPUTE_UNITS = 4  # a small GPU: grids sized from the CU count stay cheap to emulate
THREADS_PER_CU = 2048
# hipDeviceAttribute_t (ROCm 6) values this device answers; the rest are hipErrorInvalidValue,
# so the driver keeps its own (sm_86) values for them.
_ATTRIBUTES = {56: 1024, 26: 1024, 27: 1024, 28: 1024, 29: 2147483647, 30: 65535, 31: 65535, 63: COMPUTE_UNITS,
               58: THREADS_PER_CU, 6: 0}  # threads per block, block dims, grid dims, CUs, threads per CU, ECC off


def _pointer(p) -> int:
    """The address a `void*` argument holds (cffi pointer data, or bytes as cffi would pass)."""
    return int(ffi.cast("uintptr_t", ffi.from_buffer(p) if isinstance(p, bytes) else p))


def _text(p) -> str:
    """A `const char*` argument: bytes as the binding passes them, or cffi char data."""
    return (p if isinstance(p, bytes) else ffi.string(p)).decode()


def _out(p, value: int) -> None:
    """Store a handle or address into a `T*` out-parameter."""
    p[0] = ffi.cast(ffi.typeof(p).item.cname, value)


@dataclass
class _Module:
    image: loader.Image
    functions: dict[str, int] = field(default_factory=dict)


@dataclass
class _Stream:
    error: int = SUCCESS  # a kernel's failure, answered by the next synchronize


class EmulatedHipLibrary:
    """The libamdhip64 entry points `hip_runtime` declares, over the emulator."""

    def __init__(self, arch: str) -> None:
        if arch not in TARGETS:
            raise ValueError(f"ZLUDA_HIP_ARCH={arch!r}: the compiler targets {', '.join(TARGETS)}")
        loader.isa_family(arch)  # the emulator has instruction tables for it
        self.arch = arch
        self.memory = Memory()
        self._kinds: dict[int, str] = {}  # base -> "device", "host", "managed" or "registered"
        self._owners: dict[int, np.ndarray] = {}  # base -> the array holding an allocation
        self._modules: dict[int, _Module] = {}
        self._functions: dict[int, tuple[_Module, str]] = {}
        self._streams: dict[int, _Stream] = {0: _Stream()}
        self._handles = 0x1000
        self._lock = threading.Lock()  # one kernel at a time
        self._strings: dict[int, object] = {}  # keeps hipGetErrorString's results alive
        self._vmm, self._ipc = HostVmm(), HostIpc()
        self._physical: dict[int, int] = {}  # hipMemGenericAllocationHandle_t -> HostVmm's allocation
        self._vmm_blocks: dict[int, int] = {}  # accessible VMM ranges in emulator memory: base -> size
        self.stack_size = 1024  # hipLimitStackSize (CUDA's default; the driver sets its own before a launch)

    def _handle(self) -> int:
        self._handles += 16
        return self._handles

    # ---------------------------------------------------------------- devices
    def hipInit(self, flags: int) -> int:
        return SUCCESS

    def hipGetDeviceCount(self, count) -> int:
        count[0] = 1
        return SUCCESS

    def hipDeviceGetAttribute(self, value, attribute: int, device: int) -> int:
        if device != 0 or attribute not in _ATTRIBUTES and attribute not in (8, 12):
            return INVALID_VALUE
        if attribute in (8, 12):  # shared memory per block (and per CU): the target's LDS
            value[0] = TARGETS[self.arch].lds
        else:
            value[0] = _ATTRIBUTES[attribute]
        return SUCCESS

    def hipDeviceGetName(self, name, length: int, device: int) -> int:
        text = f"ZLUDA emulated AMD GPU ({self.arch})".encode()[: length - 1]
        ffi.memmove(name, text + b"\0", len(text) + 1)
        return SUCCESS if device == 0 else INVALID_VALUE

    def hipDeviceSetLimit(self, limit: int, value: int) -> int:
        """hipLimitStackSize only: each lane's call stack in kernels with a dynamic stack."""
        if limit != HIP_LIMIT_STACK_SIZE:
            return NOT_SUPPORTED
        self.stack_size = value
        return SUCCESS

    def hipDeviceTotalMem(self, size, device: int) -> int:
        size[0] = MEMORY_BYTES
        return SUCCESS if device == 0 else INVALID_VALUE

    def hipGetErrorString(self, error: int):
        if error not in self._strings:
            self._strings[error] = ffi.new("char[]", _NAMES.get(error, f"hipError {error}").encode())
        return self._strings[error]

    # ---------------------------------------------------------------- memory
    def _allocate(self, ptr, size: int, kind: str) -> int:
        """Zeroed memory aligned to TEXTURE_ALIGNMENT, which the driver advertises for texture
        memory (a cudaMalloc'd buffer may be bound as a linear texture)."""
        try:
            owner = np.zeros(max(size, 1) + TEXTURE_ALIGNMENT, np.uint8)
        except MemoryError:
            return OUT_OF_MEMORY
        base = -(-owner.ctypes.data // TEXTURE_ALIGNMENT) * TEXTURE_ALIGNMENT
        self.memory.add(base, max(size, 1))
        self._owners[base] = owner
        self._kinds[base] = kind
        _out(ptr, base)
        return SUCCESS

    def hipMalloc(self, ptr, size: int) -> int:
        return self._allocate(ptr, size, "device")

    def hipHostMalloc(self, ptr, size: int, flags: int) -> int:
        return self._allocate(ptr, size, "host")

    def hipMallocManaged(self, ptr, size: int, flags: int) -> int:
        return self._allocate(ptr, size, "managed") if flags in (1, 2) else INVALID_VALUE

    def hipHostRegister(self, ptr, size: int, flags: int) -> int:
        base = _pointer(ptr)
        if not base or not size or base in self._kinds:
            return INVALID_VALUE
        self.memory.add(base, size)  # kernels reach the program's memory where it is
        self._kinds[base] = "registered"
        return SUCCESS

    def _release(self, ptr, kinds: tuple[str, ...], missing: int) -> int:
        base = _pointer(ptr)
        if self._kinds.get(base) not in kinds:
            return missing
        del self._kinds[base]
        self.memory.remove(base)
        self._owners.pop(base, None)
        return SUCCESS

    def hipHostUnregister(self, ptr) -> int:
        return self._release(ptr, ("registered",), HOST_MEMORY_NOT_REGISTERED)

    def hipFree(self, ptr) -> int:
        return SUCCESS if not _pointer(ptr) else self._release(ptr, ("device", "managed"), INVALID_VALUE)

    def hipHostFree(self, ptr) -> int:
        return SUCCESS if not _pointer(ptr) else self._release(ptr, ("host",), INVALID_VALUE)

    def _fits(self, address: int, size: int) -> bool:
        """Whether [address, address + size) is host memory or lies inside one device block:
        a copy that starts in a block must not run past its end."""
        try:
            self.memory.block(address, 1)
        except MemoryFault:
            return True  # the program's own host memory
        try:
            self.memory.block(address, size)
            return True
        except MemoryFault:
            return False

    def hipMemcpyAsync(self, dst, src, size: int, kind: int, stream) -> int:
        d, s = _pointer(dst), _pointer(src)
        if not (d and s and self._fits(d, size) and self._fits(s, size)):
            return INVALID_VALUE
        ctypes.memmove(d, s, size)
        return SUCCESS

    def hipMemcpyHtoD(self, dst, src, size: int) -> int:
        keep = ffi.from_buffer(src) if isinstance(src, bytes) else src  # alive until the copy is done
        return self.hipMemcpyAsync(dst, keep, size, 1, ffi.NULL)

    def hipMemcpyDtoH(self, dst, src, size: int) -> int:
        return self.hipMemcpyAsync(dst, src, size, 2, ffi.NULL)

    def _memset(self, dst, value: int, count: int, dtype: str) -> int:
        d = _pointer(dst)
        width = np.dtype(dtype).itemsize
        if not d or not self._fits(d, count * width):
            return INVALID_VALUE
        host_view(d, count * width).view(dtype)[:] = int(value)  # a cffi int for D32
        return SUCCESS

    def hipMemsetD8Async(self, dst, value: int, count: int, stream) -> int:
        return self._memset(dst, value, count, "u1")

    def hipMemsetD16Async(self, dst, value: int, count: int, stream) -> int:
        return self._memset(dst, value, count, "u2")

    def hipMemsetD32Async(self, dst, value: int, count: int, stream) -> int:
        return self._memset(dst, int(value) & 0xFFFFFFFF, count, "u4")

    # ---------------------------------------------------------------- virtual memory, IPC
    # Over host pages as the CPU backend maps them (backends/hostshare.py); what becomes
    # accessible is emulator memory, what is unmapped or closed stops being.
    @staticmethod
    def _host(call, *args):
        """(hipError_t, result) of a hostshare call: its CudaError's code is HIP's number too."""
        try:
            return SUCCESS, call(*args)
        except CudaError as e:
            return e.code, None

    def _vmm_block(self, base: int, size: int, add: bool) -> None:
        """Make [base, base + size) reachable (add) or not. Adjacent accessible ranges are one
        emulator block, so that copies and accesses may span the mappings a buffer grew by."""
        start, end = base, base + size
        for b, n in list(self._vmm_blocks.items()):
            if b + n < start or b > end or (not add and (b + n == start or b == end)):
                continue
            del self._vmm_blocks[b]
            self.memory.remove(b)
            if add:
                start, end = min(start, b), max(end, b + n)
                continue
            for lo, hi in ((b, start), (end, b + n)):  # the parts outside the range stay
                if lo < hi:
                    self.memory.add(lo, hi - lo)
                    self._vmm_blocks[lo] = hi - lo
        if add:
            self.memory.add(start, end - start)
            self._vmm_blocks[start] = end - start

    def hipMemAddressReserve(self, ptr, size: int, alignment: int, addr, flags: int) -> int:
        if flags or not size:
            return INVALID_VALUE
        code, base = self._host(self._vmm.reserve, size, max(alignment, mmap.PAGESIZE), _pointer(addr))
        if code == SUCCESS:
            _out(ptr, base)
        return code

    def hipMemAddressFree(self, ptr, size: int) -> int:
        return self._host(self._vmm.free, _pointer(ptr), size)[0]

    def hipMemCreate(self, handle, size: int, prop, flags: int) -> int:
        if flags or prop.type != HIP_MEM_ALLOCATION_PINNED or prop.location.type != HIP_MEM_LOCATION_DEVICE \
                or prop.location.id != 0:
            return INVALID_VALUE
        code, token = self._host(self._vmm.create, size, 0)
        if code == SUCCESS:
            self._physical[h := self._handle()] = token
            _out(handle, h)
        return code

    def hipMemRelease(self, handle) -> int:
        token = self._physical.pop(_pointer(handle), None)
        return INVALID_VALUE if token is None else self._host(self._vmm.release, token)[0]

    def hipMemMap(self, ptr, size: int, offset: int, handle, flags: int) -> int:
        token = self._physical.get(_pointer(handle))
        if token is None or flags:
            return INVALID_VALUE
        return self._host(self._vmm.map, _pointer(ptr), size, offset, token)[0]

    def hipMemUnmap(self, ptr, size: int) -> int:
        self._vmm_block(_pointer(ptr), size, False)
        return self._host(self._vmm.unmap, _pointer(ptr), size)[0]

    def hipMemSetAccess(self, ptr, size: int, desc, count: int) -> int:
        if not count or any(desc[i].location.type != HIP_MEM_LOCATION_DEVICE or desc[i].location.id != 0
                            for i in range(count)):
            return INVALID_VALUE
        base, access = _pointer(ptr), desc[count - 1].flags
        code = self._host(self._vmm.set_access, base, size, 0, access)[0]
        if code == SUCCESS:
            self._vmm_block(base, size, access != 0)
        return code

    def hipMemExportToShareableHandle(self, shareable, handle, handle_type: int, flags: int) -> int:
        token = self._physical.get(_pointer(handle))
        if token is None or handle_type != HIP_MEM_HANDLE_POSIX_FD or flags:
            return INVALID_VALUE
        code, fd = self._host(self._vmm.export_fd, token)
        if code == SUCCESS:
            ffi.cast("int*", shareable)[0] = fd
        return code

    def hipMemImportFromShareableHandle(self, handle, os_handle, handle_type: int) -> int:
        if handle_type != HIP_MEM_HANDLE_POSIX_FD:
            return INVALID_VALUE
        code, got = self._host(self._vmm.import_fd, _pointer(os_handle))
        if code == SUCCESS:
            self._physical[h := self._handle()] = got[0]
            _out(handle, h)
        return code

    def hipMemGetAddressRange(self, pbase, psize, dptr) -> int:
        try:
            block, offset = self.memory.block(_pointer(dptr), 1)
        except MemoryFault:
            return NOT_FOUND
        _out(pbase, _pointer(dptr) - offset)
        psize[0] = block.size
        return SUCCESS

    def hipIpcGetMemHandle(self, handle, dev_ptr) -> int:
        base = _pointer(dev_ptr)
        if self._kinds.get(base) != "device":
            return INVALID_VALUE
        code, raw = self._host(self._ipc.get_handle, base, self.memory.view(base).size, id(self._owners[base]))
        if code == SUCCESS:
            ffi.memmove(handle, raw, 64)
        return code

    def hipIpcOpenMemHandle(self, dev_ptr, handle, flags: int) -> int:
        code, got = self._host(self._ipc.open, bytes(ffi.buffer(ffi.addressof(handle), 64)))
        if code == SUCCESS:
            base, size = got
            self.memory.add(base, size)
            self._kinds[base] = "ipc"
            _out(dev_ptr, base)
        return code

    def hipIpcCloseMemHandle(self, dev_ptr) -> int:
        base = _pointer(dev_ptr)
        if self._kinds.get(base) != "ipc":
            return INVALID_VALUE
        del self._kinds[base]
        self.memory.remove(base)
        return self._host(self._ipc.close, base)[0]

    # ---------------------------------------------------------------- streams
    def hipStreamCreateWithFlags(self, stream, flags: int) -> int:
        handle = self._handle()
        self._streams[handle] = _Stream()
        _out(stream, handle)
        return SUCCESS

    def hipStreamDestroy(self, stream) -> int:
        return SUCCESS if self._streams.pop(_pointer(stream), None) else INVALID_HANDLE

    def hipStreamSynchronize(self, stream) -> int:
        s = self._streams.get(_pointer(stream))
        if s is None:
            return INVALID_HANDLE
        error, s.error = s.error, SUCCESS
        return error

    # ---------------------------------------------------------------- modules
    def hipModuleLoadData(self, module, image) -> int:
        """The code object's size is not passed: as ROCm does, take it from the ELF header
        (the section headers come last in what ld.lld writes)."""
        address = _pointer(image)
        header = bytes(ffi.buffer(ffi.cast("char*", image), 64))
        if header[:4] != b"\x7fELF" or header[4] != 2 or struct.unpack_from("<H", header, 18)[0] != 224:
            return INVALID_IMAGE  # not a 64-bit AMDGPU ELF
        shoff, = struct.unpack_from("<Q", header, 40)
        shentsize, shnum = struct.unpack_from("<HH", header, 58)
        code_object = ctypes.string_at(address, shoff + shentsize * shnum)
        if struct.unpack_from("<I", header, 48)[0] & 0xFF != TARGETS[self.arch].mach:
            return NO_BINARY_FOR_GPU
        try:
            loaded = loader.Image(code_object, self.memory)
        except (EmulatorError, ValueError) as exc:
            print(f"zluda emulator: hipModuleLoadData: {exc}", file=sys.stderr)
            return INVALID_IMAGE
        handle = self._handle()
        self._modules[handle] = _Module(loaded)
        _out(module, handle)
        return SUCCESS

    def hipModuleUnload(self, module) -> int:
        m = self._modules.pop(_pointer(module), None)
        if m is None:
            return INVALID_HANDLE
        for f in m.functions.values():
            del self._functions[f]
        m.image.unload()
        return SUCCESS

    def hipModuleGetFunction(self, function, module, name) -> int:
        m = self._modules.get(_pointer(module))
        if m is None:
            return INVALID_HANDLE
        kernel = _text(name)
        if kernel not in m.image.metadata:
            return NOT_FOUND
        if kernel not in m.functions:
            m.functions[kernel] = self._handle()
            self._functions[m.functions[kernel]] = (m, kernel)
        _out(function, m.functions[kernel])
        return SUCCESS

    def hipModuleGetGlobal(self, dptr, size, module, name) -> int:
        m = self._modules.get(_pointer(module))
        if m is None:
            return INVALID_HANDLE
        found = m.image.symbol(_text(name))
        if found is None:
            return NOT_FOUND
        _out(dptr, found[0])
        size[0] = found[1]
        return SUCCESS

    # ---------------------------------------------------------------- launches
    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
        if params != ffi.NULL or extra == ffi.NULL:
            return NOT_SUPPORTED  # the binding always passes the packed buffer through `extra`
        fields, i = {}, 0
        while _pointer(extra[i]) != LAUNCH_PARAM_END:
            fields[_pointer(extra[i])] = extra[i + 1]
            i += 2
        buffer, size = fields.get(LAUNCH_PARAM_BUFFER_POINTER), fields.get(LAUNCH_PARAM_BUFFER_SIZE)
        if buffer is None or size is None:
            return INVALID_VALUE
        n = ffi.cast("size_t*", size)[0]
        return self._launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, bytes(ffi.buffer(ffi.cast("char*", buffer), n)))

    def hipModuleLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params) -> int:
        """grid.sync(): every workgroup resident at once (the emulator interleaves their waves),
        so the grid may hold no more blocks than COMPUTE_UNITS CUs of THREADS_PER_CU threads and
        the target's LDS each hold. `params` has one pointer per explicit kernel argument."""
        target = self._functions.get(_pointer(f))
        if target is None:
            return INVALID_HANDLE
        module, kernel = target
        args = [a for a in module.image.metadata.get(kernel, {}).get(".args", [])
                if not a.get(".value_kind", "").startswith("hidden_")]
        if args and params == ffi.NULL:
            return INVALID_VALUE
        kernarg = bytearray(max((a[".offset"] + a[".size"] for a in args), default=0))
        for i, a in enumerate(args):
            kernarg[a[".offset"]:a[".offset"] + a[".size"]] = ffi.buffer(ffi.cast("char*", params[i]), a[".size"])
        blocks, threads = gx * gy * gz, bx * by * bz
        try:
            k = module.image.kernel(kernel, self.arch)
        except EmulatorError:
            return INVALID_HANDLE
        per_cu = min(THREADS_PER_CU // max(threads, 1),
                     TARGETS[self.arch].lds // max(k.group_segment_size + shared, 1))
        if blocks > per_cu * COMPUTE_UNITS:
            return COOPERATIVE_LAUNCH_TOO_LARGE
        return self._launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, bytes(kernarg), cooperative=True)

    def _launch(self, f, grid, block, shared: int, stream, kernarg: bytes, cooperative: bool = False) -> int:
        target = self._functions.get(_pointer(f))
        s = self._streams.get(_pointer(stream))
        if target is None or s is None:
            return INVALID_HANDLE
        module, kernel = target
        with self._lock:
            try:
                launch(module.image, kernel, grid, block, kernarg, self.memory, self.arch, shared, cooperative,
                       self.stack_size)
            except EmulatorError as exc:
                print(f"zluda emulator: {kernel}: {exc}", file=sys.stderr)
                # s_trap (__trap(), and __assertfail after its message) and a stack overflow are launch
                # failures, as CUDA reports both
                s.error = ILLEGAL_ADDRESS if isinstance(exc, MemoryFault) else LAUNCH_FAILURE
        return SUCCESS
