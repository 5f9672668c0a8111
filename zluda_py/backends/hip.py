"""The HIP backend: AMD GPUs through ROCm (the binding is `hip_runtime`).

Modules are HSA code objects from `zluda_py.compiler.amdgpu`, compiled through the cache for
the device's gfx target; a launch passes CUDA's packed parameter buffer as the kernarg buffer
(HIP appends the hidden arguments) and waits for the grid, so that a launch is complete when
the driver's stream sees it return, as on the CPU backend. Device printf goes through the code
object's `__zluda_printf_buffer`, drained after each launch. Device memory is HIP memory:
copies and fills are hipMemcpyAsync (hipMemcpyDefault) and hipMemsetD8/D16/D32Async.

Launches, copies and fills go to a HIP stream of the calling thread's own. Each CUDA stream's
work runs on its worker thread (driver.stream), so kernels of different CUDA streams run
concurrently on the GPU, while the wait after each operation keeps the driver's ordering: an
operation is done on the device when the driver marks it done.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import weakref
from dataclasses import dataclass, field
from functools import cached_property

from ..devinfo import Device
from . import hip_textures as textures  # noqa: F401  (the driver's texture and surface objects)
from . import tracking
from .hip_runtime import HIP_ERROR_INVALID_VALUE, HIP_ERROR_OUT_OF_MEMORY, Hip, HipError, HipUnavailable, gfx_names
from .tracking import Allocation

PRINTF_BUFFER_BYTES = 1 << 20
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
CU_MEM_ATTACH_GLOBAL = 1  # hipMemAttachGlobal too: a managed allocation any stream may use


class NoBinaryForGpu(Exception):
    """The device's gfx target is one the compiler cannot build for."""

    cu_result = CUDA_ERROR_NO_BINARY_FOR_GPU


def device_gfx(ordinal: int = 0) -> str:
    """The gfx target of HIP device `ordinal`: the emulated one under ZLUDA_HIP=emulator; else
    HSA_OVERRIDE_GFX_VERSION (ROCm's own setting, "major.minor.stepping") wins, as it does for
    ROCm's code object loader."""
    if os.environ.get("ZLUDA_HIP"):  # Hip.get() accepts only "emulator" there (or raises)
        return str(Hip.get().emulated_arch)
    override = os.environ.get("HSA_OVERRIDE_GFX_VERSION", "").strip()
    if override:
        try:
            major, minor, stepping = (int(x) for x in override.split("."))
        except ValueError:
            raise HipUnavailable(f"HSA_OVERRIDE_GFX_VERSION={override!r}: expected major.minor.stepping") from None
        return f"gfx{major}{minor}{stepping:x}"
    names = gfx_names()
    if ordinal >= len(names):
        raise HipUnavailable(f"cannot tell the gfx target of GPU {ordinal}: the KFD topology lists {len(names)} "
                             "GPU(s); set HSA_OVERRIDE_GFX_VERSION")
    return names[ordinal]


def _problem() -> str | None:
    """Why this backend cannot run here, or None when it can."""
    try:
        hip = Hip.get()
    except HipError as e:
        return str(e)
    try:
        count = hip.device_count()
    except HipError as e:  # ROCm answers hipErrorNoDevice where there is no GPU
        return f"ROCm's HIP runtime ({hip.path}) reports no AMD GPU: {e}"
    if count == 0:
        return f"ROCm's HIP runtime ({hip.path}) reports no AMD GPU (hipGetDeviceCount = 0)"
    return None


def available() -> bool:
    """Whether ROCm is installed and sees at least one AMD GPU (for ZLUDA_BACKEND=auto)."""
    return _problem() is None


def unavailable_reason() -> str:
    return _problem() or ""


