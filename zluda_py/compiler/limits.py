"""Limits ptxas enforces on a kernel, so NVIDIA's driver refuses the module that breaks them
(CUDA_ERROR_INVALID_PTX). Checked on what a build compiles, before lowering, for every target."""

from __future__ import annotations

from zluda_py.compiler.parts import _statements
from zluda_py.compiler.ptxtypes import align_up, is_dynamic_shared, var_align, var_size
from zluda_py.ptx import ast
from zluda_py.ptx.errors import PtxError

MAX_STATIC_SHARED = 0xC000  # bytes of static .shared per kernel ("uses too much shared data")


def _declared(body: list[ast.Statement]):
    return (s for s in _statements(body) if isinstance(s, ast.Variable))


class _SharedUse:
    """Static .shared bytes per kernel as ptxas counts them: the module's variables the kernel or
    a function it reaches names, and those they declare, in order, each at its alignment. Each
    body is walked once however many kernels reach it."""

    def __init__(self, module: ast.Module) -> None:
        self.module = module
        self.bodies = {f.name: f.body for f in module.functions() if f.body is not None}
        self.mentions: dict[str, set[str]] = {}

    def names(self, function: str) -> set[str]:
        if function not in self.mentions:
            self.mentions[function] = ast.mentioned_names(self.bodies[function])
        return self.mentions[function]

    def bytes(self, kernel: str) -> int:
        reached, todo, names = set(), [kernel], set()
        while todo:
            f = todo.pop()
            if f in reached:
                continue
            reached.add(f)
            names |= self.names(f)
            todo += [n for n in self.names(f) if n in self.bodies]
        variables = [v for v in self.module.variables() if v.space == "shared" and v.name in names]
        variables += [v for f in self.bodies if f in reached for v in _declared(self.bodies[f]) if v.space == "shared"]
        end = 0
        for v in variables:
            if not is_dynamic_shared(v):
                end = align_up(end, var_align(v)) + var_size(v)
        return end


def static_shared(module: ast.Module, kernel: str) -> int:
    """The static .shared bytes ptxas gives `kernel` of `module`."""
    return _SharedUse(module).bytes(kernel)


def check(module: ast.Module, kernels: list[str] | None = None) -> None:
    """Refuse the first of `kernels` (default: all the module's) over a ptxas limit."""
    if kernels is not None and not any(k.name in kernels for k in module.kernels()):
        return  # the variables' part: its bodies may be unbuilt (ast.UnbuiltBody)
    every = [*module.variables(), *(v for f in module.functions() if f.body for v in _declared(f.body))]
    if sum(var_size(v) for v in every if v.space == "shared" and not is_dynamic_shared(v)) <= MAX_STATIC_SHARED:
        return  # no kernel can be over: the usual case, decided without walking any body twice
    use = _SharedUse(module)
    for k in module.kernels():
        if kernels is None or k.name in kernels:
            size = use.bytes(k.name)
            if size > MAX_STATIC_SHARED:
                raise PtxError(f"kernel '{k.name}' uses {size} bytes of static .shared memory, more than "
                               f"{MAX_STATIC_SHARED}", k.pos.file, k.pos.line, k.pos.col)
