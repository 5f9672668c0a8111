"""One wave's state and the execution of one instruction.

Decoding is tinygrad's (`tinygrad.renderer.amd.decode_inst`). Semantics: ALU, compare, branch and
exec-mask instructions run AMD's pseudocode compiled by `pcode.py`; memory, cross-lane and
program-control instructions, and the few ALU ones whose pseudocode needs more than 64-bit
arithmetic, are hand-written below (`_HANDLERS`). Anything else stops the launch with an
`EmulatorError` naming the instruction and its address.
"""

from __future__ import annotations

import importlib
import re
import struct
import time
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable

import numpy as np
from tinygrad.renderer.amd import decode_inst
from tinygrad.renderer.amd.dsl import Inst, Reg, SrcField, VGPRField

from zluda_py.emulator import memory as memmod
from zluda_py.emulator import strict
from zluda_py.emulator.errors import EmulatorError, MemoryFault, StackOverflow, Trapped
from zluda_py.emulator.pcode import BOOL, LaneVarying, PcodeUnsupported, Type, compile_pcode, convert, dtype, reinterpret

if TYPE_CHECKING:
    from zluda_py.emulator.launch import Workgroup

_F32_CONST = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
              248: 0.15915494309189535}
_VCC, _EXEC = 106, 126


def _pcode_table(family: str) -> dict:
    return importlib.import_module(f"tinygrad.runtime.autogen.amd.{family}.str_pcode").PCODE


class Decoded:
    """A decoded instruction with its literal constant (tinygrad leaves some literals unread).
    `inst` is a snapshot of the fields: tinygrad decodes a field on every attribute access,
    which would dominate the time of a step. `fn` and `ctx_args` cache what executing it needs."""

    __slots__ = ("inst", "size", "literal", "name", "fmt", "fn", "ctx_args", "op_bits", "halves", "run", "mods")

    def __init__(self, inst: "Inst | SimpleNamespace", size: int, literal: int | None):
        self.op_bits: dict[str, int] = {}
        if isinstance(inst, Inst):
            fields = {n: getattr(inst, n) for n, _ in type(inst)._fields}
            self.name = inst.op_name if "op" in fields else type(inst).__name__
            self.fmt = type(inst).__name__.removesuffix("_LIT")  # VOP3SD_LIT is a VOP3SD with a literal
            self.op_bits = inst.op_bits if "op" in fields else {}
            inst = SimpleNamespace(**fields)
        self.inst, self.size, self.literal = inst, size, literal
        self.fn: Callable | None = None
        self.ctx_args: tuple | None = None
        self.halves = (0, False)  # 16-bit operands: (high-half bits as opsel lays them out, result into a half)
        self.run: Callable | None = None  # the handler `step` calls (`_handler`)
        self.mods: tuple | None = None  # Ctx's view of the source modifiers (`_source_modifiers`)

    def copy(self, name: str) -> "Decoded":
        """The same instruction under another operation name (the halves of DS 2-address forms)."""
        d = Decoded(self.inst, self.size, self.literal)
        d.name, d.fmt, d.op_bits = name, self.fmt, self.op_bits
        return d


# cache invalidates tinygrad's tables cannot decode (gfx11 MUBUF without operands): no-ops here
_UNDECODED = {("rdna3", bytes.fromhex("0000ace000000000")): "BUFFER_GL0_INV",
              ("rdna3", bytes.fromhex("0000b0e000000000")): "BUFFER_GL1_INV"}


class Program:
    """The kernel's code, decoded lazily and cached per address."""

    def __init__(self, text: bytes, base: int, family: str):
        self.text, self.base, self.family = text, base, family
        self.pcode = _pcode_table(family)
        self._cache: dict[int, Decoded] = {}

    def at(self, pc: int) -> Decoded:
        d = self._cache.get(pc)
        if d is None:
            off = pc - self.base
            if not 0 <= off < len(self.text):
                raise EmulatorError(f"jump to {pc:#x}, outside the code")
            raw = self.text[off:off + 20]
            bare = _UNDECODED.get((self.family, raw[:8]))
            if bare is not None:
                d = self._cache[pc] = Decoded(SimpleNamespace(), 8, None)
                d.name, d.fmt = bare, "MUBUF"
                return d
            try:
                inst = decode_inst(raw, self.family)
            except Exception as exc:
                raise EmulatorError(f"cannot decode the instruction at {pc:#x} ({raw[:8].hex()}): {exc}") from exc
            size, literal = inst.size(), getattr(inst, "literal", None)
            if literal is None and any(isinstance(f, SrcField) and not isinstance(f, VGPRField)
                                       and getattr(inst, n).offset == 255 for n, f in type(inst)._fields):
                literal = int.from_bytes(raw[size:size + 4], "little")
                size += 4
            d = self._cache[pc] = Decoded(inst, size, literal)
        return d


class Wave:
    def __init__(self, program: Program, lanes: int, wg: "Workgroup", index: int, scratch_size: int, stack: int = 0):
        self.program, self.lanes, self.wg, self.index = program, lanes, wg, index
        self.rdna = program.family != "cdna"
        self.m0 = 125 if self.rdna else 124
        self.sgpr = np.zeros(256, np.uint32)
        self.vgpr = np.zeros((512, lanes), np.uint32)
        self.scc = 0
        self.pc = 0
        self.done = False
        self.at_barrier = False
        self.yielded = False  # s_sleep ended the wave's turn: the others run before it polls again
        self.scratch = np.zeros((lanes, max(scratch_size, 0)), np.uint8)
        self.stack = stack  # bytes of call stack at the end of scratch (a kernel with a dynamic stack)
        self.lane_ids = np.arange(lanes, dtype=np.uint32)
        # cooperative launches (launch._run_resident): what each load returned last, by PC, so
        # that a wave polling memory nobody has changed ends its turn too
        self.polls: dict[int, bytes] | None = None
        self.pending: list[strict.Pending] | None = None  # strict mode: outstanding memory operations

    # lane masks (EXEC, VCC and compare results are lanes bits wide)
    def mask(self, reg: int) -> int:
        lo = int(self.sgpr[reg])
        return lo if self.lanes == 32 else lo | int(self.sgpr[reg + 1]) << 32

    def set_mask(self, reg: int, value: int) -> None:
        self.sgpr[reg] = value & 0xFFFFFFFF
        if self.lanes == 64:
            self.sgpr[reg + 1] = (value >> 32) & 0xFFFFFFFF

    @property
    def exec(self) -> int:
        return self.mask(_EXEC)

    def exec_lanes(self) -> np.ndarray:
        return mask_lanes(self.exec, self.lanes)

    def polled(self, data: np.ndarray, addrs: "np.ndarray | int") -> None:
        """A load at this PC returned `data` from `addrs`: the same as last time ends the turn."""
        if self.polls is not None:
            seen = data.tobytes() + np.asarray(addrs).tobytes()
            self.yielded = self.yielded or self.polls.get(self.pc) == seen
            self.polls[self.pc] = seen

    def where(self, what: str) -> str:
        return f"{what} at {self.pc:#x} (kernel offset {self.pc - self.program.base:#x})"

    # operands
    def read_raw(self, reg: Reg, bits: int, float64: bool, literal: int | None) -> np.ndarray:
        """The operand's bits as uint64, shape (lanes,) for VGPRs and (1,) otherwise."""
        off = reg.offset
        wide = bits > 32
        if off >= 256:
            v = off - 256
            lo = self.vgpr[v].astype(np.uint64)
            return lo | (self.vgpr[v + 1].astype(np.uint64) << np.uint64(32)) if wide else lo
        if off < 128 and not (self.rdna and off == 124):
            lo = int(self.sgpr[off])
            value = lo | (int(self.sgpr[off + 1]) << 32 if wide else 0)
        elif off == 124:  # NULL on RDNA
            value = 0
        elif 128 <= off <= 192:
            value = off - 128
        elif 193 <= off <= 208:
            value = (-(off - 192)) & (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF)
        elif off in _F32_CONST:
            f = _F32_CONST[off]
            # a 64-bit operand gets the f64 pattern whatever its type (LLVM compares 64-bit integers with 1.0)
            value = struct.unpack("<Q", struct.pack("<d", f))[0] if wide else (
                int(np.float16(f).view(np.uint16)) if bits == 16 else struct.unpack("<I", struct.pack("<f", f))[0])
        elif off == 235:
            value = memmod.SHARED_APERTURE << 32 if wide else memmod.SHARED_APERTURE
        elif off == 237:
            value = memmod.PRIVATE_APERTURE << 32 if wide else memmod.PRIVATE_APERTURE
        elif off == 251:
            value = int(self.mask(_VCC) == 0)
        elif off == 252:
            value = int(self.exec == 0)
        elif off == 253:
            value = self.scc
        elif off == 255 and literal is not None:
            value = literal << 32 if float64 else literal
        else:
            raise EmulatorError(self.where(f"operand {reg!r} (encoding {off})"))
        return np.array([value], np.uint64)

    def write_sgpr(self, reg: int, value: int, bits: int) -> None:
        if reg == 124 and self.rdna:  # NULL
            return
        self.sgpr[reg] = value & 0xFFFFFFFF
        if bits > 32:
            self.sgpr[reg + 1] = (value >> 32) & 0xFFFFFFFF

    def write_vgpr(self, reg: int, raw: np.ndarray, bits: int, lanes: np.ndarray) -> None:
        """The low 32 bits of raw (one value or one per lane) into `reg` (and the high ones into
        reg + 1 for 64-bit values) in the lanes `lanes` (a bool mask) selects."""
        raw = raw.astype(np.uint64, copy=False)
        np.copyto(self.vgpr[reg], raw, casting="unsafe", where=lanes)  # unsafe: truncates to 32 bits
        if bits > 32:
            np.copyto(self.vgpr[reg + 1], raw >> np.uint64(32), casting="unsafe", where=lanes)


