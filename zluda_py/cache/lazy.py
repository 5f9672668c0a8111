"""Lazy module loading (CUDA_MODULE_LOADING, LAZY by default as on NVIDIA's driver since CUDA
12.2): a load parses and checks the PTX (unless its variables' part is cached: see `load`) and
builds only the module's variables, then keeps the PTX text rather than its AST
(part_source.py); a kernel is
built (from the cache, or compiled) the first time it is needed: launched, or asked for what
only its code knows (`kernel(name)`). EAGER builds every kernel at load, in parallel.

Each part (compiler/parts.py) is its own cache entry, so a kernel's entry serves every program
that launches it, and `zluda-compile` warms the very entries a run looks up. A module that
must stay whole (`parts.whole_reason`) is built whole at load, in either mode.
"""

from __future__ import annotations

import os
import threading
import time

from zluda_py.compiler.cpu.runtime import CompiledModule
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.kernels import KernelInfo
from zluda_py.compiler.parts import VARIABLES, parts

from . import events
from .compile import Built, checked, compile_cached, known, linked, parts_once, release


def eager() -> bool:
    """CUDA_MODULE_LOADING=EAGER: compile every kernel when its module is loaded."""
    return os.environ.get("CUDA_MODULE_LOADING", "LAZY").strip().upper() == "EAGER"


class LazyModule:
    """One instance of a module built per kernel (its own variables): CompiledModule's
    interface, with `kernel(name)` building that kernel first if it is not built yet. Until
    then `kernels[name]` holds what the declaration says (parameters, block limits; shared and
    local sizes read 0). The PTX is parsed only when a part must be compiled."""

    def __init__(self, ptx: list[str], name: str = "", module=None) -> None:
        """`module`: the load's AST (`checked`), from which the variables' part is built."""
        self._ptx, self._name = ptx, name
        self._lock = threading.Lock()
        variables = self._built([VARIABLES], module)[0]
        self._instance = CompiledModule(variables.object_code, variables.metadata)
        self.globals = self._instance.globals
        self.kernels: dict[str, KernelInfo] = {}
        for k, d in variables.metadata["declared"]:
            self.kernels[k] = KernelInfo.declared(k, d)

    def _built(self, names: list[str], module=None) -> list[Built]:
        start = time.perf_counter()
        built = parts_once(self._ptx, names, CPU, self._name, module)
        for b in built:
            events.record(events.LOADED, f"{b.key[:16]} {'from the cache' if b.cached else 'compiled'} "
                                         f"in {time.perf_counter() - start:.4f} s")
        return built

    def build(self, names: list[str]) -> None:
        """Build and link these kernels (those not built yet), together."""
        with self._lock:
            todo = [n for n in names if n not in self._instance.kernels]
            if not todo:
                return
            for built in self._built(todo):
                self._instance.add_part(built.object_code, built.metadata)
            self.kernels.update((n, self._instance.kernels[n]) for n in todo)

    def is_built(self, name: str) -> bool:
        """Whether the kernel's code is built (cuFuncIsLoaded)."""
        return name in self._instance.kernels

    def kernel(self, name: str) -> KernelInfo:
        if name not in self._instance.kernels:
            self.build([name])
        return self._instance.kernels[name]

    def launch_raw(self, kernel: str, *args, **kwargs) -> None:
        self.kernel(kernel)
        self._instance.launch_raw(kernel, *args, **kwargs)

    def launch(self, kernel: str, *args, **kwargs) -> None:
        self.kernel(kernel)
        self._instance.launch(kernel, *args, **kwargs)


def load(ptx: list[str], name: str = ""):
    """A new instance of the PTX for the host CPU: a LazyModule (every kernel built already
    under EAGER), or, for a module that must stay whole, a CompiledModule. The PTX is parsed
    and checked unless its variables' part is built or cached already: that part exists only
    for a module built per kernel, and holds what its kernels declare. Under LAZY the bodies
    are checked without building their AST where they can be (`checked`)."""
    module = None
    if not known(ptx, CPU, VARIABLES):
        module = linked(ptx) if eager() else checked(ptx)
        if parts(module) is None:
            return compile_cached(ptx if len(ptx) > 1 else ptx[0], CPU, once=True, name=name)
    lazy = LazyModule(ptx, name, module)
    if eager():
        lazy.build(list(lazy.kernels))
    release(ptx, module)  # the kernels built later are parsed from the text of what they reach
    return lazy
