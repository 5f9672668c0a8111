"""Memory and data movement: ld/ldu/st in every state space the form allows (and through generic
addresses into each), mov (values, immediates, special registers, symbol addresses, pack/unpack),
cvta/isspacep, cp.async with its groups, st.bulk, and the cache hints that are no-ops here
(prefetch, discard, applypriority, createpolicy): the data must still be right around them.

A load's data lies in one *place* (global buffer, shared array, local array, module .const with
an initializer, kernel parameter, .func parameter); lane t reads slot perm(t) of it (own slot,
reversed, or all lanes one slot) and writes what it got to its row of `out`. A store writes lane
t's values to slot perm(t) of its place, which is then copied to `out`. The copies around the
access under test move whole slots in units of at most 8 bytes. References are exact Python on
bytes: sign or zero extension into wider registers, truncation from wider registers.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from conformance.target_forms import ABSENT, TargetForm
from conformance.targets import Instance
from zluda_py.ptx import grammar

OPCODES = {"ld", "ldu", "st", "st.bulk", "mov", "cvta", "isspacep", "cp.async", "cp.async.commit_group",
           "cp.async.wait_group", "cp.async.wait_all", "prefetch", "prefetchu",
           "discard", "applypriority", "createpolicy"}

THREADS = 48  # one and a half warps: the second warp is partial
WIDTH = {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32,
         "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128}
# register width per type: narrow types also go through wider registers (extension, truncation)
REG_BITS = {"b8": 16, "u8": 32, "s8": 64, "b16": 16, "u16": 64, "s16": 32}
SHARED = ("shared", "shared::cta", "shared::cluster")
STRONG = ("volatile", "relaxed", "acquire", "release", "mmio")
GLOBAL_ONLY_HINTS = ("L2::cache_hint", "L2::64B", "L2::128B", "L2::256B")
PERMS = ("lane", "rev", "bcast")
BCAST_SLOT = 3


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _line(tf: TargetForm) -> int:
    return grammar.opcodes()[tf.opcode].forms.index(tf.form)


def _tag(mods: tuple[str, ...]) -> str:
    return "_".join(m.replace("::", "_") for m in mods) or "plain"


def _entry(name: str, params: list[str], regs: list[str], body: list[str]) -> str:
    return (f".visible .entry {name}({', '.join(params)})\n{{\n  " + "\n  ".join(regs + body)
            + "\n  ret;\n}\n")


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed byte buffer at a 64-byte boundary (256-bit accesses need 32)."""
    raw = np.zeros(nbytes + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip:skip + nbytes]


def _perm(pattern: str, t: int) -> int:
    return {"lane": t, "rev": THREADS - 1 - t, "bcast": BCAST_SLOT}[pattern]


def _perm_ptx(pattern: str) -> list[str]:
    """%s = the slot lane %t accesses."""
    return {"lane": ["mov.u32 %s, %t;"], "rev": [f"sub.u32 %s, {THREADS - 1}, %t;"],
            "bcast": [f"mov.u32 %s, {BCAST_SLOT};"]}[pattern]


def _copy(src: str, dst: str, nbytes: int, ld_space: str, st_space: str) -> list[str]:
    """Move nbytes from [src] to [dst] (address expressions), in units of at most 8 bytes."""
    unit = min(nbytes, 8)
    return [f"ld.{ld_space}.b{8 * unit} %cp, [{src}+{off}]; st.{st_space}.b{8 * unit} [{dst}+{off}], %cp;"
            for off in range(0, nbytes, unit)]


def _vec(prefix: str, n: int) -> str:
    return f"%{prefix}0" if n == 1 else "{" + ", ".join(f"%{prefix}{k}" for k in range(n)) + "}"


def _reg_decl(t: str) -> tuple[str, int]:
    bits = REG_BITS.get(t, WIDTH[t])
    return (t if t in ("f32", "f64") else f"b{bits}"), bits


# ================================================================ ld / ldu / st
@dataclass(frozen=True)
class Access:
    """One ld/ldu/st under test: its modifiers, the place its data lies in, how lanes address it."""

    opcode: str
    mods: tuple[str, ...]
    place: str  # global shared local const kparam fparam (ld) | global shared local arg ret (st)
    generic: bool  # addressed through a generic address into the place
    pattern: str

    @property
    def t(self) -> str:
        return self.mods[-1]

    @property
    def n(self) -> int:
        return next((int(m[1:]) for m in self.mods if m in ("v2", "v4", "v8")), 1)

    @property
    def size(self) -> int:
        return WIDTH[self.t] // 8

    @property
    def slot(self) -> int:
        return self.size * self.n

    @property
    def reg(self) -> tuple[str, int]:
        return _reg_decl(self.t)

    @property
    def hint(self) -> bool:
        return "L2::cache_hint" in self.mods

    def instr(self, addr: str, values: str) -> str:
        ops = f"{values}, [{addr}]" if self.opcode != "st" else f"[{addr}], {values}"
        return f"{self.opcode}.{'.'.join(self.mods)} {ops}{', %pol' if self.hint else ''};"


def _space(mods: tuple[str, ...]) -> str | None:
    return next((m for m in mods if m in ("global", "local", "const", "param", "param::entry", "param::func")
                 or m in SHARED), None)


def valid(opcode: str, mods: tuple[str, ...]) -> bool:
    """Whether ptxas takes this ld/ldu/st modifier list (the manual's rules as ptxas applies them)."""
    t = mods[-1]
    space = _space(mods)
    n = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
    bits = WIDTH.get(t, 0) * n
    global_ish = space in (None, "global")
    if bits > 256 or (t == "b128" and n > 1):
        return False
    if bits == 256 and not global_ish:
        return False
    if any(m in STRONG for m in mods) and not (global_ish or space in SHARED):
        return False
    if any(m in GLOBAL_ONLY_HINTS or "evict" in m or "no_allocate" in m for m in mods) and not global_ish:
        return False
    if any(m.startswith("L2::evict") for m in mods) and bits != 256:  # ptxas: only on .v8.b32/.v4.b64
        return False
    if "nc" in mods and any(m in ("cv", "lu") for m in mods):
        return False
    if opcode == "ldu" and not global_ish:
        return False
    return True


