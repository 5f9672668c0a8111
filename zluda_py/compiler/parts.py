"""A PTX module as parts that are compiled, cached and loaded on their own (lazy loading):
one holding the module's variables, and one per kernel with the functions it reaches.

Pruning happens on the AST, before lowering, so a kernel costs only what it reaches however
big its module is (CuPy's CUB fatbins hold thousands of kernels). `cpu/split.py` then takes the
lowered part apart the way it splits a whole module: the variables are declared in a kernel's
part and defined only in the variables' part, which every instance loads once.

A module stays whole (`whole_reason` says why) where a part could not stand alone:
  * a function's address is taken (an initializer, a non-call operand, `.calltargets`):
    copies in several parts would have several addresses, and an indirect call needs the
    callee in the caller's part;
  * a `.global`/`.const` variable is declared inside a function body: lowering defines it
    with its function, so it would live in a kernel's part, not in the variables' part.
"""

from __future__ import annotations

from zluda_py.compiler.inline import _initializer_syms
from zluda_py.compiler.layout import directive_dims, kernel_params, max_threads
from zluda_py.ptx import ast
from zluda_py.ptx.facts import facts_for, statement_reason

VARIABLES = "@variables"  # the variables' part; PTX names cannot start with "@"


def _statements(body: list[ast.Statement]):
    for s in body:
        if isinstance(s, ast.Block):
            yield from _statements(s.body)
        else:
            yield s


def whole_reason(module: ast.Module) -> str | None:
    """Why the (linked) module cannot be built per kernel, or None when it can. A function's
    bodies are walked only where the front end's checker did not record the answer against
    these function names (`Function.facts`)."""
    functions = {f.name for f in module.functions()}
    for v in module.variables():
        taken = next((s.name for s in _initializer_syms(v.init) if s.name in functions), None)
        if taken:
            return f"the address of {taken} is taken (initializer of {v.name})"
    for f in module.functions():
        known = facts_for(f, functions)
        reason = known.whole if known is not None else next(
            filter(None, (statement_reason(s, f.name, functions) for s in _statements(f.body or []))), None)
        if reason:
            return reason
    return None


def reached(module: ast.Module, kernel: str) -> set[str]:
    """The kernel and every function it calls, directly or not."""
    bodies = {f.name: f.body for f in module.functions() if f.body is not None}
    functions = {f.name for f in module.functions()}
    seen, todo = set(), [kernel]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [n for n in ast.mentioned_names(bodies.get(name) or []) if n in functions]
    return seen


def mentioned(module: ast.Module, name: str) -> bool:
    """Whether any function body or variable initializer of the module names `name`: a declared
    function nothing calls or takes the address of needs no definition (ptxas leaves it out)."""
    return (any(name in ast.mentioned_names(f.body) for f in module.functions() if f.body)
            or any(s.name == name for v in module.variables() for s in _initializer_syms(v.init)))


def part_module(module: ast.Module, part: str) -> ast.Module:
    """The module reduced to one part: every variable, plus (for a kernel) that kernel and the
    functions it reaches (their declarations included)."""
    keep = set() if part == VARIABLES else reached(module, part)
    items = [i for i in module.items if not isinstance(i, ast.Function) or i.name in keep]
    return ast.Module(module.version, module.target, module.address_size, items, module.filename)


def parts(module: ast.Module) -> list[str] | None:
    """The parts of a module built per kernel ([VARIABLES, kernels...]), None if it stays whole."""
    if whole_reason(module) is not None:
        return None
    return [VARIABLES, *(k.name for k in module.kernels())]


def declared_kernel(f: ast.Function) -> dict:
    """What a kernel's declaration says (parameters, block limits), before it is compiled."""
    params, param_size = kernel_params(f)
    return {"params": params, "param_size": param_size, "max_threads": max_threads(f),
            "reqntid": directive_dims(f, "reqntid")}
