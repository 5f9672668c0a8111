"""A lowered CPU module as one LLVM module per kernel plus one holding the module's variables,
so that code generation, which dominates large modules (CUB and Thrust), runs on several
cores (`compiler/codegen.py`). The objects are loaded together, so each kernel's references to
the variables resolve to the one definition.

A kernel's module holds its block runner and everything the runner reaches: the internal
functions (.funcs, warp functions, helpers) and internal constants are copied into each
module that uses them; the variables are declared there and defined only in the variables'
module. Where copying could be observed the module is not split (`split` returns None): a
function whose address is taken (two copies would have two addresses), an internal mutable
variable (two copies would be two variables), or an exported function other than a runner.
A function whose address only its kernel's runner takes and no other value names (the block or
warp function the runner passes to the shared block runner) is in that runner's module alone.
"""

from __future__ import annotations

import re

from llvmlite import ir

# a reference to a global value (llvmlite quotes every name), and whether a call's "(" follows
_REF = re.compile(r'(@"[^"]*")(\()?')
_INTERNAL = ("internal", "private")


def _declaration(v: ir.GlobalVariable) -> str:
    kind = "constant" if v.global_constant else "global"
    align = f", align {v.align}" if v.align else ""
    return f"{v.get_reference()} = external {kind} {v.value_type}{align}"


def _text(v: ir.GlobalValue) -> str:
    """`str(v)`; a function with a body printed without llvmlite's string cache of each
    instruction (`_to_string`, what `str` calls on a miss): each is printed once here, and the
    miss (an AttributeError) and the format around it were a quarter of a function's printing."""
    if not (isinstance(v, ir.Function) and v.blocks):
        return str(v)
    buf: list[str] = []
    v.descr_prototype(buf)
    buf.append("{\n")
    for block in v.blocks:
        buf.append(f"{block._format_name()}:\n")
        buf += [f"  {i._to_string()}\n" for i in block.instructions]
    buf.append("}\n")
    return "".join(buf)


def split(module: ir.Module, runners: list[str]) -> list[str] | None:
    """[variables' module, one module per runner (in `runners` order)] as IR text, or None
    when the module must stay whole."""
    values = list(module.globals.values())
    by_ref = {v.get_reference(): v for v in values}
    text = {v.name: _text(v) for v in values}
    refs: dict[str, list[str]] = {}
    taken: dict[str, set[str]] = {}  # function -> the globals that take its address
    for v in values:
        found: dict[str, None] = {}  # ordered, for reproducible output
        for m in _REF.finditer(text[v.name]):
            target = by_ref.get(m.group(1))
            if target is None or target is v:
                continue
            found[target.name] = None
            if isinstance(target, ir.Function) and target.blocks and (m.group(2) is None
                                                                       or isinstance(v, ir.GlobalVariable)):
                taken.setdefault(target.name, set()).add(v.name)
        refs[v.name] = list(found)
    users: dict[str, int] = {}
    for name in refs:
        for target in refs[name]:
            users[target] = users.get(target, 0) + 1
    for name, takers in taken.items():
        # a runner passes its own block or warp function to the shared block runner
        # (block_runner.py): held by that runner alone, it has one copy and one address
        if not (len(takers) == 1 and users[name] == 1 and next(iter(takers)) in runners):
            return None  # a function's address is taken
    for v in values:
        if isinstance(v, ir.GlobalVariable) and v.linkage in _INTERNAL and not v.global_constant:
            return None
        if isinstance(v, ir.Function) and v.blocks and v.linkage not in _INTERNAL and v.name not in runners:
            return None

    def exported_variable(v: ir.GlobalValue) -> bool:
        return isinstance(v, ir.GlobalVariable) and v.linkage not in _INTERNAL

    def module_text(roots: list[str], define_variables: bool) -> str:
        seen: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            v = module.globals[name]
            if define_variables or not exported_variable(v):
                stack.extend(refs[name])
        body = [text[v.name] if define_variables or not exported_variable(v) else _declaration(v)
                for v in values if v.name in seen]
        return "\n".join([f'target triple = "{module.triple}"', f'target datalayout = "{module.data_layout}"', "",
                          *(t.get_declaration() for t in module.get_identified_types().values()),
                          *body, *_metadata(module)])

    variables = [v.name for v in values if exported_variable(v)]
    return [module_text(variables, True)] + [module_text([r], False) for r in runners]


def _metadata(module: ir.Module) -> list[str]:
    """Every metadata node, in each part (branch weights and the like; unused ones are harmless)."""
    named = [f"!{k} = !{{ {', '.join(i.get_reference() for i in v.operands)} }}"
             for k, v in module.namedmetadata.items()]
    return named + [str(md) for md in module.metadata]