def _choose(tf: TargetForm, forced: dict[int, str], uncovered: set[tuple[int, str]], k: int) -> tuple[str, ...] | None:
    """A valid modifier list with the `forced` slot values, preferring values still uncovered,
    then the others in a rotation by k (so that the instances spread over them); slots are
    decided type first, then vector, space and the rest in order (an undecided optional slot
    counts as absent, the loosest choice)."""
    slots = tf.form.slots
    order = sorted(range(len(slots)), key=lambda i: (i != len(slots) - 1, "v2" not in slots[i].values,
                                                     "global" not in slots[i].values, i))
    chosen: dict[int, str] = {}

    def mods(extra: dict[int, str]) -> tuple[str, ...]:
        pick = {**forced, **chosen, **extra}
        out = []
        for i, s in enumerate(slots):
            v = pick.get(i, ABSENT if s.optional else sorted(s.values)[0])
            if v != ABSENT:
                out.append(v)
        return tuple(out)

    for i in order:
        s = slots[i]
        values = sorted(s.values | ({ABSENT} if s.optional else set()))
        fresh = [v for v in values if (i, v) in uncovered]
        seen = [v for v in values if (i, v) not in uncovered]
        cands = [forced[i]] if i in forced else fresh + seen[k % max(len(seen), 1):] + seen[:k % max(len(seen), 1)]
        pick = next((v for v in cands if valid(tf.opcode, mods({i: v}))), None)
        if pick is None:
            return None
        chosen[i] = pick
    return mods({})


def _plans(tf: TargetForm) -> list[tuple[str, ...]]:
    """Modifier lists covering every requirement of the line that ptxas can take: one per type
    first, then one per value still missing."""
    type_slot = len(tf.form.slots) - 1
    uncovered = set(tf.requirements())
    out = []
    for t in sorted(tf.form.slots[type_slot].values):
        m = _choose(tf, {type_slot: t}, uncovered, len(out))
        if m is not None:
            out.append(m)
            uncovered -= tf.covered_by(m)
    vec_slot = next((i for i, s in enumerate(tf.form.slots) if "v2" in s.values), None)
    shapes = [{}] + [{type_slot: t, vec_slot: v} for t in ("b32", "b64") for v in ("v8", "v4")] * (vec_slot is not None)
    for slot, value in sorted(uncovered):
        if (slot, value) in uncovered:  # some values need a shape (L2::evict_*: 256-bit vectors)
            m = next((m for shape in shapes if (m := _choose(tf, {**shape, slot: value}, uncovered, len(out)))), None)
            if m is not None:
                out.append(m)
                uncovered -= tf.covered_by(m)
    return out


LD_PLACES = {"global": "global", "local": "local", "const": "const", "param": "kparam", "param::entry": "kparam",
             "param::func": "fparam", **{s: "shared" for s in SHARED}}
ST_PLACES = {"global": "global", "local": "local", "param": "arg", "param::func": "ret",
             **{s: "shared" for s in SHARED}}


def _access(opcode: str, mods: tuple[str, ...], k: int, g: int) -> Access:
    """Where the k-th instance of a line (its g-th generic one) puts its data; a generic address
    rotates over the places the modifiers allow (hints and ldu: global memory; strong accesses:
    global or shared)."""
    space = _space(mods)
    if space is None:
        if opcode == "ldu" or any(m in GLOBAL_ONLY_HINTS or "evict" in m or "no_allocate" in m for m in mods):
            options = ["global"]
        elif any(m in STRONG for m in mods):
            options = ["global", "shared"]
        else:
            options = ["global", "shared", "local"] + (["const", "kparam"] if opcode != "st" else [])
        place, generic = options[g % len(options)], True
    else:
        place, generic = (LD_PLACES if opcode != "st" else ST_PLACES)[space], False
    own = place in ("local", "fparam", "arg", "ret")
    patterns = ("bcast",) if opcode == "ldu" else PERMS if opcode == "ld" else PERMS[:2]
    return Access(opcode, mods, place, generic, "lane" if own and opcode == "st" else patterns[k % len(patterns)])


COMMON_REGS = [".reg .pred %p<2>;", ".reg .b32 %t, %s, %a32, %x;",
               ".reg .b64 %src, %out, %gsrc, %gout, %o, %so, %a, %b, %cp, %pol;"]


def _header(name: str) -> list[str]:
    return ["mov.u32 %t, %tid.x;", f"ld.param.u64 %gsrc, [{name}_src];", f"ld.param.u64 %gout, [{name}_out];",
            "cvta.to.global.u64 %src, %gsrc;", "cvta.to.global.u64 %out, %gout;"]


def _policy(a: Access) -> list[str]:
    return ["createpolicy.fractional.L2::evict_last.b64 %pol, 1.0;"] if a.hint else []


def _space_address(a: Access, symbol: str, space: str) -> list[str]:
    """%a (or %a32 for .shared::cta) = slot %s of `symbol`, generic when the access is."""
    if "shared::cta" in a.mods:
        return [f"mov.u32 %a32, {symbol};", f"mad.lo.u32 %a32, %s, {a.slot}, %a32;"]
    body = [f"mov.u64 %a, {symbol};", "add.s64 %a, %a, %so;"]
    return body + ([f"cvta.{space}.u64 %a, %a;"] if a.generic else [])


def _addr_reg(a: Access) -> str:
    return "%a32" if "shared::cta" in a.mods else "%a"


