"""Barriers, control flow and the instructions that are no-ops on this target.

Barriers (bar, barrier): threads exchange data through shared memory across warps around the
barrier (wrong without it, since the CPU runs warps one after another), with the default
participants (the whole CTA, its last warp partial) or a thread count and per-group named
barrier ids; barrier.sync without .aligned is reached from divergent code; arrive has consumer
warps wait for producer warps that run after them; red (popc, and, or) with plain and negated
predicates, checked per participating group. Control flow: divergent loops and uniform branches,
brx.idx tables, direct and indirect calls (a function-pointer table through .callprototype or
.calltargets) with and without parameters and return values, early ret and exit (exited threads
leave the barrier count), trap and brkpt (the launch fails with 719). No-ops sit between stores
and loads of global and shared memory, whose data must come back intact.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from conformance.target_forms import TargetForm
from conformance.targets import Instance
from zluda_py.compiler.errors import LaunchError

OPCODES = {"bar", "barrier", "bra", "brx.idx", "call", "ret", "exit", "trap", "brkpt", "membar", "fence",
           "nanosleep", "pmevent", "griddepcontrol", "setmaxnreg"}

GRID = 2
SENTINEL = 0xDEADBEEF
M32 = 0xFFFFFFFF
SHIFT = 37  # barrier exchanges: thread t reads the slot of thread t + SHIFT (another warp)
GROUP = 64  # threads per group when barriers take a thread count
LAUNCH_FAILED = 719

Expected = list[list[int]]  # per thread its two output words (SENTINEL: left untouched)


@dataclass(frozen=True)
class Kernel:
    """One instance's kernel: `body` runs after the common prologue, which sets %g (global
    thread id), %t (%tid.x), %a and %b (the thread's two input words) and %out (its two output
    words), %ob (the output base); `expect(a, b, block)` gives every thread's two output words."""

    block: int
    body: list[str]
    expect: Callable[[np.ndarray, int], Expected]
    decls: str = ""
    fault: str | None = None  # trap/brkpt: launching with arg = a thread id must fail with 719
    shape: Callable[[np.ndarray], np.ndarray] = lambda rows: rows  # adjusts the random inputs


def _entry(name: str, body: list[str]) -> str:
    regs = [".reg .pred %p, %q, %w;", ".reg .b32 %g, %t, %a, %b, %x, %y, %k, %r<2>;",
            ".reg .b64 %in, %out, %ob, %o, %s, %my, %pa, %fp;"]
    prologue = ["mov.u32 %t, %tid.x;", "mov.u32 %x, %ntid.x;", "mov.u32 %y, %ctaid.x;", "mad.lo.u32 %g, %x, %y, %t;",
                f"ld.param.u64 %in, [{name}_in];", "cvta.to.global.u64 %in, %in;",
                f"ld.param.u64 %ob, [{name}_out];", "cvta.to.global.u64 %ob, %ob;",
                "mul.wide.u32 %o, %g, 8;", "add.s64 %in, %in, %o;", "add.s64 %out, %ob, %o;",
                "ld.global.v2.u32 {%a, %b}, [%in];"]
    params = f".param .u64 {name}_in, .param .u64 {name}_out, .param .u32 {name}_arg"
    return f".visible .entry {name}({params})\n{{\n  " + "\n  ".join(regs + prologue + body) + "\n  ret;\n}\n"


def _store(k: int, reg: str, guard: str = "") -> str:
    return f"{guard}st.global.u32 [%out+{4 * k}], {reg};"


def _inputs(name: str, block: int) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(name.encode())).integers(0, 1 << 32, (GRID * block, 2), dtype=np.uint32)


def _launch(module, name: str, kern: Kernel, rows: np.ndarray, arg: int = M32) -> np.ndarray:
    out = np.full((GRID * kern.block, 2), SENTINEL, np.uint32)
    module.launch(name, (GRID,), (kern.block,), [rows, out, np.uint32(arg)])
    return out


