"""Attaches the driver's entry points to the shim's exported symbols (run by the shim's
embedded init code, once per process). The build writes the list of symbols the library
exports into exports.txt next to it; each is a C wrapper around the cffi extern named
`extern_prefix + symbol`, which is what gets the Python function."""

from __future__ import annotations

import os
from typing import Callable

from . import api, context, native
from ..curesult import CUDA_ERROR_UNKNOWN


def install(ffi, lib, extern_prefix: str) -> None:
    from . import context_api  # noqa: F401  (the package import registers every entry point)

    context.use_shim(lib)
    native.use_shim(ffi, lib)
    shim = ffi.string(lib.zluda_shim_path()).decode()
    with open(os.path.join(os.path.dirname(os.path.realpath(shim)), "exports.txt")) as f:
        symbols = f.read().split()
    implemented = api.implemented()
    for symbol in symbols:
        base = symbol[:-5] if symbol.endswith(("_ptds", "_ptsz")) else symbol
        if base not in implemented:
            raise RuntimeError(f"libcuda.so.1 exports {symbol} but zluda_py.driver does not implement {base}")
        ffi.def_extern(name=extern_prefix + symbol, error=CUDA_ERROR_UNKNOWN,
                       onerror=_escaped(symbol, lib))(api.wrapped(symbol))


def _escaped(symbol: str, lib) -> Callable[[type, BaseException, object], int]:
    """What an exception escaping the entry point's wrapper (a BaseException: Ctrl-C in a
    Python host) returns, instead of cffi's traceback and 0, success. Ctrl-C goes back to the
    host's interpreter, which raises KeyboardInterrupt once the call has returned (shim.c)."""
    def onerror(_type: type, value: BaseException, _tb: object) -> int:
        if isinstance(value, KeyboardInterrupt):
            lib.zluda_interrupted()
            return CUDA_ERROR_UNKNOWN
        return api.internal_error(symbol, value)
    return onerror