# ---------------------------------------------------------------------- devices
class HipDevice(Device):
    """An AMD GPU as CUDA sees it: HIP's name, memory and attributes (the warp is 32 lanes on
    every target; see Hip.attribute). Attributes HIP has no equivalent for, and the compute
    capability (ZLUDA_COMPUTE_CAPABILITY), keep the CPU device's sm_86 values."""

    @property
    def refusal(self) -> str:
        """Work goes to HIP's current device, 0 (per-device module instances and thread streams
        are not there yet): a context on another GPU is refused rather than silently run on GPU 0."""
        if self.ordinal == 0:
            return ""
        return "the HIP backend runs work on device 0 only; use HIP_VISIBLE_DEVICES to choose the GPU"

    @cached_property
    def name(self) -> str:
        return Hip.get().name(self.ordinal)[:255]

    @cached_property
    def uuid(self) -> bytes:
        return hashlib.md5(f"zluda-py hip device {self.ordinal} {self.name}".encode()).digest()

    @cached_property
    def total_mem(self) -> int:
        return Hip.get().total_memory(self.ordinal)

    @cached_property
    def cores(self) -> int:
        """HIP's compute units (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), not the host's CPUs:
        the cooperative launch limit (driver.launch.coresident_blocks) multiplies by it, as
        programs do with the attribute."""
        try:
            return Hip.get().attribute(16, self.ordinal)
        except HipError as e:
            if e.code != HIP_ERROR_INVALID_VALUE:
                raise
            return super().cores

    def attribute(self, number: int) -> int:
        try:
            return Hip.get().attribute(number, self.ordinal)
        except HipError as e:
            if e.code != HIP_ERROR_INVALID_VALUE:
                raise
            return super().attribute(number)


_devices: list[HipDevice] = []


def devices() -> list[HipDevice]:
    """The GPUs HIP sees (ROCm applies HIP_VISIBLE_DEVICES/CUDA_VISIBLE_DEVICES itself)."""
    if not _devices:
        _devices.extend(HipDevice(i, pci_bus=i) for i in range(Hip.get().device_count()))
    return _devices


# ---------------------------------------------------------------------- streams
class _ThreadStream:
    """A thread's HIP stream, given back when the thread ends (its thread-local goes away)."""

    def __init__(self) -> None:
        hip = Hip.get()
        self.handle = hip.stream_create()
        fin = weakref.finalize(self, hip.stream_destroy, self.handle)
        fin.atexit = False  # at exit the HIP runtime tears its streams down itself


_local = threading.local()


def thread_stream() -> int:
    """The calling thread's HIP stream, created on first use."""
    s = getattr(_local, "stream", None)
    if s is None:
        s = _local.stream = _ThreadStream()
    return s.handle


# ---------------------------------------------------------------------- memory
class HipMemory(tracking.Memory):
    """HIP allocations, tracked for the driver's range and pointer-attribute queries."""

    def _obtain(self, size: int, kind: str, flags: int) -> tuple[int, bool]:
        hip = Hip.get()
        try:
            if kind == "device":
                return hip.malloc(size), False
            if kind == "host":
                return hip.host_malloc(size, flags), False
            return hip.malloc_managed(size, flags), False
        except HipError as e:
            if e.code == HIP_ERROR_OUT_OF_MEMORY:
                raise MemoryError(size) from e
            raise

    def _pin(self, base: int, size: int, flags: int) -> None:
        Hip.get().host_register(base, size, flags)

    def _give_back(self, a: Allocation) -> None:
        hip = Hip.get()
        if a.kind in ("device", "managed"):
            hip.free(a.base)
        elif a.kind == "host":
            hip.host_free(a.base)
        elif a.kind == "registered":
            hip.host_unregister(a.base)
        # "global": the module's variable, gone with the module

    def copy(self, dst: int, src: int, size: int) -> None:
        if size:
            Hip.get().copy(dst, src, size, thread_stream())

    def fill(self, dst: int, value: int, element_size: int, count: int) -> None:
        if count:
            Hip.get().fill(dst, value, element_size, count, thread_stream())


memory = HipMemory()


class HipVmm:
    """Virtual memory management (the driver's vmm.py) through HIP's: a physical allocation is
    a hipMemGenericAllocationHandle_t."""

    def reserve(self, size: int, align: int, hint: int) -> int:
        return Hip.get().mem_address_reserve(size, align, hint)

    def free(self, base: int, size: int) -> None:
        Hip.get().mem_address_free(base, size)

    def create(self, size: int, device: int) -> int:
        return Hip.get().mem_create(size, device)

    def release(self, physical: int) -> None:
        Hip.get().mem_release(physical)

    def map(self, ptr: int, size: int, offset: int, physical: int) -> None:
        Hip.get().mem_map(ptr, size, offset, physical)

    def unmap(self, ptr: int, size: int) -> None:
        Hip.get().mem_unmap(ptr, size)

    def set_access(self, ptr: int, size: int, device: int, access: int) -> None:
        Hip.get().mem_set_access(ptr, size, device, access)

    def export_fd(self, physical: int) -> int:
        return Hip.get().mem_export_fd(physical)

    def import_fd(self, fd: int) -> tuple[int, int]:
        """(physical allocation, its size): the exported file's size (a dma-buf on ROCm, a memfd
        on the emulator; both tell it by seeking to the end)."""
        return Hip.get().mem_import_fd(fd), os.lseek(fd, 0, os.SEEK_END)


