"""Lowering of the warp-level matrix instructions: mma.sync, wmma, ldmatrix, stmatrix, movmatrix.

A warp is one vector, so a fragment exchange is a shuffle of lanes. `mma` stores its operand
registers to stack buffers and calls one out-of-line helper per form and module
(`zluda.mma.<form>`), which unpacks A, B and C into row-major matrices (elements placed by the
manual's fragment layouts, compiler/matrix.py), multiplies, and packs D back into registers.
`wmma.mma` is the same with our own fragment layout (matrix.wmma_fragment), which
`wmma.load`/`wmma.store` move to and from memory element by element. Addresses the manual
requires aligned (ldmatrix/stmatrix rows, wmma's rows by base and stride) fault with 716 when
they are not, as an NVIDIA GPU's launch does.

Arithmetic (PTX leaves accumulation order and intermediate rounding open for all but .f64;
compiler/matrix_values.py, shared with the AMDGPU target):
* .f16/.bf16/.tf32: products are exact in f32 (at most 11 x 11 significand bits); each D
  element is C (widened to f32), then + A[r][0]*B[0][c], + A[r][1]*B[1][c], ... in k order,
  each addition rounded to nearest even in f32; an .f16 D is that sum rounded once to f16.
  A .tf32 operand is its 32-bit register with the low 13 bits ignored.
* .f64: the same order with one f64 fused multiply-add per k (.rn, the default).
* .s8/.u8: the exact sum of C and the products (64-bit), then wrapped to 32 bits, or clamped
  to the s32 range with .satfinite.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.cpu.memory import Access
from zluda_py.compiler.matrix import (BITS, MmaForm, WmmaMove, matrix_form, matrix_rows, matrix_space, mma_form,
                                      movmatrix_source, wmma_dims,
                                      wmma_form, wmma_fragment, wmma_registers)
from zluda_py.compiler.matrix_values import accumulator, multiplicand, multiply_add, narrow, widen
from zluda_py.compiler.errors import unsupported
from zluda_py.compiler.vector_constants import int_vector
from zluda_py.ptx import ast

I16, I32, I64, PTR = ir.IntType(16), V.I32, V.I64, V.PTR
F64 = ir.DoubleType()


def _elems(op: ast.Operand) -> list[ast.Operand]:
    return op.elems if isinstance(op, ast.Vec) else [op]


def _lanes(values: list[int]) -> ir.Constant:
    return V.lane_consts(I32, values)


class MmaMixin:
    # ------------------------------------------------------------------ mma
    def op_mma(self, inst: ast.Instruction, mask: ir.Value) -> None:
        self._mma(inst, mma_form(inst), mask)

    def _mma(self, inst: ast.Instruction, form: MmaForm, mask: ir.Value) -> None:
        b = self.b
        d, a, bm, c = inst.operands[:4]
        buffers = []
        for operand, which in ((a, "a"), (bm, "b"), (c, "c"), (d, "d")):
            count, width = form.registers(which)
            regs = _elems(operand)
            if len(regs) != count:
                raise unsupported(inst, f"operand {which} needs {count} registers, not {len(regs)}")
            buf = V.entry_alloca(b, ir.ArrayType(V.vec(ir.IntType(width)), count))
            buffers.append(buf)
            if which != "d":
                for k, r in enumerate(regs):
                    b.store(self.read(r, f"b{width}"), b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, k)]), align=16)
        b.call(_mma_function(self.mod, form), buffers)
        _, width = form.registers("d")
        for k, r in enumerate(_elems(d)):
            value = b.load(b.gep(buffers[3], [ir.Constant(I32, 0), ir.Constant(I32, k)]), align=16)
            self.write(r, value, f"b{width}", mask)

    # ------------------------------------------------------------------ wmma
    def op_wmma(self, inst: ast.Instruction, mask: ir.Value) -> None:
        form = wmma_form(inst)
        if isinstance(form, MmaForm):
            self._mma(inst, form, mask)
            return
        b = self.b
        bits = BITS[form.etype]
        width = 64 if bits == 64 else 32
        per = width // bits
        regs_op, addr = inst.operands[:2] if form.operand != "d" else inst.operands[1::-1]
        stride = inst.operands[2] if len(inst.operands) > 2 else None
        accesses = self._wmma_elements(form, addr, stride, mask)
        regs = _elems(regs_op)
        count = wmma_registers(form.operand, form.etype)
        if len(regs) != count:
            raise unsupported(inst, f"{count} registers expected, not {len(regs)}")
        wt = V.vec(ir.IntType(width))
        if form.operand == "d":
            words = [self.read(r, f"b{width}") for r in regs]
            for e, acc in enumerate(accesses):
                part = words[e // per]
                if e % per:
                    part = b.lshr(part, V.splat_const(ir.IntType(width), e % per * bits))
                self.store(acc, [part if bits == width else b.trunc(part, V.vec(ir.IntType(bits)))], mask)
            return
        words: list[ir.Value] = []
        for e, acc in enumerate(accesses):
            value = self.load(acc, ir.IntType(bits), 1, mask)[0]
            if bits != width:
                value = b.shl(b.zext(value, wt), V.splat_const(ir.IntType(width), e % per * bits))
            if e % per == 0:
                words.append(value)
            else:
                words[-1] = b.or_(words[-1], value)
        for k, r in enumerate(regs):  # a fragment with room to spare repeats its words
            self.write(r, words[k % len(words)], f"b{width}", mask)

    def _wmma_elements(self, form: WmmaMove, addr: ast.Addr, stride: ast.Operand | None,
                       mask: ir.Value) -> list[Access]:
        """Per fragment element (matrix.wmma_fragment), each lane's access to its matrix element at
        p + (major * stride + minor) * element size; the default stride is the matrix's leading
        dimension (its columns row-major, its rows column-major). Faults with 716 where a row
        (column) would start off the alignment the manual requires (`_check_wmma_alignment`)."""
        b = self.b
        nbytes = BITS[form.etype] // 8
        host, offsets = self._locate(addr, form.space)
        if not isinstance(host.type, ir.VectorType):
            host = V.splat(b, host)
        rows, cols = wmma_dims(form.shape, form.operand)
        layout = wmma_fragment(rows, cols)
        default = cols if form.row_major else rows
        pitch = V.splat_const(I64, default) if stride is None else b.zext(self.read(stride, "u32"), V.vec(I64))
        self._check_wmma_alignment(form, host, b.mul(pitch, V.splat_const(I64, nbytes)), mask)
        out = []
        for e in range(len(layout[0])):
            r = V.lane_consts(I64, [lane[e][0] for lane in layout])
            c = V.lane_consts(I64, [lane[e][1] for lane in layout])
            major, minor = (r, c) if form.row_major else (c, r)
            off = b.mul(b.add(b.mul(major, pitch), minor), V.splat_const(I64, nbytes))
            out.append(Access(b.add(host, off), None if offsets is None else b.add(offsets, off), form.space, nbytes,
                              "gather"))
        return out

    def _check_wmma_alignment(self, form: WmmaMove, base: ir.Value, pitch_bytes: ir.Value, mask: ir.Value) -> None:
        """The manual ("Matrix Storage for WMMA", Address Alignment): the start of each row (column
        in a .col layout), p + i * stride * element size, is a multiple of the fragment's size in
        bytes (its registers: an .f16 A/B of m16n16k16 is eight .f16x2, 32 bytes). Rows past the
        first are aligned exactly when p and p + stride * element size are."""
        size = wmma_registers(form.operand, form.etype) * (8 if form.etype == "f64" else 4)
        self._check_aligned(base, size, mask)
        self._check_aligned(self.b.add(base, pitch_bytes), size, mask)

    # ------------------------------------------------------------------ ldmatrix / stmatrix
    def _check_row_alignment(self, inst: ast.Instruction, addr: ast.Addr, count: int, mask: ir.Value) -> None:
        """The manual: four threads move each 16-byte row, so every row address is 16-byte aligned.
        Only lanes 0 .. 8*count-1 give row addresses (the other lanes' are not used)."""
        host, _ = self._locate(addr, matrix_space(inst))
        if not isinstance(host.type, ir.VectorType):
            host = V.splat(self.b, host)
        rows = V.lane_consts(ir.IntType(1), [int(lane < 8 * count) for lane in range(WARP)])
        self._check_aligned(host, 16, self.b.and_(mask, rows))

    def _matrix_rows(self, inst: ast.Instruction, addr: ast.Addr, sources: tuple[int, ...], add: tuple[int, ...],
                     nbytes: int) -> Access:
        """The per-lane access of lane i at (the row address lane sources[i] holds) + add[i]."""
        b = self.b
        space = matrix_space(inst)
        host, offsets = self._locate(addr, space)
        if not isinstance(host.type, ir.VectorType):
            host = V.splat(b, host)
        pick = _lanes(sources)
        extra = V.lane_consts(I64, add)
        moved = lambda v: b.add(b.shuffle_vector(v, ir.Constant(v.type, None), pick), extra)  # noqa: E731
        return Access(moved(host), None if offsets is None else moved(offsets), space, nbytes, "gather")

    def op_ldmatrix(self, inst: ast.Instruction, mask: ir.Value) -> None:
        count, trans = matrix_form(inst)
        dst, addr = inst.operands[:2]
        b = self.b
        self._check_row_alignment(inst, addr, count, mask)
        for m, d in enumerate(_elems(dst)[:count]):
            if not trans:
                acc = self._matrix_rows(inst, addr, *matrix_rows(m, False), 4)
                word = self.load(acc, I32, 1, mask)[0]
            else:
                halves = [self.load(self._matrix_rows(inst, addr, *matrix_rows(m, True, h), 2), I16, 1, mask)[0]
                          for h in (0, 1)]
                word = _pack16(b, *halves)
            self.write(d, word, "b32", mask)

    def op_stmatrix(self, inst: ast.Instruction, mask: ir.Value) -> None:
        count, trans = matrix_form(inst)
        addr, src = inst.operands[:2]
        b = self.b
        self._check_row_alignment(inst, addr, count, mask)
        for m, s in enumerate(_elems(src)[:count]):
            word = self.read(s, "b32")
            if not trans:
                self.store(self._matrix_rows(inst, addr, *matrix_rows(m, False), 4), [word], mask)
                continue
            for h in (0, 1):
                half = b.trunc(b.lshr(word, V.splat_const(I32, 16 * h)), V.vec(I16))
                self.store(self._matrix_rows(inst, addr, *matrix_rows(m, True, h), 2), [half], mask)

    def op_movmatrix(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """The lanes' halves picked from the source's low and high halves (matrix.movmatrix_source)."""
        matrix_form(inst)
        b = self.b
        d, a = inst.operands[:2]
        word = self.read(a, "b32")
        lo = b.trunc(word, V.vec(I16))
        hi = b.trunc(b.lshr(word, V.splat_const(I32, 16)), V.vec(I16))

        def take(half: int) -> ir.Value:
            return b.shuffle_vector(lo, hi, _lanes([which * WARP + lane for lane, which in movmatrix_source(half)]))

        self.write(d, _pack16(b, take(0), take(1)), "b32", mask)


def _pack16(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    return b.or_(b.zext(lo, V.vec(I32)), b.shl(b.zext(hi, V.vec(I32)), V.splat_const(I32, 16)))


# ---------------------------------------------------------------------- the per-form helper
def _lane_pointers(b: ir.IRBuilder, base: ir.Value, offsets: list[int]) -> ir.Value:
    return b.inttoptr(b.add(V.splat(b, b.ptrtoint(base, I64)), V.lane_consts(I64, offsets)), ir.VectorType(PTR, WARP))


def _unpack(b: ir.IRBuilder, form: MmaForm, which: str, regs: ir.Value, matrix: ir.Value, cols: int,
            acc: ir.Type) -> None:
    """Scatter operand `which`'s fragments (registers at `regs`) into the row-major `matrix`."""
    etype = {"a": form.atype, "b": form.btype, "c": form.ctype}[which]
    layout = form.layout(which)
    _, width = form.registers(which)
    bits, per = BITS[etype], width // BITS[etype]
    size = acc.width // 8 if isinstance(acc, ir.IntType) else (8 if acc == F64 else 4)
    for i in range(len(layout[0])):
        reg = b.load(V.typed(b, b.gep(regs, [ir.Constant(I64, i // per * WARP * width // 8)], source_etype=V.I8),
                             V.vec(ir.IntType(width))), typ=V.vec(ir.IntType(width)), align=16)
        if i % per:
            reg = b.lshr(reg, V.splat_const(ir.IntType(width), i % per * bits))
        element = reg if bits == width else b.trunc(reg, V.vec(ir.IntType(bits)))
        ptrs = _lane_pointers(b, matrix, [(r * cols + c) * size for r, c in (lane[i] for lane in layout)])
        V.intrinsic(b, f"llvm.masked.scatter.v{WARP}{_suffix(acc)}.v{WARP}p0", ir.VoidType(),
                    [widen(b, element, etype, acc), ptrs, ir.Constant(I32, size), V.ALL])


def _suffix(t: ir.Type) -> str:
    return f"i{t.width}" if isinstance(t, ir.IntType) else ("f64" if t == F64 else "f32")


def _mma_function(mod, form: MmaForm) -> ir.Function:
    name = f"zluda.mma.{form.name}"
    if name in mod.ir.globals:
        return mod.ir.globals[name]
    fn = ir.Function(mod.ir, ir.FunctionType(ir.VoidType(), [PTR] * 4), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    a_regs, b_regs, c_regs, d_regs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    acc, mul_t = accumulator(form), multiplicand(form)
    (m, n), k = form.size, form.k
    am, bm = b.alloca(ir.ArrayType(mul_t, m * k)), b.alloca(ir.ArrayType(mul_t, k * n))
    c_type = ir.ArrayType(acc, m * n)
    cm = b.alloca(c_type)
    if form.quad:  # only the diagonal blocks come from C: keep the rest defined
        b.store(ir.Constant(c_type, [ir.Constant(acc, 0)] * (m * n)), cm)
    for which, regs, matrix, cols, t in (("a", a_regs, am, k, mul_t), ("b", b_regs, bm, n, mul_t),
                                         ("c", c_regs, cm, n, acc)):
        _unpack(b, form, which, regs, matrix, cols, t)
    row_t, mrow_t = ir.VectorType(acc, n), ir.VectorType(mul_t, n)
    for r in range(m):  # D row r, accumulated in k order (see the module docstring)
        at = lambda arr, idx, t: V.typed(b, b.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, idx)]), t)  # noqa: E731
        total = b.load(at(cm, r * n, row_t), typ=row_t, align=4)
        for j in range(k):
            a = b.load(at(am, r * k + j, mul_t), typ=mul_t)
            splat = b.shuffle_vector(b.insert_element(ir.Constant(mrow_t, None), a, ir.Constant(I32, 0)),
                                     ir.Constant(mrow_t, None), int_vector(ir.VectorType(I32, n), [0] * n))
            brow = b.load(at(bm, j * n, mrow_t), typ=mrow_t, align=4)
            total = multiply_add(b, total, splat, brow,
                                 lambda x, y, z: V.intrinsic(b, f"llvm.fma.v{n}f64", row_t, [x, y, z]))
        b.store(total, at(cm, r * n, row_t), align=4)
    size = 8 if acc in (F64, I64) else 4
    layout = form.layout("d")
    _, width = form.registers("d")
    bits = BITS[form.dtype]
    per = width // bits
    regs: list[ir.Value | None] = [None] * -(-len(layout[0]) // per)
    for i in range(len(layout[0])):
        ptrs = _lane_pointers(b, cm, [(r * n + c) * size for r, c in (lane[i] for lane in layout)])
        value = V.intrinsic(b, f"llvm.masked.gather.v{WARP}{_suffix(acc)}.v{WARP}p0", ir.VectorType(acc, WARP),
                            [ptrs, ir.Constant(I32, size), V.ALL, ir.Constant(ir.VectorType(acc, WARP), None)])
        part = narrow(b, value, form)
        if bits != width:
            part = b.shl(b.zext(part, V.vec(ir.IntType(width))), V.splat_const(ir.IntType(width), i % per * bits))
        regs[i // per] = part if regs[i // per] is None else b.or_(regs[i // per], part)
    for j, reg in enumerate(regs):
        b.store(reg, V.typed(b, b.gep(d_regs, [ir.Constant(I64, j * WARP * width // 8)], source_etype=V.I8), reg.type),
                align=16)
    b.ret_void()
    return fn