@lru_cache(maxsize=4096)
def mask_lanes(mask: int, lanes: int) -> np.ndarray:
    """A lane mask as a (read-only) bool array, lane 0 first."""
    bits = np.unpackbits(np.frombuffer(mask.to_bytes(8, "little"), np.uint8), bitorder="little")[:lanes].astype(bool)
    bits.flags.writeable = False
    return bits


def lanes_mask(bits: np.ndarray) -> int:
    """A bool array (lane 0 first) as a lane mask."""
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def _source_modifiers(d: Decoded) -> tuple[int, int, bool, bool]:
    """(abs bits, neg bits, SDWA, none of these nor a 16-bit high half): how `Ctx` reads sources."""
    vop3 = d.fmt.startswith("VOP3")
    abs_, neg = (getattr(d.inst, "abs", 0), getattr(d.inst, "neg", 0)) if vop3 else (0, 0)
    sdwa = d.fmt in _SDWA
    if sdwa:
        i = d.inst
        abs_, neg = i.src0_abs | i.src1_abs << 1, i.src0_neg | i.src1_neg << 1
    return abs_, neg, sdwa, not (abs_ or neg or sdwa or d.halves[0] & 7)


class Ctx:
    """The operands the compiled pseudocode reads and writes for one instruction. Writes are
    collected and applied by `commit`, so every source is read before any destination changes;
    a read of an already-written name sees the new value, as the pseudocode expects."""

    def __init__(self, wave: Wave, d: Decoded, srcs: list[Reg | str | None], dst: int | None, valu: bool,
                 vcc_in: Reg | None = None, vcc_out: int | None = None, mask_dst: int | None = None):
        self.w, self.d, self.srcs, self.dst, self.valu = wave, d, srcs, dst, valu
        self.vcc_in, self.vcc_out, self.mask_dst = vcc_in, vcc_out, mask_dst
        self.lanes = wave.lane_ids
        self.out: dict[str, tuple[Type, np.ndarray, bool]] = {}
        if d.mods is None:
            d.mods = _source_modifiers(d)
        self.abs, self.neg, self.sdwa, self.plain = d.mods
        self.exec_before = wave.exec
        self.sel: int | None = None  # lane by lane (`_per_lane`): the one lane this run computes

    def _mask_value(self, reg: int) -> np.ndarray:
        return np.array([self.w.mask(reg)], np.uint64)

    def rd(self, name: str, kind: str, bits: int) -> np.ndarray:
        value = self._rd(name, kind, bits)
        if self.sel is not None and value.shape == (self.w.lanes,):
            return value[self.sel:self.sel + 1]
        return value

    def _rd(self, name: str, kind: str, bits: int) -> np.ndarray:
        t = (kind, bits)
        if name in self.out:
            ot, value, _ = self.out[name]
            return reinterpret(value, ot, t)
        w = self.w
        if name in ("S0", "S1", "S2"):
            i = int(name[1])
            reg = self.srcs[i] if i < len(self.srcs) else None
            if reg is None:
                raise PcodeUnsupported(f"{name} has no operand in {self.d.fmt}")
            if isinstance(reg, str):  # an immediate field standing as a source
                return self._rd(reg, kind, bits)
            if self.plain and bits <= 32 and reg.offset >= 256:  # the common case, with one copy
                raw = w.vgpr[reg.offset - 256].copy()  # a copy: commit may overwrite the register
                return raw if t == ("u", 32) else reinterpret(raw, ("u", 32), t)
            raw = w.read_raw(reg, bits, kind == "f" and bits == 64, self.d.literal)
            if self.d.halves[0] >> i & 1:
                raw = raw >> np.uint64(16)
            if self.sdwa:
                inst = self.d.inst
                raw = _sdwa_select(raw, *((inst.src0_sel, inst.src0_sext) if i == 0 else (inst.src1_sel, inst.src1_sext)))
            modified = (self.abs | self.neg) >> i & 1
            if modified and kind != "f":
                if not self.d.name.startswith("V_CNDMASK"):
                    raise PcodeUnsupported("abs/neg modifier on a non-float operand")
                sign = np.uint64(1 << (bits - 1))  # V_CNDMASK selects floats: the modifiers act on the sign bit
                raw = raw & ~sign if self.abs >> i & 1 else raw
                raw = raw ^ sign if self.neg >> i & 1 else raw
            value = reinterpret(raw, ("u", 64), t) if bits > 32 else reinterpret(raw.astype(np.uint32), ("u", 32), t)
            if modified and kind == "f":
                value = np.abs(value) if self.abs >> i & 1 else value
                value = -value if self.neg >> i & 1 else value
            return value
        if name == "D0" and self.dst is not None:
            if self.valu:
                raw = w.read_raw(Reg(256 + self.dst), bits, False, None)
                raw = raw >> np.uint64(16) if self.d.halves[0] & 8 else raw
            else:
                raw = w.read_raw(Reg(self.dst), bits, False, None)
            return reinterpret(raw, ("u", 64), t) if bits > 32 else reinterpret(raw.astype(np.uint32), ("u", 32), t)
        if name == "SCC":
            return reinterpret(np.array([w.scc], np.uint32), ("u", 32), t)
        if name == "VCC":
            raw = (w.read_raw(self.vcc_in, 64, False, None) if self.vcc_in is not None and self.vcc_in.offset != 106
                   else self._mask_value(_VCC))
            if self.vcc_in is not None and w.lanes == 32:
                raw = raw & np.uint64(0xFFFFFFFF)
            return reinterpret(raw, ("u", 64), t)
        if name == "EXEC":
            return reinterpret(self._mask_value(_EXEC), ("u", 64), t)
        if name == "M0":
            return reinterpret(np.array([w.sgpr[w.m0]], np.uint32), ("u", 32), t)
        if name == "PC":
            return reinterpret(np.array([w.pc], np.int64), ("i", 64), t)
        if name == "SIMM16":
            return reinterpret(np.array([self.d.inst.simm16], np.uint16), ("u", 16), t)
        if name == "OPSEL":  # the instruction's op_sel bits (CDNA's 16-bit legacy ops place their result by bit 3)
            return reinterpret(np.array([getattr(self.d.inst, "opsel", 0)], np.uint32), ("u", 32), t)
        if name == "SIMM32" and self.d.literal is not None:
            return reinterpret(np.array([self.d.literal], np.uint32), ("u", 32), t)
        raise PcodeUnsupported(f"operand {name} of {self.d.fmt}")

    def wr(self, name: str, kind: str, bits: int, value) -> None:
        if self.valu and name == "VCC":  # a VALU instruction's VCC is its lane's bit (V_DIV_SCALE)
            self.wrbit(name, np.asarray(value) != 0)
            return
        self.out[name] = ((kind, bits), np.asarray(value), False)

    def wrbit(self, name: str, value) -> None:
        if self.sel is not None:
            bit = bool(np.asarray(value).flat[0]) and self.exec_before >> self.sel & 1
            self.out[name] = (("u", 64), np.array([int(bit) << self.sel], np.uint64), True)
            return
        bits = np.asarray(value, bool) & mask_lanes(self.exec_before, self.w.lanes)
        self.out[name] = (("u", 64), np.array([lanes_mask(np.broadcast_to(bits, (self.w.lanes,)))], np.uint64), True)

    def scalar(self, name: str) -> np.ndarray:
        if name == "EXECZ":
            return np.array([self.w.exec == 0])
        if name == "VCCZ":
            return np.array([self.w.mask(_VCC) == 0])
        return np.array([(self.w.lanes == 64) == (name == "WAVE64")])

    def commit(self) -> int | None:
        """Apply the writes; returns the new PC when the instruction branched."""
        w, new_pc = self.w, None
        exec_lanes = mask_lanes(self.exec_before, w.lanes)
        for name, (t, value, is_mask) in self.out.items():
            if name == "D0" and is_mask:
                reg = self.mask_dst if self.mask_dst is not None else _VCC
                w.write_sgpr(reg, int(value.flat[0]), w.lanes)
            elif name == "D0" and self.dst is not None:
                raw = convert(value, t, ("u", 64)) if t[0] != "f" and t != BOOL else reinterpret(value, t, ("u", 64))
                if t[0] == "f":
                    raw = reinterpret(value, t, ("u", t[1])).astype(np.uint64)
                elif t[1] < 32:  # a 16-bit result (V_MAX_I16's -32768) fills its bits only; gfx9 zeroes the rest
                    raw = raw & np.uint64((1 << t[1]) - 1)
                if self.sdwa:
                    raw = _sdwa_place(raw, w.vgpr[self.dst].astype(np.uint64), self.d.inst.dst_sel, self.d.inst.dst_unused)
                if self.d.halves[1]:  # a 16-bit result goes to its half, the other half is kept
                    shift = np.uint64(16 if self.d.halves[0] & 8 else 0)
                    old = w.vgpr[self.dst].astype(np.uint64) & ~(np.uint64(0xFFFF) << shift)
                    raw = old | (raw & np.uint64(0xFFFF)) << shift
                if self.valu:
                    w.write_vgpr(self.dst, raw, t[1], exec_lanes)
                else:
                    w.write_sgpr(self.dst, int(raw.flat[0]), t[1])
            elif name == "SCC":
                w.scc = int(np.asarray(value).flat[0] != 0)
            elif name == "VCC":
                reg = self.vcc_out if self.vcc_out is not None else _VCC
                w.write_sgpr(reg, int(reinterpret(value, t, ("u", 64)).flat[0]), w.lanes if is_mask else t[1])
            elif name == "EXEC":
                v = int(reinterpret(value, t, ("u", 64)).flat[0])
                w.write_sgpr(_EXEC, v, w.lanes if is_mask else t[1])
            elif name == "PC":
                new_pc = int(np.asarray(value).flat[0])
            elif name == "M0":
                w.write_sgpr(w.m0, int(reinterpret(value, t, ("u", 32)).flat[0]), 32)
            else:
                raise PcodeUnsupported(f"write of {name}")
        return new_pc