def ld_kernel(a: Access, name: str, data: bytes) -> tuple[str, str]:
    """(decls, entry) of a load instance; `data` is the place's initial bytes (const only)."""
    rt, rbits = a.reg
    area = THREADS * a.slot
    decls, params = "", [f".param .u64 {name}_src", f".param .u64 {name}_out"]
    regs = COMMON_REGS + [f".reg .{rt} %v<{a.n}>;"]
    body = _header(name) + _perm_ptx(a.pattern) + [f"mul.wide.u32 %o, %t, {a.slot};",
                                                   f"mul.wide.u32 %so, %s, {a.slot};"] + _policy(a)
    load = a.instr(_addr_reg(a), _vec("v", a.n))
    outs = [f"mul.wide.u32 %b, %t, {a.n * rbits // 8};", "add.s64 %b, %out, %b;"]
    outs += [f"st.global.b{rbits} [%b+{k * rbits // 8}], %v{k};" for k in range(a.n)]
    if a.place == "global":
        body += ["add.s64 %a, %gsrc, %so;" if a.generic else "add.s64 %a, %src, %so;", load]
    elif a.place == "shared":
        decls = f".shared .align 32 .b8 {name}_s[{area}];"
        body += ["add.s64 %a, %src, %o;", f"mov.u64 %b, {name}_s;", "add.s64 %b, %b, %o;"]
        body += _copy("%a", "%b", a.slot, "global", "shared") + ["bar.sync 0;"]
        body += _space_address(a, f"{name}_s", "shared") + [load]
    elif a.place == "local":  # the lane's own window holds the slot it reads
        regs.append(f".local .align 16 .b8 {name}_l[{a.slot}];")
        body += ["add.s64 %a, %src, %so;"] + _copy("%a", f"{name}_l", a.slot, "global", "local")
        body += [f"mov.u64 %a, {name}_l;"] + (["cvta.local.u64 %a, %a;"] if a.generic else []) + [load]
    elif a.place == "const":
        init = ", ".join(str(x) for x in data)
        decls = f".const .align 32 .b8 {name}_c[{area}] = {{{init}}};"
        body += _space_address(a, f"{name}_c", "const") + [load]
    elif a.place == "kparam":
        params.append(f".param .align 16 .b8 {name}_k[{area}]")
        body += _space_address(a, f"{name}_k", "param") + [load]
    else:  # fparam: a .func loads its parameter, filled by the caller from slot %s
        func = f"{name}_f"
        decls = (f".func {func}(.param .align 16 .b8 {func}_x[{a.slot}], .param .b64 {func}_y)\n{{\n  "
                 + "\n  ".join([".reg .b64 %d;", f".reg .{rt} %v<{a.n}>;", f"ld.param.u64 %d, [{func}_y];",
                                a.instr(f"{func}_x", _vec("v", a.n))]
                               + [f"st.global.b{rbits} [%d+{k * rbits // 8}], %v{k};" for k in range(a.n)])
                 + "\n  ret;\n}\n")
        outs = []
        body += ["add.s64 %a, %src, %so;", f"mul.wide.u32 %b, %t, {a.n * rbits // 8};", "add.s64 %b, %out, %b;",
                 "{", f".param .align 16 .b8 px[{a.slot}];", ".param .b64 py;"]
        body += _copy("%a", "px", a.slot, "global", "param") + ["st.param.b64 [py], %b;",
                                                                 f"call.uni {func}, (px, py);", "}"]
    return decls, _entry(name, params, regs, body + outs)


def _extend(raw: bytes, t: str, bits: int) -> int:
    """An element as the register of `bits` holds it after ld (sign-extended for signed types)."""
    v = int.from_bytes(raw, "little")
    w = WIDTH[t]
    if t.startswith("s") and v >> (w - 1):
        v -= 1 << w
    return v & ((1 << bits) - 1)


