"""Entry points: modules, libraries, functions and kernels, the linker, function attributes.

A module is PTX (pulled from whatever image the program hands us by zluda_py.fatbin) compiled
by the backend. A library (cuLibrary*, what cudart 13 uses) wraps one module; its CUkernel
handles are accepted wherever a CUfunction is, as NVIDIA's driver does."""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import context as ctxs, device as devices, native, trace
from .api import entry
from ..cdata import addr, cstr, ffi, read_bytes, store, store_ptr
from ..devinfo import SHARED_MEMORY_PER_BLOCK_OPTIN, compute_capability
from ..curesult import (CUDA_ERROR_FILE_NOT_FOUND, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_IMAGE,
                     CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND, CudaError)
from .handles import HandleTable
from .init_device import require
from .. import backends

CU_MODULE_LAZY_LOADING = 0x2


@dataclass
class Function:
    module: "Module"
    name: str
    max_dynamic_shared: int = 48 * 1024
    cache_config: int = 0
    carveout: int = -1
    handle: int = 0

    @property
    def info(self):
        """The compiler's KernelInfo. Under lazy loading the kernel is built here, the first
        time the driver needs it: its first launch, or a query of what only its code knows."""
        return _backend_call(self.module.compiled.kernel, self.name)

    @property
    def static_shared(self) -> int:
        return self.info.static_shared


@dataclass
class Module:
    compiled: object
    ptx_arch: int  # the PTX's virtual architecture (.target sm_75 -> 75): CU_FUNC_ATTRIBUTE_PTX_VERSION
    library: "Library | None" = None
    functions: dict[str, Function] = field(default_factory=dict)
    # the context current at load: once it is destroyed, so are the module's functions
    context: "ctxs.Context | None" = field(default_factory=lambda: ctxs.current(required=False))
    handle: int = 0
    on_unload: list = field(default_factory=list)  # callables run when the module goes (texrefs.py)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def function(self, name: str) -> Function:
        with self._lock:
            fn = self.functions.get(name)
            if fn is None:
                if name not in self.compiled.kernels:
                    raise CudaError(CUDA_ERROR_NOT_FOUND, f"no kernel named {name!r} in the module")
                fn = self.functions[name] = Function(self, name)
                functions.add(fn)
        return fn

    @property
    def const_size(self) -> int:
        """Bytes of the module's .const variables (NVIDIA reports them all for every kernel)."""
        return sum(g.size for g in self.compiled.globals.values() if g.space == "const")

    def global_(self, name: str, space: tuple[str, ...] = ("global", "const")) -> tuple[int, int]:
        """(address, size) of a module variable of one of the spaces; a .texref or .surfref is
        the word holding its object's handle (driver/texrefs.py)."""
        g = self.compiled.globals.get(name)
        if g is None or g.space not in space:
            raise CudaError(CUDA_ERROR_NOT_FOUND, f"no {' or '.join(space)} variable named {name!r} in the module")
        return g.address, g.size


@dataclass
class Library:
    module: Module
    handle: int = 0


modules: HandleTable[Module] = HandleTable("module", CUDA_ERROR_INVALID_HANDLE)
libraries: HandleTable[Library] = HandleTable("library", CUDA_ERROR_INVALID_HANDLE)
functions: HandleTable[Function] = HandleTable("function", CUDA_ERROR_INVALID_HANDLE)


def function_of(handle: int) -> Function:
    """A CUfunction or CUkernel argument (they share one table). A function of a module whose
    context was destroyed is invalid: launched, it would run on freed memory in whatever
    context is current (a library's kernels belong to no context)."""
    fn = functions.get(handle)
    owner = fn.module.context
    if fn.module.library is None and owner is not None and ctxs.contexts.find(owner.handle) is not owner:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, f"function {handle:#x} belongs to a destroyed context")
    return fn


def _backend_call(fn, *args):
    """A backend or compiler call; its errors that carry a CUresult become CudaErrors."""
    try:
        return fn(*args)
    except CudaError:
        raise
    except Exception as e:
        code = getattr(e, "cu_result", None)
        if code is None:
            raise
        raise CudaError(code, str(e)) from e


def _compile(texts: list[str], names: list[str]) -> Module:
    for text, name in zip(texts, names):
        trace.save_ptx(text, name)
    m = Module(_backend_call(backends.select().load, texts, ", ".join(names)), _ptx_arch(texts))
    modules.add(m)
    _register_globals(m)
    return m


_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)


