"""Lowering of a whole PTX module for the CPU target: variables, functions, block runners.

Output: an LLVM module plus JSON-able metadata (kernels, parameters, globals), so an object
built once can be loaded later without re-running the optimiser.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.block_runner import define_shared_runners, kernel_runner
from zluda_py.compiler.cpu.thread_ids import define_tid_3d
from zluda_py.compiler.cpu.calls import SYSCALLS
from zluda_py.compiler.cpu.abi import BASE_ALIGN, STACK_ALIGN
from zluda_py.compiler import parts
from zluda_py.compiler.cpu.function import FunctionLowering, Symbol
from zluda_py.compiler.cpu.memory import define_shared_helpers
from zluda_py.compiler.cpu.shared import layout_shared
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.layout import (address_offsets, directive_dims, init_type, initial_value, kernel_params,
                                     max_threads)
from zluda_py.compiler.ptxtypes import global_align, is_dynamic_shared, var_align, var_size
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR


class ModuleLowering:
    def __init__(self, module: ast.Module, triple: str, data_layout: str) -> None:
        self.ast = module
        self.ir = ir.Module(name=module.filename)
        self.ir.triple = triple
        self.ir.data_layout = data_layout
        self.symbols: dict[str, Symbol] = {}
        self.functions: dict[str, ast.Function] = {}
        self.llfns: dict[str, ir.Function] = {}
        self.defined: set[str] = set()
        self.shared = layout_shared(module)
        self.local_align = window_align(module, "local", STACK_ALIGN)
        window_align(module, "shared", 1)
        self._shared_symbols: dict[str, Symbol] = {}  # module .shared variables as the function being lowered sees them
        self._lowering: ast.Function | None = None
        self.globals_meta: dict[str, dict] = {}
        self.kernels_meta: dict[str, dict] = {}
        self.frames: dict[str, tuple[int, set[str]]] = {}  # function -> (.local frame bytes, direct callees)
        self.reads_reserved_smem = False  # set by FunctionLowering.special
        self._initializers: list[tuple[ast.Variable, ir.GlobalVariable]] = []
        self.helpers_here = False  # True only in the shared helpers' own module (`helpers_ir`)
        self.device_runtime_users: set[str] = set()  # functions calling the device runtime (calls.py)

    # ------------------------------------------------------------------ top level
    def lower(self) -> dict:
        for f in self.ast.functions():
            self._declare(f)
        for v in self.ast.variables():
            if v.space != "shared":  # .shared offsets depend on the kernel (see _define)
                self.symbols[v.name] = self._variable(v, v.name)
        for v, g in self._initializers:  # after every symbol exists: initializers may hold addresses
            g.initializer = self._initializer(v)
        for f in self.ast.functions():
            if f.body is not None:
                self._define(f)
        for name, k in self.kernels_meta.items():
            k["stack_size"] = self._static_stack(name)
            k["device_launches"] = bool(self._reached(name) & self.device_runtime_users)
        return {"kernels": self.kernels_meta, "globals": self.globals_meta,
                "reserved_smem": self.reads_reserved_smem}

    def symbol(self, name: str) -> Symbol | None:
        return self._shared_symbols.get(name) or self.symbols.get(name)

    def function_variable(self, fn: ast.Function, v: ast.Variable) -> Symbol:
        """A .shared/.global/.const variable declared inside a function body."""
        sym = self._variable(v, f"{fn.name}.{v.name}")
        if self._initializers and self._initializers[-1][0] is v:  # module symbols all exist by now
            _, g = self._initializers.pop()
            g.initializer = self._initializer(v)
        return sym

    def _variable(self, v: ast.Variable, name: str) -> Symbol:
        if v.type in ("texref", "surfref"):  # a word holding the bound object's handle (driver/texrefs.py)
            g = ir.GlobalVariable(self.ir, I64, name=name)
            g.align, g.initializer = 8, ir.Constant(I64, 0)
            self.globals_meta[v.name] = {"symbol": name, "size": 8, "space": v.type}
            return Symbol(v.type, ptr=g, size=8)
        if v.type == "samplerref":
            return Symbol("samplerref")  # only the independent-sampler forms and istypep name these
        if v.space == "shared":  # declared in the body of the function being lowered
            if is_dynamic_shared(v):
                return Symbol("shared", self.shared.dynamic_base[self._lowering.name])
            return Symbol("shared", self.shared.local_offsets[(self._lowering.name, v.name)], size=var_size(v))
        if v.space in ("global", "const"):
            size = var_size(v)
            if v.linkage == "extern" and v.init is None:
                raise UnsupportedError(f"unresolved .extern variable {v.name}", v.pos)
            g = ir.GlobalVariable(self.ir, init_type(size, address_offsets(v)), name=name)
            g.align = global_align(v)
            self._initializers.append((v, g))
            self.globals_meta[v.name] = {"symbol": name, "size": size, "space": v.space, "managed": v.managed}
            return Symbol(v.space, ptr=g, size=size)
        raise UnsupportedError(f"module variable in .{v.space}", v.pos)

    def _initializer(self, v: ast.Variable) -> ir.Constant:
        """The contents, with address items (`fn`, `var`, `generic(var)+4`) as constant expressions."""
        def address(item: ast.Initializer) -> ir.Constant:
            sym = self.symbols.get(item.value.name)
            if sym is None or sym.kind not in ("global", "const", "func"):
                raise UnsupportedError(f"address of {item.value.name} in an initializer", v.pos)
            return sym.ptr.bitcast(V.I8.as_pointer()).gep([ir.Constant(I64, item.offset)]).ptrtoint(I64)
        return initial_value(v, address)

    def _declare(self, f: ast.Function) -> None:
        if f.kind == "entry":
            if f.body is not None:  # a kernel's address (a device-side launch names it) is its block runner's
                runner = ir.Function(self.ir, ir.FunctionType(I32, [PTR]), name=f"zluda_run.{f.name}")
                self.symbols[f.name] = Symbol("func", ptr=runner)
            return
        if f.body is None:
            if any(g.name == f.name and g.body is not None for g in self.ast.functions()):
                return  # a forward declaration of a function defined in this module
            self.functions[f.name] = f
            if f.name in SYSCALLS or not parts.mentioned(self.ast, f.name):
                return
            raise UnsupportedError(f"unresolved .extern .func {f.name} (link the module that defines it)", f.pos)
        self.functions[f.name] = f
        nparams = len(f.returns) + len(f.params)
        fnty = ir.FunctionType(I32, [PTR, I32, I64, V.MASK, *([PTR] * nparams)])
        llfn = ir.Function(self.ir, fnty, name=f.name)
        llfn.linkage = "internal"
        self.llfns[f.name] = llfn
        self.symbols[f.name] = Symbol("func", ptr=llfn)
        self.defined.add(f.name)

    def _define(self, f: ast.Function) -> None:
        self._lowering = f
        offsets, base = self.shared.offsets[f.name], self.shared.dynamic_base[f.name]
        self._shared_symbols = {
            v.name: Symbol("shared", base) if is_dynamic_shared(v) else Symbol("shared", offsets[v.name], size=var_size(v))
            for v in self.ast.variables() if v.space == "shared" and (is_dynamic_shared(v) or v.name in offsets)}
        if f.kind == "func":
            lowering = FunctionLowering(self, f, self.llfns[f.name])
            lowering.lower()
            self.frames[f.name] = (lowering.frame_size, lowering.callees)
            return
        # (ctx, frame, resume point, whether %tid.x is aligned to the lanes: lane_masks.aligned)
        warp = ir.Function(self.ir, ir.FunctionType(I32, [PTR, PTR, I32, I1]), name=f"{f.name}.warp")
        warp.linkage = "internal"
        warp.attributes.add("noinline")  # one call per warp and barrier; keeps the runner small
        lowering = FunctionLowering(self, f, warp)
        lowering.lower()
        self.frames[f.name] = (lowering.frame_size, lowering.callees)
        runner = f"zluda_run.{f.name}"
        lockstep = bool(lowering.resume_sites) and lowering.lockstep_barriers()
        by_shape = False
        if (lockstep or not lowering.resume_sites) and lowering.cloned:
            # one call site: inlined, each warp's run (to its next barrier, if any) is a loop
            # iteration instead of a call, and what is the same for every warp is hoisted out of
            # that loop (small kernels; large ones keep compile time down; block_runner.py)
            warp.attributes.discard("noinline")
            # without barriers, a block forked on its lanes (_fork_lanes): one call site per shape.
            # Inlined before it is simplified: inlined after, its code was simplified twice (alone,
            # then in the runner), a seventh of a small kernel's compile time
            by_shape = not lowering.resume_sites and lowering.lanes_forked
            if not lowering.resume_sites:
                warp.attributes.add("alwaysinline")
        kernel_runner(self.ir.globals[runner], warp, lowering.frame_bytes, bool(lowering.resume_sites), lockstep,
                      by_shape, lowering.warp_loop)
        params, param_size = kernel_params(f)
        self.kernels_meta[f.name] = {
            "runner": runner, "params": params, "param_size": param_size,
            "local_size": lowering.frame_size, "frame_bytes": lowering.frame_bytes, "local_align": self.local_align,
            "static_shared": self.shared.static[f.name], "declared_shared": self.shared.declared[f.name],
            "max_threads": max_threads(f), "reqntid": directive_dims(f, "reqntid"),
        }

    def _reached(self, kernel: str) -> set[str]:
        """The kernel and every function its calls reach."""
        seen, todo = set(), [kernel]
        while todo:
            name = todo.pop()
            if name not in seen and name in self.frames:
                seen.add(name)
                todo.extend(self.frames[name][1])
        return seen

    def _static_stack(self, kernel: str) -> int:
        """The per-thread stack a kernel needs without recursion: its frame plus the deepest chain
        of direct calls, a recursive cycle counted once. NVIDIA's driver grows the stack to what a
        launch needs (cuCtxSetLimit: it "automatically increases the per-thread stack size for
        each kernel launch as needed"); the limit bounds only what recursion adds to this."""
        deepest: dict[str, int] = {}

        def below(name: str, path: set[str]) -> int:
            if name not in deepest:
                deepest[name] = max((self.frames[c][0] + below(c, path | {c})
                                     for c in self.frames[name][1] if c in self.frames and c not in path), default=0)
            return deepest[name]

        return self.frames[kernel][0] + below(kernel, {kernel})

    # ------------------------------------------------------------------ runtime services
    def host_fn(self) -> ir.Function:
        fn = self.ir.globals.get("zluda_host")
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(I64, [I32, PTR, I64, I64, I64, I64, I64]), "zluda_host")
        return fn

    def libc(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.ir.globals.get(name)
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(ret, args), name)
        return fn

    def globaltimer(self, b: ir.IRBuilder) -> ir.Value:
        """Nanoseconds of CLOCK_REALTIME (what %globaltimer counts on the GPU)."""
        ts = V.entry_alloca(b, ir.ArrayType(I64, 2))
        b.call(self.libc("clock_gettime", I32, [I32, PTR]), [ir.Constant(I32, 0), ts])
        sec = b.load(b.gep(ts, [ir.Constant(I64, 0)], source_etype=I64), typ=I64)
        nsec = b.load(b.gep(ts, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)


def helpers_ir(triple: str, data_layout: str) -> str:
    """The module of the helpers every kernel's module declares (memory.SHARED_HELPERS, the block
    runners, %tid of a 2-D or 3-D block)."""
    lowering = ModuleLowering(ast.Module((8, 0), ("sm_80",), filename="zluda_helpers"), triple, data_layout)
    lowering.helpers_here = True
    define_shared_helpers(lowering)
    define_shared_runners(lowering.ir)
    define_tid_3d(lowering.ir)
    return str(lowering.ir)


def window_align(module: ast.Module, space: str, least: int) -> int:
    """The largest alignment a .shared or .local variable of the module declares (at least
    `least`). The launch aligns the windows' bases to BASE_ALIGN (runtime.py, native_launch.c);
    a variable asking for more is refused rather than misplaced."""
    def aligns(stmts: list) -> list[int]:
        return [a for s in stmts for a in (aligns(s.body) if isinstance(s, ast.Block) else
                                          [var_align(s)] if isinstance(s, ast.Variable) and s.space == space else [])]

    found = [var_align(v) for v in module.variables() if v.space == space]
    found += [a for f in module.functions() for a in aligns(f.body or [])]
    align = max([least, *found])
    if align > BASE_ALIGN:
        raise UnsupportedError(f".{space} variable with .align {align} (at most {BASE_ALIGN})")
    return align
