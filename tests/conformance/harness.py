"""Run one PTX instruction over arrays of inputs, on a chosen target.

Targets:
* "cpu": a real PTX kernel (one thread per input element) through
  `zluda_py.compiler.compile(...).launch(...)`: the acceptance path.
* "gfx1100" / "gfx950": the same kernel compiled by the AMDGPU target and run on the ISA
  emulator (`zluda_py.emulator`), wave32 and wave64 (`EmulatedModule`).
* "cuda": the same kernel on a real CUDA driver (tests/hardware/cudadrv.py): on an NVIDIA GPU
  this checks the suite's independent references against the hardware.
* "semantics" / "semantics1": the instruction's `emit` alone, wrapped in a tiny LLVM loop over
  lane values of width 32 / 1 and JIT-compiled with llvmlite: checks the definitions
  independently of the framework, and at both widths the targets use.

Values cross as unsigned bit patterns of the operand's PTX width (pred and cc as 0/1 bytes).
A kernel holds one or several instructions (`run_many`, `batch`), each over its own buffers,
and is compiled once per session.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from zluda_py.compiler.lanes import Lanes, ptx_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast

if TYPE_CHECKING:
    from hardware.cudadrv import Module as CudaModule
    from zluda_py.compiler.cpu.runtime import CompiledModule
    from zluda_py.emulator.module import EmulatedModule

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

@dataclass
class Op:
    """One instruction of a test kernel: its operand types and its immediates."""

    text: str
    inst: ast.Instruction
    src_types: list[str]
    dst_types: list[str]
    imms: dict[int, int]
    pred_out: bool

    @property
    def data_types(self) -> list[str]:
        return [t for k, t in enumerate(self.src_types) if k not in self.imms]


def make_op(text: str, srcs: list, pred_out: bool) -> Op:
    imms = {k: s.value for k, s in enumerate(srcs) if isinstance(s, Imm)}
    opcode, mods = split(text)
    ndst = 2 if pred_out else len(SEMANTICS[opcode].operands(ast.Instruction(opcode, mods)).dst)
    inst = instruction(text, len(srcs), imms, pred_out, ndst)
    types = SEMANTICS[opcode].operands(inst)
    return Op(text, inst, types.src, types.dst, imms, pred_out)


class SemanticKernel:
    """The ops' `emit`s inside `void k(i64 nchunks, ptr srcs..., ptr dsts..., ...)`."""

    def __init__(self, ops: list[Op], width: int) -> None:
        self.ops, self.width = ops, width
        mod = ir.Module("conformance")
        mod.triple = llvm.get_process_triple()
        nptr = sum(len(op.data_types) + len(op.dst_types) for op in ops)
        i64 = ir.IntType(64)
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [i64] + [ir.PointerType()] * nptr), "k")
        entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
        b = ir.IRBuilder(entry)
        b.cbranch(b.icmp_signed(">", fn.args[0], ir.Constant(i64, 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        lanes = Lanes(b, width)
        args = iter(fn.args[1:])

        def slot(t: str):
            bits = ptx_bits(t)
            store_ty = lanes.int_ty(8 if bits == 1 else bits)
            return bits, store_ty, b.gep(next(args), [i], source_etype=store_ty)

        for op in ops:
            srcs: list[ir.Value] = []
            for k, t in enumerate(op.src_types):
                if k in op.imms:
                    srcs.append(lanes.const(ir.IntType(ptx_bits(t)), op.imms[k] & ((1 << ptx_bits(t)) - 1)))
                    continue
                bits, store_ty, p = slot(t)
                v = b.load(p, typ=store_ty, align=1)
                srcs.append(b.trunc(v, lanes.int_ty(1)) if bits == 1 else v)
            outs = SEMANTICS[op.inst.opcode].emit(lanes, op.inst, srcs)
            assert len(outs) == len(op.dst_types), (op.text, outs)
            for v, t in zip(outs, op.dst_types):
                bits, store_ty, p = slot(t)
                assert v.type == lanes.int_ty(bits), f"{op.text}: result {v.type} for {t}"
                b.store(b.zext(v, store_ty) if bits == 1 else v, p, align=1)
        nxt = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
        b.position_at_end(done)
        b.ret_void()
        llmod = llvm.parse_assembly(str(mod))
        llmod.verify()
        from zluda_py.reference.jit import target_machine  # here: the PTX targets need no JIT of ours

        self.tm = target_machine()  # the engine borrows it
        self.engine = llvm.create_mcjit_compiler(llmod, self.tm)
        self.engine.finalize_object()
        self.fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, *[ctypes.c_void_p] * nptr)(
            self.engine.get_function_address("k"))

    def run(self, inputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        n = max(len(a) for ins in inputs for a in ins)
        padded = -(-n // self.width) * self.width
        ptrs, outs = _buffers(self.ops, inputs, padded)
        self.fn(padded // self.width, *[a.ctypes.data for a in ptrs])
        return _results(inputs, outs)


def _buffers(ops: list[Op], inputs: list[list[np.ndarray]], n: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Zero-padded input copies and fresh outputs, in kernel-argument order."""
    ptrs, outs = [], []
    for op, ins in zip(ops, inputs):
        for arr, t in zip(ins, op.data_types):
            a = np.zeros(n, DTYPES[ptx_bits(t)])
            a[: len(arr)] = arr
            ptrs.append(a)
        o = [np.zeros(n, DTYPES[ptx_bits(t)]) for t in op.dst_types]
        ptrs += o
        outs.append(o)
    return ptrs, outs


def _results(inputs: list[list[np.ndarray]], outs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    return [[o[: len(ins[0]) if ins else 1] for o in op_outs] for ins, op_outs in zip(inputs, outs)]


# --------------------------------------------------------------------------- the PTX target

_REG = {1: ".pred", 8: ".b16", 16: ".b16", 32: ".b32", 64: ".b64"}


def ptx_kernel(ops: list[Op]) -> str:
    """A kernel applying each op to element i of its own buffers, one thread per element."""
    params, decls, body = [], [], []
    for j, op in enumerate(ops):
        for k, t in enumerate(op.src_types):
            if k not in op.imms:
                params.append(f".param .u64 in{j}_{k}")
                if t != "cc":
                    decls.append(f"  .reg {_REG[ptx_bits(t)]} %s{j}_{k};")
        for k, t in enumerate(op.dst_types):
            params.append(f".param .u64 out{j}_{k}")
            if t != "cc":
                decls.append(f"  .reg {_REG[ptx_bits(t)]} %d{j}_{k};")
        body += _op_body(j, op)
    lines = [".version 8.8", ".target sm_100", ".address_size 64", "",
             f".visible .entry k({', '.join(params + ['.param .u32 n'])})", "{",
             "  .reg .b32 %i, %tx, %bx, %nx, %n, %w;", "  .reg .b64 %p, %off;", "  .reg .pred %out;",
             "  .reg .b16 %h;", *decls,
             "  mov.u32 %tx, %tid.x;", "  mov.u32 %bx, %ctaid.x;", "  mov.u32 %nx, %ntid.x;",
             "  mad.lo.u32 %i, %bx, %nx, %tx;", "  ld.param.u32 %n, [n];", "  setp.ge.u32 %out, %i, %n;",
             "  @%out bra DONE;", *body, "DONE:", "  ret;", "}", ""]
    return "\n".join(lines)


def _address(param: str, bits: int) -> list[str]:
    return [f"  ld.param.u64 %p, [{param}];", "  cvta.to.global.u64 %p, %p;",
            f"  mul.wide.u32 %off, %i, {max(bits, 8) // 8};", "  add.u64 %p, %p, %off;"]


def _op_body(j: int, op: Op) -> list[str]:
    lines: list[str] = []
    dst_names = [f"%d{j}_{k}" for k, t in enumerate(op.dst_types) if t != "cc"]
    operands = [f"{dst_names[0]}|{dst_names[1]}" if op.pred_out else ", ".join(dst_names)]
    for k, t in enumerate(op.src_types):
        bits = ptx_bits(t)
        if k in op.imms:
            operands.append(str(op.imms[k]))
            continue
        lines += _address(f"in{j}_{k}", bits)
        if t == "cc":  # CC = (value != 0): 1 + 0xffffffff carries out, 0 + 0xffffffff does not
            lines += ["  ld.global.u8 %h, [%p];", "  cvt.u32.u16 %w, %h;", "  add.cc.u32 %w, %w, -1;"]
            continue
        if bits == 1:
            lines += ["  ld.global.u8 %h, [%p];", f"  setp.ne.u16 %s{j}_{k}, %h, 0;"]
        else:
            lines.append(f"  ld.global.u{bits} %s{j}_{k}, [%p];")
        operands.append(f"%s{j}_{k}")
    lines.append(f"  {op.text} {', '.join(o for o in operands if o)};")
    for k, t in enumerate(op.dst_types):
        bits = ptx_bits(t)
        lines += _address(f"out{j}_{k}", bits)
        if t == "cc":
            lines += ["  addc.u32 %w, 0, 0;", "  cvt.u16.u32 %h, %w;", "  st.global.u8 [%p], %h;"]
        elif bits == 1:
            lines += [f"  selp.u16 %h, 1, 0, %d{j}_{k};", "  st.global.u8 [%p], %h;"]
        else:
            lines.append(f"  st.global.u{bits} [%p], %d{j}_{k};")
    return lines


EMULATED = ("gfx1100", "gfx950", "gfx942", "gfx90a", "gfx1200")  # AMDGPU targets the conformance suite runs on the ISA emulator


def needs_sm100(op: Op) -> bool:
    """Value forms that ptxas (CUDA 13.0) assembles only for .target sm_100 and newer: an older
    GPU on the cuda target cannot run them."""
    opcode, mods = split(op.text)
    three_input_min_max = opcode in ("min", "max") and len(op.src_types) == 3
    return three_input_min_max or ("tf32" in mods and "satfinite" in mods and "rna" not in mods)


def compile_module(source: str, target: str) -> "CompiledModule | EmulatedModule | CudaModule":
    """`source` compiled for a PTX-running target: a CompiledModule, an EmulatedModule (the
    AMDGPU code object on the ISA emulator), or a module of a real CUDA driver (`cuda`: an NVIDIA
    GPU, for checking the suite's references against hardware); all with the same `launch`."""
    if target == "cuda":
        from hardware.cudadrv import driver

        major, minor = driver().compute_capability()
        return driver().load(source.replace(".target sm_100", f".target sm_{major}{minor}", 1))
    if target in EMULATED:
        from zluda_py.emulator.module import EmulatedModule

        return EmulatedModule.from_ptx(source, target)
    from zluda_py.compiler import compile as compile_ptx
    from zluda_py.compiler.target import get

    return compile_ptx(source, target=get(target))


class PtxKernel:
    def __init__(self, ops: list[Op], target: str) -> None:
        self.ops = ops
        self.source = ptx_kernel(ops)
        self.module = compile_module(self.source, target)

    def run(self, inputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        n = max(len(a) for ins in inputs for a in ins)
        ptrs, outs = _buffers(self.ops, inputs, n)
        block = 128
        self.module.launch("k", (-(-n // block), 1, 1), (block, 1, 1), ptrs + [np.uint32(n)])
        return _results(inputs, outs)


_KERNELS: dict[tuple, SemanticKernel | PtxKernel] = {}
RECORD = os.environ.get("ZLUDA_HW_RECORD")  # a folder: the cuda target saves every launch there


def _record(kernel: PtxKernel, inputs: list[list[np.ndarray]], outputs: list[list[np.ndarray]]) -> None:
    """One .npz per launch (named by its content): the PTX, the instruction texts, the pytest
    node, in{op}_{operand} and out{op}_{operand} arrays, for ground truth read off-line."""
    arrays = {f"in{j}_{k}": a for j, ins in enumerate(inputs) for k, a in enumerate(ins)}
    arrays |= {f"out{j}_{k}": a for j, outs in enumerate(outputs) for k, a in enumerate(outs)}
    digest = hashlib.sha1(kernel.source.encode() + b"".join(a.tobytes() for a in arrays.values())).hexdigest()
    Path(RECORD).mkdir(parents=True, exist_ok=True)
    np.savez_compressed(Path(RECORD) / f"{digest[:20]}.npz", ptx=np.array(kernel.source),
                        ops=np.array([op.text for op in kernel.ops]),
                        test=np.array(os.environ.get("PYTEST_CURRENT_TEST", "")), **arrays)


class Runner:
    """Runs instructions on one target; each kernel is built once per session."""

    def __init__(self, target: str) -> None:
        self.target = target

    def runs(self, text: str, srcs: list, pred_out: bool = False) -> bool:
        """Whether this target can run the form (the cuda target's GPU may predate it)."""
        if self.target != "cuda" or not needs_sm100(make_op(text, srcs, pred_out)):
            return True
        from hardware.cudadrv import driver

        return driver().compute_capability() >= (10, 0)

    def run(self, text: str, srcs: list, pred_out: bool = False) -> list[np.ndarray]:
        """Outputs of one instruction over the input arrays (Imm entries are immediates)."""
        return self.run_many([(text, srcs, pred_out)])[0]

    def run_many(self, items: list[tuple[str, list, bool]]) -> list[list[np.ndarray]]:
        """Several instructions in one kernel (one compilation), each over its own inputs."""
        ops = [make_op(text, srcs, pred_out) for text, srcs, pred_out in items]
        if not all(self.runs(*item) for item in items):
            pytest.skip(f"{self.target}: this GPU predates sm_100, which {[op.text for op in ops]} need")
        key = (self.target, tuple((op.text, len(op.src_types), tuple(sorted(op.imms.items())), op.pred_out)
                                  for op in ops))
        kernel = _KERNELS.get(key)
        if kernel is None:
            if self.target.startswith("semantics"):
                kernel = SemanticKernel(ops, 1 if self.target == "semantics1" else 32)
            else:
                kernel = PtxKernel(ops, self.target)
            _KERNELS[key] = kernel
        inputs = [[np.asarray(s) for s in srcs if not isinstance(s, Imm)] for _, srcs, _ in items]
        outputs = kernel.run(inputs)
        if RECORD and self.target == "cuda":
            _record(kernel, inputs, outputs)
        return outputs

    def batch(self, cases: dict, group: int = 24) -> dict:
        """{key: (text, srcs[, pred_out])} -> {key: outputs}, compiling `group` cases per kernel."""
        keys = list(cases)
        out = {}
        for lo in range(0, len(keys), group):
            chunk = keys[lo: lo + group]
            items = [(cases[k][0], cases[k][1], cases[k][2] if len(cases[k]) > 2 else False) for k in chunk]
            out.update(zip(chunk, self.run_many(items)))
        return out