class HipIpc:
    """IPC memory handles (the driver's ipc.py) through HIP's: the 64-byte handle is HIP's."""

    def get_handle(self, base: int, size: int, key: int) -> bytes:
        return Hip.get().ipc_get_handle(base)

    def open(self, handle: bytes) -> tuple[int, int]:
        hip = Hip.get()
        base = hip.ipc_open(handle)
        return base, hip.address_range(base)[1]

    def close(self, base: int) -> None:
        Hip.get().ipc_close(base)


vmm, ipc = HipVmm(), HipIpc()


# ---------------------------------------------------------------------- modules
@dataclass
class HipModule:
    """A code object loaded on the current device: its kernels (`KernelInfo`) and globals
    (`GlobalInfo`) as the driver reads them from a CompiledModule, and its printf buffer."""

    hip: Hip
    handle: int
    metadata: dict
    kernels: dict = field(default_factory=dict)
    globals: dict = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)
    printf_buffer: int = 0

    @classmethod
    def load(cls, code_object: bytes, metadata: dict) -> "HipModule":
        from zluda_py.compiler.amdgpu import codeobject
        from zluda_py.compiler.kernels import GlobalInfo, KernelInfo

        hip = Hip.get()
        m = cls(hip, hip.module_load(code_object), metadata)
        notes = codeobject.read(code_object).kernels
        for name, k in metadata["kernels"].items():
            md = notes[name]
            m.kernels[name] = KernelInfo.declared(name, k, md[".group_segment_fixed_size"],
                                                  md[".private_segment_fixed_size"])
        for name, g in metadata["globals"].items():
            address, size = hip.module_global(m.handle, g["symbol"])
            if g.get("managed"):
                address, size = m._managed(address, g), g["size"]
            m.globals[name] = GlobalInfo(address, size, g["space"], g.get("managed", False))
        symbol = metadata.get("printf_symbol")
        if symbol:
            m.printf_buffer = hip.malloc(PRINTF_BUFFER_BYTES)
            m._reset_printf()
            where, _ = hip.module_global(m.handle, symbol)
            hip.copy_to_device(where, m.printf_buffer.to_bytes(8, "little"), 8)
        return m

    def _managed(self, cell: int, g: dict) -> int:
        """A __managed__ variable's memory: a managed allocation (CU_MEM_ATTACH_GLOBAL) holding
        its initial bytes, whose address goes into the code object's cell for it. The driver
        frees it as the module's variable when the module is unloaded."""
        a = memory.allocate(g["size"], "managed", CU_MEM_ATTACH_GLOBAL, None)
        init = bytes.fromhex(g.get("init", ""))
        self.hip.copy_to_device(a.base, init or bytes(g["size"]), g["size"])
        self.hip.copy_to_device(cell, a.base.to_bytes(8, "little"), 8)
        return a.base

    def _reset_printf(self) -> None:
        header = (0).to_bytes(8, "little") + (PRINTF_BUFFER_BYTES - 16).to_bytes(8, "little")
        self.hip.copy_to_device(self.printf_buffer, header, 16)

    def kernel(self, name: str):
        """The kernel's KernelInfo (every kernel is built at load on this backend)."""
        return self.kernels[name]

    def function(self, name: str) -> int:
        if name not in self.functions:
            self.functions[name] = self.hip.module_function(self.handle, name)
        return self.functions[name]

    def kernargs(self, kernel: str, params: bytes, grid_workspace: int = 0) -> bytes:
        """The explicit kernel arguments: CUDA's parameter buffer, then, in modules that use
        grid.sync(), the grid workspace pointer (0 outside cooperative launches)."""
        offset = self.metadata["kernels"][kernel].get("grid_workspace_offset")
        if offset is None:
            return params
        return params.ljust(offset, b"\0") + grid_workspace.to_bytes(8, "little")

    def launch(self, kernel: str, grid, block, params: bytes, shared_mem: int = 0, stream: int = 0,
               grid_workspace: int = 0) -> None:
        """Run the grid to completion (and print its device printf output)."""
        kernargs = self.kernargs(kernel, params, grid_workspace)
        if grid_workspace:  # grid.sync() needs every block resident: HIP's cooperative launch checks it
            offsets = [p.offset for p in self.kernels[kernel].params]
            workspace = self.metadata["kernels"][kernel].get("grid_workspace_offset")
            offsets += [] if workspace is None else [workspace]
            self.hip.launch_cooperative(self.function(kernel), grid, block, kernargs, offsets, shared_mem, stream)
        else:
            self.hip.launch(self.function(kernel), grid, block, kernargs, shared_mem, stream)
        self.hip.stream_synchronize(stream)
        if self.printf_buffer:  # printf output appears before the launch returns, as on the CPU
            self.drain_printf()

    def drain_printf(self) -> None:
        from zluda_py.compiler.amdgpu.printf import drain

        used = int.from_bytes(self.hip.read(self.printf_buffer, 8), "little")
        if used == 0:
            return
        raw = self.hip.read(self.printf_buffer, 16 + min(used, PRINTF_BUFFER_BYTES - 16))
        formats = [f.encode("latin-1") for f in self.metadata["printf_formats"]]
        text, lost = drain(raw, formats, self._read_string)
        os.write(1, text)
        if lost:
            sys.stderr.write(f"zluda: device printf buffer full, {lost} bytes of output lost\n")
        self._reset_printf()

    def _read_string(self, address: int) -> bytes:
        out, chunk = b"", 256
        while b"\0" not in out and len(out) < 1 << 16:
            try:
                out += self.hip.read(address + len(out), chunk)
            except HipError:  # a chunk may run past the end of the allocation
                if chunk == 1:
                    break
                chunk = 1
        return out.split(b"\0", 1)[0]

    def unload(self) -> None:
        """Free the printf buffer and the code object (the driver has dropped the variables)."""
        if self.printf_buffer:
            self.hip.free(self.printf_buffer)
        self.hip.module_unload(self.handle)