def ld_check(a: Access) -> Callable:
    def check(module, name: str) -> None:
        rbits = a.reg[1]
        data = _place_data(a, name)
        src = _aligned(len(data))
        src[:] = np.frombuffer(data, np.uint8)
        out = _aligned(THREADS * a.n * rbits // 8)
        args = [src, out] + ([data] if a.place == "kparam" else [])
        module.launch(name, (1,), (THREADS,), args)
        got = out.tobytes()
        step = rbits // 8
        for t in range(THREADS):
            base = _perm(a.pattern, t) * a.slot
            for k in range(a.n):
                want = _extend(data[base + k * a.size:base + (k + 1) * a.size], a.t, rbits)
                at = (t * a.n + k) * step
                have = int.from_bytes(got[at:at + step], "little")
                assert have == want, (f"lane {t} element {k} (slot {base // a.slot} of {a.place}"
                                      f"{', generic' if a.generic else ''}): got {have:#x}, expected {want:#x}")
    return check


def _place_data(a: Access, name: str) -> bytes:
    return _rng(name).bytes(THREADS * a.slot)


def st_kernel(a: Access, name: str) -> tuple[str, str]:
    """(decls, entry) of a store instance: lane t stores the values of its row of src to slot
    perm(t) of the place, which then goes to slot perm(t) of out."""
    rt, rbits = a.reg
    row = a.n * rbits // 8
    area = THREADS * a.slot
    decls = ""
    regs = COMMON_REGS + [f".reg .{rt} %v<{a.n}>;"]
    body = _header(name) + _perm_ptx(a.pattern) + [f"mul.wide.u32 %o, %t, {a.slot};",
                                                   f"mul.wide.u32 %so, %s, {a.slot};", f"mul.wide.u32 %b, %t, {row};",
                                                   "add.s64 %b, %src, %b;"]
    body += [f"ld.global.b{rbits} %v{k}, [%b+{k * rbits // 8}];" for k in range(a.n)] + _policy(a)
    store = a.instr(_addr_reg(a), _vec("v", a.n))
    dst = "add.s64 %b, %out, %so;"
    if a.place == "global":
        body += ["add.s64 %a, %gout, %so;" if a.generic else "add.s64 %a, %out, %so;", store]
    elif a.place == "shared":
        decls = f".shared .align 32 .b8 {name}_s[{area}];"
        body += _space_address(a, f"{name}_s", "shared") + [store, "bar.sync 0;", f"mov.u64 %a, {name}_s;",
                                                                  "add.s64 %a, %a, %o;", "add.s64 %b, %out, %o;"]
        body += _copy("%a", "%b", a.slot, "shared", "global")
    elif a.place == "local":
        regs.append(f".local .align 16 .b8 {name}_l[{a.slot}];")
        body += [f"mov.u64 %a, {name}_l;"] + (["cvta.local.u64 %a, %a;"] if a.generic else []) + [store, dst]
        body += _copy(f"{name}_l", "%b", a.slot, "local", "global")
    elif a.place == "arg":  # st.param into a call's argument, which the callee copies out
        func = f"{name}_f"
        decls = (f".func {func}(.param .align 16 .b8 {func}_x[{a.slot}], .param .b64 {func}_y)\n{{\n  "
                 + "\n  ".join([".reg .b64 %d, %cp;", f"ld.param.u64 %d, [{func}_y];"]
                               + _copy(f"{func}_x", "%d", a.slot, "param", "global")) + "\n  ret;\n}\n")
        body += [dst, "{", f".param .align 16 .b8 px[{a.slot}];", ".param .b64 py;", a.instr("px", _vec("v", a.n)),
                 "st.param.b64 [py], %b;", f"call.uni {func}, (px, py);", "}"]
    else:  # ret: st.param::func into the callee's return parameter
        func = f"{name}_f"
        lines = ([f".reg .{rt} %v<{a.n}>;"] + [f"ld.param.b{rbits} %v{k}, [{func}_x+{k * rbits // 8}];"
                                              for k in range(a.n)] + [a.instr(f"{func}_r", _vec("v", a.n))])
        decls = (f".func (.param .align 16 .b8 {func}_r[{a.slot}]) {func}(.param .align 16 .b8 {func}_x[{row}])\n"
                 "{\n  " + "\n  ".join(lines) + "\n  ret;\n}\n")
        body += [dst, "{", f".param .align 16 .b8 px[{row}];", f".param .align 16 .b8 pr[{a.slot}];"]
        body += [f"st.param.b{rbits} [px+{k * rbits // 8}], %v{k};" for k in range(a.n)]
        body += [f"call.uni (pr), {func}, (px);"] + _copy("pr", "%b", a.slot, "param", "global") + ["}"]
    entry = _entry(name, [f".param .u64 {name}_src", f".param .u64 {name}_out"], regs, body)
    return decls, entry


def st_check(a: Access) -> Callable:
    def check(module, name: str) -> None:
        rbits = a.reg[1]
        rng = _rng(name)
        row = a.n * rbits // 8
        src = _aligned(THREADS * row)
        src[:] = np.frombuffer(rng.bytes(len(src)), np.uint8)
        background = rng.bytes(THREADS * a.slot + 16)
        out = _aligned(len(background))
        out[:] = np.frombuffer(background, np.uint8)
        module.launch(name, (1,), (THREADS,), [src, out])
        want = bytearray(background)
        for t in range(THREADS):
            at = _perm(a.pattern, t) * a.slot
            for k in range(a.n):  # the low bytes of each (wider) register
                lo = t * row + k * rbits // 8
                want[at + k * a.size:at + (k + 1) * a.size] = src.tobytes()[lo:lo + a.size]
        got = out.tobytes()
        bad = [i for i in range(len(want)) if got[i] != want[i]]
        assert not bad, (f"{len(bad)} bytes differ, first at {bad[0]} (slot {bad[0] // a.slot}, place {a.place}"
                         f"{', generic' if a.generic else ''}): got {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")
    return check


def _target(mods: tuple[str, ...]) -> tuple[str, str]:
    n = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
    return ("sm_100", "8.8") if WIDTH.get(mods[-1], 0) * n == 256 else ("sm_90", "8.7")


def access_instances(tf: TargetForm) -> list[Instance]:
    out = []
    generic = 0
    for k, mods in enumerate(_plans(tf)):
        a = _access(tf.opcode, mods, k, generic)
        generic += a.generic
        name = f"{tf.opcode}{_line(tf)}_{k}_{_tag(mods)}"
        if tf.opcode == "st":
            decls, entry = st_kernel(a, name)
            check = st_check(a)
        else:
            decls, entry = ld_kernel(a, name, _place_data(a, name))
            check = ld_check(a)
        target, version = _target(mods)
        out.append(Instance(mods, name, entry, check, decls, target, version,
                            notes=[f"place {a.place}{' (generic)' if a.generic else ''}, {a.pattern}"]))
    if _line(tf) == 0 and tf.opcode in GENERIC_TOUR:  # a generic address into every place
        mods, places = GENERIC_TOUR[tf.opcode]
        for k, place in enumerate(places):
            a = Access(tf.opcode, mods, place, True, "lane" if place == "local" else PERMS[k % 3])
            name = f"{tf.opcode}_generic_{place}"
            decls, entry = st_kernel(a, name) if tf.opcode == "st" else ld_kernel(a, name, _place_data(a, name))
            out.append(Instance(mods, name, entry, st_check(a) if tf.opcode == "st" else ld_check(a), decls))
    return out


GENERIC_TOUR = {"ld": (("v4", "b32"), ("shared", "local", "const", "kparam")),
                "st": (("v2", "b64"), ("shared", "local"))}


# ================================================================ the word-table kernels
# The other instances write W 64-bit words per lane to `out` (a row per lane) from values of
# their src row (W words too); `check` compares with a reference table, None where the manual
# leaves the answer open.
def _words_kernel(name: str, body: list[str], regs: list[str], params: tuple[str, ...] = ()) -> str:
    return _entry(name, [f".param .u64 {name}_src", f".param .u64 {name}_out", *params], COMMON_REGS + regs,
                  _header(name) + body)


def _put(j: int, reg: str, bits: int = 64) -> list[str]:
    """Word j of the lane's out row = reg (zero-extended to 64 bits by the zeroed row)."""
    return [f"st.global.b{bits} [%b+{8 * j}], {reg};"]


ROW = ["mul.wide.u32 %o, %t, {w};", "add.s64 %a, %src, %o;", "add.s64 %b, %out, %o;"]


def _row(words: int) -> list[str]:
    return [line.format(w=8 * words) for line in ROW]


def _words_check(words: int, reference: Callable[[np.ndarray], list[list[int | None]]],
                 extra: Callable[[str], list] = lambda name: []) -> Callable:
    def check(module, name: str) -> None:
        src = _aligned(THREADS * words * 8).view(np.uint64)
        src[:] = np.frombuffer(_rng(name).bytes(src.nbytes), np.uint64)
        out = _aligned(THREADS * words * 8).view(np.uint64)
        want = reference(src.copy().reshape(THREADS, words))  # before the kernel may write src
        module.launch(name, (1,), (THREADS,), [src, out, *extra(name)])
        got = out.reshape(THREADS, words)
        for t in range(THREADS):
            for j, w in enumerate(want[t]):
                assert w is None or int(got[t, j]) == w, f"lane {t} word {j}: got {int(got[t, j]):#x}, expected {w:#x}"
    return check


# ---------------------------------------------------------------- mov
MOV_IMM = {"b16": 0x1234, "u16": 0xBEEF, "s16": -3, "b32": 0x12345678, "u32": 0xDEADBEEF, "s32": -123456,
           "f32": 0x3FC00000, "b64": 0x0123456789ABCDEF, "u64": 0xFEDCBA9876543210, "s64": -5000000000,
           "f64": 0xC004000000000000}
MOV_GLOBAL = 0x1122334455667788  # the first word of the instance's .global array; the second is its complement


def _imm(t: str) -> str:
    v = MOV_IMM[t]
    return {"f32": f"0f{v:08X}", "f64": f"0d{v:016X}"}.get(t, str(v))


def mov_instance(t: str, name: str) -> Instance:
    """mov.t from a register and from an immediate; per type also what mov does besides:
    special registers (u32), symbol addresses (u64), pack and unpack (b32, b64)."""
    mask = (1 << WIDTH.get(t, 1)) - 1
    if t == "pred":
        body = _row(3) + ["ld.global.u32 %x, [%a];", "and.b32 %x, %x, 1;", "setp.ne.u32 %p0, %x, 0;",
                          "mov.pred %p1, %p0;", "selp.u32 %s, 1, 0, %p1;", *_put(0, "%s", 32),
                          "mov.pred %p1, 1;", "selp.u32 %s, 1, 0, %p1;", *_put(1, "%s", 32),
                          "mov.pred %p1, 0;", "selp.u32 %s, 1, 0, %p1;", *_put(2, "%s", 32)]
        ref = lambda src: [[int(r[0]) & 1, 1, 0] for r in src]  # noqa: E731
        return Instance((t,), name, _words_kernel(name, body, []), _words_check(3, ref))
    bits = WIDTH[t]
    rt = t if t in ("f32", "f64") else f"b{bits}"
    body = _row(4) + [f"ld.global.b{bits} %v0, [%a];", f"mov.{t} %v1, %v0;", *_put(0, "%v1", bits),
                      f"mov.{t} %v1, {_imm(t)};", *_put(1, "%v1", bits)]
    extra: list[Callable[[int, list[int]], int]] = []
    decls = ""
    regs = [f".reg .{rt} %v<2>;", ".reg .b16 %h<4>;", ".reg .b32 %r<2>;"]
    if t == "u32":
        body += ["mov.u32 %v1, %tid.x;", *_put(2, "%v1", 32), "mov.u32 %v1, %laneid;", *_put(3, "%v1", 32)]
        extra = [lambda lane, row: lane, lambda lane, row: lane % 32]
    elif t == "u64":
        decls = f".global .align 8 .u64 {name}_g[2] = {{{MOV_GLOBAL}, {MOV_GLOBAL ^ (2**64 - 1)}}};"
        body += [f"mov.u64 %v1, {name}_g;", "ld.global.u64 %v1, [%v1];", *_put(2, "%v1"),
                 f"mov.u64 %v1, {name}_g;", "ld.global.u64 %v1, [%v1+8];", *_put(3, "%v1")]
        extra = [lambda lane, row: MOV_GLOBAL, lambda lane, row: MOV_GLOBAL ^ (2**64 - 1)]
    elif t == "b32":  # halves swapped through an unpack and a pack
        body += ["mov.b32 {%h0, %h1}, %v0;", "mov.b32 %v1, {%h1, %h0};", *_put(2, "%v1", 32)]
        extra = [lambda lane, row: (row[0] >> 16 | row[0] << 16) & 0xFFFFFFFF]
    elif t == "b64":  # 32-bit halves swapped; 16-bit quarters reversed
        body += ["mov.b64 {%r0, %r1}, %v0;", "mov.b64 %v1, {%r1, %r0};", *_put(2, "%v1"),
                 "mov.b64 {%h0, %h1, %h2, %h3}, %v0;", "mov.b64 %v1, {%h3, %h2, %h1, %h0};", *_put(3, "%v1")]
        extra = [lambda lane, row: (row[0] >> 32 | row[0] << 32) & (2**64 - 1),
                 lambda lane, row: sum(((row[0] >> (16 * i)) & 0xFFFF) << (16 * (3 - i)) for i in range(4))]

    def ref(src: np.ndarray) -> list[list[int | None]]:
        out = []
        for lane, r in enumerate(src):
            row = [int(r[0]) & mask]
            out.append(row + [MOV_IMM[t] & mask] + [f(lane, row) for f in extra] + [None] * (2 - len(extra)))
        return out
    return Instance((t,), name, _words_kernel(name, body, regs), _words_check(4, ref), decls)


def mov_b128_instance(name: str) -> Instance:
    """mov.b128: pack two halves, copy, unpack (in order and swapped)."""
    body = _row(4) + ["ld.global.v2.b64 {%v0, %v1}, [%a];", "mov.b128 %q0, {%v0, %v1};", "mov.b128 %q1, %q0;",
                      "mov.b128 {%v2, %v3}, %q1;", *_put(0, "%v2"), *_put(1, "%v3"), "mov.b128 %q0, {%v1, %v0};",
                      "mov.b128 {%v2, %v3}, %q0;", *_put(2, "%v2"), *_put(3, "%v3")]
    ref = lambda src: [[int(r[0]), int(r[1]), int(r[1]), int(r[0])] for r in src]  # noqa: E731
    return Instance(("b128",), name, _words_kernel(name, body, [".reg .b64 %v<4>;", ".reg .b128 %q<2>;"]),
                    _words_check(4, ref))


def mov_instances(tf: TargetForm) -> list[Instance]:
    name = f"mov{_line(tf)}"
    values = sorted(tf.form.slots[0].values)
    if values == ["b128"]:
        return [mov_b128_instance(f"{name}_b128")]
    if values[0].startswith("v"):
        return [_vector_register_instance(t, f"{name}_{t}") for t in sorted(tf.form.slots[1].values - {"pred"})]
    return [mov_instance(t, f"{name}_{t}") for t in values]


def _vector_register_instance(t: str, name: str) -> Instance:
    """Refused: moves between vector registers (`.reg .v4 .b32 %v;`, PTX 1.x); vectors of up
    to 128 bits, the largest ptxas takes."""
    vec = "v2" if WIDTH[t] == 64 else "v4"
    body = [f"mov.{vec}.{t} %vr1, %vr0;"]
    entry = _entry(name, [f".param .u64 {name}_src", f".param .u64 {name}_out"],
                   COMMON_REGS + [f".reg .{vec} .{t} %vr<2>;"], body)
    return Instance((vec, t), name, entry, lambda module, name: None, refused=r"vector register")


# ---------------------------------------------------------------- cvta / isspacep
CVTA_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "local", "const", "param", "param::entry")
KINDS = ("global", "shared", "local", "const", "param")  # where a generic address may point


