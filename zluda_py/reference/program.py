"""A PTX module decoded for the reference: per function a list of instruction closures.

Each closure is `step(t, r)`: `t` the executing Thread, `r` its current frame's register list.
It returns None to go on with the next instruction, the index of the instruction to jump to
(a taken branch), or STOP (-1) when the thread must leave its run loop (a call, a return, a
wait at a rendezvous, exit). Operands are resolved once here: a register to its index, an immediate
to its bit pattern, a symbol to its address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from zluda_py.compiler import cfg
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.layout import flatten_init, initial_bits, kernel_params
from zluda_py.compiler.linker import link
from zluda_py.compiler.ptxtypes import (align_up, dynamic_shared_align, global_align, is_dynamic_shared,
                                        type_size, var_align, var_size)
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast, parse
from zluda_py.reference.memory import CONST_BASE, FUNC_BASE, VARS_BASE

Step = Callable[..., object]
Read = Callable[..., int]
Write = Callable[..., None]


@dataclass
class Symbol:
    """What a name means in a function: kind kparam (offset in the parameter buffer), param (a
    per-frame .param buffer), local (offset in the frame), shared (offset in the window),
    global / const (address), func (a function)."""

    kind: str
    value: int = 0
    size: int = 0


@dataclass
class Func:
    name: str
    fn: ast.Function
    regs: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (index, bits)
    symbols: dict[str, Symbol] = field(default_factory=dict)
    frame_size: int = 0  # .local bytes
    param_vars: list[tuple[str, int]] = field(default_factory=list)  # .param buffers made per frame
    code: list[Step] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    directives: list[ast.Directive] = field(default_factory=list)

    @property
    def nregs(self) -> int:
        return len(self.regs)


class Program:
    """The decoded module: functions, module variables' initial bytes, the shared layout."""

    def __init__(self, ptx: str | list[str]) -> None:
        texts = [ptx] if isinstance(ptx, str) else list(ptx)
        self.module = link([parse(t) for t in texts])
        self.functions: dict[str, Func] = {}
        self.func_list: list[Func] = []
        self.module_symbols: dict[str, Symbol] = {}
        self.shared_static = 0
        self.vars = bytearray()
        self.consts = bytearray()
        fns = [f for f in self.module.functions() if f.body is not None]
        for f in fns:
            func = Func(f.name, f)
            self.functions[f.name] = func
            self.module_symbols[f.name] = Symbol("func", FUNC_BASE + 16 * len(self.func_list))
            self.func_list.append(func)
        bodies = {f.name: cfg.flatten(f.body or [], keep=lambda op: op in SEMANTICS) for f in fns}
        scoped = self._layout_variables(bodies)
        self._init_variables(scoped)
        self.bodies = bodies

    def _layout_variables(self, bodies) -> list[tuple[dict[str, Symbol], ast.Variable]]:
        """Module .global/.const variables, then every static .shared variable in declaration
        order (module scope, then function bodies); extern .shared starts after them."""
        shared: list[tuple[dict[str, Symbol], ast.Variable]] = []
        dynamic: list[tuple[dict[str, Symbol], ast.Variable]] = []
        scoped = [(self.module_symbols, v) for v in self.module.variables()]
        for name, (variables, _, _) in bodies.items():
            scoped += [(self.functions[name].symbols, v) for v in variables if v.space in ("shared", "global", "const")]
        for table, v in scoped:
            if v.type not in ast.SCALAR_TYPES or v.space not in ("shared", "global", "const"):
                raise NotImplementedError(f"reference: .{v.space} .{v.type} variable {v.name}")
            if v.space == "shared":
                (dynamic if is_dynamic_shared(v) else shared).append((table, v))
            elif v.space in ("global", "const"):
                buf = self.vars if v.space == "global" else self.consts
                off = align_up(len(buf), global_align(v))
                buf.extend(bytes(off - len(buf) + var_size(v)))
                base = VARS_BASE if v.space == "global" else CONST_BASE
                table[v.name] = Symbol(v.space, base + off, var_size(v))
        end = 0
        for table, v in shared:
            end = align_up(end, var_align(v))
            table[v.name] = Symbol("shared", end, var_size(v))
            end += var_size(v)
        self.shared_static = align_up(end, dynamic_shared_align(v for _, v in dynamic))
        for table, v in dynamic:
            table[v.name] = Symbol("shared", self.shared_static)
        return scoped

    def _init_variables(self, scoped: list[tuple[dict[str, Symbol], ast.Variable]]) -> None:
        for table, v in scoped:
            if v.space not in ("global", "const") or v.init is None:
                continue
            sym = table[v.name]
            buf = self.vars if v.space == "global" else self.consts
            start = sym.value & 0xFFFFFFFF
            elem = type_size(v.type)
            for i, item in enumerate(flatten_init(v.init)):
                if isinstance(item.value, ast.Sym):
                    target = table.get(item.value.name) or self.module_symbols.get(item.value.name)
                    if target is None or target.kind == "shared":
                        raise NotImplementedError(f"reference: initializer address of {item.value.name}")
                    bits, elem_bits = target.value + item.offset, 8 * elem
                elif isinstance(item.value, ast.Imm):
                    bits, elem_bits = initial_bits(item.value, v.type), 8 * elem
                else:
                    continue
                at = start + i * elem
                buf[at:at + elem] = (bits & ((1 << elem_bits) - 1)).to_bytes(elem, "little")

    def function_at(self, address: int) -> Func | None:
        k, rem = divmod(address - FUNC_BASE, 16)
        return self.func_list[k] if rem == 0 and 0 <= k < len(self.func_list) else None

    def static_stack(self, kernel: str) -> int:
        """Stack bytes `kernel` needs before any recursion: its .local frame plus the largest sum of
        frames along a chain of direct calls in which no function repeats. NVIDIA's driver grows the
        per-thread stack to a launch's need (cuCtxSetLimit); the limit caps only what recursion adds."""
        below: dict[str, int] = {}

        def callees(name: str) -> set[str]:
            return {next(o.name for o in s.operands if isinstance(o, ast.Sym)) for s in self.bodies[name][1]
                    if isinstance(s, ast.Instruction) and s.opcode == "call"
                    and any(isinstance(o, ast.Sym) for o in s.operands)} & self.functions.keys()

        def deepest(name: str, chain: frozenset[str]) -> int:
            if name not in below:
                below[name] = max((self.functions[c].frame_size + deepest(c, chain | {c})
                                   for c in callees(name) if c not in chain), default=0)
            return below[name]

        return self.functions[kernel].frame_size + deepest(kernel, frozenset([kernel]))

    def kernel(self, name: str) -> tuple[Func, list[dict], int]:
        func = self.functions.get(name)
        if func is None or func.fn.kind != "entry":
            raise KeyError(f"no kernel {name}")
        params, size = kernel_params(func.fn)
        return func, params, size


def bits_of(t: str) -> int:
    """Width of a PTX type in bits, b128 included."""
    return 128 if t == "b128" else ptx_bits(t)