def _ptx_arch(texts: list[str]) -> int:
    """The virtual architecture the PTX was written for; linked modules report the oldest.
    CUB compares it with the architectures it was compiled for (__CUDA_ARCH_LIST__) and
    refuses to launch (cudaErrorInvalidDeviceFunction) when none matches."""
    archs = [int(m.group(1)) for m in map(_TARGET.search, texts) if m]
    if archs:
        return min(archs)
    major, minor = compute_capability()
    return major * 10 + minor


def _register_globals(m: Module) -> None:
    """Module globals are device memory too: copies to symbols check their ranges. A __managed__
    variable (`.attribute(.managed)`) is managed memory, as NVIDIA's driver treats it: pointer
    attributes say so and managed advice, prefetches and range queries take it."""
    memory = backends.select().memory
    for g in m.compiled.globals.values():
        if g.size and memory.find(g.address) is None:
            memory.add(g.address, g.size, "managed" if g.managed else "global", 0, None)


def _target_sm() -> int:
    """The sm whose PTX is picked from a fatbin. cuLibrary* calls are context-independent
    (cudart 13 loads its library before any context is current), so without a current
    context device 0 decides: every device reports the same compute capability."""
    ctx = ctxs.current(required=False)
    return (ctx.device if ctx is not None else devices.get(0)).sm


def _ptx_of_image(address: int) -> tuple[list[str], list[str]]:
    from .. import fatbin

    sm = _target_sm()
    try:
        mods = fatbin.ptx_from_pointer(address, sm)
    except fatbin.FatbinError as e:
        raise CudaError(e.cu_result, str(e)) from e
    return [m.text for m in mods], [m.name for m in mods]


def _ptx_of_file(path: str) -> tuple[list[str], list[str]]:
    from .. import fatbin

    if not os.path.isfile(path):
        raise CudaError(CUDA_ERROR_FILE_NOT_FOUND, path)
    try:
        mods = fatbin.ptx_from_file(path, _target_sm())
    except fatbin.FatbinError as e:
        raise CudaError(e.cu_result, f"{path}: {e}") from e
    return [m.text for m in mods], [m.name for m in mods]


def load_image(address: int) -> Module:
    if not address:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL image")
    return _compile(*_ptx_of_image(address))


def _release(m: Module) -> None:
    modules.remove(m.handle)
    native.forget()
    for forget in m.on_unload:
        forget()
    for fn in m.functions.values():
        functions.remove(fn.handle)
    backend = backends.select()
    for g in m.compiled.globals.values():
        a = backend.memory.find(g.address)
        if a is not None and a.owner is None:
            backend.memory.release(g.address)
    backend.unload(m.compiled)


# ---- modules ----
@entry("cuModuleGetLoadingMode")
def cuModuleGetLoadingMode(mode):
    require(mode)
    store(mode, 0x1 if os.environ.get("CUDA_MODULE_LOADING", "LAZY").upper() == "EAGER" else CU_MODULE_LAZY_LOADING)


@entry("cuModuleLoad")
def cuModuleLoad(pmod, fname):
    require(pmod, fname)
    store_ptr(pmod, _compile(*_ptx_of_file(cstr(fname))).handle)


@entry("cuModuleLoadData", "cuModuleLoadFatBinary")
def cuModuleLoadData(pmod, image):
    require(pmod)
    ctxs.current()
    store_ptr(pmod, load_image(addr(image)).handle)


# ---- JIT options (cuModuleLoadDataEx, cuLinkCreate): CUjit_option numbers from cuda.h ----
CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 2, 3, 4
CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE = 5, 6, 12