def _kind(space: str) -> str:
    return space.split("::")[0]


def _space_slot(space: str, name: str) -> list[str]:
    """%a = the lane's 8-byte slot in `space` (in that space's addressing), holding word 0 of its src row."""
    kind = _kind(space)
    if kind == "global":
        return ["add.s64 %a, %src, %o;"]
    sym = {"shared": f"{name}_s", "local": f"{name}_l", "const": f"{name}_c", "param": f"{name}_k"}[kind]
    body = [f"mov.u64 %a, {sym};"] + ([] if kind == "local" else ["add.s64 %a, %a, %o;"])
    if kind in ("shared", "local"):
        body += ["add.s64 %so, %src, %o;", "ld.global.u64 %cp, [%so];", f"st.{space}.u64 [%a], %cp;"]
    return body


def _space_decls(name: str, data: bytes) -> tuple[str, list[str], tuple[str, ...]]:
    """(module decls, function decls, kernel params) of the per-space slots; `data` the const/param bytes."""
    init = ", ".join(str(x) for x in data)
    return (f".shared .align 8 .b8 {name}_s[{THREADS * 8}];\n.const .align 8 .b8 {name}_c[{THREADS * 8}] = {{{init}}};",
            [f".local .align 8 .b8 {name}_l[8];"], (f".param .align 8 .b8 {name}_k[{THREADS * 8}]",))


