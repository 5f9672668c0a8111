"""Per-kernel layout of the `.shared` window (CPU target).

nvcc hoists each kernel's `__shared__` arrays to module-scope `.shared` declarations, so one
module holds the arrays of all its kernels. Laying them all out in one window would make every
kernel need the sum (and the occupancy API answer 0 blocks). Instead: the static variables any
`.func` names come first, at offsets valid in every kernel (a `.func` may run under any kernel);
then each kernel places the other variables it names itself, so kernels overlap each other.
Dynamic (extern) `.shared` starts at the kernel's static size (aligned as ptxtypes.
dynamic_shared_align says); when a `.func` names one, it must start at one offset in every
kernel, so every kernel then reports the largest static size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zluda_py.compiler.cfg import flatten
from zluda_py.compiler.ptxtypes import align_up, dynamic_shared_align, is_dynamic_shared, var_align, var_size
from zluda_py.ptx import ast


@dataclass
class SharedLayout:
    """Offsets in the shared window: per function (module-scope variables by name, and the
    dynamic base), per body-declared variable (by function and name after cfg.flatten's
    renaming of shadowed names), and each kernel's static size: the window's (`static`, where
    the dynamic part starts) and the one NVIDIA reports (`declared`: the same in a module with
    dynamic shared memory, else its variables' exact end)."""

    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    local_offsets: dict[tuple[str, str], int] = field(default_factory=dict)
    dynamic_base: dict[str, int] = field(default_factory=dict)
    static: dict[str, int] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)


def layout_shared(module: ast.Module) -> SharedLayout:
    out = SharedLayout()
    shared = [v for v in module.variables() if v.space == "shared"]
    bodies = [f for f in module.functions() if f.body is not None]
    names: dict[str, set[str]] = {}
    local: dict[str, list[ast.Variable]] = {}
    for f in bodies:
        variables, statements, _ = flatten(f.body)
        names[f.name] = _names_used(statements)
        local[f.name] = [v for v in variables if v.space == "shared"]
    funcs = [f for f in bodies if f.kind == "func"]
    every = shared + [v for vs in local.values() for v in vs]
    dyn_align = dynamic_shared_align(every)
    has_dynamic = any(is_dynamic_shared(v) for v in every)
    end = 0

    def place(v: ast.Variable) -> int:
        nonlocal end
        end = align_up(end, var_align(v))
        offset, end = end, end + var_size(v)
        return offset

    common = {v.name: place(v) for v in shared
              if not is_dynamic_shared(v) and any(v.name in names[f.name] for f in funcs)}
    for f in funcs:
        for v in local[f.name]:
            if not is_dynamic_shared(v):
                out.local_offsets[(f.name, v.name)] = place(v)
    common_end = end
    for k in (f for f in bodies if f.kind == "entry"):
        end = common_end
        own = {v.name: place(v) for v in shared
               if not is_dynamic_shared(v) and v.name in names[k.name] and v.name not in common}
        for v in local[k.name]:
            if not is_dynamic_shared(v):
                out.local_offsets[(k.name, v.name)] = place(v)
        out.offsets[k.name] = {**common, **own}
        out.static[k.name] = align_up(end, dyn_align)
        out.declared[k.name] = out.static[k.name] if has_dynamic else end
    dynamic_names = {v.name for v in shared if is_dynamic_shared(v)}
    funcs_dynamic = any(names[f.name] & dynamic_names or any(is_dynamic_shared(v) for v in local[f.name]) for f in funcs)
    shared_base = align_up(common_end, dyn_align)
    if funcs_dynamic:
        shared_base = max([shared_base, *out.static.values()])
    for f in funcs:
        out.offsets[f.name] = common
        out.dynamic_base[f.name] = shared_base
    for k in out.static:
        if funcs_dynamic:
            out.static[k] = out.declared[k] = shared_base
        out.dynamic_base[k] = out.static[k]
    return out


def _names_used(statements: list[ast.Statement]) -> set[str]:
    """Every symbol an instruction names (operands, address bases, call targets)."""
    out: set[str] = set()

    def operand(op) -> None:
        if isinstance(op, ast.Sym):
            out.add(op.name)
        elif isinstance(op, ast.Addr):
            operand(op.base)
            for e in op.extra:
                operand(e)
        elif isinstance(op, ast.Vec):
            for e in op.elems:
                operand(e)
        elif isinstance(op, ast.ArgList):
            for e in op.args:
                operand(e)

    for s in statements:
        if isinstance(s, ast.Instruction):
            for op in s.operands:
                operand(op)
    return out
