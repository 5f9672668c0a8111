"""Warp collectives: shfl (every mode, clamp and segment values, the |p output), vote (all, any,
uni, ballot, negated predicates), match (any, all with |p, b32 and b64), redux.sync (every
operation and type, f32 with .abs and .NaN), elect.sync, activemask and bar.warp.sync.

Two blocks of 80 threads (the third warp of each is partial). In the *divergent* layout some lanes
branch around the instruction and the others pass per-lane member masks that split their warp
into groups (halves, even and odd lanes, quarters, a group that does not start at lane 0); the
*converged* layout runs every thread with the immediate mask 0xffffffff. Forms without .sync take
the divergent layout's active lanes as their group. References follow the PTX ISA's definitions
per lane; a shuffle from a lane outside the group is undefined and not checked, and lanes that
branched around the instruction must leave their output rows untouched.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from conformance.target_forms import TargetForm
from conformance.targets import Instance

OPCODES = {"shfl", "vote", "match", "redux.sync", "elect.sync", "activemask", "bar.warp.sync"}

BLOCK, GRID = 80, 2
N = BLOCK * GRID
ROW = 8  # u32 words per thread: a, a_hi, b, c, membermask, active, partner, unused
OUTS = 2  # u32 results per thread
SENTINEL = 0xDEADBEEF
FULL = 0xFFFFFFFF
CANONICAL_NAN = 0x7FFFFFFF
# shfl c operands of the divergent layout, one per warp: the whole warp, clamps alone, 8- and
# 16-lane segments with full or partial clamps
SHFL_C = [0x1F, 0x0000, 0x181F, 0x1800, 0x1007, 0x1E03, 0x0005, 0x1F1F]
# (b, c) immediates per mode for the converged layout
SHFL_IMM = {"up": (3, 0x1800), "down": (5, 0x181F), "bfly": (17, 0x101F), "idx": (37, 0x1C1F)}

Row = list[int]
Expect = list[int | None]  # per output word; None: undefined, not checked


# ---------------------------------------------------------------- lane layouts
def _lanes(t: int) -> int:
    """Threads of warp t // 32 of a block."""
    return min(32, BLOCK - t // 32 * 32)


def _divergent(block: int, warp: int, lane: int) -> int:
    """The member mask of a lane in the divergent layout (0: the lane branches around)."""
    if block == 0:
        if warp == 1:
            if lane < 16:
                return 0x0000FFFF
            if lane < 28:
                return 0x05550000 if lane % 2 == 0 else 0x0AAA0000
            return 0
        return FULL if warp == 0 else 0x0000FFFF
    if warp == 0:
        return 0xFF << (8 * (lane // 8))
    if warp == 1:
        return 0xFFFFFFF0 if lane >= 4 else 0
    return 0x0FFF if lane < 12 else 0


def layout(divergent: bool) -> list[tuple[bool, int]]:
    """(active, membermask) per thread."""
    out = []
    for g in range(N):
        block, t = divmod(g, BLOCK)
        m = _divergent(block, t // 32, t % 32) if divergent else FULL
        out.append((m != 0, m))
    return out


def _warp_index(g: int) -> int:
    """The warp of thread g, counted over the grid."""
    return g // BLOCK * -(-BLOCK // 32) + g % BLOCK // 32


def _warp_threads(g: int) -> list[int]:
    """Global ids of the threads of g's warp, by lane."""
    block, t = divmod(g, BLOCK)
    first = block * BLOCK + t // 32 * 32
    return list(range(first, first + _lanes(t)))


def group(rows: np.ndarray, g: int, sync: bool) -> list[int]:
    """The global ids of the lanes taking part with thread g (active, and in g's mask under .sync)."""
    mask = int(rows[g, 4]) if sync else FULL
    return [h for lane, h in enumerate(_warp_threads(g)) if rows[h, 5] and mask >> lane & 1]


def _bits(members: list[int]) -> int:
    return sum(1 << (h % BLOCK % 32) for h in members)


# ---------------------------------------------------------------- references (PTX ISA definitions)
def shfl_ref(mode: str, lane: int, b: int, c: int) -> tuple[int, bool]:
    """(source lane, in range): the manual's j and pval; out of range a lane reads itself."""
    bval, clamp, seg = b & 0x1F, c & 0x1F, (c >> 8) & 0x1F
    max_lane = (lane & seg) | (clamp & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j, ok = lane + bval, lane + bval <= max_lane
    elif mode == "bfly":
        j, ok = lane ^ bval, (lane ^ bval) <= max_lane
    else:
        j = min_lane | (bval & ~seg & 0x1F)
        ok = j <= max_lane
    return (j if ok else lane), ok


def _is_nan(x: int) -> bool:
    return (x & 0x7FFFFFFF) > 0x7F800000


def _f32(x: int) -> float:
    return struct.unpack("<f", struct.pack("<I", x))[0]


def redux_ref(op: str, t: str, values: list[int], absolute: bool = False, nan: bool = False) -> int:
    if t == "f32":
        xs = [v & 0x7FFFFFFF if absolute else v for v in values]
        if nan and any(map(_is_nan, xs)):
            return CANONICAL_NAN
        xs = [x for x in xs if not _is_nan(x)]
        if not xs:
            return CANONICAL_NAN
        key = lambda x: (_f32(x), x >> 31 == 0)  # noqa: E731  (+0 > -0)
        return (min if op == "min" else max)(xs, key=key)
    if op in ("and", "or", "xor"):
        acc = FULL if op == "and" else 0
        for v in values:
            acc = {"and": acc & v, "or": acc | v, "xor": acc ^ v}[op]
        return acc
    if op == "add":
        return sum(values) & FULL
    key = (lambda v: v - (1 << 32) if v >> 31 else v) if t == "s32" else (lambda v: v)
    return (min if op == "min" else max)(values, key=key)


# ---------------------------------------------------------------- one use of a collective
@dataclass(frozen=True)
class Use:
    opcode: str
    mods: tuple[str, ...]
    divergent: bool = True  # else converged, immediate mask 0xffffffff
    negate: bool = False  # vote: {!}a
    pred_out: bool = True  # d|p forms
    imm_bc: bool = False  # shfl: b and c immediates

    @property
    def sync(self) -> bool:
        return self.opcode not in ("shfl", "vote") or "sync" in self.mods

    @property
    def head(self) -> tuple[str, str]:
        """(.version, .target): forms without .sync only exist before PTX 6.4 on sm_70 and later."""
        if not self.sync:
            return "6.3", "sm_75"
        return ("8.8", "sm_100a") if "f32" in self.mods else ("8.7", "sm_90")

    @property
    def mask(self) -> str:
        return "%m" if self.divergent else f"{FULL:#x}"

    def _mod(self, names) -> str:
        return next(m for m in self.mods if m in names)

    def body(self, name: str) -> list[str]:
        """PTX setting %r0 (and %r1) from %a/%hi (the value), %b, %c, %m, %x (the partner)."""
        op, m, p = self.opcode, self.mask, "|%p" if self.writes_p else ""
        instr = f"{op}.{'.'.join(self.mods)}" if self.mods else op
        sel = ["selp.u32 %r1, 1, 0, %p;"] if self.writes_p else []
        tail = f", {m}" if self.sync else ""
        if op == "shfl":
            b, c = (str(v) for v in SHFL_IMM[self._mod(SHFL_IMM)]) if self.imm_bc else ("%b", "%c")
            return [f"{instr} %r0{p}, %a, {b}, {c}{tail};"] + sel
        if op == "vote":
            pred = "!%q" if self.negate else "%q"
            out = "%r0" if "ballot" in self.mods else "%p"
            return ["setp.ne.u32 %q, %b, 0;", f"{instr} {out}, {pred}{tail};"] + \
                ([] if "ballot" in self.mods else ["selp.u32 %r0, 1, 0, %p;"])
        if op == "match":
            a = "%a64" if "b64" in self.mods else "%a"
            return [f"{instr} %r0{p}, {a}, {m};"] + sel
        if op == "redux.sync":
            return [f"{instr} %r0, %a, {m};"]
        if op == "elect.sync":
            return [f"{instr} %r0{p}, {m};"] + sel
        if op == "activemask":
            return [f"{instr} %r0;"]
        # bar.warp.sync: publish a in shared memory, sync the group, read a partner's
        return [f"mov.u64 %s, {name}_s;", "mov.u32 %t, %tid.x;", "mul.wide.u32 %o, %t, 4;", "add.s64 %o, %s, %o;",
                "st.shared.u32 [%o], %a;", f"{instr} {m};", "mul.wide.u32 %o, %x, 4;", "add.s64 %o, %s, %o;",
                "ld.shared.u32 %r0, [%o];"]

    @property
    def writes_p(self) -> bool:
        """Whether the instruction has the d|p destination (written to output word 1)."""
        takes_p = self.opcode in ("shfl", "elect.sync") or (self.opcode == "match" and "all" in self.mods)
        return takes_p and self.pred_out

    def outputs(self) -> int:
        return 2 if self.writes_p else 1

    # -------------------------------------------------------------- inputs and expectations
    def rows(self, rng: np.random.Generator) -> np.ndarray:
        rows = np.zeros((N, ROW), np.uint32)
        for g, (active, m) in enumerate(layout(self.divergent)):
            rows[g, 4], rows[g, 5] = m, active
        for g in range(N):
            w = _warp_index(g)  # each warp of a block draws its values from another pattern
            rows[g, 0], rows[g, 1] = self._value(rng, w % 3)
            rows[g, 2] = self._b(rng, w % 3)
            rows[g, 3] = SHFL_C[w % len(SHFL_C)]
        if self.opcode == "bar.warp.sync":
            for g in range(N):
                members = group(rows, g, True)
                if members:
                    rows[g, 6] = members[(members.index(g) + 1) % len(members)] % BLOCK
        return rows

    def _value(self, rng: np.random.Generator, pattern: int) -> tuple[int, int]:
        if self.opcode == "match":
            # few distinct values; pattern 0 makes the whole warp (so every group in it) agree,
            # pattern 1 only its low words (a 64-bit match must compare the high words too)
            if pattern == 0:
                return 7, 9
            return (5 if pattern == 1 else int(rng.integers(0, 2))), int(rng.integers(0, 2))
        if "f32" in self.mods:
            specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x00000001,
                        0x80000001, 0x7F7FFFFF, 0xFF7FFFFF]
            if pattern == 0:  # a warp of NaNs and signed zeros: +0 > -0, or no number at all
                return int(rng.choice([0x7FC00000, 0xFFFFFFFF, 0x7F800001, 0, 0x80000000])), 0
            if pattern == 1 and rng.integers(0, 4) == 0:
                return int(rng.choice(specials)), 0
            return int(np.array(rng.normal() * 2.0 ** int(rng.integers(-20, 20)), np.float32).view(np.uint32)), 0
        if self.opcode == "redux.sync" and pattern == 0:
            return int(rng.choice([0, 1, 0x7FFFFFFF, 0x80000000, FULL, 0x80000001])), 0
        return int(rng.integers(0, 1 << 32)), 0

    def _b(self, rng: np.random.Generator, pattern: int) -> int:
        if self.opcode == "vote":  # predicates: mixed, all true or all false per warp
            return int(rng.integers(0, 2)) if pattern == 0 else pattern - 1
        return int(rng.integers(0, 40))  # shfl offsets, some past 31 (only bits 0-4 count)

    def expect(self, rows: np.ndarray, g: int) -> Expect:
        members = group(rows, g, self.sync)
        lane = g % BLOCK % 32
        op = self.opcode
        if op == "shfl":
            b, c = SHFL_IMM[self._mod(SHFL_IMM)] if self.imm_bc else (int(rows[g, 2]), int(rows[g, 3]))
            j, ok = shfl_ref(self._mod(SHFL_IMM), lane, b, c)
            src = _warp_threads(g)[j] if j < len(_warp_threads(g)) else None
            value = int(rows[src, 0]) if src in members else None
            return [value] + ([int(ok)] if self.pred_out else [])
        if op == "vote":
            preds = {h: bool(rows[h, 2]) != self.negate for h in members}
            if "ballot" in self.mods:
                return [_bits([h for h in members if preds[h]])]
            kind = self._mod(("all", "any", "uni"))
            got = {"all": all(preds.values()), "any": any(preds.values()),
                   "uni": len(set(preds.values())) == 1}[kind]
            return [int(got)]
        value = lambda h: int(rows[h, 0]) | (int(rows[h, 1]) << 32 if "b64" in self.mods else 0)  # noqa: E731
        if op == "match":
            if "any" in self.mods:
                return [_bits([h for h in members if value(h) == value(g)])]
            same = len({value(h) for h in members}) == 1
            return [_bits(members) if same else 0] + ([int(same)] if self.pred_out else [])
        if op == "redux.sync":
            op_name = self.mods[0]
            return [redux_ref(op_name, self.mods[-1], [value(h) for h in members], "abs" in self.mods,
                              "NaN" in self.mods)]
        if op == "elect.sync":
            leader = members[0] % BLOCK % 32  # the lowest member lane, as the hardware elects
            return [leader] + ([int(lane == leader)] if self.pred_out else [])
        if op == "activemask":
            return [_bits(group(rows, g, False))]
        return [int(rows[int(rows[g, 6]) + g // BLOCK * BLOCK, 0])]


# ---------------------------------------------------------------- kernels and checks
def kernel(u: Use, name: str) -> tuple[str, str]:
    decls = f".shared .align 4 .b32 {name}_s[{BLOCK}];" if u.opcode == "bar.warp.sync" else ""
    stores = [f"st.global.u32 [%out+{4 * k}], %r{k};" for k in range(u.outputs())]
    body = ["mov.u32 %t, %ntid.x;", "mov.u32 %u, %ctaid.x;", "mov.u32 %x, %tid.x;", "mad.lo.u32 %t, %t, %u, %x;",
            f"ld.param.u64 %in, [{name}_in];", "cvta.to.global.u64 %in, %in;",
            f"ld.param.u64 %out, [{name}_out];", "cvta.to.global.u64 %out, %out;",
            f"mul.wide.u32 %o, %t, {4 * ROW};", "add.s64 %in, %in, %o;",
            f"mul.wide.u32 %o, %t, {4 * OUTS};", "add.s64 %out, %out, %o;",
            "ld.global.v4.u32 {%a, %hi, %b, %c}, [%in];", "ld.global.v4.u32 {%m, %u, %x, %t}, [%in+16];",
            "mov.b64 %a64, {%a, %hi};", "setp.ne.u32 %act, %u, 0;", f"@!%act bra {name}_end;",
            *u.body(name), *stores, f"{name}_end:"]
    regs = [".reg .pred %act, %p, %q;", ".reg .b32 %t, %u, %a, %hi, %b, %c, %m, %x, %r<2>;",
            ".reg .b64 %in, %out, %o, %a64, %s;"]
    params = f".param .u64 {name}_in, .param .u64 {name}_out"
    entry = f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(regs + body) + "\n  ret;\n}\n"
    return decls, entry


def check_for(u: Use) -> Callable:
    def check(module, name: str) -> None:
        rows = u.rows(np.random.default_rng(zlib.crc32(name.encode())))
        out = np.full(N * OUTS, SENTINEL, np.uint32)
        module.launch(name, (GRID,), (BLOCK,), [rows, out])
        bad = []
        for g in range(N):
            want: Expect = u.expect(rows, g) if rows[g, 5] else [SENTINEL] * u.outputs()
            for k, w in enumerate(want):
                got = int(out[g * OUTS + k])
                if w is not None and got != w:
                    bad.append(f"thread {g} (block {g // BLOCK}, lane {g % BLOCK % 32}, mask {int(rows[g, 4]):#x}) "
                               f"out{k} = {got:#x}, expected {w:#x}")
        assert not bad, f"{len(bad)} differ: " + "; ".join(bad[:4])
    return check


# ---------------------------------------------------------------- uses per form line
def _uses(tf: TargetForm) -> list[Use]:
    op, syntax = tf.opcode, tf.syntax
    sync = ".sync" in syntax
    pre = ("sync",) if sync and op in ("shfl", "vote") else ()
    if op == "shfl":
        uses = [Use(op, pre + (mode, "b32")) for mode in ("up", "down", "bfly", "idx")]
        if sync:  # immediates (the constant shuffle) in a converged warp, with and without |p
            uses += [Use(op, pre + (mode, "b32"), divergent=False, imm_bc=True, pred_out=k % 2 == 0)
                     for k, mode in enumerate(("up", "down", "bfly", "idx"))]
        return uses
    if op == "vote":
        if "ballot" in syntax:
            return [Use(op, pre + ("ballot", "b32"), negate=True), Use(op, pre + ("ballot", "b32"), divergent=not sync)]
        uses = [Use(op, pre + (k, "pred"), negate=k != "any") for k in ("all", "any", "uni")]
        return uses + ([Use(op, pre + ("all", "pred"), divergent=False)] if sync else [])
    if op == "match":
        kind = "any" if ".any" in syntax else "all"
        uses = [Use(op, (kind, "sync", t)) for t in ("b32", "b64")]
        return uses + [Use(op, (kind, "sync", "b32"), divergent=False, pred_out=False)]
    if op == "redux.sync":
        if "f32" in syntax:
            return [Use(op, mods) for mods in (("min", "f32"), ("max", "abs", "f32"), ("min", "NaN", "f32"),
                                               ("max", "abs", "NaN", "f32"), ("min", "abs", "f32"))]
        if ".op2" in syntax:
            return [Use(op, (o, "b32")) for o in ("and", "or", "xor")]
        uses = [Use(op, (o, t)) for o in ("add", "min", "max") for t in ("u32", "s32")]
        return uses + [Use(op, ("add", "u32"), divergent=False)]
    if op == "elect.sync":
        return [Use(op, ()), Use(op, (), divergent=False)]
    if op == "activemask":
        return [Use(op, ("b32",))]
    return [Use(op, ()), Use(op, (), divergent=False)]  # bar.warp.sync


def instances(tf: TargetForm) -> list[Instance]:
    out = []
    for k, u in enumerate(_uses(tf)):
        tag = "_".join([u.opcode.replace(".", "_"), *u.mods, "div" if u.divergent else "conv"])
        name = f"warp_{tag}_{k}"
        decls, entry = kernel(u, name)
        version, target = u.head
        out.append(Instance(u.mods, name, entry, check_for(u), decls, target=target, version=version))
    return out
