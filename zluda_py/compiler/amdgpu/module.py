"""Lowering of a whole PTX module for one AMDGPU target: variables, functions, kernel ABI.

Kernels are `amdgpu_kernel` functions with one `byref` kernarg per PTX parameter, aligned
as CUDA lays out its parameter buffer, so the kernarg segment is the CUDA parameter buffer
followed by the v5 hidden arguments (in modules that use grid.sync(), the grid workspace
pointer comes between the two: see GRID_WORKSPACE_ARG). `.func`s take a private buffer
pointer per parameter and return value. Module `.global`/`.const` variables are exported (protected) symbols in the
code object, so the runtime finds them by name (cuModuleGetGlobal). A `__managed__` variable is
managed memory the HIP backend allocates at load (hipMallocManaged, as HIP's own `__managed__`
variables are): the code object exports only a pointer to it under its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

from llvmlite import ir

from zluda_py.compiler import parts
from zluda_py.compiler.amdgpu.codegen import CODE_OBJECT_FLAG
from zluda_py.compiler.amdgpu.function import (ENVREG_WORKSPACE, GRID_WORKSPACE_ARG, GRID_WORKSPACE_BYTES, SYSCALLS,
                                               FunctionLowering, Symbol)
from zluda_py.compiler.amdgpu.ir_extras import ByRefAttributes
from zluda_py.compiler.amdgpu.printf import BUFFER_SYMBOL
from zluda_py.compiler.amdgpu.targets import GfxTarget
from zluda_py.compiler.amdgpu.warp import NAMED_BARRIER_WORDS, NAMED_BARRIERS, counted_barrier
from zluda_py.compiler.device_runtime import LAUNCH_FUNCTIONS
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.layout import (RESERVED_SMEM, address_offsets, directive_dims, initial_value, kernel_params,
                                      max_threads)
from zluda_py.compiler.ptxtypes import dynamic_shared_align, global_align, is_dynamic_shared, var_align, var_size
from zluda_py.ptx import ast

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
SPACE_AS = {"global": 1, "const": 4, "shared": 3}
DYN_SHARED_ALIGN = 16


def _instructions_of(body: list) -> Iterator[ast.Instruction]:
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, ast.Block):
            stack.extend(s.body)
        elif isinstance(s, ast.Instruction):
            yield s


class ModuleLowering:
    def __init__(self, module: ast.Module, target: GfxTarget, data_layout: str) -> None:
        self.ast = module
        self.target = target
        self.ir = ir.Module(name=module.filename)
        self.ir.triple = target.triple
        self.ir.data_layout = data_layout
        self.symbols: dict[str, Symbol] = {}
        self.functions: dict[str, ast.Function] = {}
        self.llfns: dict[str, ir.Function] = {}
        self.string_globals: dict[str, bytes] = {}
        self.globals_meta: dict[str, dict] = {}
        self.kernels_meta: dict[str, dict] = {}
        self.printf_formats: list[bytes] = []
        self.kernel_attrs: dict[str, int] = {}

    # ------------------------------------------------------------------ top level
    def lower(self) -> tuple[str, dict]:
        defined = {f.name for f in self.ast.functions() if f.body is not None}
        for f in self.ast.functions():
            if f.body is not None or f.name not in defined:  # skip forward declarations
                self._declare(f)
        for v in self.ast.variables():  # after the functions: initializers may hold their addresses
            self.symbols[v.name] = self._variable(v, v.name)
        for f in self.ast.functions():
            if f.body is not None:
                FunctionLowering(self, f, self.llfns[f.name]).lower()
                if f.kind == "entry":
                    self._kernel_meta(f)
        metadata = {"target": self.target.name, "wave": self.target.wave, "kernels": self.kernels_meta,
                    "globals": self.globals_meta,
                    "printf_formats": [f.decode("latin-1") for f in self.printf_formats],
                    "printf_symbol": BUFFER_SYMBOL if self.printf_formats else None}
        return self._finish(str(self.ir)), metadata

    def _finish(self, text: str) -> str:
        """Kernel attributes llvmlite cannot spell, and the code object version flag."""
        groups = []
        for name, limit in self.kernel_attrs.items():
            k = len(groups)
            groups.append(f'attributes #{k} = {{ "amdgpu-flat-work-group-size"="1,{limit}" '
                          f'"uniform-work-group-size"="true" }}')
            pattern = re.compile(r'^(define amdgpu_kernel void @"' + re.escape(name) + r'"\(.*\))$', re.M)
            text = pattern.sub(lambda m: m.group(1) + f" #{k}", text, count=1)
        return text + "\n" + "\n".join(groups) + CODE_OBJECT_FLAG

    # ------------------------------------------------------------------ variables
    def function_variable(self, fn: ast.Function, v: ast.Variable) -> Symbol:
        """A .shared/.global/.const variable declared inside a function body."""
        return self._variable(v, f"{fn.name}.{v.name}")

    def _variable(self, v: ast.Variable, name: str) -> Symbol:
        if v.type in ("texref", "surfref"):
            return self._reference_word(v, name)
        if v.type == "samplerref":  # no storage: only istypep and the refused independent-sampler forms name it
            return Symbol("samplerref", ir.Constant(ir.PointerType(addrspace=1), None))
        if v.space not in SPACE_AS:
            raise UnsupportedError(f"module variable in .{v.space}", v.pos)
        space = SPACE_AS[v.space]
        size = var_size(v)
        align = global_align(v)
        if v.space == "shared":
            if is_dynamic_shared(v):
                # dynamic shared memory: LLVM places it after the static LDS of each kernel
                g = ir.GlobalVariable(self.ir, ir.ArrayType(I8, 0), name=name, addrspace=space)
                g.type = ir.PointerType(addrspace=space)
                g.linkage = "external"
                g.align = dynamic_shared_align([v])
                return Symbol("shared", g, 0)
            g = ir.GlobalVariable(self.ir, ir.ArrayType(I8, max(size, 1)), name=name, addrspace=space)
            g.type = ir.PointerType(addrspace=space)
            g.linkage = "internal"
            g.initializer = ir.Constant(g.value_type, ir.Undefined)  # LDS has no initial contents
            g.align = align
            return Symbol("shared", g, size)
        if v.linkage == "extern" and v.init is None:
            raise UnsupportedError(f"unresolved .extern variable {v.name}", v.pos)
        if v.managed:
            return self._managed(v, name, size)
        init = self._initializer(v)
        g = ir.GlobalVariable(self.ir, init.type, name=name, addrspace=space)
        g.type = ir.PointerType(addrspace=space)
        g.initializer = init
        g.align = align
        g.visibility = "protected"
        if v.type in ("b8", "u8", "s8") and v.init is not None:
            self.string_globals[v.name] = bytes(init.constant).split(b"\0", 1)[0]
        self.globals_meta[v.name] = {"symbol": name, "size": size, "space": v.space}
        return Symbol(v.space, g, size)

    def _reference_word(self, v: ast.Variable, name: str) -> Symbol:
        """A texture or surface reference: a global word holding the handle (the descriptor's
        address, compiler/texdesc.py) of the object bound to it, which the driver writes before
        launches (driver/texrefs.py, as for the CPU target); 0 while unbound, which faults."""
        g = ir.GlobalVariable(self.ir, I64, name=name, addrspace=1)
        g.type = ir.PointerType(addrspace=1)
        g.initializer = ir.Constant(I64, 0)
        g.align = 8
        g.visibility = "protected"  # hipModuleGetGlobal finds it
        self.globals_meta[v.name] = {"symbol": name, "size": 8, "space": v.type}
        return Symbol(v.type, g, 8)

    def _managed(self, v: ast.Variable, name: str, size: int) -> Symbol:
        """A `.attribute(.managed)` variable: a u64 cell `name` that the backend points at the
        managed allocation it makes at load, with the initial bytes (metadata `init`, hex) copied
        in. Code reaches the variable through the cell (`MemoryMixin.symbol`)."""
        if address_offsets(v):  # the loader relocates the code object only, not managed memory
            raise UnsupportedError(f"managed variable {v.name} initialized with addresses", v.pos)
        cell = ir.GlobalVariable(self.ir, I64, name=name, addrspace=1)
        cell.type = ir.PointerType(addrspace=1)
        cell.initializer = ir.Constant(I64, 0)
        cell.align = 8
        cell.visibility = "protected"
        meta = {"symbol": name, "size": size, "space": v.space, "managed": True}
        if v.init is not None:
            meta["init"] = bytes(self._initializer(v).constant).hex()
        self.globals_meta[v.name] = meta
        return Symbol("managed", cell, size)

    def _initializer(self, v: ast.Variable) -> ir.Constant:
        """The initial contents: bytes, or a packed struct of bytes and addresses (`.u64 t[] = {f, g}`)."""
        def address(item: ast.Initializer) -> ir.Constant:
            target = self.symbols.get(item.value.name)
            if target is not None and target.kind == "managed":  # its address is known at load only
                raise UnsupportedError(f"initializer of {v.name} with the address of managed variable "
                                       f"{item.value.name}", v.pos)
            if target is None or item.offset:
                raise UnsupportedError(f"initializer of {v.name} with the address of {item.value.name}", v.pos)
            return target.ptr.ptrtoint(I64)
        return initial_value(v, address)

    def printf_buffer(self) -> ir.GlobalVariable:
        g = self.ir.globals.get(BUFFER_SYMBOL)
        if g is None:
            g = ir.GlobalVariable(self.ir, I64, name=BUFFER_SYMBOL, addrspace=1)
            g.type = ir.PointerType(addrspace=1)
            g.initializer = ir.Constant(I64, 0)
            g.visibility = "protected"
            g.align = 8
        return g

    def printf_format(self, fmt: bytes) -> int:
        if fmt not in self.printf_formats:
            self.printf_formats.append(fmt)
        return self.printf_formats.index(fmt)

    def reserved_smem(self) -> ir.GlobalVariable:
        """The shared memory CUDA reserves per block (%reserved_smem_offset_*: nvcc's cooperative
        groups under -G keep state there), in the LDS of the kernels that reach it."""
        name = "zluda.reserved_smem"
        g = self.ir.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.ir, ir.ArrayType(I8, RESERVED_SMEM), name=name, addrspace=3)
            g.type = ir.PointerType(addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(g.value_type, ir.Undefined)
            g.align = DYN_SHARED_ALIGN
        return g

    def bar_red_counter(self) -> ir.GlobalVariable:
        name = "zluda.bar_red"
        g = self.ir.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.ir, I32, name=name, addrspace=3)
            g.type = ir.PointerType(addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(I32, ir.Undefined)
            g.align = 4
        return g

    def named_barriers(self) -> ir.GlobalVariable:
        """The 16 named barriers' words in LDS (warp.py `_named_barrier`)."""
        name = "zluda.named_barriers"
        g = self.ir.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.ir, ir.ArrayType(I32, NAMED_BARRIERS * NAMED_BARRIER_WORDS), name=name,
                                  addrspace=3)
            g.type = ir.PointerType(addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(g.value_type, ir.Undefined)
            g.align = 4
        return g

    @cached_property
    def has_counted_barrier(self) -> bool:
        """Whether any function has bar.arrive or a barrier with a thread count (the LDS counters,
        which every kernel zeroes first)."""
        return any(counted_barrier(i) for i in self._instructions())

    def _instructions(self):
        return _instructions_of([s for f in self.ast.functions() for s in (f.body or [])])

    @cached_property
    def has_bar_red(self) -> bool:
        """Whether any function uses bar.red (then every kernel zeroes its LDS counter)."""
        return any(i.opcode in ("bar", "barrier") and i.has("red") for i in self._instructions())

    @cached_property
    def func_result(self) -> ir.Type:
        """What every .func returns: void, or with an `exit` inside any .func, whether the thread
        exited (callers return at once, up to the kernel: a lane cannot end inside a call)."""
        exits = any(i.opcode == "exit" for f in self.ast.functions() if f.kind != "entry"
                    for i in _instructions_of(f.body or []))
        return ir.IntType(1) if exits else ir.VoidType()

    @cached_property
    def has_grid_workspace(self) -> bool:
        """Whether any function reads %envreg1/%envreg2 (nvcc's grid.sync()): then every kernel
        takes the grid workspace as a last, hidden-by-convention kernel argument."""
        def reads(op) -> bool:
            if isinstance(op, ast.Vec):
                return any(reads(e) for e in op.elems)
            return isinstance(op, ast.Reg) and op.name in ENVREG_WORKSPACE
        return any(reads(op) for i in self._instructions() for op in i.operands)

    # ------------------------------------------------------------------ functions
    def _declare(self, f: ast.Function) -> None:
        self.functions[f.name] = f
        if f.body is None:
            if f.name in SYSCALLS or not parts.mentioned(self.ast, f.name):
                return
            if f.name in LAUNCH_FUNCTIONS:
                raise UnsupportedError(f"dynamic parallelism ({f.name}): device-side launches run on the CPU target only",
                                       f.pos)
            raise UnsupportedError(f"unresolved .extern .func {f.name} (link the module that defines it)", f.pos)
        if f.kind == "entry":
            params = [ir.PointerType(addrspace=4)] * (len(f.params) + self.has_grid_workspace)
            llfn = ir.Function(self.ir, ir.FunctionType(ir.VoidType(), params), name=f.name)
            llfn.calling_convention = "amdgpu_kernel"
            for p, arg in zip(f.params, llfn.args):
                arg.name = p.name
                arg.attributes = ByRefAttributes(ir.ArrayType(I8, var_size(p)), var_align(p))
            if self.has_grid_workspace:
                llfn.args[-1].name = GRID_WORKSPACE_ARG
                llfn.args[-1].attributes = ByRefAttributes(I64, GRID_WORKSPACE_BYTES)
            self.kernel_attrs[f.name] = max_threads(f)
        else:
            params = [ir.PointerType(addrspace=5)] * (len(f.returns) + len(f.params))
            llfn = ir.Function(self.ir, ir.FunctionType(self.func_result, params), name=f.name)
            llfn.linkage = "internal"
            self.symbols[f.name] = Symbol("func", llfn)
        self.llfns[f.name] = llfn

    def _kernel_meta(self, f: ast.Function) -> None:
        params, param_size = kernel_params(f)
        workspace = -(-param_size // GRID_WORKSPACE_BYTES) * GRID_WORKSPACE_BYTES if self.has_grid_workspace else None
        self.kernels_meta[f.name] = {"params": params, "param_size": param_size, "symbol": f"{f.name}.kd",
                                     "max_threads": self.kernel_attrs[f.name], "reqntid": directive_dims(f, "reqntid"),
                                     "grid_workspace_offset": workspace}