# ---------------------------------------------------------------------- the driver interface
def load(ptx_texts: list[str], name: str = "") -> HipModule:
    """A new instance of the PTX compiled for device 0's gfx target (several texts are linked
    into one module), through the compiled-code cache once per distinct input in this process.
    Whole and at load whatever CUDA_MODULE_LOADING says: AMDGPU code objects are not built
    per kernel yet."""
    from ..cache.compile import build_once
    from ..compiler.target import TargetUnavailable, get

    gfx = device_gfx(0)
    try:
        target = get(gfx)
    except TargetUnavailable as e:
        raise NoBinaryForGpu(f"the GPU's target {gfx} cannot be compiled for: {e}") from e
    built = build_once(ptx_texts, target, name)
    module = HipModule.load(built.object_code, built.metadata)
    for g in module.globals.values():  # module variables are device memory the driver can name
        if g.size and memory.find(g.address) is None:
            memory.add(g.address, g.size, "global", 0, None)
    return module


def unload(module: HipModule) -> None:
    module.unload()


class _StackLimit:
    """hipLimitStackSize as last set (a device's limit in HIP; work runs on device 0)."""

    def __init__(self) -> None:
        self.size: int | None = None
        self.lock = threading.Lock()

    def set(self, hip: Hip, size: int) -> None:
        with self.lock:
            if size != self.size:
                hip.set_stack_size(size)
                self.size = size


_stack_limit = _StackLimit()


def launch(module: HipModule, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
           shared_mem: int, grid_workspace: int = 0, stack_size: int = 1024) -> None:
    """`stack_size`: the context's CU_LIMIT_STACK_SIZE, HIP's hipLimitStackSize (set when it
    changes): the per-thread stack of kernels with a dynamic call stack; the fixed part of a code
    object's private segment is sized by its compiler."""
    _stack_limit.set(module.hip, stack_size)
    module.launch(kernel, grid, block, params, shared_mem, thread_stream(), grid_workspace)
