"""Entry points: what a module, library or function holds (cuModuleEnumerateFunctions,
cuFuncGetParamCount/cuKernelGetParamCount, cuKernelGetLibrary, cuLibraryGetUnifiedFunction)
and the lazy-loading state of a function (cuFuncIsLoaded, cuFuncLoad).

Under lazy loading (`docs/driver.md`, "Lazy loading") a function is loaded once its kernel's
code is built: at its first launch, a query only the code answers, or cuFuncLoad. Modules built
whole (EAGER, modules that must stay whole, the HIP backend) load every function with the
module. A parameter count comes from the kernel's declaration, without building it."""

from __future__ import annotations

from .api import entry
from ..cdata import addr, cstr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_NOT_FOUND, CudaError
from .init_device import require
from .module import Function, function_of, libraries, modules

CU_FUNCTION_LOADING_STATE_UNLOADED, CU_FUNCTION_LOADING_STATE_LOADED = 0, 1


def _param_count(fn: Function) -> int:
    return len(fn.module.compiled.kernels[fn.name].params)


@entry("cuFuncGetParamCount", "cuKernelGetParamCount")
def cuFuncGetParamCount(handle, pcount):
    require(pcount)
    store(pcount, _param_count(function_of(addr(handle))))


@entry("cuFuncIsLoaded")
def cuFuncIsLoaded(pstate, hfunc):
    require(pstate)
    fn = function_of(addr(hfunc))
    is_built = getattr(fn.module.compiled, "is_built", None)  # only a lazily built module has it
    loaded = is_built is None or is_built(fn.name)
    store(pstate, CU_FUNCTION_LOADING_STATE_LOADED if loaded else CU_FUNCTION_LOADING_STATE_UNLOADED)


@entry("cuFuncLoad")
def cuFuncLoad(hfunc):
    function_of(addr(hfunc)).info  # noqa: B018 - builds the kernel; an error of its code is this call's


@entry("cuModuleEnumerateFunctions")
def cuModuleEnumerateFunctions(pfunctions, n, hmod):
    m = modules.get(addr(hmod))
    names = list(m.compiled.kernels)[:n]  # "a maximum of numFunctions function handles"
    if names:
        require(pfunctions)
    for i, name in enumerate(names):
        pfunctions[i] = ffi.cast("void *", m.function(name).handle)


@entry("cuKernelGetLibrary")
def cuKernelGetLibrary(plib, kernel):
    require(plib)
    library = function_of(addr(kernel)).module.library
    if library is None:
        raise CudaError(CUDA_ERROR_NOT_FOUND, "the function belongs to a module, not a library")
    store_ptr(plib, library.handle)


@entry("cuLibraryGetUnifiedFunction")
def cuLibraryGetUnifiedFunction(pfptr, hlib, symbol):
    """cuda.h: without a device reporting CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS (ours
    report 0: device code cannot call host function addresses) the call answers NOT_FOUND."""
    require(pfptr, symbol)
    libraries.get(addr(hlib))
    raise CudaError(CUDA_ERROR_NOT_FOUND, f"no unified function {cstr(symbol)!r}: the device has no unified "
                                          "function pointers (CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS 0)")
