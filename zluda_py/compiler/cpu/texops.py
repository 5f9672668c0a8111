"""Lowering of the texture and surface instructions (tex, tld4, txq, suld, sust, sured, suq,
istypep).

istypep is false whatever it names (`op_istypep`). The others' semantics live in one place,
the host side (cpu/texture.py), since texels sit behind the driver's texture objects: a warp
fills a request record (each lane's handle, its operands zero-extended to 64 bits) and calls
`zluda_host(HOST_TEXTURE, ctx, record, mask, form)`, `form` being the instruction's
`opcode.mods` text; a nonzero answer is the launch's fault.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import WARP, Ctx
from zluda_py.compiler.cpu.texture import ARG_SLOTS, REQUEST_WORDS, RESULT_SLOTS
from zluda_py.compiler.errors import CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, UnsupportedError, unsupported
from zluda_py.ptx import ast
from zluda_py.ptx.parser import OPAQUE_TYPES

I32, I64 = V.I32, V.I64
HOST_TEXTURE = 6  # zluda_host kind: a texture or surface request
# what the host answers: 700 for a .trap surface access out of bounds (as the H200 does) or a
# handle that is no live object, 719 when the host call itself failed (hostcalls.py)
FAULTS = (CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ILLEGAL_ADDRESS)


def _elems(op: ast.Operand) -> list[ast.Operand]:
    return op.elems if isinstance(op, ast.Vec) else [op]


class TextureMixin:
    def _texture_request(self, inst: ast.Instruction, mask: ir.Value, handle: ast.Operand,
                         args: list[tuple[ast.Operand, str]]) -> ir.Value:
        """Fill the record (args by slot, read as their PTX types), make the host call, fault on
        its answer; returns the record."""
        b = self.b
        record = V.entry_alloca(b, ir.ArrayType(I64, REQUEST_WORDS))
        record.align = 64
        slot = lambda k: b.gep(record, [ir.Constant(I32, 0), ir.Constant(I32, k * WARP)])  # noqa: E731
        b.store(self._texture_handle(inst, handle), V.typed(b, slot(0), V.vec(I64)), align=16)
        for k, (op, ptype) in enumerate(args):
            if op is not None and not isinstance(op, ast.Sink):
                value = V.resize(b, self.read(op, ptype), 64, False)
                b.store(value, V.typed(b, slot(1 + k), V.vec(I64)), align=16)
        text = bytearray(".".join((inst.opcode, *inst.mods)).encode() + b"\0")
        form = ir.GlobalVariable(self.mod.ir, ir.ArrayType(V.I8, len(text)), self.mod.ir.get_unique_name("texform"))
        form.global_constant, form.linkage, form.initializer = True, "private", ir.Constant(form.value_type, text)
        status = b.call(self.mod.host_fn(), [ir.Constant(I32, HOST_TEXTURE), self.ctx, b.ptrtoint(record, I64),
                                             b.zext(V.mask_bits(b, mask), I64), b.ptrtoint(form, I64),
                                             ir.Constant(I64, 0), ir.Constant(I64, 0)])
        for code in FAULTS:
            with b.if_then(b.icmp_unsigned("==", status, ir.Constant(I64, code)), likely=False):
                self.fault(code, mask)
        self._texture_record = (record, slot)
        return record

    def _texture_handle(self, inst: ast.Instruction, handle: ast.Operand) -> ir.Value:
        """Each lane's object handle: the operand; for a texture or surface reference the
        handle the driver keeps in the reference's module variable (driver/texrefs.py); for a
        kernel parameter of such a type the handle it was passed (PTX "texture parameters")."""
        if not isinstance(handle, ast.Sym):
            return self.read(handle, "u64")
        b = self.b
        want = "surfref" if inst.opcode.startswith("su") else "texref"
        sym = self.symbol(handle.name, inst.pos)
        if sym.kind == "kparam":
            declared = next(p.type for p in self.fn.params if p.name == handle.name)
            if declared != want:
                raise unsupported(inst, f"parameter {handle.name} is a .{declared}, not a .{want}")
            word = b.inttoptr(b.add(self.ctx_i64(Ctx.PARAMS), ir.Constant(I64, sym.offset)), V.PTR)
            return V.splat(b, b.load(word, typ=I64, align=8))
        if sym.kind != want:
            raise unsupported(inst, f"{handle.name} is not a .{want}")
        return V.splat(b, b.load(sym.ptr, align=8))

    def _texture_results(self, dests: list[ast.Operand], ptype: str, mask: ir.Value) -> None:
        b = self.b
        _, slot = self._texture_record
        for k, d in enumerate(dests):
            value = b.load(V.typed(b, slot(1 + ARG_SLOTS + k), V.vec(I64)), typ=V.vec(I64), align=16)
            self.write(d, V.resize(b, value, 64 if ptype == "b64" else 32, False), "b32" if ptype == "f16x2" else ptype, mask)

    def _coordinates(self, inst: ast.Instruction, c: ast.Operand, ctype: str) -> list[tuple[ast.Operand, str]]:
        """The coordinate slots: an array index first (a .u32 whatever the coordinate type)."""
        elems = _elems(c)
        layered = any(m in inst.mods for m in ("a1d", "a2d", "acube"))
        return [(e, "u32" if layered and i == 0 else ctype) for i, e in enumerate(elems)][:4]

    def _texture_dests(self, inst: ast.Instruction, d: ast.Operand, mask: ir.Value) -> list[ast.Operand]:
        if isinstance(d, ast.PredOut):  # the texel is always resident
            if not isinstance(d.pred, ast.Sink):
                self.write(d.pred, V.splat_const(V.I1, 1), "pred", mask)
            d = d.dest
        elems = _elems(d)
        if len(elems) > RESULT_SLOTS:
            raise UnsupportedError(f"{len(elems)} results", inst.pos)
        return elems

    def op_tex(self, inst: ast.Instruction, mask: ir.Value) -> None:
        d, a, *rest = inst.operands
        extra = len(rest) - (1 if inst.has("level") else 2 if inst.has("grad") else 0)
        if not isinstance(a, ast.Addr) or len(a.extra) != 1:
            raise unsupported(inst, "independent texture and sampler ([a, b, c])")
        if extra:
            raise unsupported(inst, "texel offset or depth compare operands")
        args = self._coordinates(inst, a.extra[0], inst.types[-1])
        args += [(None, "u32")] * (4 - len(args))
        if inst.has("level"):  # the LOD and gradients go to the slots cpu/mipmap.py reads
            args.append((rest[0], "f32"))
        elif inst.has("grad"):
            dpdx, dpdy = (_elems(g)[:4] for g in rest)
            args += [(e, "f32") for e in dpdx] + [(None, "u32")] * (4 - len(dpdx)) + [(e, "f32") for e in dpdy]
        self._texture_request(inst, mask, a.base, args)
        self._texture_results(self._texture_dests(inst, d, mask), inst.types[-2], mask)

    def op_tld4(self, inst: ast.Instruction, mask: ir.Value) -> None:
        d, a, *rest = inst.operands
        if not isinstance(a, ast.Addr) or len(a.extra) != 1:
            raise unsupported(inst, "independent texture and sampler ([a, b, c])")
        if rest:
            raise unsupported(inst, "texel offset or depth compare operands")
        self._texture_request(inst, mask, a.base, self._coordinates(inst, a.extra[0], "f32"))
        self._texture_results(self._texture_dests(inst, d, mask), inst.types[-2], mask)

    def _query(self, inst: ast.Instruction, mask: ir.Value) -> None:
        d, a, *lod = inst.operands
        if not isinstance(a, ast.Addr) or a.extra:
            raise unsupported(inst, "query operand")
        args = [(None, "u32")] * 4 + [(lod[0], "s32")] if lod else []
        self._texture_request(inst, mask, a.base, args)
        self._texture_results([d], "b32", mask)

    op_txq = op_suq = _query

    def op_suld(self, inst: ast.Instruction, mask: ir.Value) -> None:
        d, a = inst.operands
        self._texture_request(inst, mask, a.base, self._coordinates(inst, a.extra[0], "s32"))
        self._texture_results(_elems(d), inst.types[-1], mask)

    def op_sust(self, inst: ast.Instruction, mask: ir.Value) -> None:
        a, c = inst.operands
        coords = self._coordinates(inst, a.extra[0], "s32")
        coords += [(None, "u32")] * (4 - len(coords))
        self._texture_request(inst, mask, a.base, coords + [(e, inst.types[-1]) for e in _elems(c)])

    op_sured = op_sust  # the same record: coordinates, then the operand

    def op_istypep(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """False whatever the operand: an NVIDIA H100 answers false for texture and surface object
        handles of every kind, and a reference, which holds such a handle here, answers as they
        do (docs/semantics.md). A name must still be a reference (module variable or parameter)."""
        p, a = inst.operands
        if isinstance(a, ast.Sym):
            sym = self.symbol(a.name, inst.pos)
            kind = next(q.type for q in self.fn.params if q.name == a.name) if sym.kind == "kparam" else sym.kind
            if kind not in OPAQUE_TYPES:
                raise unsupported(inst, f"{a.name} is not a texture, sampler or surface reference")
        self.write(p, V.NONE, "pred", mask)
