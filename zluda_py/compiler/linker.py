"""Linking several PTX modules into one (-rdc): .extern declarations resolve to definitions, also
to the device runtime functions the driver provides (device_runtime.py). The linked module
leaves out the kernels NVIDIA's driver leaves out of a module it loads (`absent_kernels`)."""

from __future__ import annotations

from zluda_py.compiler import device_runtime
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.parts import _statements, reached
from zluda_py.compiler.ptxtypes import var_size
from zluda_py.ptx import ast
from zluda_py.ptx.errors import PtxError
from zluda_py.ptx.facts import absent_query


def _is_definition(item: ast.Function | ast.Variable) -> bool:
    if isinstance(item, ast.Function):
        return item.body is not None
    return item.linkage != "extern"


def _absent_query(f: ast.Function) -> bool:
    """Whether f makes a query NVIDIA's driver builds no kernel with (facts.absent_query), as the
    front end's checker recorded it (`Function.facts`) or found by walking f's body."""
    if f.facts is not None:
        return f.facts.absent_query
    return any(isinstance(s, ast.Instruction) and absent_query(s) for s in _statements(f.body or []))


def absent_kernels(module: ast.Module) -> set[str]:
    """The kernels that reach an absent query: the module loads without them, and looking one
    up is CUDA_ERROR_NOT_FOUND, as on NVIDIA's driver."""
    querying = {f.name for f in module.functions() if _absent_query(f)}
    if not querying:
        return set()
    return {k.name for k in module.kernels() if querying & reached(module, k.name)}


def link(modules: list[ast.Module]) -> ast.Module:
    module = _link(modules)
    absent = absent_kernels(module)
    if not absent:
        return module
    items = [i for i in module.items if not isinstance(i, ast.Function) or i.name not in absent]
    return ast.Module(module.version, module.target, module.address_size, items, module.filename)


def _common(a: ast.Variable, b: ast.Variable) -> ast.Variable:
    """The definition that two modules' `.common` variables of one name resolve to: the larger
    (PTX ISA, linking directives); only one may be initialised, and it must be the largest."""
    if a.init is not None and b.init is not None:
        raise PtxError(f"common variable {b.name} is initialised in more than one module", b.pos.file, b.pos.line,
                       b.pos.col)
    big, small = (a, b) if var_size(a) > var_size(b) or (var_size(a) == var_size(b) and a.init is not None) else (b, a)
    if small.init is not None:
        raise PtxError(f"common variable {small.name} is initialised in a module that does not give its largest size",
                       small.pos.file, small.pos.line, small.pos.col)
    return big


def _link(modules: list[ast.Module]) -> ast.Module:
    modules = [*modules, *device_runtime.needed_by(modules)]
    if len(modules) == 1:
        return modules[0]
    items: list = []
    defined: dict[str, ast.Function | ast.Variable] = {}
    for m in modules:
        for item in m.items:
            if isinstance(item, (ast.Function, ast.Variable)) and _is_definition(item):
                old = defined.get(item.name)
                if old is not None and item.linkage == old.linkage == "common":
                    defined[item.name] = _common(old, item)
                elif old is not None and item.linkage != "weak":
                    raise UnsupportedError(f"{item.name} is defined in more than one module", item.pos)
                defined.setdefault(item.name, item)
    seen: set[str] = set()
    for m in modules:
        for item in m.items:
            if not isinstance(item, (ast.Function, ast.Variable)):
                continue
            chosen = defined.get(item.name, item)
            if item.name not in seen:
                seen.add(item.name)
                items.append(chosen)
    first = modules[0]
    return ast.Module(max(m.version for m in modules), first.target, first.address_size, items, first.filename)