class JitOptions:
    """The options a program passes as parallel arrays: CUjit_option numbers and void* slots.
    Scalars are stored in the slot itself, not pointed to; the outputs (wall time, the bytes of
    each log buffer used) are written back into their slots. Options that tune NVIDIA's code
    generator (registers, optimization level, target, cache mode) have nothing to tune here."""

    def __init__(self, n: int, options, values) -> None:
        if n and (options == ffi.NULL or values == ffi.NULL):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{n} JIT options without their arrays")
        self.values = values
        self.slot = {options[i]: i for i in range(n)}  # option -> index of its value
        self.verbose = bool(self._scalar(CU_JIT_LOG_VERBOSE))
        # read once: the size slots are then overwritten with the bytes used
        self.capacity = {o: self._scalar(o) for o in (CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)}
        # a linker's logs and wall time add up over its calls, as NVIDIA's do
        self.info: list[str] = []
        self.errors: list[str] = []
        self.total_ms = 0.0

    def _scalar(self, option: int) -> int:
        i = self.slot.get(option)
        return 0 if i is None else int(ffi.cast("uintptr_t", self.values[i])) & 0xFFFFFFFF

    def _write_log(self, buffer_option: int, size_option: int, text: str) -> None:
        """NUL-terminated, cut to the buffer's size (the NUL included); the slot of the size
        then holds the bytes used, the NUL counted (0 for an empty log)."""
        i, size = self.slot.get(buffer_option), self.capacity[size_option]
        if i is None or self.values[i] == ffi.NULL or size == 0:
            return
        data = text.encode()[:size - 1]
        ffi.memmove(self.values[i], data + b"\0", len(data) + 1)
        self.values[self.slot[size_option]] = ffi.cast("void *", len(data) + 1 if data else 0)

    @contextmanager
    def logging(self, what: str):
        """Time `what` and write both logs and the wall time when it ends, failed or not."""
        start = time.perf_counter()
        failed = False
        try:
            yield self
        except CudaError as e:
            failed = True
            self.errors.append(f"error   : {e.message or e}")
            raise
        finally:
            ms = (time.perf_counter() - start) * 1000.0
            self.total_ms += ms
            i = self.slot.get(CU_JIT_WALL_TIME)
            if i is not None:
                self.values[i] = ffi.NULL
                ffi.cast("float *", self.values + i)[0] = self.total_ms
            status = "failed" if failed else "done"
            self.info.append(f"info    : {what} {status} in {ms:.3f} ms (zluda-py, sm_{_target_sm()})")
            self._write_log(CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "\n".join(self.info))
            self._write_log(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "\n".join(self.errors))

    def describe(self, m: Module) -> None:
        """With CU_JIT_LOG_VERBOSE, a line per kernel for the info log (as ptxas -v gives)."""
        if self.verbose:  # as with ptxas -v, this builds every kernel
            for name in m.compiled.kernels:
                info = _backend_call(m.compiled.kernel, name)
                self.info.append(f"info    : entry function '{name}': {info.shared_size_bytes} bytes static shared memory")


@entry("cuModuleLoadDataEx")
def cuModuleLoadDataEx(pmod, image, n, options, values):
    require(pmod)
    ctxs.current()
    jit = JitOptions(n, options, values)
    with jit.logging("module load"):
        m = load_image(addr(image))
        jit.describe(m)
    store_ptr(pmod, m.handle)


@entry("cuModuleUnload")
def cuModuleUnload(hmod):
    m = modules.get(addr(hmod))
    if m.library is not None:
        raise CudaError(CUDA_ERROR_INVALID_HANDLE, "a library's module is unloaded with cuLibraryUnload")
    _release(m)


@entry("cuModuleGetFunction")
def cuModuleGetFunction(pfn, hmod, name):
    require(pfn, name)
    store_ptr(pfn, modules.get(addr(hmod)).function(cstr(name)).handle)


@entry("cuModuleGetGlobal_v2")
def cuModuleGetGlobal(dptr, nbytes, hmod, name):
    require(name)
    address, size = modules.get(addr(hmod)).global_(cstr(name))
    if dptr:
        store(dptr, address)
    if nbytes:
        store(nbytes, size)


@entry("cuModuleGetFunctionCount")
def cuModuleGetFunctionCount(count, hmod):
    require(count)
    store(count, len(modules.get(addr(hmod)).compiled.kernels))


# ---- libraries ----
def _library(m: Module) -> Library:
    lib = Library(m)
    libraries.add(lib)
    m.library = lib
    return lib


@entry("cuLibraryLoadData")
def cuLibraryLoadData(plib, code, jit_opts, jit_vals, n_jit, lib_opts, lib_vals, n_lib):
    require(plib)
    store_ptr(plib, _library(load_image(addr(code))).handle)


@entry("cuLibraryLoadFromFile")
def cuLibraryLoadFromFile(plib, fname, jit_opts, jit_vals, n_jit, lib_opts, lib_vals, n_lib):
    require(plib, fname)
    store_ptr(plib, _library(_compile(*_ptx_of_file(cstr(fname)))).handle)


@entry("cuLibraryUnload")
def cuLibraryUnload(hlib):
    lib = libraries.remove(addr(hlib))
    _release(lib.module)


@entry("cuLibraryGetKernel")
def cuLibraryGetKernel(pkernel, hlib, name):
    require(pkernel, name)
    store_ptr(pkernel, libraries.get(addr(hlib)).module.function(cstr(name)).handle)