def cvta_instance(mods: tuple[str, ...], name: str) -> Instance:
    """The lane's slot in a space through cvta to generic and back: word 0 = the slot read
    through the generic address, 1 = back-converted minus original (0), 2 = the slot read in its
    space after a generic store of the complement (const/param: the complement itself). (The
    .u32 forms are for .address_size 32, which ptxas no longer takes.)"""
    space = mods[-2]
    data = _rng(name).bytes(THREADS * 8)
    decls, fdecls, params = _space_decls(name, data)
    writable = _kind(space) in ("global", "shared", "local")
    ld_space = "global" if space == "global" else space
    body = ["mul.wide.u32 %o, %t, 8;"] + _space_slot(space, name) + [
        f"cvta.{space}.u64 %g, %a;", "ld.u64 %w0, [%g];", f"cvta.to.{space}.u64 %w1, %g;", "sub.s64 %w1, %w1, %a;",
        "not.b64 %w2, %w0;"]
    if writable:
        body += ["st.u64 [%g], %w2;", f"ld.{ld_space}.u64 %w2, [%a];"]
    body += ["mul.wide.u32 %b, %t, 24;", "add.s64 %b, %out, %b;"] + [x for j in range(3) for x in _put(j, f"%w{j}")]
    regs = fdecls + [".reg .b64 %g, %w<3>;"]

    def ref(src: np.ndarray) -> list[list[int | None]]:
        out = []
        for t in range(THREADS):
            word = int(src.reshape(-1)[t]) if writable else int.from_bytes(data[8 * t:8 * t + 8], "little")
            out.append([word, 0, word ^ (2**64 - 1)])
        return out
    return Instance(mods, name, _words_kernel(name, body, regs, params), _words_check(3, ref, lambda n: [data]),
                    decls)


def isspacep_instance(space: str, name: str) -> Instance:
    """isspacep.space on generic addresses into each kind of memory (word j: kind KINDS[j]):
    1 for its own kind, 0 where the manual rules it out; kernel parameters and .const data may
    also count as global (their windows lie in the global one), which the check leaves open."""
    data = _rng(name).bytes(THREADS * 8)
    decls, fdecls, params = _space_decls(name, data)
    body = ["mul.wide.u32 %o, %t, 8;", f"mul.wide.u32 %b, %t, {8 * len(KINDS)};", "add.s64 %b, %out, %b;"]
    for j, kind in enumerate(KINDS):
        body += _space_slot(kind, name)
        body += [] if kind == "global" else [f"cvta.{kind}.u64 %a, %a;"]
        body += [f"isspacep.{space} %p0, %a;", "selp.u32 %s, 1, 0, %p0;", *_put(j, "%s", 32)]
    own = _kind(space)

    def answer(kind: str) -> int | None:
        if kind == own:
            return 1
        if own == "global" and kind in ("const", "param"):
            return None
        if own in ("const", "param") and kind in ("const", "param"):
            return None
        return 0
    ref = lambda src: [[answer(k) for k in KINDS] for _ in range(THREADS)]  # noqa: E731
    return Instance((space,), name, _words_kernel(name, body, fdecls, params),
                    _words_check(len(KINDS), ref, lambda n: [data]), decls)


