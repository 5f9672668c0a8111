"""Lazy module loading (CUDA_MODULE_LOADING, LAZY by default as on NVIDIA's driver since CUDA
12.2): a load parses and checks the PTX and builds only the module's variables; a kernel is
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

from zluda_py.compiler.cpu.runtime import CompiledModule, KernelInfo, ParamInfo
from zluda_py.compiler.parts import VARIABLES, declared_kernel, parts

from . import events
from .compile import Built, compile_cached, parts_once


def eager() -> bool:
    """CUDA_MODULE_LOADING=EAGER: compile every kernel when its module is loaded."""
    return os.environ.get("CUDA_MODULE_LOADING", "LAZY").strip().upper() == "EAGER"


_plans: dict[tuple[str, ...], tuple[object, list[str] | None]] = {}
_plans_lock = threading.Lock()


def plan(ptx: list[str]) -> tuple[object, list[str] | None]:
    """(the linked AST, its parts or None when it stays whole), once per input in this process.
    Parsing checks the PTX: a bad module fails its load, as ptxas's errors do."""
    from zluda_py.compiler.linker import link
    from zluda_py.ptx import parse

    key = tuple(ptx)
    with _plans_lock:
        found = _plans.get(key)
    if found is None:
        module = link([parse(text) for text in ptx])
        found = (module, parts(module))
        with _plans_lock:
            _plans.setdefault(key, found)
    return found


class LazyModule:
    """One instance of a module built per kernel (its own variables): CompiledModule's
    interface, with `kernel(name)` building that kernel first if it is not built yet. Until
    then `kernels[name]` holds what the declaration says (parameters, block limits; shared and
    local sizes read 0)."""

    def __init__(self, ptx: list[str], module, kernels: list[str], name: str = "") -> None:
        self._ptx, self._ast, self._name = ptx, module, name
        self._lock = threading.Lock()
        variables = self._built([VARIABLES])[0]
        self._instance = CompiledModule(variables.object_code, variables.metadata)
        self.globals = self._instance.globals
        by_name = {f.name: f for f in module.kernels()}
        self.kernels: dict[str, KernelInfo] = {}
        for k in kernels:
            d = declared_kernel(by_name[k])
            self.kernels[k] = KernelInfo(k, [ParamInfo(**p) for p in d["params"]], d["param_size"], 0, 0,
                                         d["max_threads"], tuple(d["reqntid"]) if d["reqntid"] else None)

    def _built(self, names: list[str]) -> list[Built]:
        start = time.perf_counter()
        built = parts_once(self._ptx, names, "cpu", self._name, self._ast)
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
    under EAGER), or, for a module that must stay whole, a CompiledModule."""
    module, names = plan(ptx)
    if names is None:
        return compile_cached(ptx if len(ptx) > 1 else ptx[0], target="cpu", once=True, name=name)
    lazy = LazyModule(ptx, module, names[1:], name)
    if eager():
        lazy.build(names[1:])
    return lazy
