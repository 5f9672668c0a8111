"""LLVM IR forms llvmlite's builder cannot spell: private-address-space allocas, atomics with a
sync scope, byref kernel arguments. Each is a small subclass that only changes the printed text."""

from __future__ import annotations

from llvmlite import ir
from llvmlite.ir import instructions as inst
from llvmlite.ir import values

PRIVATE = 5


class PrivateAlloca(inst.AllocaInstr):
    """`alloca T, align A, addrspace(5)`: AMDGPU's stack lives in the private address space."""

    def __init__(self, parent: ir.Block, typ: ir.Type, align: int, name: str = "") -> None:
        super().__init__(parent, typ, None, name)
        self.type = ir.PointerType(addrspace=PRIVATE)
        self.align = align

    def descr(self, buf: list[str]) -> None:
        buf.append(f"alloca {self.allocated_type}, align {self.align}, addrspace({PRIVATE})\n")


class ScopedAtomicRMW(inst.AtomicRMW):
    def __init__(self, parent, op, ptr, val, ordering, scope: str, name: str = "") -> None:
        super().__init__(parent, op, ptr, val, ordering, name)
        self.scope = scope

    def descr(self, buf: list[str]) -> None:
        ptr, val = self.operands
        buf.append(f"atomicrmw {self.operation} {ptr.type} {ptr.get_reference()}, {val.type} {val.get_reference()}"
                   f"{_scope(self.scope)} {self.ordering}\n")


class ScopedCmpXchg(inst.CmpXchg):
    def __init__(self, parent, ptr, cmp, val, ordering, failordering, scope: str, name: str = "") -> None:
        super().__init__(parent, ptr, cmp, val, ordering, failordering, name)
        self.scope = scope

    def descr(self, buf: list[str]) -> None:
        ptr, cmp, val = self.operands
        buf.append(f"cmpxchg {ptr.type} {ptr.get_reference()}, {cmp.type} {cmp.get_reference()}, "
                   f"{val.type} {val.get_reference()}{_scope(self.scope)} {self.ordering} {self.failordering}\n")


def _scope(scope: str) -> str:
    return f' syncscope("{scope}")' if scope else ""


class ByRefAttributes(values.ArgumentAttributes):
    """`byref(T) align A noundef` on a kernel argument: the parameter is read in place from the
    kernarg segment, laid out with alignment A exactly like a CUDA parameter buffer."""

    def __init__(self, typ: ir.Type, align: int) -> None:
        super().__init__()
        self.byref_type = typ
        self.byref_align = align

    def _to_list(self, typ: ir.Type) -> list[str]:
        return [f"byref({self.byref_type})", f"align {self.byref_align}", "noundef"]


def insert(builder: ir.IRBuilder, instr: ir.Instruction) -> ir.Instruction:
    builder._insert(instr)  # llvmlite's builder has no public hook for custom instructions
    return instr