def cvta_instances(tf: TargetForm) -> list[Instance]:
    to = ("to",) if tf.form.slots[0].values == {"to"} else ()
    return [cvta_instance((*to, s, "u64"), f"cvta{_line(tf)}_{_tag((s,))}")
            for s in CVTA_SPACES] + [_cvta32_instance((*to, "shared", "u32"), f"cvta{_line(tf)}_32bit")]


def _cvta32_instance(mods: tuple[str, ...], name: str) -> Instance:
    """Refused: cvta in a module with .address_size 32 (a generic address is a 64-bit host
    address on the CPU)."""
    body = [f"mov.u32 %q0, {name}_s;", f"cvta.{'.'.join(mods)} %q1, %q0;"]
    entry = _entry(name, [f".param .u32 {name}_out"], [".reg .b32 %q<2>;"], body)
    return Instance(mods, name, entry, lambda module, name: None, f".shared .align 4 .b32 {name}_s;",
                    target="sm_50", version="6.0", address_size=32, refused=r"cvta.*32-bit generic addresses")


# ---------------------------------------------------------------- cp.async
@dataclass(frozen=True)
class Copy:
    cop: str  # ca / cg
    dst: str  # shared / shared::cta
    size: int  # cp-size: 4, 8 or 16
    extra: str  # "" / "src-size" / "ignore-src"
    hint: bool = False
    prefetch: str | None = None
    wait: str = "all"  # all: wait_all; group: two groups, wait_group 1 then wait_group 0

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(m for m in (self.cop, self.dst, "global", "L2::cache_hint" if self.hint else None,
                                 self.prefetch) if m)


def cp_kernel(c: Copy, name: str) -> str:
    """Lane t copies c.size bytes from its 16-byte src slot to its shared slot (lanes of the
    first group) and, with wait=group, again in a second group at slot t+THREADS; the copies
    come out to out row t after the waits and a barrier."""
    tail = {"": "", "src-size": ", %x", "ignore-src": ", %p1"}[c.extra] + (", %pol" if c.hint else "")
    instr = f"cp.async.{'.'.join(c.mods)} [%a], [%g], {c.size}{tail};"
    body = ["mul.wide.u32 %o, %t, 16;", "add.s64 %g, %src, %o;", f"mov.u64 %a, {name}_s;", "add.s64 %a, %a, %o;",
            f"rem.u32 %x, %t, {c.size + 1};", "and.b32 %s, %t, 1;", "setp.ne.u32 %p1, %s, 0;"]
    body += ["createpolicy.fractional.L2::evict_first.b64 %pol, 0.5;"] if c.hint else []
    body += [instr, "cp.async.commit_group;"]
    if c.wait == "group":
        body += [f"add.s64 %a, %a, {16 * THREADS};", f"add.s64 %g, %g, {16 * THREADS};", instr,
                 "cp.async.commit_group;", "cp.async.wait_group 1;", "cp.async.wait_group 0;"]
    else:
        body += ["cp.async.wait_all;"]
    body += ["bar.sync 0;"]
    for copy in range(2 if c.wait == "group" else 1):
        body += [f"mov.u64 %a, {name}_s;", "add.s64 %a, %a, %o;", "add.s64 %b, %out, %o;"]
        if copy:
            body += [f"add.s64 %a, %a, {16 * THREADS};", f"add.s64 %b, %b, {16 * THREADS};"]
        body += _copy("%a", "%b", c.size, "shared", "global")
    return _entry(name, [f".param .u64 {name}_src", f".param .u64 {name}_out"], COMMON_REGS + [".reg .b64 %g;"],
                  _header(name) + body)


def cp_check(c: Copy) -> Callable:
    copies = 2 if c.wait == "group" else 1

    def check(module, name: str) -> None:
        src = _aligned(16 * THREADS * copies)
        src[:] = np.frombuffer(_rng(name).bytes(src.nbytes), np.uint8)
        out = _aligned(src.nbytes)
        module.launch(name, (1,), (THREADS,), [src, out])
        for row in range(THREADS * copies):
            t = row % THREADS
            keep = {"": c.size, "src-size": t % (c.size + 1), "ignore-src": 0 if t & 1 else c.size}[c.extra]
            want = bytes(src[16 * row:16 * row + keep]) + bytes(c.size - keep)
            got = bytes(out[16 * row:16 * row + c.size])
            assert got == want, f"slot {row} ({c.extra or 'full'} copy): got {got.hex()}, expected {want.hex()}"
    return check


def cp_instances(tf: TargetForm) -> list[Instance]:
    line = _line(tf)
    if tf.opcode != "cp.async":  # commit_group, wait_group, wait_all: two groups, one line each
        c = Copy("ca", "shared", 16, "", wait="all" if tf.opcode == "cp.async.wait_all" else "group")
        name = tf.opcode.replace(".", "_")
        return [Instance((), name, cp_kernel(c, name), cp_check(c), f".shared .align 16 .b8 {name}_s[{32 * THREADS}];")]
    extra = {0: "src-size", 1: "src-size", 2: "ignore-src"}[line]
    cop = "cg" if line == 1 else "ca"
    sizes = (16,) if cop == "cg" else (4, 8, 16)
    plans = [Copy(cop, "shared", sizes[0], ""), Copy(cop, "shared::cta", sizes[-1], extra, True, "L2::64B"),
             Copy(cop, "shared", sizes[1 % len(sizes)], extra, False, "L2::128B"),
             Copy(cop, "shared::cta", sizes[-1], "", True, "L2::256B", "group")]
    out = []
    for k, c in enumerate(plans):
        name = f"cp_async{line}_{k}_{c.size}_{c.extra.replace('-', '_') or 'full'}_{_tag(c.mods)}"
        out.append(Instance(c.mods, name, cp_kernel(c, name), cp_check(c),
                            f".shared .align 16 .b8 {name}_s[{32 * THREADS}];"))
    return out


