"""Texture and surface instructions on AMDGPU, sampled in software.

A texture or surface object's handle is the device address of its descriptor block
(compiler/texdesc.py, written by the HIP backend when the object is created). Each thread
reads the fields it needs and computes what the CPU target's model computes (cpu/texture.py;
the rules are docs/semantics.md's), in the same arithmetic, so results agree bit for bit:
normalized coordinates truncated to 24 fractional bits and scaled in f64, point sampling at
texel floor(x), address modes on texel indices, channel values in f64 (normalized-float reads
max(t / max, -1)), the result rounded once to f32 or truncated to a 32-bit integer.

Implemented: tex (.1d/.2d/.3d/.a1d/.a2d/.2dms/.a2dms, also .level/.grad at level 0, f32 or s32 coordinates,
f32/s32/u32/f16/f16x2 results, point and linear filtering), tld4 (.2d/.a2d), every txq/suq query,
suld.b/sust.b/sured (.trap/.clamp/.zero). Every other form is refused by name; the HIP backend refuses
objects this lowering cannot sample (docs/amdgpu.md). An object of the wrong kind (its magic word) or a .trap access outside a surface faults with a
load from address 0 (CUDA reports 700 for both; a trap would be 719).
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler import texdesc as D
from zluda_py.compiler.errors import unsupported
from zluda_py.ptx import ast

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
GLOBAL = ir.PointerType(addrspace=1)
GEOMETRY = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True),  # dims, layered
            "2dms": (2, False), "a2dms": (2, True)}  # multisample: a sample number follows the layer
COORD_SCALE = float(1 << 24)  # cpu/texture.py COORD_BITS
UNSUPPORTED = "textures, surfaces: this form is not supported on AMDGPU yet"


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
        if not isinstance(handle, ast.Reg):
            raise unsupported(inst, f"{UNSUPPORTED} (texture and surface references)")
        desc = self.b.inttoptr(self.read(handle, "u64"), GLOBAL)
        self._fault_unless(self.b.icmp_unsigned("==", self._field(desc, D.MAGIC, I32), ir.Constant(I32, magic)))
        return desc

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
    def _channel(self, addr: ir.Value, item: ir.Value, flags: ir.Value, scale: ir.Value) -> ir.Value:
        """One channel at byte address `addr` as f64 (the CPU model's value)."""
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
        return b.select(b.fcmp_ordered("!=", scale, _f64(0.0)), normalized, phi)

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
                value = self._channel(b.add(addr, b.mul(b.zext(item, I64), _i64(c))), item, flags, scale)
                got = b.block
            phi = b.phi(F64)
            phi.add_incoming(value, got)
            phi.add_incoming(_f64(1.0 if c == 3 else 0.0), head)
            border = self._field(desc, D.BORDER + 8 * c, F64)
            out.append(b.select(inside, phi, border))
        return out

    def _layer(self, desc: ir.Value, value: ir.Value) -> ir.Value:
        """A u32 array index clamped to the last layer."""
        b = self.b
        last = b.sub(self._u32_field(desc, D.LAYERS), _i64(1))
        last = b.select(b.icmp_signed("<", last, _i64(0)), _i64(0), last)
        return b.select(b.icmp_unsigned(">", value, last), last, value)

    def _floor_index(self, u: ir.Value) -> ir.Value:
        """floor(u) as numpy's astype(int64) on x86 gives it: INT64_MIN for NaN and out of range."""
        b = self.b
        f = self.call_intrinsic("llvm.floor.f64", F64, [u])
        ok = b.and_(b.fcmp_ordered(">=", f, _f64(-2.0 ** 63)), b.fcmp_ordered("<", f, _f64(2.0 ** 63)))
        return b.select(ok, b.fptosi(f, I64), _i64(-(1 << 63)))

    def _texel_space(self, desc: ir.Value, flags: ir.Value, axis: int, u: ir.Value) -> ir.Value:
        """A coordinate in texel units: normalized ones truncated to 24 fractional bits, then
        scaled by the size (the height counts as 1 when 0)."""
        b = self.b
        size = self._u32_field(desc, (D.WIDTH, D.HEIGHT, D.DEPTH)[axis])
        if axis == 1:
            size = b.select(b.icmp_unsigned("==", size, _i64(0)), _i64(1), size)
        fixed = self.call_intrinsic("llvm.floor.f64", F64, [b.fmul(u, _f64(COORD_SCALE))])
        scaled = b.fmul(b.fdiv(fixed, _f64(COORD_SCALE)), b.uitofp(size, F64))
        return b.select(self._has(flags, D.NORMALIZED_COORDS), scaled, u)

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
        in the model's order; 8-bit unorm texels blend as 16-bit unorm. A 1-D fetch of an image of
        height 0 filters as 2-D at y = 0, except linear memory; the others filter on x alone (here:
        y weight 0, the second row left out). Half-float texels fault: the backend refuses them."""
        b = self.b
        item = self._field(desc, D.ITEM, I32)
        self._fault_unless(b.not_(b.and_(self._has(flags, D.FLOAT_FORMAT), b.icmp_unsigned("==", item, ir.Constant(I32, 2)))))
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
        unorm8 = b.and_(b.icmp_unsigned("==", item, ir.Constant(I32, 1)), b.not_(self._has(flags, D.SIGNED)))
        totals = [_f64(0.0)] * 4
        for corner, weight in weights:
            idx = [b.add(low, _i64(corner >> axis & 1)) for axis, low in enumerate(lows)]
            texel = self._texel(desc, idx, layer)
            w = b.sitofp(weight, F64)
            skip = b.and_(one_axis, ir.Constant(I1, corner >> 1 & 1))  # the row the 1-D rule has not
            for ch, value in enumerate(texel):
                wide = self.call_intrinsic("llvm.rint.f64", F64, [b.fmul(value, _f64(65535.0))])
                total = b.fadd(totals[ch], b.fmul(w, b.select(unorm8, wide, value)))
                totals[ch] = b.select(skip, totals[ch], total)
        out = []
        for total in totals:
            plain = b.fdiv(total, _f64(256.0))
            rounded = self.call_intrinsic("llvm.floor.f64", F64, [b.fadd(plain, _f64(0.5))])
            out.append(b.select(unorm8, b.fdiv(rounded, _f64(65535.0)), plain))
        return out

    # ------------------------------------------------------------------ tex
    def op_tex(self, inst: ast.Instruction) -> None:
        """tex. The HIP backend makes no mipmapped objects, so .level and .grad sample level 0, as
        the CPU model does for a texture without levels (the operands are not read)."""
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
        dims, layered = GEOMETRY[geom]
        elems = _elems(a.extra[0])
        layer = self._layer(desc, b.zext(self.read(elems[0], "u32"), I64)) if layered else _i64(0)
        first = int(layered) + geom.endswith("ms")  # the objects hold one sample, which every number reads
        coords = elems[first:first + dims]
        if ctype == "s32":
            values = self._texel(desc, [b.sext(self.read(c, "s32"), I64) for c in coords], layer)
        else:
            us = [self._texel_space(desc, flags, axis, b.fpext(b.bitcast(self.read(c, "f32"), F32), F64))
                  for axis, c in enumerate(coords)]
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
            values = []
            for p, q in zip(point_values, linear_values):
                phi = b.phi(F64)
                phi.add_incoming(p, point_end)
                phi.add_incoming(q, linear_end)
                values.append(phi)
        self._results(d, values, flags, dtype)

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
        geom = next((m for m in inst.mods if m in ("2d", "a2d")), None)
        if geom is None or rest or not isinstance(a, ast.Addr) or len(a.extra) != 1:
            raise unsupported(inst, UNSUPPORTED)
        b = self.b
        desc = self._desc(inst, a.base, D.TEXTURE_MAGIC)
        flags = self._field(desc, D.FLAGS, I32)
        elems = _elems(a.extra[0])
        layered = geom == "a2d"
        layer = self._layer(desc, b.zext(self.read(elems[0], "u32"), I64)) if layered else _i64(0)
        us = [self._texel_space(desc, flags, axis, b.fpext(b.bitcast(self.read(c, "f32"), F32), F64))
              for axis, c in enumerate(elems[int(layered):int(layered) + 2])]
        (i, j), _ = self._footprint(desc, us, False)
        comp = "rgba".index(inst.mods[0])
        values = [self._texel(desc, [b.add(i, _i64(dx)), b.add(j, _i64(dy))], layer)[comp]
                  for dx, dy in ((0, 1), (1, 1), (1, 0), (0, 0))]
        self._results(d, values, flags, inst.types[-2])

    # ------------------------------------------------------------------ queries
    def _query(self, inst: ast.Instruction) -> None:
        """txq/suq, as the CPU model answers (cpu/texture.py _query): sizes (a level's: the size
        shifted right by the clamped level, at least 1 where the size is not 0), layers, the
        sampler's settings, the layout, the channel order and type; one level, one sample."""
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
        elif what in ("num_mipmap_levels", "num_samples"):
            value = ir.Constant(I32, 1)
        elif what == "force_unnormalized_coords":
            value = ir.Constant(I32, 0)
        elif what in ("array_size", "normalized_coords", "filter_mode", "memory_layout", "channel_order",
                      "channel_data_type"):
            value = {"array_size": lambda: self._field(desc, D.LAYERS, I32),
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
                or (formatted and inst.opcode != "sured")):
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
        if formatted:  # the element's first bytes: inside when the whole element is
            xs[0] = b.mul(xs[0], element)
            accessed = b.select(b.icmp_signed(">", element, accessed), element, accessed)
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

    def op_sust(self, inst: ast.Instruction) -> None:
        """The lanes store one after another, lowest lane first (a waterfall on readfirstlane), so
        that where accesses overlap the last lane's bytes stay, as in the CPU target's model."""
        a, c = inst.operands
        address, keep, bits, _ = self._surface(inst, a)
        ptrs = self._components(address, bits, len(_elems(c)))
        values = [self.read(src, inst.types[-1]) for src in _elems(c)]
        b = self.b
        lane = self.hw_lane()
        loop, turn, latch, done = (self.llfn.append_basic_block(f"sust.{n}") for n in ("loop", "turn", "latch", "done"))
        b.branch(loop)
        b.position_at_end(loop)
        mine = b.icmp_unsigned("==", lane, self.call_intrinsic("llvm.amdgcn.readfirstlane.i32", I32, [lane]))
        b.cbranch(mine, turn, latch)
        b.position_at_end(turn)  # inside the loop, so that the lanes' turns follow each other
        with b.if_then(keep):
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
