"""PTX -> native code. `compile(ptx, target=CPU)` returns a loaded `CompiledModule` (targets: `compiler.target`)."""

from zluda_py.compiler.cpu.bounds import register_memory, unregister_memory
from zluda_py.compiler.cpu.runtime import CompiledModule
from zluda_py.compiler.errors import LaunchError, PtxError, UnsupportedError
from zluda_py.compiler.kernels import GlobalInfo, KernelInfo, ParamInfo
from zluda_py.compiler.pipeline import compile, emit_object, load, lower

__all__ = ["compile", "lower", "emit_object", "load", "CompiledModule", "KernelInfo", "ParamInfo", "GlobalInfo",
           "LaunchError", "PtxError", "UnsupportedError", "register_memory", "unregister_memory"]