def check_for(kern: Kernel) -> Callable:
    def check(module, name: str) -> None:
        rows = kern.shape(_inputs(name, kern.block))
        if kern.fault:
            with pytest.raises(LaunchError) as err:
                _launch(module, name, kern, rows, arg=kern.block + 5)
            assert err.value.cu_result == LAUNCH_FAILED, f"{kern.fault} gave {err.value.cu_result}, not 719"
            named = (kern.fault,) if not hasattr(module, "arch") else (kern.fault, "trap")  # AMD GPUs report every s_trap alike
            assert any(n in str(err.value) for n in named), f"the error does not name {kern.fault}: {err.value}"
        out = _launch(module, name, kern, rows)
        want = np.array([w for blk in range(GRID) for w in kern.expect(rows, blk)], np.uint32).reshape(out.shape)
        bad = np.argwhere(out != want)
        assert not len(bad), f"{len(bad)} differ, first: thread {bad[0][0]} out{bad[0][1]} = " \
                             f"{int(out[tuple(bad[0])]):#x}, expected {int(want[tuple(bad[0])]):#x}"
    return check


def _block_rows(rows: np.ndarray, block: int, blk: int) -> np.ndarray:
    return rows[blk * block:(blk + 1) * block]


# ---------------------------------------------------------------- barriers
@dataclass(frozen=True)
class Bar:
    opcode: str  # bar or barrier
    mods: tuple[str, ...]
    count: bool = False  # the thread-count operand b: groups of GROUP threads on their own ids
    negate: bool = False  # red: {!}c
    divergent: bool = False  # barrier.sync without .aligned reached from two code paths

    @property
    def block(self) -> int:
        return 2 * GROUP if self.count or "arrive" in self.mods else 80

    def instr(self, ident: str) -> str:
        return f"{self.opcode}.{'.'.join(self.mods)} {ident}" + (f", {GROUP}" if self.count else "")

    def ident(self) -> tuple[list[str], str]:
        """PTX computing the barrier id: per group a register (ids 3 and 4), else the immediate 0."""
        if self.count:
            return [f"shr.u32 %k, %t, {GROUP.bit_length() - 1};", "add.u32 %k, %k, 3;"], "%k"
        return [], "0"

    def group_of(self, t: int) -> range:
        size = GROUP if self.count else self.block
        return range(t // size * size, t // size * size + size)


def _bar_site(u: Bar, name: str, k: int, ident: str) -> list[str]:
    if not u.divergent:
        return [u.instr(ident) + ";"]
    # even and odd threads arrive at different instructions of the same barrier
    return ["and.b32 %y, %t, 1;", "setp.eq.u32 %w, %y, 0;", f"@%w bra {name}_even{k};", u.instr(ident) + ";",
            f"bra {name}_join{k};", f"{name}_even{k}:", u.instr(ident) + ";", f"{name}_join{k}:"]


def exchange(u: Bar, name: str) -> Kernel:
    """S[t] = a; barrier; r0 = S[partner]; barrier; S[t] = r0 + t; barrier; r1 = S[partner]."""
    pre, ident = u.ident()
    size = GROUP if u.count else u.block
    partner = [f"and.b32 %y, %t, {-size & M32 if u.count else 0};", "sub.u32 %x, %t, %y;", f"add.u32 %x, %x, {SHIFT};",
               f"rem.u32 %x, %x, {size};", "add.u32 %x, %x, %y;"]
    body = pre + partner + [f"mov.u64 %s, {name}_s;", "mul.wide.u32 %o, %t, 4;", "add.s64 %my, %s, %o;",
                            "mul.wide.u32 %o, %x, 4;", "add.s64 %pa, %s, %o;", "st.shared.u32 [%my], %a;"]
    body += _bar_site(u, name, 0, ident) + ["ld.shared.u32 %r0, [%pa];"] + _bar_site(u, name, 1, ident)
    body += ["add.u32 %y, %r0, %t;", "st.shared.u32 [%my], %y;"] + _bar_site(u, name, 2, ident)
    body += ["ld.shared.u32 %r1, [%pa];", _store(0, "%r0"), _store(1, "%r1")]

    def expect(rows: np.ndarray, blk: int) -> Expected:
        a = _block_rows(rows, u.block, blk)[:, 0]
        p = [t // size * size + (t % size + SHIFT) % size for t in range(u.block)]
        return [[int(a[p[t]]), (int(a[p[p[t]]]) + p[t]) & M32] for t in range(u.block)]
    return Kernel(u.block, body, expect, f".shared .align 4 .b32 {name}_s[{u.block}];")


def arrive(u: Bar, name: str) -> Kernel:
    """Warps 0-1 wait (bar.sync) for data that warps 2-3 write and then arrive with (these run later)."""
    sync = f"{u.opcode}.sync 5, {2 * GROUP};"
    body = [f"mov.u64 %s, {name}_s;", f"setp.lt.u32 %w, %t, {GROUP};", f"@%w bra {name}_consume;",
            f"sub.u32 %x, %t, {GROUP};", "mul.wide.u32 %o, %x, 4;", "add.s64 %my, %s, %o;",
            "mad.lo.u32 %y, %a, 3, 1;", "st.shared.u32 [%my], %y;", f"{u.opcode}.{'.'.join(u.mods)} 5, {2 * GROUP};",
            _store(0, "%a"), f"bra {name}_done;", f"{name}_consume:", sync, "mul.wide.u32 %o, %t, 4;",
            "add.s64 %my, %s, %o;", "ld.shared.u32 %r0, [%my];", _store(0, "%r0"), f"{name}_done:"]

    def expect(rows: np.ndarray, blk: int) -> Expected:
        a = _block_rows(rows, u.block, blk)[:, 0]
        return [[(int(a[t + GROUP]) * 3 + 1) & M32 if t < GROUP else int(a[t]), SENTINEL] for t in range(u.block)]
    return Kernel(u.block, body, expect, f".shared .align 4 .b32 {name}_s[{GROUP}];")


def reduction(u: Bar, name: str) -> Kernel:
    """Every participating thread gets the popc / and / or of the (negated) predicates a & 1 of its
    group; the inputs make some groups uniform."""
    pre, ident = u.ident()
    pred = "!%q" if u.negate else "%q"
    kind = next(m for m in u.mods if m in ("popc", "and", "or"))
    out = "%r0" if kind == "popc" else "%p"
    count = f", {GROUP}" if u.count else ""
    body = pre + ["and.b32 %y, %a, 1;", "setp.ne.u32 %q, %y, 0;",
                  f"{u.opcode}.{'.'.join(u.mods)} {out}, {ident}{count}, {pred};"]
    body += ([] if kind == "popc" else ["selp.u32 %r0, 1, 0, %p;"]) + [_store(0, "%r0")]

    def expect(rows: np.ndarray, blk: int) -> Expected:
        a = _block_rows(rows, u.block, blk)[:, 0]
        res = []
        for t in range(u.block):
            preds = [bool(a[s] & 1) != u.negate for s in u.group_of(t)]
            res.append([{"popc": sum(preds), "and": int(all(preds)), "or": int(any(preds))}[kind], SENTINEL])
        return res
    return Kernel(u.block, body, expect, shape=lambda rows: _uniform_groups(rows, u))


def _uniform_groups(rows: np.ndarray, u: Bar) -> np.ndarray:
    """Make the second group of each block all-odd and the third all-even (all true / all false)."""
    size = GROUP if u.count else u.block
    for start in range(0, len(rows), size):
        pattern = start // size % 3
        if pattern:
            rows[start:start + size, 0] = (rows[start:start + size, 0] & ~np.uint32(1)) | np.uint32(pattern == 1)
    return rows


def _bar_uses(tf: TargetForm) -> list[Bar]:
    op, syntax = tf.opcode, tf.syntax
    aligned = "{.aligned}" in syntax
    al = lambda on: ("aligned",) if aligned and on else ()  # noqa: E731
    if ".sync" in syntax:
        uses = [Bar(op, ("cta", "sync") + al(True)), Bar(op, ("sync",), count=True)]
        return uses + ([Bar(op, ("sync",), divergent=True)] if aligned else [])
    if ".arrive" in syntax:
        return [Bar(op, ("cta", "arrive")), Bar(op, ("arrive",) + al(True))]
    if ".popc" in syntax:
        return [Bar(op, ("cta", "red", "popc") + al(True) + ("u32",)),
                Bar(op, ("red", "popc", "u32"), count=True, negate=True)]
    return [Bar(op, ("cta", "red", "and") + al(True) + ("pred",), count=True, negate=True),
            Bar(op, ("red", "or", "pred")),
            Bar(op, ("red", "and", "pred")),
            Bar(op, ("cta", "red", "or") + al(True) + ("pred",), count=True, negate=True)]


def _bar_kernel(u: Bar, name: str) -> Kernel:
    if "sync" in u.mods:
        return exchange(u, name)
    if "arrive" in u.mods:
        return arrive(u, name)
    return reduction(u, name)


# ---------------------------------------------------------------- control flow
def _per_thread(block: int, fn: Callable[[int, int, int, int], list[int]]) -> Callable[[np.ndarray, int], Expected]:
    """expect() from fn(a, b, global id, tid) per thread."""
    def expect(rows: np.ndarray, blk: int) -> Expected:
        return [[w & M32 for w in fn(int(rows[blk * block + t, 0]), int(rows[blk * block + t, 1]), blk * block + t, t)]
                for t in range(block)]
    return expect


def branches(uni: bool, name: str) -> Kernel:
    if uni:  # a jump over dead code, then a branch uniform per block
        body = ["mov.u32 %r0, %a;", f"bra.uni {name}_skip;", "mov.u32 %r0, 0;", f"{name}_skip:",
                "mov.u32 %y, %ctaid.x;", "setp.eq.u32 %w, %y, 0;", f"@%w bra.uni {name}_zero;",
                "add.u32 %r0, %r0, 100;", f"bra.uni {name}_join;", f"{name}_zero:", "add.u32 %r0, %r0, 7;",
                f"{name}_join:", _store(0, "%r0")]
        return Kernel(80, body, _per_thread(80, lambda a, b, g, t: [a + (7 if g < 80 else 100), SENTINEL]))
    # a loop with a per-thread trip count: sum of y*y + 1 for y < a % 8
    body = ["and.b32 %x, %a, 7;", "mov.u32 %r0, 0;", "mov.u32 %y, 0;", f"{name}_loop:", "setp.ge.u32 %w, %y, %x;",
            f"@%w bra {name}_leave;", "mad.lo.u32 %r0, %y, %y, %r0;", "add.u32 %r0, %r0, 1;", "add.u32 %y, %y, 1;",
            f"bra {name}_loop;", f"{name}_leave:", _store(0, "%r0")]
    return Kernel(80, body, _per_thread(80, lambda a, b, g, t: [sum(y * y + 1 for y in range(a & 7)), SENTINEL]))


def branch_table(uni: bool, name: str) -> Kernel:
    """brx.idx over three targets: index a % 3 per thread, or per warp and block with .uni."""
    index = ["shr.u32 %x, %t, 5;", "mov.u32 %y, %ctaid.x;", "add.u32 %x, %x, %y;"] if uni else ["mov.u32 %x, %a;"]
    body = [f"{name}_tl: .branchtargets {name}_L0, {name}_L1, {name}_L2;", *index, "rem.u32 %x, %x, 3;",
            f"brx.idx{'.uni' if uni else ''} %x, {name}_tl;",
            f"{name}_L0:", "add.u32 %r0, %b, 10;", f"bra {name}_J;",
            f"{name}_L1:", "mul.lo.u32 %r0, %b, 3;", f"bra {name}_J;",
            f"{name}_L2:", "xor.b32 %r0, %b, 0x5555;",
            f"{name}_J:", _store(0, "%r0")]

    def target(a: int, b: int, g: int, t: int) -> list[int]:
        k = (t // 32 + g // 96) % 3 if uni else a % 3
        return [(b + 10, b * 3, b ^ 0x5555)[k], SENTINEL]
    return Kernel(96, body, _per_thread(96, target))


@dataclass(frozen=True)
class Call:
    """One call form: a return value, parameters, through a function pointer (3 targets)."""

    ret: bool
    params: bool
    indirect: bool
    uni: bool

    def value(self, k: int, a: int, g: int) -> int:
        """What callee k computes: from its parameters (a, g) or, without any, from its own id."""
        return a * (2 * k + 3) + g * (k + 1) + k if self.params else g * (2 * k + 3) + 7 * k + 1

    def _sig(self, name: str) -> tuple[str, str]:
        """(return list, parameter list) of a callee, or of the prototype with names "_"."""
        label = lambda n: name if name == "_" else f"{name}_{n}"  # noqa: E731
        ret = f"(.param .u32 {label('r')}) " if self.ret else ""
        params = [f".param .u32 {label('x')}", f".param .u32 {label('y')}"] if self.params else []
        if self.params and not self.ret:  # a result without a return value goes through a pointer
            params.insert(0, f".param .u64 {label('p')}")
        return ret, f" ({', '.join(params)})" if params else ""

    def callee(self, name: str, fname: str, k: int) -> str:
        ret, params = self._sig(fname)
        if self.params:
            body = [f"ld.param.u32 %x, [{fname}_x];", f"ld.param.u32 %y, [{fname}_y];",
                    f"mul.lo.u32 %v, %x, {2 * k + 3};", f"mad.lo.u32 %v, %y, {k + 1}, %v;", f"add.u32 %v, %v, {k};"]
        else:
            body = ["mov.u32 %x, %ntid.x;", "mov.u32 %y, %ctaid.x;", "mov.u32 %v, %tid.x;",
                    "mad.lo.u32 %y, %x, %y, %v;", f"mul.lo.u32 %v, %y, {2 * k + 3};", f"add.u32 %v, %v, {7 * k + 1};"]
        if self.ret:
            body.append(f"st.param.u32 [{fname}_r], %v;")
        elif self.params:
            body += [f"ld.param.u64 %d, [{fname}_p];", "st.global.u32 [%d], %v;"]
        else:  # the output base comes through a module variable
            body += [f"ld.global.u64 %d, [{name}_ptr];", "mul.wide.u32 %e, %y, 8;", "add.s64 %d, %d, %e;",
                     "st.global.u32 [%d+4], %v;"]
        regs = ".reg .b32 %x, %y, %v; .reg .b64 %d, %e;"
        return f".func {ret}{fname}{params}\n{{\n  {regs}\n  " + "\n  ".join(body) + "\n  ret;\n}\n"

    def _pointer(self, name: str, targets: list[str]) -> tuple[str, list[str], str]:
        """(table declaration, PTX loading %fp, flist): the callee from a table, per thread or
        (.uni) per warp and block; flist a .callprototype, or .calltargets without a signature."""
        table = f".global .u64 {name}_tab[3] = {{{', '.join(targets)}}};\n"
        uniform = ["shr.u32 %k, %t, 5;", "mov.u32 %y, %ctaid.x;", "add.u32 %k, %k, %y;"]
        pick = uniform if self.uni else ["mov.u32 %k, %a;"]
        pick += ["rem.u32 %k, %k, 3;", f"mov.u64 %s, {name}_tab;", "mul.wide.u32 %o, %k, 8;", "add.s64 %s, %s, %o;",
                 "ld.global.u64 %fp, [%s];"]
        if self.params or self.ret:
            ret, params = self._sig("_")
            return table, pick + [f"{name}_proto: .callprototype {ret}_{params};"], f"{name}_proto"
        return table, pick + [f"{name}_ct: .calltargets {', '.join(targets)};"], f"{name}_ct"

    def _arguments(self, name: str) -> tuple[list[str], list[str]]:
        """(PTX declaring and setting the call's .param space, the argument names): the pointer
        to output word 1 (no return value), a and the thread id; the return value's space."""
        body, args = [], []
        if self.params:
            if not self.ret:
                body += [f".param .u64 {name}_ap;", "add.s64 %o, %out, 4;", f"st.param.u64 [{name}_ap], %o;"]
                args.append(f"{name}_ap")
            body += [f".param .u32 {name}_ax;", f".param .u32 {name}_ay;", f"st.param.u32 [{name}_ax], %a;",
                     f"st.param.u32 [{name}_ay], %g;"]
            args += [f"{name}_ax", f"{name}_ay"]
        if self.ret:
            body.append(f".param .u32 {name}_ar;")
        return body, args

    def kernel(self, name: str) -> Kernel:
        targets = [f"{name}_f{k}" for k in range(3 if self.indirect else 1)]
        decls = f".global .u64 {name}_ptr;\n" + "".join(self.callee(name, f, k) for k, f in enumerate(targets))
        body = [f"mov.u64 %s, {name}_ptr;", "st.global.u64 [%s], %ob;"]
        if self.indirect:
            table, pick, flist = self._pointer(name, targets)
            decls += table
            body += pick
        # without .uni: odd threads only (a predicated call), and per-thread callees
        guard = "" if self.uni else "@%w "
        setup, args = self._arguments(name)
        body += ["and.b32 %y, %g, 1;", "setp.ne.u32 %w, %y, 0;", "{", *setup]
        ops = ([f"({name}_ar)"] if self.ret else []) + ["%fp" if self.indirect else targets[0]]
        ops += [f"({', '.join(args)})"] if args else []
        ops += [flist] if self.indirect else []
        body.append(f"{guard}call{'.uni' if self.uni else ''} {', '.join(ops)};")
        if self.ret:
            body += [f"ld.param.u32 %r1, [{name}_ar];", _store(1, "%r1", guard)]
        body += ["}", "add.u32 %r0, %a, 1;", _store(0, "%r0")]

        def expect(a: int, b: int, g: int, t: int) -> list[int]:
            k = ((t // 32 + g // 64) if self.uni else a) % 3 if self.indirect else 0
            called = self.uni or g % 2 == 1
            return [a + 1, self.value(k, a, g) if called else SENTINEL]
        return Kernel(64, body, _per_thread(64, expect), decls)


CALL_FORMS = {"call{.uni} (ret-param), func, (param-list);": (True, True, False),
              "call{.uni} func, (param-list);": (False, True, False),
              "call{.uni} func;": (False, False, False),
              "call{.uni} (ret-param), func;": (True, False, False),
              "call{.uni} (ret-param), fptr, (param-list), flist;": (True, True, True),
              "call{.uni} fptr, (param-list), flist;": (False, True, True),
              "call{.uni} fptr, flist;": (False, False, True),
              "call{.uni} (ret-param), fptr, flist;": (True, False, True)}


def returns(uni: bool, name: str) -> Kernel:
    """A .func returning a + 1 early, else a * 3: early for odd a, or with .uni (a uniform
    return) in block 0; without .uni also a kernel ret for every fourth thread before its
    second store."""
    r = "ret.uni" if uni else "ret"
    early = ["mov.u32 %y, %ctaid.x;", "setp.eq.u32 %e, %y, 0;"] if uni else \
        ["and.b32 %y, %x, 1;", "setp.ne.u32 %e, %y, 0;"]
    decls = (f".func (.param .u32 {name}_r) {name}_h(.param .u32 {name}_x)\n{{\n  .reg .b32 %x, %y; .reg .pred %e;\n  "
             + "\n  ".join([f"ld.param.u32 %x, [{name}_x];", "add.u32 %y, %x, 1;", f"st.param.u32 [{name}_r], %y;",
                            *early, f"@%e {r};", "mul.lo.u32 %y, %x, 3;", f"st.param.u32 [{name}_r], %y;", f"{r};"])
             + "\n}\n")
    body = ["{", f".param .u32 {name}_a;", f".param .u32 {name}_v;", f"st.param.u32 [{name}_a], %a;",
            f"call ({name}_v), {name}_h, ({name}_a);", f"ld.param.u32 %r0, [{name}_v];", "}", _store(0, "%r0")]
    if not uni:
        body += ["and.b32 %y, %g, 3;", "setp.eq.u32 %w, %y, 0;", "@%w ret;"]
    body += ["xor.b32 %r1, %a, 0xFF;", _store(1, "%r1")]

    def expect(a: int, b: int, g: int, t: int) -> list[int]:
        first = a + 1 if (g < 64 if uni else a & 1) else a * 3
        return [first, SENTINEL if not uni and g % 4 == 0 else a ^ 0xFF]
    return Kernel(64, body, _per_thread(64, expect), decls)


def exits(name: str) -> Kernel:
    """Threads with g % 3 == 0 exit in the kernel, those with g % 3 == 1 and a & 2 inside a called
    function; the rest count themselves with bar.red.popc (exited threads do not take part)."""
    decls = (f".func {name}_leave(.param .u32 {name}_v)\n{{\n  .reg .b32 %v; .reg .pred %e;\n  "
             f"ld.param.u32 %v, [{name}_v];\n  and.b32 %v, %v, 2;\n  setp.ne.u32 %e, %v, 0;\n  @%e exit;\n  ret;\n}}\n")
    body = ["rem.u32 %y, %g, 3;", "setp.eq.u32 %w, %y, 0;", "@%w exit;", "setp.eq.u32 %w, %y, 1;",
            "{", f".param .u32 {name}_a;", f"st.param.u32 [{name}_a], %a;", f"@%w call {name}_leave, ({name}_a);", "}",
            "add.u32 %r1, %a, 1;", _store(1, "%r1"), "setp.eq.u32 %q, %t, %t;", "bar.red.popc.u32 %r0, 0, %q;",
            _store(0, "%r0")]

    def expect(rows: np.ndarray, blk: int) -> Expected:
        a = _block_rows(rows, 80, blk)[:, 0]
        alive = [(blk * 80 + t) % 3 == 2 or ((blk * 80 + t) % 3 == 1 and not a[t] & 2) for t in range(80)]
        return [[sum(alive), (int(a[t]) + 1) & M32] if alive[t] else [SENTINEL, SENTINEL] for t in range(80)]
    return Kernel(80, body, expect, decls)


def stops(opcode: str, name: str) -> Kernel:
    """The thread whose id is the argument runs trap/brkpt; with no such thread the kernel completes."""
    body = [f"ld.param.u32 %x, [{name}_arg];", "setp.eq.u32 %w, %g, %x;", f"@%w {opcode};",
            "add.u32 %r0, %a, 5;", _store(0, "%r0")]
    return Kernel(80, body, _per_thread(80, lambda a, b, g, t: [a + 5, SENTINEL]), fault=opcode)


# ---------------------------------------------------------------- no-ops
def around(instr: str, name: str, decls: str = "") -> Kernel:
    """Store a to global and b to shared memory, run `instr`, load both back: r0 = a + 1, r1 = b."""
    body = [f"mov.u64 %s, {name}_s;", "mul.wide.u32 %o, %t, 4;", "add.s64 %my, %s, %o;", "st.global.u32 [%out], %a;",
            "st.shared.u32 [%my], %b;", instr, "ld.global.u32 %r0, [%out];", "ld.shared.u32 %r1, [%my];",
            "add.u32 %r0, %r0, 1;", _store(0, "%r0"), _store(1, "%r1")]
    return Kernel(80, body, _per_thread(80, lambda a, b, g, t: [a + 1, b]),
                  decls + f".shared .align 4 .b32 {name}_s[80];\n")


def _no_op_uses(tf: TargetForm) -> list[tuple[tuple[str, ...], str]]:
    """(mods, operands) per instance: each value of each slot (and each absence) once."""
    slots = tf.form.slots
    width = max([len(s.values) + s.optional for s in slots] + [1])
    uses = []
    for i in range(width):
        mods = []
        for s in slots:
            values = sorted(s.values) + ([None] if s.optional else [])
            v = values[i % len(values)]
            if v is not None:
                mods.append(v)
        uses.append(tuple(mods))
    if tf.opcode == "setmaxnreg":  # .dec with the smaller count
        return [(m, " 40" if "dec" in m else " 240") for m in uses]
    operand = {"nanosleep": " 1000", "pmevent": " 0x0104" if slots else " 3"}.get(tf.opcode, "")
    return [(m, " [%fp], 128" if "[addr], size" in tf.syntax else operand) for m in uses]


def no_op(tf: TargetForm, mods: tuple[str, ...], operands: str, name: str) -> Kernel:
    decls = ""
    if "[addr]" in tf.syntax:  # a tensormap-sized, aligned global object to fence
        decls = f".global .align 128 .b8 {name}_tm[128];\n"
    instr = f"{tf.opcode}{''.join('.' + m for m in mods)}{operands};"
    kern = around(instr, name, decls)
    if "[addr]" in tf.syntax:
        kern = Kernel(kern.block, [f"mov.u64 %fp, {name}_tm;", "cvta.global.u64 %fp, %fp;"] + kern.body,
                      kern.expect, kern.decls)
    return kern


# ---------------------------------------------------------------- instances per form line
def _kernels(tf: TargetForm) -> list[tuple[tuple[str, ...], Callable[[str], Kernel], str]]:
    """(mods, kernel builder, target) per instance of a form line."""
    op = tf.opcode
    uni = [("uni",), ()]
    if op in ("bar", "barrier"):
        return [(u.mods, lambda n, u=u: _bar_kernel(u, n), "sm_90") for u in _bar_uses(tf)]
    if op == "bra":
        return [(m, lambda n, m=m: branches(bool(m), n), "sm_90") for m in uni]
    if op == "brx.idx":
        return [(m, lambda n, m=m: branch_table(bool(m), n), "sm_90") for m in uni]
    if op == "call":
        ret, params, indirect = CALL_FORMS[tf.syntax]
        return [(m, lambda n, m=m: Call(ret, params, indirect, bool(m)).kernel(n), "sm_90") for m in uni]
    if op == "ret":
        return [(m, lambda n, m=m: returns(bool(m), n), "sm_90") for m in uni]
    if op == "exit":
        return [((), exits, "sm_90")]
    if op in ("trap", "brkpt"):
        return [((), lambda n: stops(op, n), "sm_90")]
    target = "sm_90a" if op == "setmaxnreg" else "sm_90"
    return [(m, lambda n, m=m, o=o: no_op(tf, m, o, n), target) for m, o in _no_op_uses(tf)]


def _line(tf: TargetForm) -> int:
    from zluda_py.ptx import grammar
    return grammar.opcodes()[tf.opcode].forms.index(tf.form)


def instances(tf: TargetForm) -> list[Instance]:
    out = []
    for k, (mods, build, target) in enumerate(_kernels(tf)):
        tag = "_".join(m.replace("::", "_").replace(".", "_") for m in mods) or "plain"
        name = f"ctl_{tf.opcode.replace('.', '_')}{_line(tf)}_{k}_{tag}"
        kern = build(name)
        out.append(Instance(mods, name, _entry(name, kern.body), check_for(kern), kern.decls, target=target))
    return out