@entry("cuLibraryGetKernelCount")
def cuLibraryGetKernelCount(count, hlib):
    require(count)
    store(count, len(libraries.get(addr(hlib)).module.compiled.kernels))


@entry("cuLibraryEnumerateKernels")
def cuLibraryEnumerateKernels(kernels, n, hlib):
    require(kernels)
    m = libraries.get(addr(hlib)).module
    names = list(m.compiled.kernels)
    if n < len(names):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"room for {n} kernels, the library has {len(names)}")
    for i, name in enumerate(names):
        kernels[i] = ffi.cast("void *", m.function(name).handle)


@entry("cuLibraryGetModule")
def cuLibraryGetModule(pmod, hlib):
    require(pmod)
    store_ptr(pmod, libraries.get(addr(hlib)).module.handle)


@entry("cuLibraryGetGlobal", "cuLibraryGetManaged")
def cuLibraryGetGlobal(dptr, nbytes, hlib, name):
    require(name)
    address, size = libraries.get(addr(hlib)).module.global_(cstr(name))
    if dptr:
        store(dptr, address)
    if nbytes:
        store(nbytes, size)


@entry("cuKernelGetFunction")
def cuKernelGetFunction(pfn, kernel):
    require(pfn)
    store_ptr(pfn, function_of(addr(kernel)).handle)


@entry("cuKernelGetName", "cuFuncGetName")
def cuKernelGetName(pname, handle):
    require(pname)
    fn = function_of(addr(handle))
    if not hasattr(fn, "c_name"):
        fn.c_name = ffi.new("char[]", fn.name.encode())
    pname[0] = fn.c_name


def _param_info(fn: Function, index: int, poffset, psize) -> None:
    params = fn.info.params
    if not 0 <= index < len(params):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"parameter {index} of {fn.name} (it has {len(params)})")
    if poffset:
        store(poffset, params[index].offset)
    if psize:
        store(psize, params[index].size)


@entry("cuKernelGetParamInfo", "cuFuncGetParamInfo")
def cuKernelGetParamInfo(handle, index, poffset, psize):
    _param_info(function_of(addr(handle)), index, poffset, psize)


@entry("cuFuncGetModule")
def cuFuncGetModule(pmod, hfunc):
    require(pmod)
    store_ptr(pmod, function_of(addr(hfunc)).module.handle)


# ---- function attributes ----
def get_attribute(fn: Function, attrib: int) -> int:
    major, minor = compute_capability()
    values = {
        0: fn.info.max_threads,  # MAX_THREADS_PER_BLOCK
        1: fn.info.shared_size_bytes,  # SHARED_SIZE_BYTES
        2: fn.module.const_size,  # CONST_SIZE_BYTES: all of the module's .const, as NVIDIA's driver answers
        3: fn.info.local_size,  # LOCAL_SIZE_BYTES
        4: 32,  # NUM_REGS
        5: fn.module.ptx_arch,  # PTX_VERSION: the virtual architecture, compiled just in time
        6: major * 10 + minor,  # BINARY_VERSION
        7: 0,  # CACHE_MODE_CA
        8: fn.max_dynamic_shared,  # MAX_DYNAMIC_SHARED_SIZE_BYTES
        9: fn.carveout,  # PREFERRED_SHARED_MEMORY_CARVEOUT
        10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0,  # cluster attributes: no clusters
    }
    if attrib not in values:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"function attribute {attrib}")
    return values[attrib]


def set_attribute(fn: Function, attrib: int, value: int) -> None:
    if attrib == 8:
        if not 0 <= value <= SHARED_MEMORY_PER_BLOCK_OPTIN - fn.info.static_shared:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dynamic shared memory {value} exceeds the device limit")
        if fn.max_dynamic_shared != value:
            native.forget()  # descriptors hold the limit
        fn.max_dynamic_shared = value
    elif attrib == 9:
        if not -1 <= value <= 100:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"shared memory carveout {value}")
        fn.carveout = value
    elif attrib in (10, 11, 12, 13, 14, 15):
        pass  # cluster scheduling hints: accepted, no clusters on this device
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"function attribute {attrib} cannot be set")


@entry("cuFuncGetAttribute")
def cuFuncGetAttribute(pi, attrib, hfunc):
    require(pi)
    store(pi, get_attribute(function_of(addr(hfunc)), attrib))


@entry("cuKernelGetAttribute")
def cuKernelGetAttribute(pi, attrib, kernel, dev):
    require(pi)
    store(pi, get_attribute(function_of(addr(kernel)), attrib))


