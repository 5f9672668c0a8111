"""The warp-level matrix instructions on AMDGPU: mma.sync, wmma, ldmatrix, stmatrix, movmatrix.

No matrix hardware is used. Every fragment element sits where the manual's layouts put it
(compiler/matrix.py, shared with the CPU target), so a lane computes its own D elements in
scalar code from the A, B and C elements it reads from the lanes holding them (`fetch`:
ds_bpermute within the lane's 32-lane CUDA warp, also on wave64), with the CPU target's order
and rounding (compiler/matrix_values.py). Which lane and register hold an element is a table
over the 32 lanes; each table becomes arithmetic on %laneid (`lane_function`). The matrix moves
address memory from another lane's row address (ldmatrix/stmatrix) or per element (wmma's own
layout, matrix.wmma_fragment).

Addresses the manual requires aligned (ldmatrix/stmatrix rows, wmma's rows by base and stride)
fault when they are not. CUDA reports 716 (MISALIGNED_ADDRESS); HIP has no such error, so the
fault is texture.py's load from address 0, an illegal address (700), as docs/amdgpu.md says
(llvm.trap, 719, made LLVM 22 abort printing gfx1100 code with several such checks).
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.matrix import (BITS, WARP, MmaForm, WmmaMove, matrix_form, matrix_rows, matrix_space,
                                      mma_form, movmatrix_source, wmma_dims, wmma_form, wmma_fragment,
                                      wmma_registers)
from zluda_py.compiler.matrix_values import accumulator, multiplicand, multiply_add, narrow, widen
from zluda_py.ptx import ast

I1, I16, I32, I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
ALL_LANES = (1 << WARP) - 1
# the 32-lane pattern of %laneid's bit j: bit l set where lane l has bit j
LANE_BITS = tuple(sum(((lane >> j) & 1) << lane for lane in range(WARP)) for j in range(5))
Table = tuple[int, ...]  # one value per lane


def _elems(op: ast.Operand) -> list[ast.Operand]:
    return op.elems if isinstance(op, ast.Vec) else [op]


def _c(t: ir.IntType, v: int) -> ir.Constant:
    return ir.Constant(t, v & ((1 << t.width) - 1))


class MmaMixin:
    # ------------------------------------------------------------------ lane tables
    def lane_function(self, table: Table) -> ir.Value:
        """The i32 value that lane l holds table[l]: each bit of it a constant, a bit of %laneid
        moved into place (every layout's tables are so far), or else looked up in the bit's
        32-lane pattern."""
        if len(set(table)) == 1:
            return _c(I32, table[0])
        b = self.b
        lane = self.lane()
        if table == tuple(range(WARP)):
            return lane
        out: ir.Value = _c(I32, 0)
        for bit in range(max(table).bit_length()):
            pattern = sum(((v >> bit) & 1) << lane_no for lane_no, v in enumerate(table))
            if pattern in (0, ALL_LANES):
                out = b.or_(out, _c(I32, (pattern & 1) << bit))
                continue
            if pattern in LANE_BITS:
                j = LANE_BITS.index(pattern)
                moved = b.shl(lane, _c(I32, bit - j)) if bit >= j else b.lshr(lane, _c(I32, j - bit))
            else:
                moved = b.shl(b.lshr(_c(I32, pattern), lane), _c(I32, bit))
            out = b.or_(out, b.and_(moved, _c(I32, 1 << bit)))
        return out

    def _select(self, words: list[ir.Value | None], which: Table) -> ir.Value:
        """words[which[l]] in lane l."""
        if len(set(which)) == 1:
            return words[which[0]]
        index = self.lane_function(which)
        out = words[which[0]]
        for k in sorted(set(which) - {which[0]}):
            out = self.b.select(self.b.icmp_unsigned("==", index, _c(I32, k)), words[k], out)
        return out

    def element(self, words: list[ir.Value], cells: tuple[tuple[int, int], ...], bits: int,
                fetched: dict) -> ir.Value:
        """Lane l's copy of element cells[l] = (lane, index) of a fragment held in `words`
        (element i is register i // per, bits (i % per) * bits up). `fetched` keeps the words
        already read from other lanes for this instruction."""
        b = self.b
        per = words[0].type.width // bits
        lanes = tuple(src for src, _ in cells)
        regs = tuple(i // per for _, i in cells)
        own = lanes == tuple(range(WARP))
        for reg in set(regs):  # read in the source lane, then picked by this lane's register index
            key = (id(words), lanes, reg)
            if key not in fetched:
                fetched[key] = words[reg] if own else self.fetch(self.lane_function(lanes), words[reg])
        word = self._select([fetched.get((id(words), lanes, reg)) for reg in range(len(words))], regs)
        shift = tuple(i % per * bits for _, i in cells)
        if any(shift):
            amount = self.lane_function(shift)
            word = b.lshr(word, amount if amount.type == word.type else b.zext(amount, word.type))
        return word if bits == word.type.width else b.trunc(word, ir.IntType(bits))

    def _pack(self, parts: list[ir.Value], width: int) -> list[ir.Value]:
        """Elements (integers of one width, low to high) packed into `width`-bit registers."""
        bits = parts[0].type.width
        per = width // bits
        words: list[ir.Value] = []
        for i, part in enumerate(parts):
            value = part if bits == width else self.b.zext(part, ir.IntType(width))
            if i % per:
                words[-1] = self.b.or_(words[-1], self.b.shl(value, _c(ir.IntType(width), i % per * bits)))
            else:
                words.append(value)
        return words

    def _fault_unless_aligned(self, address: ir.Value, size: int) -> None:
        """Fault where `address` is not a multiple of `size` (see the module docstring)."""
        b = self.b
        self._fault_unless(b.icmp_unsigned("==", b.and_(address, _c(address.type, size - 1)), _c(address.type, 0)))

    # ------------------------------------------------------------------ mma
    def op_mma(self, inst: ast.Instruction) -> None:
        self._mma(inst, mma_form(inst))

    def _registers(self, inst: ast.Instruction, form: MmaForm, which: str, op: ast.Operand) -> list[ast.Operand]:
        count, _ = form.registers(which)
        regs = _elems(op)
        if len(regs) != count:
            raise unsupported(inst, f"operand {which} needs {count} registers, not {len(regs)}")
        return regs

    def _mma(self, inst: ast.Instruction, form: MmaForm) -> None:
        b = self.b
        d, a, bm, c = inst.operands[:4]
        words, where = {}, {}
        for which, op in (("a", a), ("b", bm), ("c", c)):
            _, width = form.registers(which)
            words[which] = [self.read(r, f"b{width}") for r in self._registers(inst, form, which, op)]
            where[which] = {cell: (lane, i) for lane, cells in enumerate(form.layout(which)) for i, cell in
                            enumerate(cells)}
        etype = {"a": form.atype, "b": form.btype, "c": form.ctype}
        acc, mul = accumulator(form), multiplicand(form)
        fetched: dict = {}

        def value(which: str, cells: list[tuple[int, int]], to: ir.Type) -> ir.Value:
            located = tuple(where[which][cell] for cell in cells)
            return widen(b, self.element(words[which], located, BITS[etype[which]], fetched), etype[which], to)

        def fma(x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
            return self.call_intrinsic("llvm.fma.f64", acc, [x, y, z])

        layout = form.layout("d")
        parts = []
        for e in range(len(layout[0])):  # this lane's D element e, (r, col), summed in k order
            cells = [lane[e] for lane in layout]
            total = value("c", cells, acc)
            for k in range(form.k):
                x = value("a", [(r, k) for r, _ in cells], mul)
                y = value("b", [(k, col) for _, col in cells], mul)
                total = multiply_add(b, total, x, y, fma)
            parts.append(narrow(b, total, form))
        _, width = form.registers("d")
        for r, word in zip(self._registers(inst, form, "d", d), self._pack(parts, width)):
            self.write(r, word, f"b{width}")

    # ------------------------------------------------------------------ wmma
    def op_wmma(self, inst: ast.Instruction) -> None:
        form = wmma_form(inst)
        if isinstance(form, MmaForm):
            self._mma(inst, form)
            return
        b = self.b
        bits = BITS[form.etype]
        width = 64 if bits == 64 else 32
        regs_op, addr = inst.operands[:2] if form.operand != "d" else inst.operands[1::-1]
        stride = inst.operands[2] if len(inst.operands) > 2 else None
        regs = _elems(regs_op)
        count = wmma_registers(form.operand, form.etype)
        if len(regs) != count:
            raise unsupported(inst, f"{count} registers expected, not {len(regs)}")
        pointers = self._wmma_elements(form, addr, stride)
        if form.operand == "d":
            words = [self.read(r, f"b{width}") for r in regs]
            for e, ptr in enumerate(pointers):
                b.store(self.element(words, tuple((lane, e) for lane in range(WARP)), bits, {}), ptr, align=bits // 8)
            return
        words = self._pack([b.load(ptr, typ=ir.IntType(bits), align=bits // 8) for ptr in pointers], width)
        for k, r in enumerate(regs):  # a fragment with room to spare repeats its words
            self.write(r, words[k % len(words)], f"b{width}")

    def _wmma_elements(self, form: WmmaMove, addr: ast.Addr, stride: ast.Operand | None) -> list[ir.Value]:
        """Per fragment element (matrix.wmma_fragment), a pointer to this lane's matrix element at
        p + (major * stride + minor) * element size; the default stride is the matrix's leading
        dimension (its columns row-major, its rows column-major). Faults where a row (column)
        would start off the alignment the manual requires: p and p + stride * element size are
        multiples of the fragment's size in bytes (cpu/mma.py's _check_wmma_alignment)."""
        b = self.b
        nbytes = BITS[form.etype] // 8
        pointer = self.pointer(addr, form.space)
        at = ir.IntType(32 if form.space == "shared" else 64)
        base = b.ptrtoint(pointer, at)
        rows, cols = wmma_dims(form.shape, form.operand)
        layout = wmma_fragment(rows, cols)
        default = cols if form.row_major else rows
        pitch = _c(at, default) if stride is None else self.lanes.resize(self.read(stride, "u32"), at.width, False)
        size = wmma_registers(form.operand, form.etype) * (8 if form.etype == "f64" else 4)
        self._fault_unless_aligned(base, size)
        self._fault_unless_aligned(b.add(base, b.mul(pitch, _c(at, nbytes))), size)
        out = []
        for e in range(len(layout[0])):
            r = self.lanes.resize(self.lane_function(tuple(lane[e][0] for lane in layout)), at.width, False)
            c = self.lanes.resize(self.lane_function(tuple(lane[e][1] for lane in layout)), at.width, False)
            major, minor = (r, c) if form.row_major else (c, r)
            off = b.mul(b.add(b.mul(major, pitch), minor), _c(at, nbytes))
            out.append(b.inttoptr(b.add(base, off), pointer.type))
        return out

    # ------------------------------------------------------------------ ldmatrix / stmatrix / movmatrix
    def _row_addresses(self, inst: ast.Instruction, addr: ast.Addr, count: int) -> tuple[ir.Value, ir.PointerType]:
        """This lane's row address (an integer of its space's width) and the pointer type; lanes
        0 .. 8*count-1 give the rows, each 16-byte aligned (four threads move each 16-byte row)."""
        b = self.b
        pointer = self.pointer(addr, matrix_space(inst))
        address = b.ptrtoint(pointer, ir.IntType(32 if matrix_space(inst) == "shared" else 64))
        gives_row = b.icmp_unsigned("<", self.lane(), _c(I32, 8 * count))
        self._fault_unless_aligned(b.select(gives_row, address, _c(address.type, 0)), 16)
        return address, pointer.type

    def _row_pointer(self, address: ir.Value, ptype: ir.PointerType, m: int, trans: bool, half: int) -> ir.Value:
        sources, add = matrix_rows(m, trans, half)
        row = self.fetch(self.lane_function(sources), address)
        extra = self.lanes.resize(self.lane_function(add), address.type.width, False)
        return self.b.inttoptr(self.b.add(row, extra), ptype)

    def op_ldmatrix(self, inst: ast.Instruction) -> None:
        count, trans = matrix_form(inst)
        dst, addr = inst.operands[:2]
        b = self.b
        address, ptype = self._row_addresses(inst, addr, count)
        for m, d in enumerate(_elems(dst)[:count]):
            if not trans:
                word = b.load(self._row_pointer(address, ptype, m, False, 0), typ=I32, align=4)
            else:
                halves = [b.load(self._row_pointer(address, ptype, m, True, h), typ=I16, align=2) for h in (0, 1)]
                word = self._pack(halves, 32)[0]
            self.write(d, word, "b32")

    def op_stmatrix(self, inst: ast.Instruction) -> None:
        count, trans = matrix_form(inst)
        addr, src = inst.operands[:2]
        b = self.b
        address, ptype = self._row_addresses(inst, addr, count)
        for m, s in enumerate(_elems(src)[:count]):
            word = self.read(s, "b32")
            if not trans:
                b.store(word, self._row_pointer(address, ptype, m, False, 0), align=4)
                continue
            for h in (0, 1):
                half = b.trunc(b.lshr(word, _c(I32, 16 * h)), I16)
                b.store(half, self._row_pointer(address, ptype, m, True, h), align=2)

    def op_movmatrix(self, inst: ast.Instruction) -> None:
        matrix_form(inst)
        d, a = inst.operands[:2]
        words = [self.read(a, "b32")]
        fetched: dict = {}
        halves = [self.element(words, movmatrix_source(h), 16, fetched) for h in (0, 1)]
        self.write(d, self._pack(halves, 32)[0], "b32")