# ---------------------------------------------------------------------------- ALU through pcode

def _alu_ctx(w: Wave, d: Decoded) -> Ctx:
    if d.ctx_args is None:
        d.ctx_args = _true16(d, _ctx_args(d)) if w.rdna else _gfx9_halves(d, _ctx_args(d))
    return Ctx(w, d, *d.ctx_args)


def _opsel_on_halves(d: Decoded) -> bool:
    """Whether every operand VOP3's opsel selects a half of is a 16-bit one."""
    names = (("src0", "vsrc0"), ("src1", "vsrc1"), ("src2", "vsrc2"), ("vdst",))
    return all(any(d.op_bits.get(n) == 16 for n in names[i]) for i in range(4) if d.inst.opsel >> i & 1)


_HALF_FIELDS = {"VOP1": ("src0", None, None, "vdst"), "VOP2": ("src0", "vsrc1", None, "vdst"),
                "VOPC": ("src0", "vsrc1", None, None)}


def _true16(d: Decoded, args: tuple) -> tuple:
    """RDNA's 16-bit operands name register halves: in VOP1/VOP2/VOPC a VGPR number's bit 7 picks
    the high half of v0-v127, in VOP3 the opsel bits (sources 0-2, then the destination) do. Sets
    `d.halves` and returns the Ctx arguments with the VGPR numbers of the e32 fields corrected."""
    fields = _HALF_FIELDS.get(d.fmt)
    srcs, dst = list(args[0]), args[1]
    if fields is None:  # VOP3 (opsel checked by _ctx_args), or an encoding without 16-bit halves
        d.halves = (getattr(d.inst, "opsel", 0) if d.fmt.startswith("VOP3") else 0,
                    dst is not None and d.op_bits.get("vdst") == 16)
        return args
    hi = 0
    for i, name in enumerate(fields):
        if name is None or d.op_bits.get(name) != 16:
            continue
        if i == 3:
            if dst is not None and dst >= 128:
                dst, hi = dst - 128, hi | 8
        elif isinstance(srcs[i], Reg) and srcs[i].offset >= 256 + 128:
            srcs[i], hi = Reg(srcs[i].offset - 128), hi | 1 << i
    d.halves = (hi, dst is not None and d.op_bits.get("vdst") == 16)
    return (srcs, dst, *args[2:])


def _gfx9_halves(d: Decoded, args: tuple) -> tuple:
    """CDNA's VOP3 op_sel (GFX9 VOP3A, checked by _ctx_args to name 16-bit operands only): bits 0-2
    read the high half of src0-2, bit 3 writes the result to the high half and keeps the low one.
    Where the pseudocode reads OPSEL itself (V_MAD_LEGACY_U16: `if OPSEL.u4[3] then D0 = { tmp.u16,
    D0[15 : 0] }`), the text places the result. Sets `d.halves`; returns the Ctx arguments."""
    opsel = getattr(d.inst, "opsel", 0) if d.fmt.startswith("VOP3") else 0
    if opsel & 8 and "OPSEL" in getattr(d.fn, "operands", ()):
        opsel &= 7
    d.halves = (opsel, bool(opsel & 8))
    return args


def _ctx_args(d: Decoded) -> tuple:
    """Ctx's arguments after the wave and the instruction: sources, destination, VALU or not,
    and the carry-in, carry-out and compare-mask registers of the encodings that have them."""
    inst, fmt = d.inst, d.fmt
    if fmt == "SOPK" and d.name.startswith("S_CMPK"):  # CDNA's text: S0 = the SGPR, S1 = the immediate
        return [inst.sdst, "SIMM16"], None, False
    if fmt.startswith("SOP"):
        srcs = [getattr(inst, n, None) for n in ("ssrc0", "ssrc1")]
        if fmt == "SOPK":  # CDNA's text names the immediate S0 (RDNA's says SIMM16)
            srcs = ["SIMM16"]
        dst = inst.sdst.offset if hasattr(inst, "sdst") else None
        return srcs, dst, False
    if fmt in _SDWA:
        if getattr(inst, "omod", 0) or getattr(inst, "clmp", 0):
            raise PcodeUnsupported("SDWA with omod or clamp")
        src0 = Reg(inst.vsrc0.offset - 256) if inst.s0 else inst.vsrc0  # s0/s1: the field names an SGPR
        if fmt == "VOP1_SDWA":
            return [src0], inst.vdst.offset - 256, True
        srcs = [src0, Reg(inst.vsrc1.offset - 256) if inst.s1 else inst.vsrc1]
        if fmt == "VOPC_SDWA_SDST":  # the compare mask goes to sdst (sd set) or VCC
            return srcs, None, True, None, None, inst.sdst.offset if inst.sd else None
        return srcs, inst.vdst.offset - 256, True
    if any(s in fmt for s in ("DPP", "SDWA")) or fmt.startswith(("VOP3P", "VINTERP")):
        raise PcodeUnsupported(f"the {fmt} encoding")
    if fmt.startswith("VOP3"):
        if getattr(inst, "omod", 0):
            raise PcodeUnsupported("the omod modifier")
        if getattr(inst, "opsel", 0) and not _opsel_on_halves(d):
            raise PcodeUnsupported("opsel on an operand wider than 16 bits")
        if getattr(inst, "clmp", 0):
            raise PcodeUnsupported("clamp on this instruction")
        srcs = [inst.src0, inst.src1, inst.src2]
        vdst = inst.vdst.offset - 256
        if "CMP" in d.name:  # VOPC in VOP3 encoding: vdst is an SGPR
            return srcs, None, True, None, None, vdst
        sdst = inst.sdst.offset if fmt == "VOP3SD" else None
        # the mask operand in src2: V_CNDMASK's and the carry-in of VOP3SD; V_DIV_FMAS reads VCC itself
        vcc_in = inst.src2 if fmt == "VOP3SD" or d.name.startswith("V_CNDMASK") else None
        return srcs, vdst, True, vcc_in, sdst
    if fmt.startswith("VOPC"):
        return [inst.src0, inst.vsrc1], None, True
    if fmt.startswith("VOP2"):
        return [inst.src0, inst.vsrc1], inst.vdst.offset - 256, True
    if fmt.startswith("VOP1"):
        return [inst.src0], inst.vdst.offset - 256, True
    raise PcodeUnsupported(f"the {fmt} encoding")


_SDWA = ("VOP1_SDWA", "VOP2_SDWA", "VOPC_SDWA_SDST")  # CDNA's sub-dword addressing


def _sdwa_field(sel: int) -> tuple[int, int]:
    """(shift, width) of an SDWA select: BYTE_0..3, WORD_0..1, DWORD."""
    if sel <= 3:
        return 8 * sel, 8
    if sel <= 5:
        return 16 * (sel - 4), 16
    return 0, 32


def _sdwa_select(raw: np.ndarray, sel: int, sext: int) -> np.ndarray:
    """A source operand's selected byte or word, zero- or sign-extended to 32 bits."""
    shift, width = _sdwa_field(sel)
    if width == 32:
        return raw
    field = (raw >> np.uint64(shift)) & np.uint64((1 << width) - 1)
    if sext:
        field = np.where(field >> np.uint64(width - 1), field | np.uint64(0xFFFFFFFF ^ ((1 << width) - 1)), field)
    return field


