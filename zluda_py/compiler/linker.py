"""Linking several PTX modules into one (-rdc): .extern declarations resolve to definitions, also
to the device runtime functions the driver provides (device_runtime.py)."""

from __future__ import annotations

from zluda_py.compiler import device_runtime
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.ptx import ast


def _is_definition(item: ast.Function | ast.Variable) -> bool:
    if isinstance(item, ast.Function):
        return item.body is not None
    return item.linkage != "extern"


def link(modules: list[ast.Module]) -> ast.Module:
    modules = [*modules, *device_runtime.needed_by(modules)]
    if len(modules) == 1:
        return modules[0]
    items: list = []
    defined: dict[str, ast.Function | ast.Variable] = {}
    for m in modules:
        for item in m.items:
            if isinstance(item, (ast.Function, ast.Variable)) and _is_definition(item):
                if item.name in defined and item.linkage != "weak":
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
