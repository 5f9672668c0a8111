"""Run one PTX instruction over arrays of inputs, on a chosen target.

Targets:
* "cpu": a real PTX kernel (one thread per input element) through
  `zluda_py.compiler.compile(...).launch(...)`: the acceptance path.
* "semantics" / "semantics1": the instruction's `emit` alone, wrapped in a tiny LLVM loop over
  lane values of width 32 / 1 and JIT-compiled with llvmlite: checks the definitions
  independently of the framework, and at both widths the targets use.

Values cross as unsigned bit patterns of the operand's PTX width (pred and cc as 0/1 bytes).
Each distinct instruction (with its immediates) is compiled once per session.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast

DTYPES = {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@dataclass(frozen=True)
class Imm:
    """An immediate source operand (e.g. lop3's LUT): part of the kernel, not of the data."""

    value: int


def split(text: str) -> tuple[str, tuple[str, ...]]:
    opcode, *mods = text.split(".")
    return opcode, tuple(mods)


def instruction(text: str, nsrc: int, imms: dict[int, int], pred_out: bool, ndst: int) -> ast.Instruction:
    opcode, mods = split(text)
    dsts: list[ast.Operand] = [ast.Reg(f"%d{i}") for i in range(ndst)]
    if pred_out:
        dsts = [ast.PredOut(ast.Reg("%d0"), ast.Reg("%d1"))]
    srcs = [ast.Imm(imms[i]) if i in imms else ast.Reg(f"%s{i}") for i in range(nsrc)]
    return ast.Instruction(opcode, mods, dsts + srcs)


# --------------------------------------------------------------------------- semantics targets

_llvm_ready = False


def _target_machine() -> llvm.TargetMachine:
    global _llvm_ready
    if not _llvm_ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                         opt=2)


