"""Device printf through a buffer the runtime drains after each launch.

The code object exports `__zluda_printf_buffer` (a u64 in global memory): the device address
of a buffer laid out as [u64 bytes used][u64 capacity][records...], or 0 when the runtime
does not collect output. A record is [u32 size][u32 format id][argument bytes], 8-aligned;
the format strings themselves stay in the compile metadata (`printf_formats`), so the
device copies only the packed arguments vprintf was given. A record that does not fit is
dropped and counted (bytes used grows past the capacity).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Callable

from llvmlite import ir

from zluda_py.compiler.amdgpu.ir_extras import ScopedAtomicRMW, insert
from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.printf import argument_layout, format_printf
from zluda_py.ptx import ast

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
BUFFER_SYMBOL = "__zluda_printf_buffer"
BUFFER_HEADER = 16
RECORD_HEADER = 8
ASSERT_FORMAT = b"%s:%u: %s: Assertion `%s` failed.\n"


def drain(raw: bytes, formats: list[bytes], read_string: Callable[[int], bytes]) -> tuple[bytes, int]:
    """The text of every record in a drained buffer, and the bytes of records that were lost.
    `read_string(device_address)` reads a NUL-terminated string for %s arguments."""
    used, capacity = struct.unpack_from("<QQ", raw)
    end = BUFFER_HEADER + min(used, capacity, len(raw) - BUFFER_HEADER)
    out = bytearray()
    pos = BUFFER_HEADER
    while pos + RECORD_HEADER <= end:
        size, fid = struct.unpack_from("<II", raw, pos)
        if size < RECORD_HEADER or pos + size > end or fid >= len(formats):
            break
        fmt = formats[fid]
        args = bytearray(raw[pos + RECORD_HEADER:pos + size] + bytes(8))
        keep = []
        for off in argument_layout(fmt)[1]:
            ptr = struct.unpack_from("<Q", args, off)[0]
            if ptr:
                text = ctypes.create_string_buffer(read_string(ptr))
                keep.append(text)
                struct.pack_into("<Q", args, off, ctypes.addressof(text))
        host = ctypes.create_string_buffer(bytes(args), len(args))
        out += format_printf(fmt, ctypes.addressof(host))
        pos += size
    return bytes(out), max(used - capacity, 0)


class PrintfMixin:
    def lower_printf(self, inst: ast.Instruction, args: list[ast.Operand]) -> ir.Value:
        if len(args) != 2:
            raise unsupported(inst, "vprintf takes a format and an argument buffer")
        fmt = self._format_string(inst, args[0])
        size, _ = argument_layout(fmt)
        self._write_record(self.mod.printf_format(fmt), size, self.b.inttoptr(self.arg_value(args[1], 64),
                                                                              ir.PointerType()))
        return ir.Constant(I32, 0)

    def lower_assert(self, inst: ast.Instruction, args: list[ast.Operand]) -> None:
        """__assertfail(message, file, line, function, size): print CUDA's message, then trap."""
        if len(args) < 4:
            raise unsupported(inst, "__assertfail arguments")
        b = self.b
        buf = self.alloca(ir.ArrayType(I8, 32), 8)
        fields = [(args[1], 64, 0), (args[2], 32, 8), (args[3], 64, 16), (args[0], 64, 24)]
        for op, bits, off in fields:
            b.store(self.arg_value(op, bits), b.gep(buf, [ir.Constant(I64, off)], source_etype=I8))
        self._write_record(self.mod.printf_format(ASSERT_FORMAT), 32, b.addrspacecast(buf, ir.PointerType()))
        self.call_intrinsic("llvm.trap", ir.VoidType(), [])

    def arg_value(self, op: ast.Operand, bits: int) -> ir.Value:
        """The value passed in a call argument: the contents of a .param buffer, or an operand."""
        sym = self.symbols.get(op.name) if isinstance(op, ast.Sym) else None
        if sym is not None and sym.kind == "pbuf":
            return self.b.load(sym.ptr, typ=ir.IntType(bits))
        return self.read(op, f"u{bits}")

    def _write_record(self, fid: int, size: int, args: ir.Value) -> None:
        b = self.b
        record = (RECORD_HEADER + size + 7) // 8 * 8
        gptr = ir.PointerType(addrspace=1)
        buf = b.load(self.mod.printf_buffer(), typ=I64)
        with b.if_then(b.icmp_unsigned("!=", buf, ir.Constant(I64, 0))):
            base = b.inttoptr(buf, gptr)
            off = insert(b, ScopedAtomicRMW(b.block, "add", base, ir.Constant(I64, record), "monotonic", "agent"))
            cap = b.load(b.gep(base, [ir.Constant(I64, 8)], source_etype=I8), typ=I64)
            fits = b.icmp_unsigned("<=", b.add(off, ir.Constant(I64, record)), cap)
            with b.if_then(fits):
                rec = b.gep(base, [b.add(off, ir.Constant(I64, BUFFER_HEADER))], source_etype=I8)
                b.store(ir.Constant(I32, record), rec)
                b.store(ir.Constant(I32, fid), b.gep(rec, [ir.Constant(I64, 4)], source_etype=I8))
                for k in range(size):
                    byte = b.load(b.gep(args, [ir.Constant(I64, k)], source_etype=I8), typ=I8)
                    b.store(byte, b.gep(rec, [ir.Constant(I64, RECORD_HEADER + k)], source_etype=I8))

    def _format_string(self, inst: ast.Instruction, op: ast.Operand) -> bytes:
        """Follow the format argument back to the module string it addresses (nvcc stores
        `cvta.global(mov $str)` into the parameter), so its layout is known at compile time."""
        seen = 0
        while seen < 16:
            seen += 1
            if isinstance(op, ast.Sym) and op.name in self.mod.string_globals:
                return self.mod.string_globals[op.name]
            defs = self._definitions(op)
            if len(defs) != 1:
                break
            op = defs[0]
        raise unsupported(inst, "printf whose format is not a constant string of the module")

    def _definitions(self, op: ast.Operand) -> list[ast.Operand]:
        """The source operands of every instruction that writes `op` (a register or .param buffer)."""
        found = []
        for blk in self.body.blocks:
            for i in blk.insts:
                if isinstance(op, ast.Sym) and i.opcode == "st" and isinstance(i.operands[0], ast.Addr) \
                        and isinstance(i.operands[0].base, ast.Sym) and i.operands[0].base.name == op.name:
                    found.append(i.operands[1])
                elif isinstance(op, ast.Reg) and i.opcode in ("mov", "cvta") and isinstance(i.operands[0], ast.Reg) \
                        and i.operands[0].name == op.name:
                    found.append(i.operands[1])
        return found