@entry("cuFuncSetAttribute")
def cuFuncSetAttribute(hfunc, attrib, value):
    set_attribute(function_of(addr(hfunc)), attrib, value)


@entry("cuKernelSetAttribute")
def cuKernelSetAttribute(attrib, value, kernel, dev):
    set_attribute(function_of(addr(kernel)), attrib, value)


@entry("cuFuncSetCacheConfig", "cuFuncSetSharedMemConfig")
def cuFuncSetCacheConfig(hfunc, config):
    fn = function_of(addr(hfunc))
    if not 0 <= config <= 3:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cache config {config}")
    fn.cache_config = config


@entry("cuKernelSetCacheConfig")
def cuKernelSetCacheConfig(kernel, config, dev):
    return cuFuncSetCacheConfig(kernel, config)


# ---- linker ----
CU_JIT_INPUT_CUBIN, CU_JIT_INPUT_PTX, CU_JIT_INPUT_FATBINARY, CU_JIT_INPUT_OBJECT, CU_JIT_INPUT_LIBRARY = range(5)


@dataclass
class LinkState:
    jit: JitOptions  # cuLinkCreate's: its arrays stay valid until cuLinkDestroy, as cuda.h requires
    texts: list[str] = field(default_factory=list)
    image: object = None
    handle: int = 0


links: HandleTable[LinkState] = HandleTable("link state", CUDA_ERROR_INVALID_HANDLE)


def _link_input(state: LinkState, kind: int, data: bytes, name: str) -> None:
    from .. import fatbin

    if kind == CU_JIT_INPUT_PTX:
        text = data.split(b"\0", 1)[0].decode()
        _check_ptx(text, name)
        state.texts.append(text)
    elif kind in (CU_JIT_INPUT_FATBINARY, CU_JIT_INPUT_OBJECT, CU_JIT_INPUT_LIBRARY, CU_JIT_INPUT_CUBIN):
        try:
            mods = fatbin.ptx_from_bytes(data, _target_sm(), name)
        except fatbin.FatbinError as e:
            raise CudaError(e.cu_result, f"{name}: {e}") from e
        state.texts.extend(m.text for m in mods)
    else:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"link input type {kind}")


def _check_ptx(text: str, name: str) -> None:
    """Parse and check PTX as it is added, so that an error fails cuLinkAddData and reaches
    the error log there, as ptxas's does on NVIDIA's driver."""
    from .. import ptx

    try:
        ptx.parse(text, name)
    except ptx.PtxError as e:
        raise CudaError(e.cu_result, str(e)) from e


@entry("cuLinkCreate_v2")
def cuLinkCreate(n, options, values, pstate):
    require(pstate)
    ctxs.current()
    state = LinkState(JitOptions(n, options, values))
    links.add(state)
    store_ptr(pstate, state.handle)


@entry("cuLinkAddData_v2")
def cuLinkAddData(hstate, kind, data, size, name, n, options, values):
    state = links.get(addr(hstate))
    if data == ffi.NULL or size == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "empty link input")
    label = cstr(name) if name else "<data>"
    with state.jit.logging(f"adding {label}"):
        _link_input(state, kind, read_bytes(addr(data), size), label)


@entry("cuLinkAddFile_v2")
def cuLinkAddFile(hstate, kind, path, n, options, values):
    state = links.get(addr(hstate))
    require(path)
    p = cstr(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        raise CudaError(CUDA_ERROR_FILE_NOT_FOUND, p) from None
    with state.jit.logging(f"adding {p}"):
        _link_input(state, kind, data, p)


@entry("cuLinkComplete")
def cuLinkComplete(hstate, pcubin, psize):
    require(pcubin, psize)
    state = links.get(addr(hstate))
    with state.jit.logging("link"):
        if not state.texts:
            raise CudaError(CUDA_ERROR_INVALID_IMAGE, "nothing was added to the link")
    # The "cubin" holds the inputs' PTX (fatbin.ptx_cubin), linked when it is loaded: programs
    # copy it (cuda.core, before cuLinkDestroy) and cache it on disk.
    from ..fatbin import ptx_cubin

    image = ptx_cubin.pack(state.texts, _target_sm())
    state.image = ffi.new("char[]", image)
    store_ptr(pcubin, addr(state.image))
    store(psize, len(image))


@entry("cuLinkDestroy")
def cuLinkDestroy(hstate):
    links.remove(addr(hstate))