class SemanticKernel:
    """`emit` of one instruction inside `void k(i64 nchunks, ptr srcs..., ptr dsts...)`."""

    def __init__(self, inst: ast.Instruction, width: int, imms: dict[int, int]) -> None:
        types = SEMANTICS[inst.opcode].operands(inst)
        self.src_types, self.dst_types, self.imms = types.src, types.dst, imms
        mod = ir.Module("conformance")
        mod.triple = llvm.get_process_triple()
        ptr = ir.PointerType()
        data_src = [i for i in range(len(self.src_types)) if i not in self.imms]
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(64)] + [ptr] * (len(data_src) + len(self.dst_types))), "k")
        entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
        b = ir.IRBuilder(entry)
        nchunks = fn.args[0]
        b.cbranch(b.icmp_signed(">", nchunks, ir.Constant(ir.IntType(64), 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(ir.IntType(64))
        i.add_incoming(ir.Constant(ir.IntType(64), 0), entry)
        lanes = Lanes(b, width)
        srcs: list[ir.Value] = []
        arg = 1
        for k, t in enumerate(self.src_types):
            bits = ptx_bits(t)
            if k in self.imms:
                srcs.append(lanes.const(ir.IntType(bits), self.imms[k] & ((1 << bits) - 1)))
                continue
            store_ty = lanes.int_ty(8 if bits == 1 else bits)
            p = b.gep(fn.args[arg], [i], source_etype=store_ty)
            v = b.load(p, typ=store_ty, align=1)
            srcs.append(b.trunc(v, lanes.int_ty(1)) if bits == 1 else v)
            arg += 1
        outs = SEMANTICS[inst.opcode].emit(lanes, inst, srcs)
        assert len(outs) == len(self.dst_types), (inst, outs)
        for v, t in zip(outs, self.dst_types):
            bits = ptx_bits(t)
            store_ty = lanes.int_ty(8 if bits == 1 else bits)
            assert v.type == lanes.int_ty(bits), f"{inst.opcode}: result {v.type} for {t}"
            b.store(b.zext(v, store_ty) if bits == 1 else v, b.gep(fn.args[arg], [i], source_etype=store_ty), align=1)
            arg += 1
        nxt = b.add(i, ir.Constant(ir.IntType(64), 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, nchunks), loop, done)
        b.position_at_end(done)
        b.ret_void()
        self.width = width
        llmod = llvm.parse_assembly(str(mod))
        llmod.verify()
        self.tm = _target_machine()  # the engine borrows it
        self.engine = llvm.create_mcjit_compiler(llmod, self.tm)
        self.engine.finalize_object()
        nargs = 1 + len(data_src) + len(self.dst_types)
        self.fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, *[ctypes.c_void_p] * (nargs - 1))(
            self.engine.get_function_address("k"))

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        n = len(inputs[0]) if inputs else 32
        padded = -(-n // self.width) * self.width
        data = []
        for arr, t in zip(inputs, [t for k, t in enumerate(self.src_types) if k not in self.imms]):
            a = np.zeros(padded, DTYPES[ptx_bits(t)])
            a[:n] = arr
            data.append(a)
        outs = [np.zeros(padded, DTYPES[ptx_bits(t)]) for t in self.dst_types]
        self.fn(padded // self.width, *[a.ctypes.data for a in data + outs])
        return [o[:n] for o in outs]


# --------------------------------------------------------------------------- the PTX target

_REG = {1: ".pred", 8: ".b16", 16: ".b16", 32: ".b32", 64: ".b64"}


def ptx_kernel(text: str, src_types: list[str], dst_types: list[str], imms: dict[int, int],
               pred_out: bool) -> str:
    """A kernel applying `text` to element i of each input buffer, one thread per element."""
    data = [k for k in range(len(src_types)) if k not in imms]
    params = [f".param .u64 in{k}" for k in data] + [f".param .u64 out{k}" for k in range(len(dst_types))]
    lines = [".version 8.0", ".target sm_90", ".address_size 64", "",
             f".visible .entry k({', '.join(params + ['.param .u32 n'])})", "{",
             "  .reg .b32 %i, %tx, %bx, %nx, %n, %w;", "  .reg .b64 %p, %off;", "  .reg .pred %out, %cc0;",
             "  .reg .b16 %h;"]
    for k, t in enumerate(src_types):
        if k not in imms and t != "cc":
            lines.append(f"  .reg {_REG[ptx_bits(t)]} %s{k};")
    for k, t in enumerate(dst_types):
        if t != "cc":
            lines.append(f"  .reg {_REG[ptx_bits(t)]} %d{k};")
    lines += ["  mov.u32 %tx, %tid.x;", "  mov.u32 %bx, %ctaid.x;", "  mov.u32 %nx, %ntid.x;",
              "  mad.lo.u32 %i, %bx, %nx, %tx;", "  ld.param.u32 %n, [n];", "  setp.ge.u32 %out, %i, %n;",
              "  @%out bra DONE;"]
    operands: list[str] = []
    dst_names = [f"%d{k}" for k, t in enumerate(dst_types) if t != "cc"]
    operands.append(f"{dst_names[0]}|{dst_names[1]}" if pred_out else ", ".join(dst_names))
    for k, t in enumerate(src_types):
        bits = ptx_bits(t)
        if k in imms:
            operands.append(str(imms[k]))
            continue
        size = max(bits, 8) // 8
        lines += [f"  ld.param.u64 %p, [in{k}];", "  cvta.to.global.u64 %p, %p;",
                  f"  mul.wide.u32 %off, %i, {size};", "  add.u64 %p, %p, %off;"]
        if t == "cc":
            lines += ["  ld.global.u8 %h, [%p];", "  cvt.u32.u16 %w, %h;", "  add.cc.u32 %w, %w, -1;"]
        elif bits == 1:
            lines += ["  ld.global.u8 %h, [%p];", f"  setp.ne.u16 %s{k}, %h, 0;"]
            operands.append(f"%s{k}")
        else:
            lines.append(f"  ld.global.u{bits} %s{k}, [%p];")
            operands.append(f"%s{k}")
    lines.append(f"  {text} {', '.join(o for o in operands if o)};")
    for k, t in enumerate(dst_types):
        bits = ptx_bits(t)
        size = max(bits, 8) // 8
        lines += [f"  ld.param.u64 %p, [out{k}];", "  cvta.to.global.u64 %p, %p;",
                  f"  mul.wide.u32 %off, %i, {size};", "  add.u64 %p, %p, %off;"]
        if t == "cc":
            lines += ["  addc.u32 %w, 0, 0;", "  cvt.u16.u32 %h, %w;", "  st.global.u8 [%p], %h;"]
        elif bits == 1:
            lines += [f"  selp.u16 %h, 1, 0, %d{k};", "  st.global.u8 [%p], %h;"]
        else:
            lines.append(f"  st.global.u{bits} [%p], %d{k};")
    lines += ["DONE:", "  ret;", "}", ""]
    return "\n".join(lines)


class PtxKernel:
    def __init__(self, text: str, inst: ast.Instruction, target: str, imms: dict[int, int],
                 pred_out: bool) -> None:
        from zluda_py.compiler import compile as compile_ptx

        types = SEMANTICS[inst.opcode].operands(inst)
        self.src_types, self.dst_types, self.imms = types.src, types.dst, imms
        self.source = ptx_kernel(text, types.src, types.dst, self.imms, pred_out)
        self.module = compile_ptx(self.source, target=target)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        n = len(inputs[0])
        outs = [np.zeros(n, DTYPES[ptx_bits(t)]) for t in self.dst_types]
        block = 128
        data = [np.ascontiguousarray(a, DTYPES[ptx_bits(t)])
                for a, t in zip(inputs, [t for k, t in enumerate(self.src_types) if k not in self.imms])]
        self.module.launch("k", (-(-n // block), 1, 1), (block, 1, 1), data + outs + [np.uint32(n)])
        return outs


_KERNELS: dict[tuple, object] = {}


class Runner:
    """Runs instructions on one target; kernels are built once per (instruction, immediates)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def types(self, text: str) -> tuple[list[str], list[str]]:
        opcode, mods = split(text)
        t = SEMANTICS[opcode].operands(ast.Instruction(opcode, mods))
        return t.src, t.dst

    def run(self, text: str, srcs: list, pred_out: bool = False) -> list[np.ndarray]:
        imms = {k: s.value for k, s in enumerate(srcs) if isinstance(s, Imm)}
        ndst = 2 if pred_out else len(self.types(text)[1])
        inst = instruction(text, len(srcs), imms, pred_out, ndst)
        key = (self.target, text, tuple(sorted(imms.items())), pred_out)
        kernel = _KERNELS.get(key)
        if kernel is None:
            if self.target.startswith("semantics"):
                kernel = SemanticKernel(inst, 1 if self.target == "semantics1" else 32, imms)
            else:
                kernel = PtxKernel(text, inst, self.target, imms, pred_out)
            _KERNELS[key] = kernel
        data = [np.asarray(s) for s in srcs if not isinstance(s, Imm)]
        return kernel.run(data)
