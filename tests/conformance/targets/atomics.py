"""atom and red: every form line with each .sem, .scope, state space, operation, type, .noftz
and cache hint. Each lane works on a cell of its own (the old value it gets back and the cell's
new value are checked per lane), and one instance per operation family has many lanes of
several warps contend for one cell (the final value, and the old values where their multiset
does not depend on the order). References are exact Python on bit patterns."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from conformance.target_forms import TargetForm
from conformance.targets import Instance

OPCODES = {"atom", "red"}

WIDTH = {"b16": 16, "f16": 16, "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32,
         "bf16x2": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128}
SHARED = ("shared", "shared::cta", "shared::cluster")
LANES = 32  # lanes with a cell of their own
CONTENDERS = 80  # two and a half warps on one cell
HALVES = ("f16", "bf16")
FLOATS = ("f16", "bf16", "f16x2", "bf16x2", "f32", "f64")


@dataclass(frozen=True)
class Use:
    """One atom/red in a kernel of its own."""

    opcode: str
    op: str
    t: str
    sem: str | None = None
    scope: str | None = None
    space: str | None = None  # None: generic addressing
    noftz: bool = False
    hint: bool = False
    vec: int = 1
    contention: bool = False
    via_shared: bool = False  # a generic address that points into shared memory

    @property
    def mods(self) -> tuple[str, ...]:
        optional = (self.sem, self.scope, self.space, self.op, "noftz" if self.noftz else None,
                    "L2::cache_hint" if self.hint else None, f"v{self.vec}" if self.vec > 1 else None)
        return tuple(m for m in optional if m) + (self.t,)

    @property
    def shared(self) -> bool:
        return self.space in SHARED or self.via_shared

    @property
    def threads(self) -> int:
        return CONTENDERS if self.contention else LANES


# ---------------------------------------------------------------- references on bit patterns
def _signed(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) else x


def _half_f32(bits: int, t: str) -> np.float32:
    """An f16/bf16 value, exactly, as f32."""
    if t == "f16":
        return np.array(bits, np.uint16).view(np.float16).astype(np.float32)
    return np.array(bits << 16, np.uint32).view(np.float32)


def _round_half(x: np.float32, t: str) -> int:
    """Round an f32 to f16/bf16, to nearest even (subnormals kept, overflow to infinity)."""
    if t == "f16":
        return int(np.array(x, np.float16).view(np.uint16))
    raw = int(np.array(x, np.float32).view(np.uint32))
    return ((raw + 0x7FFF + ((raw >> 16) & 1)) >> 16) & 0xFFFF


def _add_float(x: int, y: int, t: str) -> int:
    with np.errstate(over="ignore"):
        if t == "f64":
            return struct.unpack("<Q", struct.pack("<d", struct.unpack("<d", struct.pack("<Q", x))[0]
                                                   + struct.unpack("<d", struct.pack("<Q", y))[0]))[0]
        if t == "f32":
            s = np.array(x, np.uint32).view(np.float32) + np.array(y, np.uint32).view(np.float32)
            return int(np.array(s, np.float32).view(np.uint32))
        # Two halves add exactly in f32 unless far apart, where rounding twice is still exact
        # (f32 has more than 2p+2 bits for p = 11 and 8).
        return _round_half(np.float32(_half_f32(x, t) + _half_f32(y, t)), t)


def _pick_float(x: int, y: int, t: str, smaller: bool) -> int:
    fx, fy = _half_f32(x, t), _half_f32(y, t)
    return y if (fy < fx if smaller else fy > fx) else x


def _packed(fn: Callable[[int, int, str], int], x: int, y: int, t: str) -> int:
    """Apply a per-half function to both halves of an f16x2/bf16x2."""
    base = t[:-2]
    return fn(x & 0xFFFF, y & 0xFFFF, base) | fn(x >> 16, y >> 16, base) << 16


def apply(op: str, t: str, old: int, b: int, c: int = 0) -> int:
    """The new cell value of `op` on type `t` (bit patterns in, bit pattern out)."""
    w = WIDTH[t]
    mask = (1 << w) - 1
    if op == "cas":
        return c if old == b else old
    if op == "exch":
        return b
    if op in ("and", "or", "xor"):
        return {"and": old & b, "or": old | b, "xor": old ^ b}[op]
    if op == "inc":
        return 0 if old >= b else old + 1
    if op == "dec":
        return b if old == 0 or old > b else old - 1
    if t.endswith("x2"):
        return _packed(lambda x, y, h: apply(op, h, x, y), old, b, t)
    if op == "add":
        return _add_float(old, b, t) if t in FLOATS else (old + b) & mask
    if t in HALVES:
        return _pick_float(old, b, t, op == "min")
    key = (lambda v: _signed(v, w)) if t[0] == "s" else (lambda v: v)
    return (min if op == "min" else max)(old, b, key=key)


# ---------------------------------------------------------------- operand values
F16_EDGES = [(0x0001, 0x0001), (0x03FF, 0x0001), (0x7BFF, 0x7BFF), (0x8000, 0x8000), (0x3C00, 0x1000),
             (0x3C00, 0x1001), (0x3C01, 0x1000), (0x3C00, 0xBC00), (0x8001, 0x0001), (0xFBFF, 0xFBFF),
             (0x7C00, 0x3C00), (0x0200, 0x8300)]
BF16_EDGES = [(0x0001, 0x0001), (0x007F, 0x0001), (0x7F7F, 0x7F7F), (0x8000, 0x8000), (0x3F80, 0x3B80),
              (0x3F80, 0x3B81), (0x3F81, 0x3B80), (0x3F80, 0xBF80), (0x8001, 0x0001), (0xFF7F, 0xFF7F),
              (0x7F80, 0x3F80), (0x0040, 0x80C0)]


def _finite_half(rng: np.random.Generator, t: str) -> int:
    """A random finite f16/bf16 with any exponent (subnormals included)."""
    exp_max = 0x1F if t == "f16" else 0xFF
    mant = 10 if t == "f16" else 7
    e = int(rng.integers(0, exp_max))
    return int(rng.integers(0, 2)) << 15 | e << mant | int(rng.integers(0, 1 << mant))


def _finite_float(rng: np.random.Generator, t: str) -> int:
    """A random normal f32/f64 of moderate magnitude (no subnormals: f32 atom.add flushes them
    on global memory on the GPU, a behaviour outside the manual's text)."""
    v = float(rng.choice([-1.0, 1.0])) * float(rng.uniform(1.0, 2.0)) * 2.0 ** int(rng.integers(-30, 30))
    return int(np.array(v, np.float32).view(np.uint32)) if t == "f32" else struct.unpack("<Q", struct.pack("<d", v))[0]


def _float_edges(t: str) -> list[tuple[int, int]]:
    one, tie = (0x3F800000, 0x33800000) if t == "f32" else (0x3FF0000000000000, 0x3CA0000000000000)
    sign = 1 << (WIDTH[t] - 1)
    inf = 0x7F800000 if t == "f32" else 0x7FF0000000000000
    return [(one, tie), (one, tie + 1), (one + 1, tie), (one, one | sign), (sign, sign), (inf, one)]


def _int_edges(op: str, t: str) -> list[tuple[int, int]]:
    w = WIDTH[t]
    top = 1 << (w - 1)
    full = (1 << w) - 1
    if op in ("inc", "dec"):
        return [(0, 0), (5, 5), (6, 5), (4, 5), (0, 5), (full, full), (full - 1, full), (7, 0), (0, full),
                (3, 1), (1, 1), (2, 1), (top, top - 1)]
    return [(0, full), (full, 1), (top, top - 1), (top - 1, top), (1, full), (5, 5), (top, 0), (0, 0)]


def _pairs(u: Use, rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """n (old, b) pairs of bit patterns for the lanes' cells: edge cases first, then random."""
    t, w = u.t, WIDTH[u.t]
    if t in HALVES or t.endswith("x2"):
        half = t[:-2] if t.endswith("x2") else t
        edges = (F16_EDGES if half == "f16" else BF16_EDGES) if u.op == "add" else []
        one = lambda: _finite_half(rng, half)  # noqa: E731
        if t.endswith("x2"):
            edges = [(x | y2 << 16, y | x2 << 16) for (x, y), (x2, y2) in zip(edges, edges[1:] + edges[:1])]
            draw = lambda: one() | one() << 16  # noqa: E731
        else:
            draw = one
    elif t in ("f32", "f64"):
        edges = _float_edges(t) if u.op == "add" else []
        draw = lambda: _finite_float(rng, t)  # noqa: E731
    else:
        edges = [] if u.op in ("cas", "exch") else _int_edges(u.op, t)
        if u.op in ("inc", "dec"):  # small values: wrapping is likely
            draw = lambda: int(rng.integers(0, 12))  # noqa: E731
        else:
            draw = lambda: int.from_bytes(rng.bytes(w // 8), "little")  # noqa: E731
    out = edges[:n]
    while len(out) < n:
        out.append((draw(), draw()))
    if u.op in ("min", "max") and (t in HALVES or t.endswith("x2")):  # -0 vs +0 may go either way
        out = [(x, y) for x, y in out if (x ^ y) not in (0x8000, 0x80000000, 0x80008000)]
        out += [(0x3C00, 0x4000)] * (n - len(out))
    return out


# ---------------------------------------------------------------- kernels
def _reg(u: Use) -> str:
    return f"b{WIDTH[u.t]}"


def _vector(prefix: str, n: int) -> str:
    return f"%{prefix}0" if n == 1 else "{" + ", ".join(f"%{prefix}{k}" for k in range(n)) + "}"


def kernel(u: Use, name: str) -> tuple[str, str]:
    """(module-scope declarations, the entry): each lane loads b (and c) from its slot of the
    operand arrays, runs the atom/red on its cell (all lanes on cell 0 under contention) and
    stores the old value to its slot of d; shared cells are copied in and out around it."""
    r, step, v = _reg(u), WIDTH[u.t] // 8, u.vec
    lane = step * v
    owners = 1 if u.contention else u.threads
    decls = f".shared .align 16 .b8 {name}_s[{owners * lane}];" if u.shared else ""
    cas = u.op == "cas"
    body = [f"mov.u32 %t, %tid.x;",
            f"setp.lt.u32 %p0, %t, {owners};",
            f"mul.wide.u32 %o, %t, {lane};",
            f"mul.wide.u32 %mo, %t, {0 if u.contention else lane};",
            f"ld.param.u64 %g, [{name}_m];",
            "add.s64 %g, %g, %mo;",
            "cvta.to.global.u64 %m, %g;"]
    for arg, reg in (("b", "b"), ("c", "c")):
        if arg == "b" or cas:
            body += [f"ld.param.u64 %q, [{name}_{arg}];", "cvta.to.global.u64 %q, %q;", "add.s64 %q, %q, %o;"]
            body += [f"ld.global.{r} %{reg}{k}, [%q+{k * step}];" for k in range(v)]
    if u.shared:
        body += [f"mov.u64 %a, {name}_s;", "add.s64 %a, %a, %mo;"]
        for k in range(v):
            body += [f"@%p0 ld.global.{r} %x, [%m+{k * step}];", f"@%p0 st.shared.{r} [%a+{k * step}], %x;"]
        body.append("bar.sync 0;")
        if u.via_shared:
            body.append("cvta.shared.u64 %a, %a;")
    else:
        body.append(f"mov.u64 %a, {'%m' if u.space else '%g'};")
    if u.hint:
        body.append("createpolicy.fractional.L2::evict_last.b64 %pol, 1.0;")
    tail = ", %pol" if u.hint else ""
    instr = f"{u.opcode}.{'.'.join(u.mods)}"
    if cas and u.contention:  # a compare-and-swap increment loop: every lane gets in once
        add = "add.s64" if WIDTH[u.t] == 64 else "add.s32"
        body += ["mov.b{w} %x, %b0;".format(w=WIDTH[u.t]), f"{name}_retry:", f"{add} %c0, %x, 1;",
                 f"{instr} %d0, [%a], %x, %c0;", f"setp.ne.{r} %p1, %d0, %x;", f"mov.{r} %x, %d0;",
                 f"@%p1 bra {name}_retry;"]
    elif u.opcode == "atom":
        body.append(f"{instr} {_vector('d', v)}, [%a], {_vector('b', v)}{', %c0' if cas else ''}{tail};")
    else:
        body.append(f"{instr} [%a], {_vector('b', v)}{tail};")
    if u.opcode == "atom":
        body += [f"ld.param.u64 %q, [{name}_d];", "cvta.to.global.u64 %q, %q;", "add.s64 %q, %q, %o;"]
        body += [f"st.global.{r} [%q+{k * step}], %d{k};" for k in range(v)]
    if u.shared:
        body.append("bar.sync 0;")
        if u.via_shared:
            body += [f"mov.u64 %a, {name}_s;", "add.s64 %a, %a, %mo;"]
        for k in range(v):
            body += [f"@%p0 ld.shared.{r} %x, [%a+{k * step}];", f"@%p0 st.global.{r} [%m+{k * step}], %x;"]
    params = ", ".join(f".param .u64 {name}_{p}" for p in "mbcd")
    regs = (f".reg .pred %p<2>; .reg .b32 %t; .reg .b64 %o, %mo, %g, %m, %q, %a, %pol;\n"
            f"  .reg .{r} %b<{v}>, %c<{v}>, %d<{v}>, %x;")
    entry = f".visible .entry {name}({params})\n{{\n  {regs}\n  " + "\n  ".join(body) + "\n  ret;\n}\n"
    return decls, entry


# ---------------------------------------------------------------- checks
def _to_array(values: list[int], t: str) -> np.ndarray:
    if WIDTH[t] == 128:
        return np.array([w for x in values for w in (x & (2**64 - 1), x >> 64)], np.uint64)
    return np.array(values, f"u{WIDTH[t] // 8}")


def _from_array(a: np.ndarray, t: str) -> list[int]:
    words = [int(x) for x in a]
    return [words[i] | words[i + 1] << 64 for i in range(0, len(words), 2)] if WIDTH[t] == 128 else words


def _launch(module, name: str, u: Use, mem: list[int], b: list[int], c: list[int]) -> tuple[list[int], list[int]]:
    """Run the kernel; the cells' new values and the old values the lanes got."""
    m, d = _to_array(mem, u.t), _to_array([0] * len(b), u.t)
    module.launch(name, (1,), (u.threads,), [m, _to_array(b, u.t), _to_array(c, u.t), d])
    return _from_array(m, u.t), _from_array(d, u.t)


def _differ(what: str, got: list[int], want: list[int], b: list[int]) -> str | None:
    bad = [i for i, (x, y) in enumerate(zip(got, want)) if x != y]
    if not bad:
        return None
    i = bad[0]
    return f"{what}[{i}] = {got[i]:#x}, expected {want[i]:#x} (b = {b[i]:#x}); {len(bad)} differ"


def per_lane_check(u: Use) -> Callable:
    def check(module, name: str) -> None:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        n = LANES * u.vec
        pairs = _pairs(u, rng, n)
        mem, b = [x for x, _ in pairs], [y for _, y in pairs]
        if u.op == "cas":  # every other cell holds the compared value
            b = [x if i % 2 == 0 else y for i, (x, y) in enumerate(pairs)]
        c = [int.from_bytes(rng.bytes(WIDTH[u.t] // 8), "little") for _ in range(n)]
        new, old = _launch(module, name, u, mem, b, c)
        want = [apply(u.op, u.t, x, y, z) for x, y, z in zip(mem, b, c)]
        problems = [_differ("new cell", new, want, b)]
        if u.opcode == "atom":
            problems.append(_differ("returned old", old, mem, b))
        problems = [p for p in problems if p]
        assert not problems, "; ".join(problems)
    return check


def contention_check(u: Use) -> Callable:
    """All lanes on one cell. Order-free facts: the final value; for add, every old plus its
    addend is some other lane's old or the final value; for exch the olds and the final value
    are the initial value and the operands; for a common inc/dec bound (and the cas increment
    loop) the sequence of values is fixed, so the olds are exactly its first N steps; for the
    others the final value."""
    def check(module, name: str) -> None:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        n, t, op = u.threads, u.t, u.op
        w = WIDTH[t]
        if op == "add" and t in FLOATS:
            # small integers: every order of additions is exact
            enc = {"f32": lambda x: int(np.array(x, np.float32).view(np.uint32)),
                   "f64": lambda x: struct.unpack("<Q", struct.pack("<d", x))[0],
                   "f16": lambda x: int(np.array(x, np.float16).view(np.uint16)),
                   "bf16": lambda x: _round_half(np.float32(x), "bf16")}
            half = t[:-2] if t.endswith("x2") else t
            pick = lambda: enc[half](float(rng.integers(-8, 9)))  # noqa: E731
            b = [pick() | (pick() << 16 if t.endswith("x2") else 0) for _ in range(n)]
            init = enc[half](3.0) | (enc[half](-5.0) << 16 if t.endswith("x2") else 0)
        elif op in ("inc", "dec"):
            bound = int(rng.integers(5, 20))
            b, init = [bound] * n, bound // 2
        elif op == "cas":
            init = int(rng.integers(0, 1000))
            b = [init] * n
        else:
            b = [int.from_bytes(rng.bytes(w // 8), "little") for _ in range(n)]
            init = b[0] ^ 0x5A5A
        new, old = _launch(module, name, u, [init], b, [0] * n)
        final = init
        for y in b:
            final = apply("add" if op == "cas" else op, t, final, 1 if op == "cas" else y)
        if op == "exch":
            assert new[0] in b, f"final {new[0]:#x} is none of the operands"
            assert sorted(old + new) == sorted(b + [init]), "olds and final are not the values exchanged"
            return
        assert new[0] == final, f"final value {new[0]:#x}, expected {final:#x}"
        if u.opcode == "red":
            return
        if op in ("inc", "dec", "cas"):
            steps, x = [], init
            for _ in range(n):
                steps.append(x)
                x = apply("add" if op == "cas" else op, t, x, 1 if op == "cas" else b[0])
            assert sorted(old) == sorted(steps), "the old values are not the steps of the sequence"
        elif op == "add":
            made = sorted([apply("add", t, x, y) for x, y in zip(old, b)] + [init])
            assert made == sorted(old + new), "old values do not chain: some update was lost or doubled"
    return check


# ---------------------------------------------------------------- plans per form line
# (op, type) pairs per form line; the optional slots rotate over these so that every value
# (and every absence) occurs.
SCALAR = [("add", "u32"), ("add", "s32"), ("add", "u64"), ("add", "f32"), ("add", "f64"), ("inc", "u32"),
          ("dec", "u32"), ("min", "u32"), ("min", "s32"), ("min", "u64"), ("min", "s64"), ("max", "u32"),
          ("max", "s32"), ("max", "u64"), ("max", "s64"), ("and", "b32"), ("and", "b64"), ("or", "b32"),
          ("or", "b64"), ("xor", "b32"), ("xor", "b64"), ("exch", "b32"), ("exch", "b64"),
          ("cas", "b32"), ("cas", "b64")]
CONTENTION = ["add.u32", "add.u64", "add.f32", "add.f64", "inc.u32", "dec.u32", "min.s32", "max.u64",
              "and.b32", "or.b64", "xor.b32", "exch.b64", "cas.b32", "cas.b64"]
HALF_CONTENTION = ["add.f16", "add.bf16", "add.f16x2", "add.bf16x2"]


def _slot_values(tf: TargetForm, group: str) -> list[str | None]:
    slot = next((s for s in tf.form.slots if s.group == group or (group == "space" and s.values == {"global"})),
                None)
    if slot is None:
        return [None]
    return sorted(slot.values) + ([None] if slot.optional else [])


def _plan(tf: TargetForm) -> tuple[list[tuple[str, str, int]], list[str]]:
    """The (op, type, vector count) triples and the contention ops of a form line."""
    syntax = tf.syntax
    values = lambda group: sorted(next(s.values for s in tf.form.slots if s.group == group))  # noqa: E731
    if ".b16 " in syntax or ".b128 " in syntax:
        return [("cas" if ".cas." in syntax else "exch", syntax.split(" ")[0].rsplit(".", 1)[1], 1)], []
    if "vec_" in syntax:
        group = next(s.group for s in tf.form.slots[::-1] if s.group)
        vec_group = next(s.group for s in tf.form.slots if s.group and s.group.startswith("vec_"))
        ops = values("op") if ".op." in syntax else ["add"]
        types = values(group) if group != vec_group else ["f32"]
        combos = [(op, t) for op in ops for t in types]
        vecs = [int(v[1:]) for v in values(vec_group)]
        return [combos[i % len(combos)] + (vecs[i % len(vecs)],) for i in range(max(len(combos), len(vecs)))], []
    if ".noftz" in syntax:
        group = next(s.group for s in tf.form.slots[::-1] if s.group)
        return [("add", t, 1) for t in values(group)], [c for c in HALF_CONTENTION if c.split(".")[1] in values(group)]
    # a scalar line names its operations and types (the grammar pairs them as ptxas does)
    ops = next(s.values for s in tf.form.slots if s.values & {op for op, _ in SCALAR})
    pairs = [(op, t, 1) for op, t in SCALAR if op in ops and t in tf.form.slots[-1].values]
    return pairs, [c for c in CONTENTION if tuple(c.split(".")) in {(op, t) for op, t, _ in pairs}]


def _uses(tf: TargetForm) -> list[Use]:
    pairs, contended = _plan(tf)
    sems, scopes, spaces = _slot_values(tf, "sem"), _slot_values(tf, "scope"), _slot_values(tf, "space")
    has_hint = any(s.group == "level::cache_hint" for s in tf.form.slots)
    noftz = ".noftz" in tf.syntax
    n = max(len(pairs), len(sems), len(scopes), len(spaces), 2 if has_hint else 1)
    uses = []
    for i in range(n):
        op, t, vec = pairs[i % len(pairs)]
        space = spaces[i % len(spaces)]
        hint = has_hint and op != "cas" and space in ("global", None) and i % 2 == 0
        uses.append(Use(tf.opcode, op, t, sems[i % len(sems)], scopes[(i + 1) % len(scopes)], space, noftz, hint, vec))
    for i, spec in enumerate(contended):
        op, t = spec.split(".")
        uses.append(Use(tf.opcode, op, t, sems[i % len(sems)], scopes[i % len(scopes)],
                        ("global", "shared::cta", None)[i % 3], noftz, contention=True))
    if ("add", "u32", 1) in pairs:  # a generic address into shared memory
        uses.append(Use(tf.opcode, "add", "u32", via_shared=True))
    return uses


def _line(tf: TargetForm) -> int:
    from zluda_py.ptx import grammar
    return grammar.opcodes()[tf.opcode].forms.index(tf.form)


def instances(tf: TargetForm) -> list[Instance]:
    out = []
    for k, u in enumerate(_uses(tf)):
        tag = "_".join(m.replace("::", "_") for m in u.mods)
        name = f"{u.opcode}{_line(tf)}_{k}_{tag}" + ("_contended" if u.contention else "")
        decls, entry = kernel(u, name)
        check = contention_check(u) if u.contention else per_lane_check(u)
        out.append(Instance(u.mods, name, entry, check, decls))
    return out