# ---------------------------------------------------------------- st.bulk
def st_bulk_instance(mods: tuple[str, ...], name: str, size: int) -> Instance:
    """Lane t zeroes `size` bytes at slot 2t of a buffer of 2*THREADS slots (shared: copied in
    and out around it); the odd slots must stay as they were."""
    space = "shared::cta" if "shared::cta" in mods else None
    area = 2 * THREADS * size
    body = [f"mul.wide.u32 %o, %t, {2 * size};", "add.s64 %a, %out, %o;"]
    if space:  # the lane's two slots into shared memory, the bulk store there, and back
        body += [f"mov.u64 %b, {name}_s;", "add.s64 %b, %b, %o;"] + _copy("%a", "%b", 2 * size, "global", "shared")
        body += [f"mov.u32 %a32, {name}_s;", f"mad.lo.u32 %a32, %t, {2 * size}, %a32;",
                 f"st.bulk.{'.'.join(mods)} [%a32], {size}, 0;"]
        body += _copy("%b", "%a", 2 * size, "shared", "global")
    else:
        body += ["add.s64 %b, %gout, %o;", f"st.bulk{''.join('.' + m for m in mods)} [%b], {size}, 0;"]
    decls = f".shared .align 16 .b8 {name}_s[{area}];" if space else ""

    def check(module, name: str) -> None:
        before = _rng(name).bytes(area)
        out = _aligned(area)
        out[:] = np.frombuffer(before, np.uint8)
        module.launch(name, (1,), (THREADS,), [_aligned(8), out])
        want = bytearray(before)
        for t in range(THREADS):
            want[2 * t * size:(2 * t + 1) * size] = bytes(size)
        bad = [i for i in range(area) if out[i] != want[i]]
        assert not bad, f"{len(bad)} bytes differ, first at {bad[0]} (slot {bad[0] // size})"
    return Instance(mods, name, _words_kernel(name, body, []), check, decls, "sm_100", "8.8")


# ---------------------------------------------------------------- hints that are no-ops here
def hint_instance(opcode: str, mods: tuple[str, ...], name: str) -> Instance:
    """A hint between a load and a store of the lane's word (through the hinted address, for the
    address-taking ones): the word must come through unchanged. discard makes its lines' data
    undefined, so it gets a scratch line of its own."""
    body = _row(1) + ["ld.global.u64 %cp, [%a];"]
    regs: list[str] = []
    params: tuple[str, ...] = ()
    instr = f"{opcode}{''.join('.' + m for m in mods)}"
    if opcode == "createpolicy":
        if "cvt" in mods:
            body += [f"ld.param.u64 %pol, [{name}_k];", f"{instr} %pol, %pol;"]
            params = (f".param .u64 {name}_k",)
        elif "range" in mods:
            body += [f"{instr} %pol, [%a], 64, 128;"]
        else:
            body += [f"{instr} %pol, 0.25;"]
        body += ["ld.global.L2::cache_hint.u64 %cp, [%a], %pol;"]
    elif opcode == "discard":
        body += [f"mov.u64 %g, {name}_d;", f"{instr} [%g], 128;"]
        regs = [".reg .b64 %g;"]
    elif opcode == "applypriority":
        body += [f"and.b64 %g, %a, -128;", f"{instr} [%g], 128;"]
        regs = [".reg .b64 %g;"]
    elif "tensormap" in mods:
        where = {"param": f"{name}_k", "const": f"{name}_c"}.get(mods[0], "%gsrc")
        body += [f"{instr} [{where}];"]
        params = (f".param .align 64 .b8 {name}_k[128]",) if mods[0] == "param" else ()
    elif "local" in mods:
        regs = [f".local .align 8 .b8 {name}_l[8];"]
        body += [f"st.local.u64 [{name}_l], %cp;", f"{instr} [{name}_l];", f"ld.local.u64 %cp, [{name}_l];"]
    else:
        body += [f"{instr} [{'%a' if mods and mods[0] == 'global' else '%gsrc'}];"]
    body += ["st.global.u64 [%b], %cp;"]
    decls = {"discard": f".global .align 128 .b8 {name}_d[128];",
             "prefetch": f".const .align 64 .b8 {name}_c[128] = {{1}};" if "const" in mods else ""}.get(opcode, "")
    extra = lambda n: ([0] if "cvt" in mods else [bytes(128)] if params else [])  # noqa: E731
    return Instance(mods, name, _words_kernel(name, body, regs, params),
                    _words_check(1, lambda src: [[int(r[0])] for r in src], extra), decls)


def hint_instances(tf: TargetForm) -> list[Instance]:
    """One instance per value of the line's slots (and one without each optional slot)."""
    slots = tf.form.slots
    plans: list[tuple[str, ...]] = []
    for i, s in enumerate(slots):
        for v in sorted(s.values) + ([ABSENT] if s.optional else []):
            m = tuple(v if j == i else sorted(x.values)[0] for j, x in enumerate(slots)
                      if (v if j == i else sorted(x.values)[0]) != ABSENT and (j == i or not x.optional))
            if m not in plans:
                plans.append(m)
    return [hint_instance(tf.opcode, m, f"{tf.opcode}{_line(tf)}_{_tag(m)}") for m in plans]


def instances(tf: TargetForm) -> list[Instance]:
    if tf.opcode in ("ld", "ldu", "st"):
        return access_instances(tf)
    if tf.opcode == "mov":
        return mov_instances(tf)
    if tf.opcode == "cvta":
        return cvta_instances(tf)
    if tf.opcode == "isspacep":
        return [isspacep_instance(s, f"isspacep_{_tag((s,))}") for s in sorted(tf.form.slots[0].values)]
    if tf.opcode in ("cp.async", "cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all"):
        return cp_instances(tf)
    if tf.opcode == "st.bulk":
        return [st_bulk_instance(m, f"st_bulk_{_tag(m)}", size)
                for m, size in ((("weak", "shared::cta"), 64), ((), 16), (("weak",), 8), (("shared::cta",), 32))]
    return hint_instances(tf)
