"""Texture and surface instructions on AMDGPU, sampled in software.

A texture or surface object's handle is the device address of its descriptor block
(compiler/texdesc.py, written by the HIP backend when the object is created). Each thread
reads the fields it needs and computes what the CPU target's model computes (cpu/texture.py;
the rules are docs/semantics.md's), in the same arithmetic, so results agree bit for bit:
normalized coordinates truncated to 24 fractional bits and scaled in f64, point sampling at
texel floor(x), address modes on texel indices, channel values in f64 (normalized-float reads
max(t / max, -1)), the result rounded once to f32 or truncated to a 32-bit integer.

Implemented: tex (.1d/.2d/.3d/.a1d/.a2d/.2dms/.a2dms/.cube/.acube, .base/.level/.grad, f32 or s32 coordinates,
f32/s32/u32/f16/f16x2 results, point and linear filtering; on mipmapped textures the CPU model's level
selection and blend, cpu/mipmap.py; sRGB reads through compiler/srgb.py's table), tld4 (.2d/.a2d/.cube/.acube),
every txq/suq query, suld.b/sust.b/sust.p/sured (.trap/.clamp/.zero), istypep (false). Every other form is refused
by name (docs/amdgpu.md). An object of the wrong kind (its magic word) or a .trap access outside a surface faults with a
load from address 0 (CUDA reports 700 for both; a trap would be 719).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from zluda_py.compiler import miplod, srgb, texdesc as D
from zluda_py.compiler.errors import unsupported
from zluda_py.ptx import ast
from zluda_py.ptx.parser import OPAQUE_TYPES

if TYPE_CHECKING:
    from zluda_py.compiler.amdgpu.function import Symbol

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
GLOBAL = ir.PointerType(addrspace=1)
GEOMETRY = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True),  # dims, layered
            "2dms": (2, False), "a2dms": (2, True),  # multisample: a sample number follows the layer
            "cube": (3, False), "acube": (3, True)}  # a direction; an array of cubes
CUBES = ("cube", "acube")
COORD_SCALE = float(1 << 24)  # cpu/texture.py COORD_BITS
HALF_ALIGN_BITS = 14  # cpu/texture.py: half texels aligned to 2^(E - 14) before they blend
UNSUPPORTED = "textures, surfaces: this form is not supported on AMDGPU yet"
LOG2_SYMBOL = "__zluda_mip_log2"  # the module's copy of miplod.LOG2_TABLE
SRGB_SYMBOL = "__zluda_srgb_to_linear"  # the module's copy of srgb.TO_LINEAR


def _elems(op: ast.Operand) -> list[ast.Operand]:
    return op.elems if isinstance(op, ast.Vec) else [op]


def _f64(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class TextureMixin:
    # ------------------------------------------------------------------ descriptor
    def _desc(self, inst: ast.Instruction, handle: ast.Operand, magic: int) -> ir.Value:
        """The descriptor pointer of the instruction's object, checked to be of the right kind."""
        desc = self.b.inttoptr(self._handle(inst, handle), GLOBAL)
        self._fault_unless(self.b.icmp_unsigned("==", self._field(desc, D.MAGIC, I32), ir.Constant(I32, magic)))
        return desc

    def _handle(self, inst: ast.Instruction, handle: ast.Operand) -> ir.Value:
        """The object's handle: the operand; for a texture or surface reference the handle the
        driver keeps in the reference's global word (driver/texrefs.py); for a kernel parameter
        of such a type the handle it was passed (PTX "texture parameters"), as cpu/texops.py."""
        if isinstance(handle, ast.Reg):
            return self.read(handle, "u64")
        if not isinstance(handle, ast.Sym):
            raise unsupported(inst, f"{UNSUPPORTED} (the object operand)")
        want = "surfref" if inst.opcode.startswith("su") else "texref"
        sym, kind = self._reference(inst, handle)
        if kind != want:  # cpu/texops.py's wording
            what = f"parameter {handle.name} is a .{kind}," if sym.kind == "kparam" else f"{handle.name} is"
            raise unsupported(inst, f"{what} not a .{want}")
        return self.b.load(sym.ptr, typ=I64, align=8)

    def _reference(self, inst: ast.Instruction, name: ast.Sym) -> tuple[Symbol, str]:
        """The symbol a name refers to and its type: a module variable's, or a kernel parameter's
        as declared."""
        sym = self.symbol(name.name, inst.pos)
        if sym.kind == "kparam":
            return sym, next(p.type for p in self.fn.params if p.name == name.name)
        return sym, sym.kind

    def _field(self, desc: ir.Value, offset: int, ty: ir.Type) -> ir.Value:
        return self.b.load(self.b.gep(desc, [_i64(offset)], source_etype=I8), typ=ty, align=4)

    def _u32_field(self, desc: ir.Value, offset: int) -> ir.Value:
        return self.b.zext(self._field(desc, offset, I32), I64)

    def _fault_unless(self, ok: ir.Value) -> None:
        """An illegal-address fault (CUresult 700) where `ok` is false: a load from address 0,
        hidden from LLVM (which would take a null load as unreachable)."""
        b = self.b
        with b.if_then(b.not_(ok)):
            zero = b.asm(ir.FunctionType(I32, [I32]), "", "=v,0", [ir.Constant(I32, 0)], True)
            word = b.load(b.inttoptr(b.zext(zero, I64), GLOBAL), typ=I32, align=4)
            b.asm(ir.FunctionType(ir.VoidType(), [I32]), "", "v", [word], True)  # the load is used

    def _has(self, flags: ir.Value, bit: int) -> ir.Value:
        return self.b.icmp_unsigned("!=", self.b.and_(flags, ir.Constant(I32, bit)), ir.Constant(I32, 0))

    # ------------------------------------------------------------------ texels
    def _table(self, symbol: str, ty: ir.Type, values: tuple) -> ir.GlobalVariable:
        """The module's constant copy of a shared table (created at its first use)."""
        table = self.mod.ir.globals.get(symbol)
        if table is None:
            array = ir.ArrayType(ty, len(values))
            table = ir.GlobalVariable(self.mod.ir, array, name=symbol, addrspace=4)
            table.type = ir.PointerType(addrspace=4)
            table.linkage, table.global_constant = "private", True
            table.initializer = ir.Constant(array, bytearray(values) if ty == I8 else list(values))
        return table

    def _channel(self, addr: ir.Value, item: ir.Value, flags: ir.Value, scale: ir.Value,
                 colour: bool) -> ir.Value:
        """One channel at byte address `addr` as f64 (the CPU model's value); a `colour` channel
        (red, green, blue) of an sRGB texture through compiler/srgb.py's table."""
        b = self.b
        signed = self._has(flags, D.SIGNED)
        is_float = self._has(flags, D.FLOAT_FORMAT)
        ptr = b.inttoptr(addr, GLOBAL)
        done = self.llfn.append_basic_block("tex.chan")
        blocks = {size: self.llfn.append_basic_block(f"tex.chan{size}") for size in (1, 2, 4)}
        switch = b.switch(item, blocks[4])
        switch.add_case(ir.Constant(I32, 1), blocks[1])
        switch.add_case(ir.Constant(I32, 2), blocks[2])
        values = []
        for size, ty, fty in ((1, I8, None), (2, I16, ir.HalfType()), (4, I32, F32)):
            b.position_at_end(blocks[size])
            raw = b.load(ptr, typ=ty, align=1)
            as_int = b.select(signed, b.sitofp(raw, F64), b.uitofp(raw, F64))
            value = as_int if fty is None else b.select(is_float, b.fpext(b.bitcast(raw, fty), F64), as_int)
            values.append((value, b.block))
            b.branch(done)
        b.position_at_end(done)
        phi = b.phi(F64)
        for value, block in values:
            phi.add_incoming(value, block)
        normalized = b.fdiv(phi, scale)
        normalized = b.select(b.fcmp_ordered(">", normalized, _f64(-1.0)), normalized, _f64(-1.0))
        value = b.select(b.fcmp_ordered("!=", scale, _f64(0.0)), normalized, phi)
        if not colour:
            return value
        head = b.block
        with b.if_then(self._has(flags, D.SRGB)):  # set only on 8-bit unorm: phi is the byte
            table = self._table(SRGB_SYMBOL, F64, srgb.TO_LINEAR)
            index = b.and_(b.fptoui(phi, I64), _i64(0xFF))
            linear = b.load(b.gep(table, [_i64(0), index], source_etype=table.value_type), typ=F64)
            converted = b.block
        out = b.phi(F64)
        out.add_incoming(linear, converted)
        out.add_incoming(value, head)
        return out

    def _address(self, i: ir.Value, n: ir.Value, mode: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(index in [0, n), inside) of texel index i under a runtime address mode."""
        b = self.b
        n = b.select(b.icmp_signed(">", n, _i64(1)), n, _i64(1))
        zero = _i64(0)

        def floor_mod(v: ir.Value, m: ir.Value) -> ir.Value:
            r = b.srem(v, m)
            return b.select(b.icmp_signed("<", r, zero), b.add(r, m), r)

        wrapped = floor_mod(i, n)
        two_n = b.add(n, n)
        m = floor_mod(i, two_n)
        mirrored = b.select(b.icmp_signed(">=", m, n), b.sub(b.sub(two_n, _i64(1)), m), m)
        low = b.select(b.icmp_signed("<", i, zero), zero, i)
        clamped = b.select(b.icmp_signed(">", low, b.sub(n, _i64(1))), b.sub(n, _i64(1)), low)
        is_mode = lambda k: b.icmp_unsigned("==", mode, ir.Constant(I32, k))  # noqa: E731
        j = b.select(is_mode(D.WRAP), wrapped, b.select(is_mode(D.MIRROR), mirrored, clamped))
        outside = b.or_(b.icmp_signed("<", i, zero), b.icmp_signed(">=", i, n))
        return j, b.not_(b.and_(is_mode(D.BORDER_MODE), outside))

    def _texel(self, desc: ir.Value, idx: list[ir.Value], layer: ir.Value) -> list[ir.Value]:
        """The four channels (f64) of the texel at integer indices `idx` of `layer` (clamped):
        absent channels 0, alpha 1, the border colour where a border axis is outside."""
        b = self.b
        sizes = [self._u32_field(desc, off) for off in (D.WIDTH, D.HEIGHT, D.DEPTH)]
        strides = [self._u32_field(desc, D.ELEMENT), self._field(desc, D.ROW, I64), self._field(desc, D.SLICE, I64)]
        offset = b.mul(layer, self._field(desc, D.LAYER_STRIDE, I64))
        inside = ir.Constant(I1, 1)
        for axis, i in enumerate(idx):
            j, ok = self._address(i, sizes[axis], self._field(desc, D.MODES + 4 * axis, I32))
            inside = b.and_(inside, ok)
            offset = b.add(offset, b.mul(j, strides[axis]))
        item, flags = self._field(desc, D.ITEM, I32), self._field(desc, D.FLAGS, I32)
        scale, channels = self._field(desc, D.SCALE, F64), self._field(desc, D.CHANNELS, I32)
        addr = b.add(self._field(desc, D.BASE, I64), offset)
        out = []
        for c in range(4):
            present = b.and_(inside, b.icmp_unsigned(">", channels, ir.Constant(I32, c)))
            head = b.block
            with b.if_then(present):
                value = self._channel(b.add(addr, b.mul(b.zext(item, I64), _i64(c))), item, flags, scale,
                                      c < srgb.CHANNELS)
                got = b.block
            phi = b.phi(F64)
            phi.add_incoming(value, got)
            phi.add_incoming(_f64(1.0 if c == 3 else 0.0), head)
            border = self._field(desc, D.BORDER + 8 * c, F64)
            out.append(b.select(inside, phi, border))
        return out

    def _layer(self, desc: ir.Value, value: ir.Value, per: int = 1) -> ir.Value:
        """A u32 array index clamped to the last layer (of `per` 2-D layers each)."""
        b = self.b
        last = b.sub(b.udiv(self._u32_field(desc, D.LAYERS), _i64(per)), _i64(1))
        last = b.select(b.icmp_signed("<", last, _i64(0)), _i64(0), last)
        return b.select(b.icmp_unsigned(">", value, last), last, value)

    def _floor_index(self, u: ir.Value) -> ir.Value:
        """floor(u) as numpy's astype(int64) on x86 gives it: INT64_MIN for NaN and out of range."""
        b = self.b
        f = self.call_intrinsic("llvm.floor.f64", F64, [u])
        ok = b.and_(b.fcmp_ordered(">=", f, _f64(-2.0 ** 63)), b.fcmp_ordered("<", f, _f64(2.0 ** 63)))
        return b.select(ok, b.fptosi(f, I64), _i64(-(1 << 63)))

    def _texel_space(self, desc: ir.Value, normalized: ir.Value, axis: int, u: ir.Value) -> ir.Value:
        """A coordinate in texel units: normalized ones truncated to 24 fractional bits, then
        scaled by the size (the height counts as 1 when 0)."""
        b = self.b
        size = self._u32_field(desc, (D.WIDTH, D.HEIGHT, D.DEPTH)[axis])
        if axis == 1:
            size = b.select(b.icmp_unsigned("==", size, _i64(0)), _i64(1), size)
        fixed = self.call_intrinsic("llvm.floor.f64", F64, [b.fmul(u, _f64(COORD_SCALE))])
        scaled = b.fmul(b.fdiv(fixed, _f64(COORD_SCALE)), b.uitofp(size, F64))
        return b.select(normalized, scaled, u)

    def _cube_face(self, x: ir.Value, y: ir.Value, z: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(face, s, t) of an f32 direction, the programming guide's cubemap table: the major
        axis picks the face (z before y before x on ties, as the CPU model measured), s and t
        are (sc / ma + 1) / 2 in f32."""
        b = self.b
        fabs = lambda v: self.call_intrinsic("llvm.fabs.f32", F32, [v])  # noqa: E731
        ax, ay, az = fabs(x), fabs(y), fabs(z)
        on_z = b.and_(b.fcmp_ordered(">=", az, ax), b.fcmp_ordered(">=", az, ay))
        on_y = b.and_(b.not_(on_z), b.fcmp_ordered(">=", ay, ax))
        on_x = b.not_(b.or_(on_z, on_y))
        zero = ir.Constant(F32, 0.0)
        xp, yp, zp = (b.fcmp_ordered(">=", v, zero) for v in (x, y, z))
        pick = lambda vx, vy, vz: b.select(on_x, vx, b.select(on_y, vy, vz))  # noqa: E731
        face = pick(b.select(xp, _i64(0), _i64(1)), b.select(yp, _i64(2), _i64(3)), b.select(zp, _i64(4), _i64(5)))
        sc = pick(b.select(xp, b.fneg(z), z), x, b.select(zp, x, b.fneg(x)))
        tc = pick(b.fneg(y), b.select(yp, z, b.fneg(z)), b.fneg(y))
        ma = pick(ax, ay, az)
        one, two = ir.Constant(F32, 1.0), ir.Constant(F32, 2.0)
        s, t = (b.fdiv(b.fadd(b.fdiv(c, ma), one), two) for c in (sc, tc))
        return face, s, t

    def _spatial(self, desc: ir.Value, flags: ir.Value, geom: str, elems: list[ast.Operand]) -> tuple[list[ir.Value], ir.Value]:
        """(f64 coordinates in texel units, the 2-D layer) of a fetch with f32 coordinates; a
        cube's direction picks a face, a layer of its cube's six, addressed with normalized
        coordinates (the descriptor of a cubemap clamps)."""
        b = self.b
        dims, layered = GEOMETRY[geom]
        first = int(layered) + geom.endswith("ms")  # the objects hold one sample, which every number reads
        floats = [b.bitcast(self.read(c, "f32"), F32) for c in elems[first:first + dims]]
        index = b.zext(self.read(elems[0], "u32"), I64) if layered else _i64(0)
        if geom not in CUBES:
            normalized = self._has(flags, D.NORMALIZED_COORDS)
            layer = self._layer(desc, index) if layered else index
            return [self._texel_space(desc, normalized, axis, b.fpext(f, F64)) for axis, f in enumerate(floats)], layer
        face, s, t = self._cube_face(*floats)
        layer = b.add(b.mul(self._layer(desc, index, 6), _i64(6)), face)
        return [self._texel_space(desc, ir.Constant(I1, 1), axis, b.fpext(v, F64)) for axis, v in enumerate((s, t))], layer

    def _footprint(self, desc: ir.Value, us: list[ir.Value], clamp_edges: bool) -> tuple[list[ir.Value], list[ir.Value]]:
        """Per axis the lower texel of the filter footprint and the upper one's weight (of 256):
        x - 0.5 held with 8 fractional bits; with `clamp_edges`, clamp-mode axes first clamped to
        [0.5, n - 0.5] (filtering does, tld4 does not)."""
        b = self.b
        lows, alphas = [], []
        for axis, u in enumerate(us):
            if clamp_edges:
                size = self._u32_field(desc, (D.WIDTH, D.HEIGHT, D.DEPTH)[axis])
                n = b.uitofp(b.select(b.icmp_unsigned("==", size, _i64(0)), _i64(1), size), F64)
                clamp = b.icmp_unsigned("==", self._field(desc, D.MODES + 4 * axis, I32), ir.Constant(I32, D.CLAMP))
                low_edge = b.select(b.fcmp_ordered("<", u, _f64(0.5)), _f64(0.5), u)
                high = b.fsub(n, _f64(0.5))
                u = b.select(clamp, b.select(b.fcmp_ordered(">", low_edge, high), high, low_edge), u)
            fixed = self._floor_index(b.fadd(b.fmul(b.fsub(u, _f64(0.5)), _f64(256.0)), _f64(0.5)))
            lows.append(b.ashr(fixed, _i64(8)))
            alphas.append(b.and_(fixed, _i64(255)))
        return lows, alphas

    def _filter(self, desc: ir.Value, flags: ir.Value, us: list[ir.Value], layer: ir.Value) -> list[ir.Value]:
        """Linear filtering, the CPU model's steps (cpu/texture.py sample, _footprint,
        _corner_weights): per axis x - 0.5 held with 8 fractional bits (clamp axes first clamped
        to the edge texels' centres), integer corner weights in 1/256, the corners summed in f64
        in the model's order; 8-bit unorm texels blend as 16-bit unorm, half floats as the
        model's _half_blend. A 1-D fetch of an image of height 0 filters as 2-D at y = 0, except
        linear memory; the others filter on x alone (here: y weight 0, the second row left out)."""
        b = self.b
        item = self._field(desc, D.ITEM, I32)
        sizes = [self._u32_field(desc, D.WIDTH), self._u32_field(desc, D.HEIGHT), self._u32_field(desc, D.DEPTH)]
        one_axis = ir.Constant(I1, 0)  # a 1-D fetch the model filters on x alone
        if len(us) == 1:
            us = [us[0], _f64(0.0)]
            one_axis = b.or_(self._has(flags, D.LINEAR_MEMORY), b.icmp_unsigned("!=", sizes[1], _i64(0)))
        lows, alphas = self._footprint(desc, us, True)
        lows[1], alphas[1] = b.select(one_axis, _i64(0), lows[1]), b.select(one_axis, _i64(0), alphas[1])
        rnd = lambda v: b.ashr(b.add(v, _i64(128)), _i64(8))  # noqa: E731  (round(v / 256), ties up, v >= 0)
        a, c = alphas[0], alphas[1]
        slices = [(0, _i64(256))] if len(alphas) == 2 else [(0, b.sub(_i64(256), alphas[2])), (4, alphas[2])]
        weights = []
        for z, s in slices:
            upper_x = rnd(b.mul(s, a))
            lower_x = b.sub(s, upper_x)
            w3 = rnd(b.mul(upper_x, c))
            w0 = rnd(b.mul(lower_x, b.sub(_i64(256), c)))
            weights += [(z | 3, w3), (z | 1, b.sub(upper_x, w3)), (z, w0), (z | 2, b.sub(lower_x, w0))]
        corners = []  # (weight, the texel's channels, left out)
        for corner, weight in weights:
            idx = [b.add(low, _i64(corner >> axis & 1)) for axis, low in enumerate(lows)]
            skip = b.and_(one_axis, ir.Constant(I1, corner >> 1 & 1))  # the row the 1-D rule has not
            corners.append((b.sitofp(weight, F64), self._texel(desc, idx, layer), skip))
        is_half = b.and_(self._has(flags, D.FLOAT_FORMAT), b.icmp_unsigned("==", item, ir.Constant(I32, 2)))
        plain_block, half_block = self.llfn.append_basic_block("tex.blend"), self.llfn.append_basic_block("tex.half")
        done = self.llfn.append_basic_block("tex.blended")
        b.cbranch(is_half, half_block, plain_block)
        b.position_at_end(plain_block)
        unorm8 = b.and_(b.icmp_unsigned("==", item, ir.Constant(I32, 1)), b.not_(self._has(flags, D.SIGNED)))
        totals = [_f64(0.0)] * 4
        for w, texel, skip in corners:
            for ch, value in enumerate(texel):
                wide = self.call_intrinsic("llvm.rint.f64", F64, [b.fmul(value, _f64(65535.0))])
                totals[ch] = b.select(skip, totals[ch], b.fadd(totals[ch], b.fmul(w, b.select(unorm8, wide, value))))
        plain = []
        for total in totals:
            value = b.fdiv(total, _f64(256.0))
            rounded = self.call_intrinsic("llvm.floor.f64", F64, [b.fadd(value, _f64(0.5))])
            plain.append(b.select(unorm8, b.fdiv(rounded, _f64(65535.0)), value))
        plain_end = b.block
        b.branch(done)
        b.position_at_end(half_block)
        halves = self._half_blend(corners)
        half_end = b.block
        b.branch(done)
        b.position_at_end(done)
        return self._join(plain, plain_end, halves, half_end)

    def _exponent(self, v: ir.Value) -> ir.Value:
        """numpy's frexp(v)[1] - 1 of an f64 that is normal, 0 (-1000, as the model puts it),
        infinite or NaN (-1): the unbiased exponent field."""
        b = self.b
        field = b.and_(b.lshr(b.bitcast(v, I64), _i64(52)), _i64(0x7FF))
        value = b.select(b.icmp_unsigned("==", field, _i64(0x7FF)), _i64(-1), b.sub(field, _i64(1023)))
        return b.select(b.fcmp_unordered("==", v, _f64(0.0)), _i64(-1000), value)

    def _power_of_two(self, e: ir.Value) -> ir.Value:
        """2.0 ** e for e in f64's normal range."""
        return self.b.bitcast(self.b.shl(self.b.add(e, _i64(1023)), _i64(52)), F64)

    def _join(self, a: list[ir.Value], a_end: ir.Block, c: list[ir.Value], c_end: ir.Block) -> list[ir.Value]:
        """At the block both branches reach: each channel's f64 from whichever branch ran."""
        out = []
        for x, y in zip(a, c):
            phi = self.b.phi(F64)
            phi.add_incoming(x, a_end)
            phi.add_incoming(y, c_end)
            out.append(phi)
        return out

    def _half_blend(self, corners: list[tuple[ir.Value, list[ir.Value], ir.Value]]) -> list[ir.Value]:
        """The CPU model's _half_blend (measured on NVIDIA H200): the texels of nonzero weight
        aligned to the largest one's exponent E, truncated toward 0 to multiples of 2^(E - 14),
        blended exactly, the result rounded to a half's precision, ties away from zero."""
        b = self.b
        out = []
        for ch in range(4):
            top = _i64(-1000)
            for w, texel, skip in corners:
                counts = b.and_(b.not_(skip), b.fcmp_ordered("!=", w, _f64(0.0)))
                e = self._exponent(texel[ch])
                top = b.select(b.and_(counts, b.icmp_signed(">", e, top)), e, top)
            quantum = self._power_of_two(b.sub(top, _i64(HALF_ALIGN_BITS)))
            total = _f64(0.0)
            for w, texel, skip in corners:
                kept = b.fmul(b.fmul(w, self.call_intrinsic("llvm.trunc.f64", F64, [b.fdiv(texel[ch], quantum)])), quantum)
                total = b.select(skip, total, b.fadd(total, kept))
            total = b.fdiv(total, _f64(256.0))
            e = self._exponent(total)
            ulp = self._power_of_two(b.select(b.icmp_signed(">", b.sub(e, _i64(10)), _i64(-24)), b.sub(e, _i64(10)), _i64(-24)))
            magnitude = b.fmul(self.call_intrinsic("llvm.floor.f64", F64, [b.fadd(b.fdiv(
                self.call_intrinsic("llvm.fabs.f64", F64, [total]), ulp), _f64(0.5))]), ulp)
            out.append(self.call_intrinsic("llvm.copysign.f64", F64, [magnitude, total]))
        return out

    # ------------------------------------------------------------------ tex
    def op_tex(self, inst: ast.Instruction) -> None:
        """tex: the level(s) the LOD selects (a texture without levels: level 0), sampled; with
        linear mip filtering the two levels around the LOD, each rounded to f32 as the CPU model
        returns it, blended in f64 by the 8-bit weight (cpu/mipmap.py fetch). One sampling loop
        body serves both levels."""
        d, a, *rest = inst.operands
        geom = next((m for m in inst.mods if m in GEOMETRY), None)
        dtype, ctype = inst.types[-2], inst.types[-1]
        extra = len(rest) - (1 if inst.has("level") else 2 if inst.has("grad") else 0)
        if geom is None or extra or not isinstance(a, ast.Addr) or len(a.extra) != 1:
            raise unsupported(inst, UNSUPPORTED)
        b = self.b
        if isinstance(d, ast.PredOut):  # whether the texel is resident: always
            if not isinstance(d.pred, ast.Sink):
                self.write(d.pred, ir.Constant(I1, 1), "pred")
            d = d.dest
        desc = self._desc(inst, a.base, D.TEXTURE_MAGIC)
        flags = self._field(desc, D.FLAGS, I32)
        elems = _elems(a.extra[0])
        lower, upper, weight = self._mip_levels(inst, desc, flags, geom, elems, rest)
        blend = self._has(flags, D.MIP_LINEAR)
        pre, loop = b.block, self.llfn.append_basic_block("tex.level")
        again, done = self.llfn.append_basic_block("tex.upper"), self.llfn.append_basic_block("tex.levels")
        b.branch(loop)
        b.position_at_end(loop)
        second = b.phi(I1)  # the pass that samples the upper level of a blend
        second.add_incoming(ir.Constant(I1, 0), pre)
        first = [b.phi(F64) for _ in range(4)]  # the lower level's channels, in the second pass
        for phi in first:
            phi.add_incoming(_f64(0.0), pre)
        level = b.select(second, upper, lower)
        values = self._sample(b.gep(desc, [b.mul(level, _i64(D.SIZE))], source_etype=I8), geom, elems, ctype)
        b.cbranch(b.and_(blend, b.not_(second)), again, done)
        b.position_at_end(again)
        second.add_incoming(ir.Constant(I1, 1), again)
        for phi, value in zip(first, values):
            phi.add_incoming(value, again)
        b.branch(loop)
        b.position_at_end(done)
        as_f32 = lambda v: b.fpext(b.fptrunc(v, F32), F64)  # noqa: E731
        keep = b.fsub(_f64(1.0), weight)
        values = [b.select(blend, b.fadd(b.fmul(keep, as_f32(lo)), b.fmul(weight, as_f32(hi))), hi)
                  for lo, hi in zip(first, values)]
        self._results(d, values, flags, dtype)

    def _sample(self, desc: ir.Value, geom: str, elems: list[ast.Operand], ctype: str) -> list[ir.Value]:
        """The four channels (f64) one level's descriptor gives at the coordinates."""
        b = self.b
        flags = self._field(desc, D.FLAGS, I32)
        dims, layered = GEOMETRY[geom]
        if ctype == "s32":
            layer = self._layer(desc, b.zext(self.read(elems[0], "u32"), I64)) if layered else _i64(0)
            first = int(layered) + geom.endswith("ms")  # the objects hold one sample, which every number reads
            return self._texel(desc, [b.sext(self.read(c, "s32"), I64) for c in elems[first:first + dims]], layer)
        us, layer = self._spatial(desc, flags, geom, elems)
        point, linear = self.llfn.append_basic_block("tex.point"), self.llfn.append_basic_block("tex.linear")
        done = self.llfn.append_basic_block("tex.fetched")
        b.cbranch(self._has(flags, D.LINEAR_FILTER), linear, point)
        b.position_at_end(point)
        point_values = self._texel(desc, [self._floor_index(u) for u in us], layer)
        point_end = b.block
        b.branch(done)
        b.position_at_end(linear)
        linear_values = self._filter(desc, flags, us, layer)
        linear_end = b.block
        b.branch(done)
        b.position_at_end(done)
        return self._join(point_values, point_end, linear_values, linear_end)

    # ------------------------------------------------------------------ mipmap levels
    def _nan_max(self, x: ir.Value, y: ir.Value, smaller: bool = False) -> ir.Value:
        """numpy's maximum (minimum with `smaller`) of two f64: NaN if either is."""
        b = self.b
        pick = b.select(b.fcmp_ordered("<=" if smaller else ">=", x, y), x, y)
        return b.select(b.fcmp_unordered("uno", x, y), b.fadd(x, y), pick)

    def _mip_levels(self, inst: ast.Instruction, desc: ir.Value, flags: ir.Value, geom: str, elems: list[ast.Operand],
                    rest: list[ast.Operand]) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(lower level, upper level, the upper one's weight in f64) of cpu/mipmap.py's fetch:
        the LOD cut to 1/256 after the bias, clamped to the descriptor's clamps and the levels
        (NaN: 0); point mip filtering takes floor(LOD + 0.5) (both levels), linear the two around
        it, weighted by its fraction (gradient LODs: sharpened by anisotropy, miplod.blend_shape)."""
        b = self.b
        bias = self._field(desc, D.BIAS, F64)
        steps = _f64(miplod.LOD_STEPS)
        if inst.has("level"):  # cut to 8 fractional bits toward zero before the bias
            given = b.fpext(b.bitcast(self.read(rest[0], "f32"), F32), F64)
            lod = b.fdiv(self.call_intrinsic("llvm.trunc.f64", F64, [b.fmul(given, steps)]), steps)
        elif inst.has("grad"):
            lod = self._gradient_lod(desc, geom, elems, rest)
        else:  # LOD 0 without the bias: -bias, to which the bias is added as the model does
            lod = b.fneg(bias)
        lod = b.fdiv(self.call_intrinsic("llvm.floor.f64", F64, [b.fmul(b.fadd(lod, bias), steps)]), steps)
        lod = self._nan_max(self._nan_max(lod, self._field(desc, D.MIN_CLAMP, F64)),
                            self._field(desc, D.MAX_CLAMP, F64), smaller=True)
        top = b.uitofp(b.sub(self._u32_field(desc, D.LEVELS_COUNT), _i64(1)), F64)
        lod = b.select(b.fcmp_ordered(">", lod, _f64(0.0)), lod, _f64(0.0))  # NaN too
        lod = b.select(b.fcmp_ordered("<", lod, top), lod, top)
        nearest = b.fptosi(self.call_intrinsic("llvm.floor.f64", F64, [b.fadd(lod, _f64(0.5))]), I64)
        low = self.call_intrinsic("llvm.floor.f64", F64, [lod])
        fraction = b.fsub(lod, low)
        low = b.fptosi(low, I64)
        high = b.add(low, _i64(1))
        high = b.select(b.fcmp_ordered(">", b.sitofp(high, F64), top), low, high)
        if inst.has("grad"):  # the sharpened blend was measured for gradient LODs only
            slope, start = self._field(desc, D.BLEND_SLOPE, F64), self._field(desc, D.BLEND_START, F64)
            rounded = self.call_intrinsic("llvm.rint.f64", F64, [b.fmul(fraction, steps)])
            sharp = self.call_intrinsic("llvm.floor.f64", F64, [b.fmul(b.fsub(rounded, start), slope)])
            sharp = b.select(b.fcmp_ordered(">", sharp, _f64(0.0)), sharp, _f64(0.0))
            sharp = b.select(b.fcmp_ordered("<", sharp, steps), sharp, steps)
            fraction = b.fdiv(sharp, steps)
        blend = self._has(flags, D.MIP_LINEAR)
        return b.select(blend, low, nearest), b.select(blend, high, nearest), fraction

    def _gradient_lod(self, desc: ir.Value, geom: str, elems: list[ast.Operand], rest: list[ast.Operand]) -> ir.Value:
        """cpu/mipmap.py _gradient_lod: the gradients in level-0 texels (of the face coordinates
        on a cube), each component cut to GRADIENT_BITS fractional mantissa bits; the footprint's
        major axis; with anisotropy (2-D) at least the minor axis; its log2 through LOG2_TABLE."""
        b = self.b
        dims, layered = GEOMETRY[geom]
        as_f64 = lambda op: b.fpext(b.bitcast(self.read(op, "f32"), F32), F64)  # noqa: E731
        dx, dy = ([as_f64(e) for e in _elems(g)[:dims]] for g in rest)
        if geom in CUBES:  # the gradient of s, t = (sc / ma + 1) / 2 at the direction
            at = [as_f64(e) for e in elems[int(layered):int(layered) + 3]]
            sc, tc, ma = self._face_terms(at, at)
            two_ma2 = b.fmul(b.fmul(_f64(2.0), ma), ma)
            for g in (dx, dy):
                dsc, dtc, dma = self._face_terms(at, g)
                g[:] = [b.fdiv(b.fsub(b.fmul(dc, ma), b.fmul(c, dma)), two_ma2) for dc, c in ((dsc, sc), (dtc, tc))]
        height = self._u32_field(desc, D.HEIGHT)
        depth = self._u32_field(desc, D.DEPTH)
        one = lambda n: b.select(b.icmp_unsigned("==", n, _i64(0)), _i64(1), n)  # noqa: E731
        sizes = [b.uitofp(n, F64) for n in (self._u32_field(desc, D.WIDTH), one(height), one(depth))]
        # keep 1 + GRADIENT_BITS significant bits of each f64 (toward zero; NaN and inf stay)
        mask = _i64(-(1 << (52 - miplod.GRADIENT_BITS)))
        cut = lambda v: b.bitcast(b.and_(b.bitcast(v, I64), mask), F64)  # noqa: E731
        dx, dy = ([cut(b.fmul(v, sizes[k])) for k, v in enumerate(g)] for g in (dx, dy))
        diagonal = _f64(miplod.DIAGONAL)
        lengths = [self._length(dx), self._length(dy),
                   b.fmul(diagonal, self._length([b.fadd(p, q) for p, q in zip(dx, dy)])),
                   b.fmul(diagonal, self._length([b.fsub(p, q) for p, q in zip(dx, dy)]))]
        major = lengths[0]
        for length in lengths[1:]:
            major = self._nan_max(major, length)
        if len(dx) == 2:  # the minor axis, at least major / maxAnisotropy, where anisotropy applies
            aniso = self._u32_field(desc, D.ANISOTROPY)
            area = self.call_intrinsic("llvm.fabs.f64", F64, [b.fsub(b.fmul(dx[0], dy[1]), b.fmul(dx[1], dy[0]))])
            minor = b.fdiv(area, major)
            minor = b.select(b.fcmp_unordered("uno", minor, minor), _f64(0.0),
                             b.select(b.fcmp_ordered("==", minor, _f64(float("inf"))), _f64(1.7976931348623157e308), minor))
            sharper = self._nan_max(minor, b.fdiv(major, b.uitofp(aniso, F64)))
            major = b.select(b.icmp_unsigned(">", aniso, _i64(1)), sharper, major)
        return self._log2(major)

    def _face_terms(self, at: list[ir.Value], v: list[ir.Value]) -> tuple[ir.Value, ir.Value, ir.Value]:
        """cpu/mipmap.py _face_terms: (sc, tc, ma) of vector v on the face the direction `at` selects."""
        b = self.b
        fabs = lambda u: self.call_intrinsic("llvm.fabs.f64", F64, [u])  # noqa: E731
        x, y, z = at
        vx, vy, vz = v
        ax, ay, az = fabs(x), fabs(y), fabs(z)
        on_z = b.and_(b.fcmp_ordered(">=", az, ax), b.fcmp_ordered(">=", az, ay))
        on_y = b.and_(b.not_(on_z), b.fcmp_ordered(">=", ay, ax))
        on_x = b.not_(b.or_(on_z, on_y))
        sign = lambda c: b.select(b.fcmp_ordered(">=", c, _f64(0.0)), _f64(1.0), _f64(-1.0))  # noqa: E731
        pick = lambda px, py, pz: b.select(on_x, px, b.select(on_y, py, pz))  # noqa: E731
        sc = pick(b.fmul(b.fneg(sign(x)), vz), vx, b.fmul(sign(z), vx))
        tc = pick(b.fneg(vy), b.fmul(sign(y), vz), b.fneg(vy))
        ma = pick(b.fmul(sign(x), vx), b.fmul(sign(y), vy), b.fmul(sign(z), vz))
        return sc, tc, ma

    def _length(self, v: list[ir.Value]) -> ir.Value:
        """cpu/mipmap.py _length: the absolute components, longest first, weighted by AXIS_WEIGHTS."""
        b = self.b
        v = [self.call_intrinsic("llvm.fabs.f64", F64, [c]) for c in v]
        for i in range(len(v)):  # a sorting network, longest first
            for j in range(len(v) - 1 - i):
                longer = b.fcmp_ordered(">=", v[j], v[j + 1])
                v[j], v[j + 1] = b.select(longer, v[j], v[j + 1]), b.select(longer, v[j + 1], v[j])
        total = v[0]
        for weight, c in zip(miplod.AXIS_WEIGHTS[1:], v[1:]):
            total = b.fadd(total, b.fmul(_f64(weight), c))
        return total

    def _log2(self, x: ir.Value) -> ir.Value:
        """cpu/mipmap.py _log2 of an f64: for x > 0 its exponent plus the LOG2_TABLE entry of its
        top 8 mantissa bits in 1/256 (infinity, whose numpy mantissa is infinite, -1 there); else -inf."""
        b = self.b
        bits = b.bitcast(x, I64)
        exponent = b.sitofp(b.sub(b.and_(b.lshr(bits, _i64(52)), _i64(0x7FF)), _i64(1023)), F64)
        table = self._table(LOG2_SYMBOL, I8, miplod.LOG2_TABLE)
        index = b.and_(b.lshr(bits, _i64(44)), _i64(0xFF))
        entry = b.load(b.gep(table, [_i64(0), index], source_etype=table.value_type), typ=I8)
        value = b.fadd(exponent, b.fdiv(b.uitofp(entry, F64), _f64(miplod.LOD_STEPS)))
        value = b.select(b.fcmp_ordered("==", x, _f64(float("inf"))), _f64(-1.0), value)
        return b.select(b.fcmp_ordered(">", x, _f64(0.0)), value, _f64(float("-inf")))

    def _results(self, d: ast.Operand, values: list[ir.Value], flags: ir.Value, dtype: str) -> None:
        """Write the fetched channels (f64) as the destination type wants them."""
        b = self.b
        floats = self._has(flags, D.FLOAT_RESULT)
        words = [b.select(floats, b.bitcast(b.fptrunc(value, F32), I32), b.trunc(b.fptosi(value, I64), I32))
                 for value in values]
        if dtype in ("f16", "f16x2"):  # floats rounded to nearest even from the f32, integers' low 16 bits
            halves = [b.select(floats, b.bitcast(b.fptrunc(b.bitcast(w, F32), ir.HalfType()), I16), b.trunc(w, I16))
                      for w in words]
            if dtype == "f16x2":  # two channels a word, the first in the low half (as the CPU target packs)
                halves = [b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), ir.Constant(I32, 16)))
                          for lo, hi in zip(halves[0::2], halves[1::2])]
            words, dtype = halves, "b32" if dtype == "f16x2" else "f16"
        for dest, word in zip(_elems(d), words):
            self.write(dest, word, dtype)

    def op_tld4(self, inst: ast.Instruction) -> None:
        """tld4: channel `comp` of the four texels bilinear filtering would blend (unclamped
        footprint), in the order (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
        d, a, *rest = inst.operands
        geom = next((m for m in inst.mods if m in ("2d", "a2d", "cube", "acube")), None)
        if geom is None or rest or not isinstance(a, ast.Addr) or len(a.extra) != 1:
            raise unsupported(inst, UNSUPPORTED)
        desc = self._desc(inst, a.base, D.TEXTURE_MAGIC)
        flags = self._field(desc, D.FLAGS, I32)
        us, layer = self._spatial(desc, flags, geom, _elems(a.extra[0]))
        b = self.b
        (i, j), _ = self._footprint(desc, us, False)
        comp = "rgba".index(inst.mods[0])
        values = [self._texel(desc, [b.add(i, _i64(dx)), b.add(j, _i64(dy))], layer)[comp]
                  for dx, dy in ((0, 1), (1, 1), (1, 0), (0, 0))]
        self._results(d, values, flags, inst.types[-2])

    # ------------------------------------------------------------------ queries
    def _query(self, inst: ast.Instruction) -> None:
        """txq/suq, as the CPU model answers (cpu/texture.py _query): sizes (a level's: the size
        shifted right by the clamped level, at least 1 where the size is not 0), layers, the
        sampler's settings, the layout, the channel order and type (of level 0: the handle's block);
        the level count (1 without levels), one sample."""
        d, a, *lod = inst.operands
        what = inst.mods[-2] if len(inst.mods) >= 2 else None
        if not isinstance(a, ast.Addr) or a.extra or len(lod) != inst.has("level"):
            raise unsupported(inst, UNSUPPORTED)
        b = self.b
        desc = self._desc(inst, a.base, D.TEXTURE_MAGIC if inst.opcode == "txq" else D.SURFACE_MAGIC)
        flags = self._field(desc, D.FLAGS, I32)
        flag = lambda bit: b.zext(self._has(flags, bit), I32)  # noqa: E731
        sizes = {"width": D.WIDTH, "height": D.HEIGHT, "depth": D.DEPTH}
        if what in sizes:
            value = self._field(desc, sizes[what], I32)
            if lod:
                level = self.read(lod[0], "s32")
                level = b.select(b.icmp_signed("<", level, ir.Constant(I32, 0)), ir.Constant(I32, 0), level)
                shifted = b.select(b.icmp_signed(">", level, ir.Constant(I32, 31)), ir.Constant(I32, 0), b.lshr(value, level))
                least = b.select(b.icmp_unsigned("==", value, ir.Constant(I32, 0)), value, ir.Constant(I32, 1))
                value = b.select(b.icmp_unsigned("<", shifted, least), least, shifted)
        elif lod:
            raise unsupported(inst, UNSUPPORTED)
        elif what == "num_mipmap_levels":  # reached through a reference (the linker leaves out handles' queries)
            value = self._field(desc, D.LEVELS_COUNT, I32)
        elif what == "num_samples":
            value = ir.Constant(I32, 1)
        elif what == "force_unnormalized_coords":
            value = ir.Constant(I32, 0)
        elif what in ("array_size", "normalized_coords", "filter_mode", "memory_layout", "channel_order",
                      "channel_data_type"):
            layers = lambda: self._field(desc, D.LAYERS, I32)  # noqa: E731  (of a cubemap: its cubes)
            value = {"array_size": lambda: b.select(self._has(flags, D.CUBEMAP), b.udiv(layers(), ir.Constant(I32, 6)), layers()),
                     "normalized_coords": lambda: flag(D.NORMALIZED_COORDS), "filter_mode": lambda: flag(D.LINEAR_FILTER),
                     "memory_layout": lambda: flag(D.PITCH_LINEAR),
                     "channel_order": lambda: self._field(desc, D.CHANNEL_ORDER, I32),
                     "channel_data_type": lambda: self._field(desc, D.CHANNEL_DATA_TYPE, I32)}[what]()
        elif what in ("addr_mode_0", "addr_mode_1", "addr_mode_2"):
            value = b.zext(self._field(desc, D.ADDRESS_MODES + int(what[-1]), I8), I32)
        else:
            raise unsupported(inst, UNSUPPORTED)
        self.write(d, value, "b32")

    op_txq = op_suq = _query

    def op_istypep(self, inst: ast.Instruction) -> None:
        """False whatever the handle: an NVIDIA H100 answers false for texture and surface object
        handles of every kind, and a reference answers as the object it holds (docs/semantics.md).
        A name must still be a reference (module variable or parameter)."""
        d, a = inst.operands
        if isinstance(a, ast.Sym) and self._reference(inst, a)[1] not in OPAQUE_TYPES:
            raise unsupported(inst, f"{a.name} is not a texture, sampler or surface reference")
        self.write(d, ir.Constant(I1, 0), "pred")

    # ------------------------------------------------------------------ surfaces
    def _surface(self, inst: ast.Instruction, addr: ast.Addr) -> tuple[ir.Value, ir.Value, int, ir.Value]:
        """(the address of the access, whether it is accessed, component bits, the descriptor) of
        suld.b/sust.b/sured, with the boundary mode applied: .trap faults outside, .clamp and .zero
        access the clamped coordinates (.zero then reads 0 or stores nothing). x is in bytes,
        for .p (sured only) in elements."""
        geom = next((m for m in inst.mods if m in GEOMETRY and not m.endswith("ms")), None)
        mode = inst.mods[-1]
        bits_mod = inst.types[-1] if inst.types else ""
        formatted = inst.mods[0] == "p"
        if (geom is None or mode not in ("trap", "clamp", "zero") or bits_mod[1:] not in ("8", "16", "32", "64")
                or (formatted and inst.opcode == "suld")):
            raise unsupported(inst, UNSUPPORTED)
        b = self.b
        bits = int(bits_mod[1:])
        count = 4 if inst.has("v4") else 2 if inst.has("v2") else 1
        size = bits // 8 * count
        desc = self._desc(inst, addr.base, D.SURFACE_MAGIC)
        dims, layered = GEOMETRY[geom]
        elems = _elems(addr.extra[0])
        xs = [b.sext(self.read(e, "s32"), I64) for e in elems[int(layered):int(layered) + dims]]
        element = self._u32_field(desc, D.ELEMENT)
        row_bytes = b.mul(self._u32_field(desc, D.WIDTH), element)
        one = lambda v: b.select(b.icmp_signed("<", v, _i64(1)), _i64(1), v)  # noqa: E731
        accessed = _i64(size)
        if formatted:  # the element's first bytes: inside when the whole element is (sust.p: stores it)
            xs[0] = b.mul(xs[0], element)
            accessed = element if inst.opcode == "sust" else b.select(b.icmp_signed(">", element, accessed), element, accessed)
        limits = [b.add(b.sub(row_bytes, accessed), _i64(1)), one(self._u32_field(desc, D.HEIGHT)),
                  one(self._u32_field(desc, D.DEPTH))]
        layers = one(self._u32_field(desc, D.LAYERS))
        layer = b.zext(self.read(elems[0], "u32"), I64) if layered else _i64(0)
        inside = b.icmp_signed("<", layer, layers)
        for axis, x in enumerate(xs):
            inside = b.and_(inside, b.and_(b.icmp_signed(">=", x, _i64(0)), b.icmp_signed("<", x, limits[axis])))
        if mode == "trap":
            self._fault_unless(inside)
        offset = b.mul(b.select(b.icmp_signed(">", layer, b.sub(layers, _i64(1))), b.sub(layers, _i64(1)), layer),
                       self._field(desc, D.LAYER_STRIDE, I64))
        strides = [_i64(1), self._field(desc, D.ROW, I64), self._field(desc, D.SLICE, I64)]
        for axis, x in enumerate(xs):
            top = b.sub(limits[axis], _i64(1))
            top = b.select(b.icmp_signed("<", top, _i64(0)), _i64(0), top)
            x = b.select(b.icmp_signed("<", x, _i64(0)), _i64(0), b.select(b.icmp_signed(">", x, top), top, x))
            offset = b.add(offset, b.mul(x, strides[axis]))
        return b.add(self._field(desc, D.BASE, I64), offset), inside if mode == "zero" else ir.Constant(I1, 1), bits, desc

    def _components(self, address: ir.Value, bits: int, count: int) -> list[ir.Value]:
        return [self.b.inttoptr(self.b.add(address, _i64(k * bits // 8)), GLOBAL) for k in range(count)]

    def op_suld(self, inst: ast.Instruction) -> None:
        d, a = inst.operands
        address, keep, bits, _ = self._surface(inst, a)
        ptrs = self._components(address, bits, len(_elems(d)))
        b = self.b
        for dest, ptr in zip(_elems(d), ptrs):
            head = b.block
            with b.if_then(keep):
                value = b.load(ptr, typ=ir.IntType(bits), align=1)
                got = b.block
            phi = b.phi(ir.IntType(bits))
            phi.add_incoming(value, got)
            phi.add_incoming(ir.Constant(ir.IntType(bits), 0), head)
            self.write(dest, phi, inst.types[-1])

    def _store_formatted(self, desc: ir.Value, address: ir.Value, words: list[ir.Value]) -> None:
        """sust.p: the words into the texel's first channels, R, G, B, A in order, converted as
        the CPU model's _format does (f32 data rounded to the float format, s32/u32 data
        saturated to the integer format); words past the texel's channels are dropped, channels
        past the words keep their bytes."""
        b = self.b
        item, flags = self._field(desc, D.ITEM, I32), self._field(desc, D.FLAGS, I32)
        signed, is_float = self._has(flags, D.SIGNED), self._has(flags, D.FLOAT_FORMAT)
        channels = self._field(desc, D.CHANNELS, I32)

        def saturated(word: ir.Value, bits: int) -> ir.Value:
            lo, hi = ir.Constant(I32, -(1 << bits - 1)), ir.Constant(I32, (1 << bits - 1) - 1)
            as_signed = b.select(b.icmp_signed("<", word, lo), lo, b.select(b.icmp_signed(">", word, hi), hi, word))
            top = ir.Constant(I32, (1 << bits) - 1)
            return b.trunc(b.select(signed, as_signed, b.select(b.icmp_unsigned(">", word, top), top, word)), ir.IntType(bits))

        for c, word in enumerate(words):
            with b.if_then(b.icmp_unsigned(">", channels, ir.Constant(I32, c))):
                ptr = b.inttoptr(b.add(address, b.mul(_i64(c), b.zext(item, I64))), GLOBAL)
                for size in (1, 2, 4):
                    with b.if_then(b.icmp_unsigned("==", item, ir.Constant(I32, size))):
                        if size == 4:  # f32, s32 and u32 data are stored as they are
                            value = word
                        else:
                            value = saturated(word, 8 * size)
                            if size == 2:
                                half = b.bitcast(b.fptrunc(b.bitcast(word, F32), ir.HalfType()), I16)
                                value = b.select(is_float, half, value)
                        b.store(value, ptr, align=1)

    def op_sust(self, inst: ast.Instruction) -> None:
        """The lanes store one after another, lowest lane first (a waterfall on readfirstlane), so
        that where accesses overlap the last lane's bytes stay, as in the CPU target's model."""
        a, c = inst.operands
        address, keep, bits, desc = self._surface(inst, a)
        ptrs = self._components(address, bits, len(_elems(c)))
        values = [self.read(src, inst.types[-1]) for src in _elems(c)]
        formatted = inst.mods[0] == "p"
        b = self.b
        lane = self.hw_lane()
        loop, turn, latch, done = (self.llfn.append_basic_block(f"sust.{n}") for n in ("loop", "turn", "latch", "done"))
        b.branch(loop)
        b.position_at_end(loop)
        mine = b.icmp_unsigned("==", lane, self.call_intrinsic("llvm.amdgcn.readfirstlane.i32", I32, [lane]))
        b.cbranch(mine, turn, latch)
        b.position_at_end(turn)  # inside the loop, so that the lanes' turns follow each other
        with b.if_then(keep):
            if formatted:
                self._store_formatted(desc, address, values)
            else:
                for value, ptr in zip(values, ptrs):
                    b.store(value, ptr, align=1)
        b.branch(latch)
        b.position_at_end(latch)  # leave on a copy of `mine` LLVM cannot see through: else it moves the turn after the loop
        leave = b.asm(ir.FunctionType(I32, [I32]), "", "=v,0", [b.zext(mine, I32)], True)
        b.cbranch(b.icmp_unsigned("!=", leave, ir.Constant(I32, 0)), done, loop)
        b.position_at_end(done)

    def op_sured(self, inst: ast.Instruction) -> None:
        """sured: an atomic reduction into the cell at the access's offset rounded down to the
        access size (as the CPU model drops a misaligned offset's low bits); .b takes min/max's
        signedness from the type, .p from the surface format."""
        a, c = inst.operands
        address, keep, bits, desc = self._surface(inst, a)
        b = self.b
        op = inst.mods[1]
        value = self.read(c, inst.types[-1])
        ptr = b.inttoptr(b.and_(address, _i64(-(bits // 8))), GLOBAL)
        with b.if_then(keep):
            if op not in ("min", "max"):
                b.atomic_rmw(op, ptr, value, "monotonic")
            elif inst.mods[0] == "b":
                b.atomic_rmw(op if inst.types[-1][0] == "s" else "u" + op, ptr, value, "monotonic")
            else:
                signed = self._has(self._field(desc, D.FLAGS, I32), D.SIGNED)
                with b.if_else(signed) as (then, otherwise):
                    with then:
                        b.atomic_rmw(op, ptr, value, "monotonic")
                    with otherwise:
                        b.atomic_rmw("u" + op, ptr, value, "monotonic")