def _sdwa_place(raw: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
    """The result's low bits in the selected destination field; the other bits zero (UNUSED_PAD),
    the field's sign (UNUSED_SEXT) or the register's old bits (UNUSED_PRESERVE)."""
    shift, width = _sdwa_field(sel)
    if width == 32:
        return raw
    mask = np.uint64(((1 << width) - 1) << shift)
    field = (raw << np.uint64(shift)) & mask
    if unused == 2:
        return field | (old & ~mask & np.uint64(0xFFFFFFFF))
    if unused == 1:
        above = np.uint64(0xFFFFFFFF ^ ((1 << (shift + width)) - 1))
        return np.where((field >> np.uint64(shift + width - 1)) & np.uint64(1), field | above, field)
    return field


def _cdna_text(text: str) -> str:
    # CDNA writes compare results as `EXEC.u64[laneId] = D0.u64[laneId] = value`
    return re.sub(r"^(\w+\.u64\[laneId\]) = (\w+\.u64\[laneId\]) = (.*)$", r"\2 = \3;\n\1 = \2", text, flags=re.M)


# V_DIV_FMAS undoes V_DIV_SCALE's scaling (VCC set): the manual's text scales by 2^32 (f32) /
# 2^64 (f64) upwards only, but V_DIV_SCALE scales by 2^64 / 2^128, the denominator up for huge
# quotients and the numerator up for denormal ones. What makes LLVM's division exact (and the
# conformance suite's division forms agree with the exact references): 2^+-64 / 2^+-128, up
# when the scaled quotient S2 is at least 2 (it is then >= 2^32 / 2^640), down when it is tiny.
_DIV_FMAS = {
    bits: f"if VCC.u64[laneId] then\nif exponent(S2.{t}) > {bias} then\nD0.{t} = fma_scaled(S0.{t}, S1.{t}, S2.{t}, {k})\n"
          f"else\nD0.{t} = fma_scaled(S0.{t}, S1.{t}, S2.{t}, -{k})\nendif\nelse\nD0.{t} = fma(S0.{t}, S1.{t}, S2.{t})\nendif"
    for bits, t, bias, k in (("F32", "f32", 127, 64), ("F64", "f64", 1023, 128))}


def _div_scale_text(text: str, t: str) -> str:
    """V_DIV_SCALE's pseudocode, read where the manual's text cannot be meant literally:
    * D0 is left unassigned where no scaling is needed: it is S0 there.
    * F32 tests `1.0 / 64'F(S1.f32) == DENORM.f64`, which never holds (the reciprocal of an f32 is
      a normal f64): the test is whether the reciprocal is an f32 denormal, as F64's is for f64.
      Read literally, a denominator above 2^126 goes unscaled, its reciprocal in the Newton steps
      is an f32 denormal and loses bits (div.rn.f32 0x7f7fffff / 0x7f7ffffe gave 1.0, not 1 + 2^-23).
    * Where both the reciprocal and the quotient are denormal, "only scale the denominator" scales
      it by 2^+64 / 2^+128: a denominator with a denormal reciprocal is above 2^126 / 2^1022, so
      that is infinity. It is scaled down, as where the reciprocal alone is denormal; the scaled
      quotient is then 2^64 / 2^128 times the denormal one and V_DIV_FMAS (VCC set, a tiny
      quotient) scales it back with a single rounding (rcp.rn.f64 0x7fefffffffffffff gave NaN,
      not 2^-1024)."""
    k = 64 if t == "f32" else 128
    if t == "f32":
        text = text.replace("1.0 / 64'F(S1.f32) == DENORM.f64", "32'F(1.0 / 64'F(S1.f32)) == DENORM.f32")
    both = (f"S2.{t} / S1.{t} == DENORM.{t})) then\nVCC = 0x1LL;\nif S0.{t} == S1.{t} then\n"
            f"// Only scale the denominator\nD0.{t} = ldexp(S0.{t}, {k})")
    assert both in text, "V_DIV_SCALE's text changed"
    text = text.replace(both, both.replace(f"ldexp(S0.{t}, {k})", f"ldexp(S0.{t}, -{k})"))
    return f"D0.{t} = S0.{t};\n" + text


def _div_fixup_text(text: str, t: str) -> str:
    """V_DIV_FIXUP's pseudocode with its overflow test on the quotient: the manual's
    `exponent(S1) == 255` (2047) tests the denominator, which the earlier cases have already
    found finite, so as written it never holds. The operand that can have an all-ones exponent
    there is S0, the quotient from V_DIV_FMAS, when the Newton steps overflowed (inf, or NaN from
    inf - inf) although the operands are finite: the quotient overflows, and the result is
    OVERFLOW (div.rn.f32 0x7f7fffff / 0x1 gave NaN, not +inf)."""
    bits = 255 if t == "f32" else 2047
    old = f"elsif exponent(S1.{t}) == {bits} then"
    assert old in text, "V_DIV_FIXUP's text changed"
    return text.replace(old, f"elsif exponent(S0.{t}) == {bits} then")


@lru_cache(maxsize=None)
def _pcode_by_name(family: str) -> dict[str, str]:
    return {op.name: text for op, text in _pcode_table(family).items()}


def _pcode_fn(w: Wave, d: Decoded, op) -> Callable:
    text = w.program.pcode.get(op)
    if text is None and op.name.endswith("_E64"):  # CDNA's tables give VOP1/VOP2/VOPC ops their _E32 text only
        text = _pcode_by_name(w.program.family).get(op.name.removesuffix("_E64") + "_E32")
    if text is None:
        raise PcodeUnsupported("no pseudocode in the tables")
    # branches: the manual's 16-bit product SIMM16 * 4 wraps for offsets past 8191 dwords; the hardware's does not
    text = text.replace("signext(SIMM16.i16 * 16'4)", "(signext(SIMM16.i16) * 4LL)")
    fmas = re.match(r"V_DIV_FMAS_(F32|F64)", op.name)
    if fmas:
        text = _DIV_FMAS[fmas.group(1)]
    rndne = re.match(r"[SV]_RNDNE_(F16|F32|F64)", op.name)
    if rndne:  # the manual's floor(x + 0.5) rounds x + 0.5 first and loses -0: the hardware rounds exactly
        t = rndne.group(1).lower()
        text = f"D0.{t} = rndne(S0.{t})"
    scale = re.match(r"V_DIV_SCALE_(F32|F64)", op.name)
    if scale:
        text = _div_scale_text(text, scale.group(1).lower())
    fixup = re.match(r"V_DIV_FIXUP_(F32|F64)", op.name)
    if fixup:
        text = _div_fixup_text(text, fixup.group(1).lower())
    return compile_pcode(_cdna_text(text) if not w.rdna else text)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


def _sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a - b


def _subrev(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b - a


# name -> (operation, signed, bits); RDNA and CDNA names of the integer add/sub with a clamp bit
_SATURATING = {"V_ADD_NC_U32_E64": (_add, False, 32), "V_SUB_NC_U32_E64": (_sub, False, 32),
               "V_SUBREV_NC_U32_E64": (_subrev, False, 32), "V_ADD_U32_E64": (_add, False, 32),
               "V_SUB_U32_E64": (_sub, False, 32), "V_SUBREV_U32_E64": (_subrev, False, 32),
               "V_ADD_NC_I32": (_add, True, 32), "V_SUB_NC_I32": (_sub, True, 32),
               "V_ADD_I32": (_add, True, 32), "V_SUB_I32": (_sub, True, 32),
               "V_ADD_NC_U16": (_add, False, 16), "V_SUB_NC_U16": (_sub, False, 16),
               "V_ADD_NC_I16": (_add, True, 16), "V_SUB_NC_I16": (_sub, True, 16),
               "V_ADD_U16_E64": (_add, False, 16), "V_SUB_U16_E64": (_sub, False, 16),
               "V_SUBREV_U16_E64": (_subrev, False, 16), "V_ADD_I16": (_add, True, 16), "V_SUB_I16": (_sub, True, 16)}


def _saturating(w: Wave, d: Decoded) -> None:
    """Integer add/sub with the clamp bit: the exact result saturates to the unsigned or signed
    range (the pseudocode describes the wrapping form only). 16-bit forms read the halves op_sel
    picks and write theirs: the other half kept on RDNA, zero on CDNA (as other 16-bit results)."""
    inst = d.inst
    op, signed, bits = _SATURATING[d.name]
    opsel = getattr(inst, "opsel", 0) if bits == 16 else 0
    vals = []
    for i, r in enumerate((inst.src0, inst.src1)):
        raw = w.read_raw(r, bits, False, d.literal).astype(np.int64) >> (16 * (opsel >> i & 1)) & ((1 << bits) - 1)
        vals.append(np.broadcast_to(np.where(raw >> (bits - 1), raw - (1 << bits), raw) if signed else raw, (w.lanes,)))
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    out = (np.clip(op(*vals), lo, hi) & ((1 << bits) - 1)).astype(np.uint64)
    dst = inst.vdst.offset - 256
    if bits == 16 and (opsel & 8 or w.rdna):
        shift = np.uint64(16 if opsel & 8 else 0)
        out = (w.vgpr[dst].astype(np.uint64) & ~(np.uint64(0xFFFF) << shift)) | out << shift
    w.write_vgpr(dst, out, 32, w.exec_lanes())


def _run_pcode(w: Wave, d: Decoded) -> int | None:
    if d.fn is None:
        d.fn = _pcode_fn(w, d, d.inst.op)
    ctx = _alu_ctx(w, d)
    try:
        d.fn(ctx)
    except LaneVarying:
        ctx = _per_lane(w, d)
    return ctx.commit()


def _per_lane(w: Wave, d: Decoded) -> Ctx:
    """Run the pseudocode once for each active lane (its `if`s branch differently per lane) and
    merge what the runs wrote: lane values into vectors, lane bits into masks."""
    merged = _alu_ctx(w, d)
    assert d.fn is not None
    for lane in _active(w).tolist():
        ctx = _alu_ctx(w, d)
        ctx.sel = lane
        ctx.lanes = w.lane_ids[lane:lane + 1]
        d.fn(ctx)
        for name, (t, value, is_mask) in ctx.out.items():
            if is_mask:
                old = merged.out.get(name, (t, np.zeros(1, np.uint64), True))[1]
                merged.out[name] = (t, old | value, True)
                continue
            if name not in merged.out:
                merged.out[name] = (t, np.zeros(w.lanes, dtype(t)), False)
            merged.out[name][1][lane] = np.asarray(value).flat[0]
    return merged


_VOPD_AS = {"MOV_B32": "VOP1Op.V_MOV_B32_E32", "FMAAK_F32": "VOP2Op.V_FMAAK_F32", "FMAMK_F32": "VOP2Op.V_FMAMK_F32"}


def _vopd(w: Wave, d: Decoded) -> None:
    """Two VOP2-like operations issued together: both read their sources before either writes."""
    inst, enum = d.inst, importlib.import_module(f"tinygrad.runtime.autogen.amd.{w.program.family}.enum")
    ctxs = []
    for op, s0, s1, dst in ((inst.opx, inst.srcx0, inst.vsrcx1, inst.vdstx), (inst.opy, inst.srcy0, inst.vsrcy1, inst.vdsty)):
        short = op.name.removeprefix("V_DUAL_")
        cls, member = _VOPD_AS.get(short, f"VOP2Op.V_{short}_E32").split(".")
        fn = _pcode_fn(w, d, getattr(getattr(enum, cls), member))
        ctx = Ctx(w, d, [s0, s1], dst.offset - 256, True)
        fn(ctx)
        ctxs.append(ctx)
    for ctx in ctxs:
        ctx.commit()


# ---------------------------------------------------------------------------- hand-written

def _sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


_SIZES = [("DWORDX16", 64, False), ("DWORDX8", 32, False), ("DWORDX4", 16, False), ("DWORDX3", 12, False),
          ("DWORDX2", 8, False), ("DWORD", 4, False), ("B512", 64, False), ("B256", 32, False),
          ("B128", 16, False), ("B96", 12, False), ("B64", 8, False), ("B32", 4, False), ("B16", 2, False),
          ("B8", 1, False), ("UBYTE", 1, False), ("SBYTE", 1, True), ("USHORT", 2, False),
          ("SSHORT", 2, True), ("BYTE", 1, False), ("SHORT", 2, False), ("U8", 1, False), ("I8", 1, True),
          ("U16", 2, False), ("I16", 2, True), ("U32", 4, False), ("I32", 4, False), ("F32", 4, False),
          ("U64", 8, False), ("I64", 8, False), ("F64", 8, False), ("X2", 8, False)]


@lru_cache(maxsize=None)
def _size_of(name: str) -> tuple[int, bool]:
    name = re.sub(r"_D16(_HI)?$", "", name)  # CDNA's d16 names (GLOBAL_LOAD_SHORT_D16_HI)
    if "PK_ADD" in name:  # packed pairs: one dword
        return 4, False
    for suffix, size, signed in _SIZES:
        if name.endswith("_" + suffix) or name.endswith(suffix):
            return size, signed
    if "ATOMIC" in name:  # CDNA names 32-bit atomics without a size (GLOBAL_ATOMIC_ADD)
        return 4, False
    raise EmulatorError(f"no access size in {name}")


def _to_dwords(data: np.ndarray, signed: bool) -> np.ndarray:
    """Loaded bytes (n, size) -> the dwords written to registers (n, dwords); sub-dword loads
    extend to 32 bits."""
    size = data.shape[1]
    if size >= 4:
        return np.ascontiguousarray(data).view(np.uint32)
    narrow = np.ascontiguousarray(data).view(f"{'i' if signed else 'u'}{size}")
    return narrow.astype(np.int32 if signed else np.uint32).view(np.uint32)


class _Space:
    """Byte access through the address space of a memory instruction: vectorised over lanes
    (`load`, `store`) and for one lane (`read`, `write`, the atomics)."""

    def __init__(self, w: Wave, kind: str):
        self.w, self.kind = w, kind

    def _parts(self, lanes: np.ndarray, addrs: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        """(space, selector into lanes, lanes, addresses) per space the addresses fall in; flat
        addresses in the shared and private apertures go to LDS and scratch."""
        if self.kind != "flat":
            return [(self.kind, slice(None), lanes, addrs)]  # type: ignore[list-item]
        hi = addrs >> np.uint64(32)
        out = []
        for kind, aperture in (("lds", memmod.SHARED_APERTURE), ("scratch", memmod.PRIVATE_APERTURE)):
            sel = np.nonzero(hi == aperture)[0]
            if sel.size:
                out.append((kind, sel, lanes[sel], addrs[sel] & np.uint64(0xFFFFFFFF)))
        sel = np.nonzero((hi != memmod.SHARED_APERTURE) & (hi != memmod.PRIVATE_APERTURE))[0]
        if sel.size:
            out.append(("global", sel, lanes[sel], addrs[sel]))
        return out

    def _local(self, kind: str, lanes: np.ndarray, addrs: np.ndarray, size: int) -> tuple[np.ndarray, tuple]:
        """The LDS or scratch buffer and the (n, size) index of the bytes, bounds-checked."""
        buf = self.w.wg.lds if kind == "lds" else self.w.scratch
        limit = buf.shape[-1]
        a = addrs.astype(np.int64)
        bad = np.nonzero(a + size > limit)[0]
        if bad.size:
            what = f"{kind} access of {size} bytes at {int(a[bad[0]]):#x} outside {limit} bytes"
            if kind == "scratch" and self.w.stack:  # the recursion outgrew the stack the launch was given
                raise StackOverflow(f"{what} (a call stack of {self.w.stack} bytes per lane: raise hipLimitStackSize)")
            raise MemoryFault(what)
        cols = a[:, None] + np.arange(size)
        return buf, (cols,) if kind == "lds" else (lanes[:, None], cols)

    def load(self, lanes: np.ndarray, addrs: np.ndarray, size: int) -> np.ndarray:
        out = np.zeros((lanes.size, size), np.uint8)
        for kind, sel, ls, a in self._parts(lanes, addrs):
            if kind == "global":
                out[sel] = self.w.wg.memory.gather(a, size)
            else:
                buf, index = self._local(kind, ls, a, size)
                out[sel] = buf[index]
        return out

    def store(self, lanes: np.ndarray, addrs: np.ndarray, data: np.ndarray) -> None:
        for kind, sel, ls, a in self._parts(lanes, addrs):
            if kind == "global":
                self.w.wg.memory.scatter(a, data[sel])
            else:
                buf, index = self._local(kind, ls, a, data.shape[1])
                buf[index] = data[sel]

    def read(self, lane: int, addr: int, size: int) -> np.ndarray:
        return self.load(np.array([lane]), np.array([addr], np.uint64), size)[0]

    def write(self, lane: int, addr: int, data: np.ndarray) -> None:
        self.store(np.array([lane]), np.array([addr], np.uint64), data[None, :])


def _atomic(op: str, old: int, data: int, cmp: int, bits: int) -> int:
    m = (1 << bits) - 1
    if op in ("ADD", "SUB", "RSUB"):
        return (old + data if op == "ADD" else old - data if op == "SUB" else data - old) & m
    if op in ("SWAP", "STOREXCHG", "WRXCHG"):  # WRXCHG: CDNA's name for DS swaps
        return data
    if op in ("CMPSWAP", "CMPSTORE", "CMPST"):
        return data if old == cmp else old
    if op in ("AND", "OR", "XOR"):
        return old & data if op == "AND" else old | data if op == "OR" else old ^ data
    if op in ("INC",):
        return 0 if old >= data else old + 1
    if op in ("DEC",):
        return data if old == 0 or old > data else old - 1
    raise KeyError(op)


def _pk_add_f16(old: int, data: int) -> int:
    """Both f16 halves added (an exact f64 sum, rounded once)."""
    halves = np.array([old & 0xFFFF, old >> 16, data & 0xFFFF, data >> 16], np.uint16).view(np.float16).astype(np.float64)
    r = (halves[:2] + halves[2:]).astype(np.float16).view(np.uint16)
    return int(r[0]) | int(r[1]) << 16


def _atomic_typed(name: str, old: int, data: int, cmp: int, bits: int) -> int:
    if re.search(r"PK_ADD(_RTN)?_F16$", name):
        return _pk_add_f16(old, data)
    m = re.search(r"(?:ATOMIC|DS)_([A-Z]+)(?:_RTN)?(?:_([UIFB]\d+|X2))?$", name)
    if m is None:
        raise KeyError(name)
    op = m.group(1)
    t = m.group(2) if m.group(2) and m.group(2) != "X2" else ("B64" if bits == 64 else "U32")
    if op in ("MIN", "MAX", "SMIN", "SMAX", "UMIN", "UMAX"):
        signed = t.startswith("I") or op.startswith("S")
        a, b = (_sext(old, bits), _sext(data, bits)) if signed else (old, data)
        if t.startswith("F"):
            fmt = "<f" if bits == 32 else "<d"
            pack = "<I" if bits == 32 else "<Q"
            fa, fb = (struct.unpack(fmt, struct.pack(pack, x))[0] for x in (old, data))
            return data if (fb < fa) == op.endswith("MIN") and fb != fa else old
        return data if (b < a if op.endswith("MIN") else b > a) else old
    if op == "ADD" and t.startswith("F"):
        fmt, pack = ("<f", "<I") if bits == 32 else ("<d", "<Q")
        fa, fb = (struct.unpack(fmt, struct.pack(pack, x))[0] for x in (old, data))
        return struct.unpack(pack, struct.pack(fmt, fa + fb))[0]
    return _atomic(op, old, data, cmp, bits)


def _mem_op(w: Wave, d: Decoded, space: str, lanes: np.ndarray, addrs: np.ndarray, data_reg: int | None,
            data2_reg: int | None, vdst: int | None, returns: bool) -> None:
    """For the `lanes` (active, ascending) at `addrs` (uint64): load into vdst, store from
    data, or read-modify-write (atomics, lane by lane in lane order)."""
    name = d.name
    size, signed = _size_of(name)
    mem = _Space(w, space)
    ndw = (size + 3) // 4
    atomic = "ATOMIC" in name or (space == "lds" and re.search(r"DS_(PK_ADD|ADD|SUB|RSUB|INC|DEC|MIN|MAX|AND|OR|XOR|"
                                                               r"MSKOR|STOREXCHG|CMPSTORE|CMPST|WRXCHG)", name))
    if w.pending is not None and (atomic or not ("STORE" in name or "WRITE" in name)):
        strict.flush_stores(w)  # what the wave reads includes its own earlier stores
    if atomic:
        bits = size * 8
        if "MSKOR" in name or "2ADDR" in name or "WRXCHG2" in name:
            raise EmulatorError(w.where(name))
        olds = np.zeros((ndw, lanes.size), np.uint32)
        for k, (lane, addr) in enumerate(zip(lanes.tolist(), addrs.tolist())):
            old = int.from_bytes(mem.read(lane, addr, size).tobytes(), "little")
            data = _gather(w, data_reg, lane, ndw)
            cmp = 0
            if re.search(r"DS_CMPSTORE", name):
                cmp = _gather(w, data2_reg, lane, ndw)
            if re.search(r"DS_CMPST_", name):  # CDNA: data0 = cmp, data1 = new value
                cmp, data = data, _gather(w, data2_reg, lane, ndw)
            if "CMPSWAP" in name:  # global/flat: the data registers hold {cmp, src}
                src_cmp = _gather(w, data_reg, lane, 2 * ndw)
                data, cmp = src_cmp & ((1 << bits) - 1), src_cmp >> bits
            try:
                new = _atomic_typed(name, old, data, cmp, bits)
            except KeyError:
                raise EmulatorError(w.where(f"unimplemented atomic {name.lower()}")) from None
            mem.write(lane, addr, np.frombuffer(new.to_bytes(size, "little"), np.uint8))
            olds[:, k] = [(old >> (32 * i)) & 0xFFFFFFFF for i in range(ndw)]
        if returns and vdst is not None:
            _result(w, d, w.vgpr, (slice(vdst, vdst + ndw), lanes), olds)
        elif w.pending is not None:  # counted until its wait, its effect already in memory
            strict.defer(w, d, False, strict.done, False)
        return
    high = "D16_HI" in name  # d16: the low or high 16 bits of the register, the other half kept
    if "LOAD" in name or "READ" in name:
        dw = _to_dwords(mem.load(lanes, addrs, size), signed)
        w.polled(dw, addrs)
        keep = 0
        if "D16" in name:  # the half is merged into the register as it is when the data arrives
            half = dw[:, :1] & np.uint32(0xFFFF)
            dw, keep = (half << np.uint32(16), 0xFFFF) if high else (half, 0xFFFF0000)
        _result(w, d, w.vgpr, (slice(vdst, vdst + dw.shape[1]), lanes), dw.T, keep)
        return
    if "STORE" in name or "WRITE" in name:
        regs = w.vgpr[data_reg:data_reg + ndw, lanes]
        if high:
            regs = regs >> np.uint32(16)
        data = np.ascontiguousarray(regs.T).view(np.uint8)[:, :size]
        if w.pending is None:
            mem.store(lanes, addrs, data)
        else:
            strict.defer(w, d, False, lambda: mem.store(lanes, addrs, data), True)
        return
    raise EmulatorError(w.where(name))


def _result(w: Wave, d: Decoded, regs: np.ndarray, index: tuple, values: np.ndarray, keep: int = 0) -> None:
    """A memory instruction's result into regs[index], the bits `keep` of the register kept
    (d16 loads): now, or at its s_waitcnt in strict mode."""
    if w.pending is None:
        regs[index] = regs[index] & np.uint32(keep) | values if keep else values
    else:
        strict.deliver(w, d, regs, index, values, keep)


def _gather(w: Wave, reg: int | None, lane: int, ndw: int) -> int:
    if reg is None:
        return 0
    return sum(int(w.vgpr[reg + k, lane]) << (32 * k) for k in range(ndw))


def _active(w: Wave) -> np.ndarray:
    """The active lanes' numbers, ascending (read-only)."""
    return _lane_numbers(w.exec, w.lanes)


@lru_cache(maxsize=4096)
def _lane_numbers(mask: int, lanes: int) -> np.ndarray:
    numbers = np.nonzero(mask_lanes(mask, lanes))[0]
    numbers.flags.writeable = False
    return numbers


def _flat_like(w: Wave, d: Decoded) -> None:
    inst, fmt = d.inst, d.fmt.removeprefix("V")
    space = {"GLOBAL": "global", "FLAT": "flat", "SCRATCH": "scratch"}[fmt]
    rdna4 = d.fmt.startswith("V")  # VGLOBAL/VFLAT/VSCRATCH: 24-bit ioffset, vaddr/vsrc, th
    off_bits = 13 if w.rdna else (13 if fmt != "FLAT" else 12)
    if rdna4:
        offset = _sext(inst.ioffset, 24)
    else:
        offset = _sext(inst.offset, off_bits) if fmt != "FLAT" or w.rdna else inst.offset
    saddr = inst.saddr.offset
    # FLAT has no SADDR operand: LLVM encodes the field as 0 on gfx9 (NULL on gfx11), the hardware ignores it
    no_saddr = (fmt == "FLAT" and not rdna4) or (saddr in (124, 125) if w.rdna else saddr == 0x7F)
    addr_reg = (inst.vaddr if rdna4 else inst.addr).offset - 256
    lanes = _active(w)
    if space == "scratch":
        addrs = np.full(lanes.size, (0 if no_saddr else int(w.sgpr[saddr])) + offset, np.int64)
        if inst.sve:  # the vaddr operand is present
            addrs += w.vgpr[addr_reg, lanes]
        addrs = (addrs & 0xFFFFFFFF).astype(np.uint64)
    else:
        if no_saddr:
            base = w.vgpr[addr_reg, lanes].astype(np.uint64) | w.vgpr[addr_reg + 1, lanes].astype(np.uint64) << np.uint64(32)
        else:
            base = np.uint64(int(w.sgpr[saddr]) | int(w.sgpr[saddr + 1]) << 32) + w.vgpr[addr_reg, lanes].astype(np.uint64)
        addrs = base + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)  # wraps modulo 2^64
    if rdna4:  # TH_ATOMIC_RETURN: bit 0 of the temporal hint
        returns, data = bool(inst.th & 1), inst.vsrc.offset - 256
    else:
        returns = bool(getattr(inst, "glc", 0)) if w.rdna else bool(getattr(inst, "sc0", 0))
        data = inst.data.offset - 256
    _mem_op(w, d, space, lanes, addrs, data, None, inst.vdst.offset - 256, returns)


# The private segment buffer a gfx9 kernel without architected flat scratch (gfx90a) gets: a
# buffer resource of base 0 with ADD_TID_ENABLE (word 3 bit 23: the hardware's per-lane swizzled
# scratch). Scratch is per lane in the emulator, so a MUBUF access through this resource is the
# lane's own scratch at soffset + offset (+ vaddr with offen); other resources are refused.
_ADD_TID = 1 << 23
SCRATCH_RESOURCE = np.array([0, 0, 0xFFFFFFFF, _ADD_TID | 0x27000], np.uint32)


def _mubuf(w: Wave, d: Decoded) -> None:
    inst, name = d.inst, d.name
    rsrc = w.sgpr[inst.srsrc.offset:inst.srsrc.offset + 4]
    base = int(rsrc[0]) | (int(rsrc[1]) & 0xFFFF) << 32
    if not int(rsrc[3]) & _ADD_TID or base != 0 or inst.idxen or inst.lds or getattr(inst, "acc", 0):
        raise EmulatorError(w.where(f"{name} (a buffer resource other than the private segment)"))
    if not name.startswith(("BUFFER_LOAD_", "BUFFER_STORE_")) or "FORMAT" in name:
        raise EmulatorError(w.where(f"{name} (buffer instruction)"))
    lanes = _active(w)
    soff = inst.soffset.offset
    addrs = np.full(lanes.size, (0 if soff == 128 else int(w.sgpr[soff])) + inst.offset, np.int64)  # 128: inline 0
    if inst.offen:
        addrs += w.vgpr[inst.vaddr.offset - 256, lanes]
    addrs = (addrs & 0xFFFFFFFF).astype(np.uint64)
    data = inst.vdata.offset - 256
    if name.startswith("BUFFER_LOAD_"):
        _mem_op(w, d, "scratch", lanes, addrs, None, None, data, True)
    else:
        _mem_op(w, d, "scratch", lanes, addrs, data, None, None, False)


def _smem(w: Wave, d: Decoded) -> None:
    inst, name = d.inst, d.name
    if "LOAD" not in name:
        if name in ("S_DCACHE_INV", "S_GL1_INV", "S_DCACHE_WB"):
            return
        raise EmulatorError(w.where(name))
    if "BUFFER" in name:
        raise EmulatorError(w.where(f"{name} (buffer resources)"))
    base = int(w.sgpr[inst.sbase.offset]) | int(w.sgpr[inst.sbase.offset + 1]) << 32
    if hasattr(inst, "ioffset"):  # RDNA4: a 24-bit signed offset
        off = _sext(inst.ioffset, 24) + (0 if inst.soffset.offset == 124 else int(w.sgpr[inst.soffset.offset]))
    elif w.rdna:
        off = _sext(inst.offset, 21) + (0 if inst.soffset.offset == 124 else int(w.sgpr[inst.soffset.offset]))
    else:
        off = _sext(inst.offset, 21) if inst.imm else int(w.sgpr[inst.offset & 0x7F])
        if inst.soffset_en:
            off += int(w.sgpr[inst.soffset.offset])
    size, signed = _size_of(name)
    dst = inst.sdata.offset
    if size < 4:  # RDNA4's S_LOAD_U8/I8/U16/I16: one SGPR, zero- or sign-extended
        data = w.wg.memory.read((base + off) & ~(size - 1), size)
        _result(w, d, w.sgpr, (slice(dst, dst + 1),), _to_dwords(data.reshape(1, size), signed)[0])
        return
    data = w.wg.memory.read((base + off) & ~3, size)
    w.polled(data, base + off)
    _result(w, d, w.sgpr, (slice(dst, dst + size // 4),), data.view(np.uint32))


_DS_LEGACY = [("READ2ST64_", "LOAD_2ADDR_STRIDE64_"), ("WRITE2ST64_", "STORE_2ADDR_STRIDE64_"),
              ("READ2_", "LOAD_2ADDR_"), ("WRITE2_", "STORE_2ADDR_"), ("READ_", "LOAD_"), ("WRITE_", "STORE_")]


def _ds(w: Wave, d: Decoded) -> None:
    inst, name = d.inst, d.name
    for old, new in _DS_LEGACY:  # CDNA's names for the same operations
        name = name.replace("DS_" + old, "DS_" + new)
    if getattr(inst, "gds", 0):
        raise EmulatorError(w.where(f"{d.name} (GDS)"))
    addr_reg, vdst = inst.addr.offset - 256, inst.vdst.offset - 256
    d0, d1 = inst.data0.offset - 256, inst.data1.offset - 256
    lanes = _active(w)
    if name in ("DS_BPERMUTE_B32", "DS_PERMUTE_B32", "DS_SWIZZLE_B32"):
        _ds_cross_lane(w, d, name, lanes, addr_reg, d0, vdst)
        return
    offset = inst.offset0 | inst.offset1 << 8
    if "2ADDR" in name:
        size, _ = _size_of(name)
        stride = size * (64 if "STRIDE64" in name else 1)
        single = name.replace("_2ADDR_STRIDE64", "").replace("_2ADDR", "")
        base = w.vgpr[addr_reg, lanes].copy()  # the first load may overwrite the address (vdst = addr)
        for k, (off, data) in enumerate(((inst.offset0, d0), (inst.offset1, d1))):
            addrs = (base + np.uint32(off * stride)).astype(np.uint64)
            sub = d.copy(single)
            _mem_op(w, sub, "lds", lanes, addrs, data, None, vdst + k * (size // 4), False)
        return
    addrs = (w.vgpr[addr_reg, lanes] + np.uint32(offset)).astype(np.uint64)
    sub = d.copy(name)
    _mem_op(w, sub, "lds", lanes, addrs, d0, d1, vdst, "RTN" in name)


def _ds_cross_lane(w: Wave, d: Decoded, name: str, lanes: np.ndarray, addr_reg: int, d0: int, vdst: int) -> None:
    inst = d.inst
    n = w.lanes
    exec_l = w.exec_lanes()
    src = w.vgpr[d0].copy()
    out = np.zeros(n, np.uint32)
    if name == "DS_SWIZZLE_B32":
        offset = inst.offset0 | inst.offset1 << 8
        ids = np.arange(n)
        if offset & 0x8000:  # quad permute: each lane of a quad picks one by two bits
            sel = (offset >> (2 * (ids & 3))) & 3
            from_lane = (ids & ~3) | sel
        else:  # bit masks within each group of 32 lanes
            and_m, or_m, xor_m = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
            from_lane = (ids & ~31) | ((((ids & 31) & and_m) | or_m) ^ xor_m)
        ok = exec_l[from_lane]
        out = np.where(ok, src[from_lane], 0).astype(np.uint32)
    else:
        offset = inst.offset0 | inst.offset1 << 8
        sel = ((w.vgpr[addr_reg].astype(np.int64) + offset) >> 2) % (32 if w.rdna else 64)
        if w.lanes == 64 and w.rdna:
            raise EmulatorError(w.where(f"{name} in wave64 on RDNA"))
        if name == "DS_BPERMUTE_B32":
            out = np.where(exec_l[sel], src[sel], 0).astype(np.uint32)
        else:  # forward permute: lane i sends to lane sel[i]
            for i in lanes:
                out[sel[i]] = src[i]
    _result(w, d, w.vgpr, (vdst, exec_l), out[exec_l])


def _mad64(w: Wave, d: Decoded) -> None:
    """V_MAD_U64_U32 / V_MAD_I64_I32: {D1.u1, D0.u64} = S0 * S1 + S2 (65-bit result)."""
    inst = d.inst
    if getattr(inst, "clmp", 0):
        raise EmulatorError(w.where(f"{d.name} with clamp"))
    signed = "I64" in d.name
    a = w.read_raw(inst.src0, 32, False, d.literal)
    b = w.read_raw(inst.src1, 32, False, d.literal)
    c = w.read_raw(inst.src2, 64, False, d.literal)
    a, b, c = (np.broadcast_to(x, (w.lanes,)) for x in (a, b, c))
    exec_l = w.exec_lanes()
    res = np.zeros(w.lanes, np.uint64)
    carry = 0
    for lane in np.nonzero(exec_l)[0]:
        x, y, z = int(a[lane]), int(b[lane]), int(c[lane])
        if signed:
            x, y, z = _sext(x, 32), _sext(y, 32), _sext(z, 64)
        full = x * y + z
        res[lane] = full & 0xFFFFFFFFFFFFFFFF
        if (full >> 64) & 1 if not signed else not -(1 << 63) <= full < (1 << 63):
            carry |= 1 << int(lane)
    w.write_vgpr(inst.vdst.offset - 256, res, 64, exec_l)
    w.write_sgpr(inst.sdst.offset, carry, w.lanes)


def _bitop3(w: Wave, d: Decoded) -> None:
    """V_BITOP3_B32/B16 (gfx950): any function of three inputs, its truth table in the OMOD, ABS
    and NEG fields: result bit = TTBL[s0 << 2 | s1 << 1 | s2] for each bit position. B16 takes the
    halves op_sel picks and writes the low half (zero-extended, as 16-bit results do here) or,
    with op_sel[3], the high half beside the kept low one."""
    inst = d.inst
    table = inst.omod << 6 | inst.abs << 3 | inst.neg
    half = d.name.startswith("V_BITOP3_B16")
    opsel = getattr(inst, "opsel", 0) if half else 0
    a, b, c = (np.broadcast_to(w.read_raw(r, 32, False, d.literal).astype(np.uint32) >> np.uint32(16 * (opsel >> i & 1)),
                               (w.lanes,)) for i, r in enumerate((inst.src0, inst.src1, inst.src2)))
    out = np.zeros(w.lanes, np.uint32)
    for i in range(8):
        if table >> i & 1:
            out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    if half:
        out &= np.uint32(0xFFFF)
        if opsel & 8:
            out = (w.vgpr[inst.vdst.offset - 256] & np.uint32(0xFFFF)) | out << np.uint32(16)
    w.write_vgpr(inst.vdst.offset - 256, out, 32, w.exec_lanes())


def _perm(w: Wave, d: Decoded) -> None:
    """V_PERM_B32 (the manual's BYTE_PERMUTE, whose bit-slice assignments the pcode compiler does
    not translate): each byte of S2 picks a byte of {S0, S1} (0-7), a sign fill of byte 1, 3, 5
    or 7 (8-11), 0x00 (12) or 0xff (13 and up)."""
    inst = d.inst
    a, b, sel = (np.broadcast_to(w.read_raw(r, 32, False, d.literal), (w.lanes,)) for r in (inst.src0, inst.src1, inst.src2))
    data = b | a << np.uint64(32)
    out = np.zeros(w.lanes, np.uint64)
    for k in range(4):
        s = (sel >> np.uint64(8 * k)) & np.uint64(0xFF)
        byte = (data >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        sign = (data >> ((s - np.uint64(8)) * np.uint64(16) + np.uint64(15)) % np.uint64(64) & np.uint64(1)) * np.uint64(0xFF)
        byte = np.where(s < 8, byte, np.where(s < 12, sign, np.where(s == 12, np.uint64(0), np.uint64(0xFF))))
        out |= byte << np.uint64(8 * k)
    w.write_vgpr(inst.vdst.offset - 256, out, 32, w.exec_lanes())


# packed f16 (VOP3P), as LLVM uses them for f16x2 atomics: operation on f64 values (exact for
# add, mul and min/max of f16s) and the number of sources
_PK_F16: dict[str, tuple[Callable, int]] = {"V_PK_ADD_F16": (_add, 2), "V_PK_MUL_F16": (np.multiply, 2),
                                             "V_PK_MIN_F16": (np.fmin, 2), "V_PK_MAX_F16": (np.fmax, 2)}


def _pk_f16(w: Wave, d: Decoded) -> None:
    """A packed f16 operation: the low result from the halves op_sel picks (negated per neg_lo),
    the high one from those op_sel_hi picks (neg_hi); the pseudocode's per-half assignments are
    more than the pcode compiler translates."""
    inst = d.inst
    op, nsrc = _PK_F16[d.name]
    if inst.clmp:
        raise EmulatorError(w.where(f"{d.name.lower()} with clamp"))
    # 16-bit reads: inline constants are f16 values in the low half
    raws = [np.broadcast_to(w.read_raw(r, 16, False, d.literal), (w.lanes,)) for r in (inst.src0, inst.src1)[:nsrc]]
    out = np.zeros(w.lanes, np.uint64)
    for half, (sel, neg) in enumerate(((inst.opsel, inst.neg), (inst.opsel_hi | inst.opsel_hi2 << 2, inst.neg_hi))):
        xs = []
        for i, raw in enumerate(raws):
            x = ((raw >> np.uint64(16 * (sel >> i & 1))) & np.uint64(0xFFFF)).astype(np.uint16).view(np.float16)
            xs.append(-x.astype(np.float64) if neg >> i & 1 else x.astype(np.float64))
        out |= op(*xs).astype(np.float16).view(np.uint16).astype(np.uint64) << np.uint64(16 * half)
    w.write_vgpr(inst.vdst.offset - 256, out, 32, w.exec_lanes())


_DOT = re.compile(r"V_DOT(\d)_([UI])32_(IU|[UI])(8|16)$")


def _dot(w: Wave, d: Decoded) -> None:
    """V_DOT4_U32_U8 / V_DOT4_I32_I8 / V_DOT2_U32_U16 / V_DOT2_I32_I16 and gfx11's V_DOT4_I32_IU8
    (whose NEG bits 0 and 1 say which sources are signed) (VOP3P; dp4a and dp2a): S2 plus the
    products of the byte or half-word lanes of S0 and S1, modulo 2^32."""
    inst = d.inst
    m = _DOT.match(d.name)
    assert m is not None
    n, kind, width = int(m.group(1)), m.group(3), int(m.group(4))
    signs = (inst.neg & 1, inst.neg >> 1 & 1) if kind == "IU" else ((kind == "I",) * 2)
    if inst.clmp or inst.opsel or inst.neg_hi or (inst.neg and kind != "IU"):
        raise EmulatorError(w.where(f"{d.name.lower()} with clamp, neg or op_sel"))
    a, b, c = (np.broadcast_to(w.read_raw(r, 32, False, d.literal).astype(np.int64), (w.lanes,))
               for r in (inst.src0, inst.src1, inst.src2))
    total = c.copy()
    for k in range(n):
        x, y = (_lane_field(v, width * k, width, signed) for v, signed in zip((a, b), signs))
        total = total + x * y
    w.write_vgpr(inst.vdst.offset - 256, (total & 0xFFFFFFFF).astype(np.uint64), 32, w.exec_lanes())


def _lane_field(v: np.ndarray, shift: int, width: int, signed: bool) -> np.ndarray:
    field = (v >> shift) & ((1 << width) - 1)
    return np.where(field >> (width - 1), field - (1 << width), field) if signed else field


def _readlane(w: Wave, d: Decoded) -> None:
    inst = d.inst
    src = inst.src0.offset - 256
    if src < 0:
        raise EmulatorError(w.where(f"{d.name} from a non-VGPR"))
    if "FIRSTLANE" in d.name:
        active = _active(w)
        lane = int(active[0]) if active.size else 0
    else:
        lane = int(w.read_raw(inst.src1, 32, False, d.literal)[0]) % w.lanes
    w.write_sgpr(inst.vdst.offset - 256, int(w.vgpr[src, lane]), 32)  # an SGPR in the vdst field


def _writelane(w: Wave, d: Decoded) -> None:
    inst = d.inst
    value = int(w.read_raw(inst.src0, 32, False, d.literal)[0])
    lane = int(w.read_raw(inst.src1, 32, False, d.literal)[0]) % w.lanes
    w.vgpr[inst.vdst.offset - 256, lane] = value


_NOPS = {"S_NOP", "S_WAITCNT", "S_CLAUSE", "S_DELAY_ALU", "S_WAITCNT_DEPCTR", "S_SET_INST_PREFETCH_DISTANCE",
         "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT", "S_SETPRIO",
         "S_SENDMSG", "S_ICACHE_INV", "BUFFER_GL0_INV", "BUFFER_GL1_INV", "BUFFER_WBL2", "BUFFER_INV",
         "S_WAIT_IDLE", "S_WAIT_LOADCNT", "S_WAIT_STORECNT", "S_WAIT_KMCNT", "S_WAIT_DSCNT",
         "S_WAIT_SAMPLECNT", "S_WAIT_BVHCNT", "S_WAIT_EXPCNT", "S_WAIT_LOADCNT_DSCNT",
         "S_WAIT_STORECNT_DSCNT", "S_WAIT_ALU", "BUFFER_WBINVL1_VOL", "BUFFER_WBINVL1", "S_SETHALT",
         "GLOBAL_INV", "GLOBAL_WB", "GLOBAL_WBINV"}  # RDNA4's cache invalidate/write-back: no caches here


def _endpgm(w: Wave, d: Decoded) -> int:
    if w.pending is not None:
        strict.drain(w)
    w.done = True
    return w.pc


def _barrier(w: Wave, d: Decoded) -> None:
    w.at_barrier = True


def _barrier_signal(w: Wave, d: Decoded) -> None:  # RDNA4's split barrier: signal, then S_BARRIER_WAIT
    if d.inst.ssrc0.offset != 193:  # -1: the workgroup barrier; named barriers are not modelled
        raise EmulatorError(w.where(f"{d.name.lower()} of a named barrier"))
    # the wave is held from its signal, not from its wait: one of the orders the hardware allows
    # (a wave may be slow to reach its wait), and the wait is then already satisfied
    w.at_barrier = True


def _nop(w: Wave, d: Decoded) -> None:
    pass


def _sleep(w: Wave, d: Decoded) -> None:  # a wave polling memory (mbarrier waits) lets the others run meanwhile
    w.yielded = True


MSG_RTN_GET_REALTIME = 0x83


def _realtime(w: Wave, d: Decoded) -> None:
    """The 100 MHz constant-rate counter (%globaltimer): S_MEMREALTIME (gfx9), or S_SENDMSG_RTN_B64
    with MSG_RTN_GET_REALTIME (gfx11+); the host's monotonic clock in its units."""
    if d.name == "S_MEMREALTIME":
        dst = d.inst.sdata.offset
    elif d.inst.ssrc0.offset == MSG_RTN_GET_REALTIME:
        dst = d.inst.sdst.offset
    else:
        raise EmulatorError(w.where(f"{d.name.lower()} of message {d.inst.ssrc0.offset:#x}"))
    value = time.monotonic_ns() // 10
    w.sgpr[dst], w.sgpr[dst + 1] = value & 0xFFFFFFFF, value >> 32 & 0xFFFFFFFF


def _trap(w: Wave, d: Decoded) -> None:
    raise Trapped(w.where(f"{d.name} (the kernel trapped: an assertion or a fault)"))


def _handler(d: Decoded) -> Callable[[Wave, Decoded], "int | None"]:
    """What executes `d`: chosen once per decoded instruction (the step loop's dispatch)."""
    name, fmt = d.name, d.fmt
    if name in strict.WAITS:
        return strict.wait
    if name in _NOPS or name == "S_BARRIER_WAIT":
        return _nop
    if name == "S_ENDPGM":
        return _endpgm
    if name == "S_BARRIER":
        return _barrier
    if name == "S_SLEEP":
        return _sleep
    if name in ("S_MEMREALTIME", "S_SENDMSG_RTN_B64"):
        return _realtime
    if name == "S_BARRIER_SIGNAL":
        return _barrier_signal
    if fmt.startswith("SMEM"):
        return _smem
    if fmt.startswith("DS"):
        return _ds
    if fmt.removeprefix("V").startswith(("GLOBAL", "FLAT", "SCRATCH")):
        return _flat_like
    if fmt.startswith("MUBUF"):
        return _mubuf
    if fmt.startswith("VOPD"):
        return _vopd
    if name in _SATURATING and getattr(d.inst, "clmp", 0):
        return _saturating
    if name.startswith(("V_BITOP3_B32", "V_BITOP3_B16")):
        return _bitop3
    if name.startswith("V_PERM_B32"):
        return _perm
    if name in _PK_F16:
        return _pk_f16
    if _DOT.match(name):
        return _dot
    if name in ("V_MAD_U64_U32", "V_MAD_I64_I32", "V_MAD_CO_U64_U32", "V_MAD_CO_I64_I32"):  # RDNA4: _CO_
        return _mad64
    if name.startswith(("V_READFIRSTLANE_B32", "V_READLANE_B32")):
        return _readlane
    if name.startswith("V_WRITELANE_B32"):
        return _writelane
    if name in ("S_TRAP", "S_CODE_END"):
        return _trap
    return _run_pcode


def step(w: Wave) -> None:
    """Execute the instruction at w.pc."""
    d = w.program.at(w.pc)
    run = d.run
    if run is None:
        run = d.run = _handler(d)
    try:
        new_pc = run(w, d)
    except PcodeUnsupported as exc:
        raise EmulatorError(w.where(f"unimplemented instruction {d.name.lower()} ({d.fmt}): {exc}")) from exc
    except (MemoryFault, StackOverflow) as exc:  # raised without the place: name the instruction and its address
        raise type(exc)(w.where(f"{d.name.lower()}: {exc}")) from None
    w.pc = w.pc + d.size if new_pc is None else new_pc
