"""mbarrier objects, cp.async.mbarrier.arrive and the bulk copies (cp.async.bulk and its groups).

An mbarrier instance is a *script* one thread runs on an object in shared memory: the form
under test at one step, plain forms around it, and after each step the things a program can
observe recorded into `out`: test_wait/try_wait results (with a state or a parity) and
mbarrier.pending_count of the states that arrivals return. The reference is `Bar` below, the
manual's rules over Python integers (phase number, pending and expected arrival counts,
tx-count); a state is the object's (phase, pending count) before the arrive-on.

A bulk copy instance moves a pattern global -> shared (completing on an mbarrier with its
byte count, waited for with try_wait.parity), shared -> shared, or shared -> global (bulk
group, committed and waited for), and the data must arrive exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from conformance.target_forms import TargetForm
from conformance.targets import Instance
from conformance.targets.memory import _line, _rng, _tag

OPCODES = {"mbarrier.init", "mbarrier.inval", "mbarrier.expect_tx", "mbarrier.complete_tx", "mbarrier.arrive",
           "mbarrier.arrive_drop", "mbarrier.test_wait", "mbarrier.try_wait", "mbarrier.pending_count",
           "cp.async.mbarrier.arrive", "cp.async.bulk", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
           "cp.async.bulk.prefetch"}
SPACES = ("shared", "shared::cta", "shared::cluster")
RECORDS = 32


class Bar:
    """The mbarrier object as the PTX manual describes it."""

    def __init__(self, count: int) -> None:
        self.phase, self.pending, self.expected, self.tx = 0, count, count, 0

    def _complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending, self.tx = self.expected, 0

    def arrive(self, count: int = 1, drop: int = 0, tx: int = 0, complete: bool = True) -> tuple[int, int]:
        self.tx += tx  # the expect-tx of the .expect_tx forms comes first
        state = (self.phase, self.pending)
        self.expected -= drop
        self.pending -= count
        if complete:
            self._complete()
        return state

    def expect_tx(self, n: int) -> None:
        self.tx += n

    def complete_tx(self, n: int) -> None:
        self.tx -= n
        self._complete()

    def done(self, state: tuple[int, int]) -> bool:
        return self.phase > state[0]

    def parity_done(self, parity: int) -> bool:
        return self.phase % 2 != parity



def _entry(name: str, params: list[str], body: list[str]) -> str:
    regs = [".reg .b64 %st<16>;", ".reg .b32 %r<16>;", ".reg .pred %p<8>;", ".reg .b64 %rd<8>;", ".reg .b32 %ra;",
            ".reg .b32 %rb;", ".reg .b64 %ga;", ".reg .b64 %pol;"]
    return (f".visible .entry {name}({', '.join(params)})\n{{\n  " + "\n  ".join(regs + body) + "\n  ret;\n}\n")


@dataclass
class Script:
    """Thread 0's sequence of steps on the object `<name>_bar`, and what it must record."""

    name: str
    body: list[str] = field(default_factory=list)
    want: list[int] = field(default_factory=list)
    states: dict[int, tuple[int, int]] = field(default_factory=dict)
    bar: Bar | None = None
    nstate: int = 0

    @staticmethod
    def addr(mods: tuple[str, ...]) -> str:
        """Shared forms take the 32-bit shared address, the others the generic one."""
        return "%ra" if any(m in SPACES for m in mods) else "%ga"

    def record(self, reg: str, value: int) -> None:
        self.body.append(f"st.global.u32 [%rd0+{4 * len(self.want)}], {reg};")
        self.want.append(value)

    def record_pred(self, value: bool) -> None:
        self.body.append("selp.u32 %r9, 1, 0, %p1;")
        self.record("%r9", int(value))

    # ---- steps (mods: the form under test, or None for a plain form)
    def init(self, count: int, mods: tuple[str, ...] | None = None) -> None:
        m = mods if mods is not None else ("shared", "b64")
        self.body.append(f"mbarrier.init.{'.'.join(m)} [{self.addr(m)}], {count};")
        self.bar = Bar(count)

    def arrive(self, count: int | None = None, mods: tuple[str, ...] | None = None, op: str = "arrive",
               drop: bool = False, tx: int = 0, sink: bool = False) -> int | None:
        m = mods if mods is not None else ("shared", "b64")
        dst = "_" if sink else f"%st{self.nstate}"
        extra = f", {tx}" if tx else (f", {count}" if count is not None else "")
        self.body.append(f"mbarrier.{op}.{'.'.join(m)} {dst}, [{self.addr(m)}]{extra};")
        n = 1 if count is None else count
        state = self.bar.arrive(n, n if drop else 0, tx, complete="noComplete" not in m)
        if sink:
            return None
        self.states[self.nstate] = state
        self.nstate += 1
        return self.nstate - 1

    def tx(self, op: str, n: int, mods: tuple[str, ...] | None = None) -> None:
        m = mods if mods is not None else ("shared::cta", "b64")
        self.body.append(f"mbarrier.{op}.{'.'.join(m)} [{self.addr(m)}], {n};")
        (self.bar.expect_tx if op == "expect_tx" else self.bar.complete_tx)(n)

    def wait(self, state: int, op: str = "test_wait", mods: tuple[str, ...] | None = None, hint: bool = False) -> None:
        m = mods if mods is not None else ("shared", "b64")
        self.body.append(f"mbarrier.{op}.{'.'.join(m)} %p1, [{self.addr(m)}], %st{state}{', 1000' if hint else ''};")
        self.record_pred(self.bar.done(self.states[state]))

    def parity(self, parity: int, op: str = "test_wait", mods: tuple[str, ...] | None = None,
               hint: bool = False) -> None:
        m = mods if mods is not None else ("parity", "shared", "b64")
        self.body.append(f"mov.u32 %rb, {parity};")
        self.body.append(f"mbarrier.{op}.{'.'.join(m)} %p1, [{self.addr(m)}], %rb{', %rb' if hint else ''};")
        self.record_pred(self.bar.parity_done(parity))

    def pending(self, state: int, mods: tuple[str, ...] = ("b64",)) -> None:
        self.body.append(f"mbarrier.pending_count.{'.'.join(mods)} %r8, %st{state};")
        self.record("%r8", self.states[state][1])

    def instance(self, mods: tuple[str, ...], decls: str = "", extra: list[str] | None = None,
                 target: str = "sm_90") -> Instance:
        name = self.name
        body = [f"ld.param.u64 %rd0, [{name}_out];", "cvta.to.global.u64 %rd0, %rd0;",
                f"mov.u32 %ra, {name}_bar;", f"mov.u64 %ga, {name}_bar;", "cvta.shared.u64 %ga, %ga;",
                "mov.u32 %r0, %tid.x;", "setp.ne.u32 %p0, %r0, 0;", f"@%p0 bra {name}_done;",
                *(extra or []), *self.body, f"{name}_done:"]
        want = np.array(self.want, np.uint32)

        def check(module, kname: str) -> None:
            out = np.full(RECORDS, 0xDEADBEEF, np.uint32)
            module.launch(kname, (1,), (32,), [out])
            got = out[:len(want)]
            assert (got == want).all(), f"records {got.tolist()}, expected {want.tolist()}"

        entry = _entry(name, [f".param .u64 {name}_out"], body)
        return Instance(mods, name, entry, check, f".shared .align 8 .b64 {name}_bar;\n" + decls, target=target)


def _sem(tf: TargetForm) -> tuple[str, ...]:
    """Values of the form's .sem slot (arrivals release, waits acquire, tx updates relaxed)."""
    for slot in tf.form.slots:
        if slot.values & {"release", "acquire", "relaxed"}:
            return tuple(sorted(slot.values))
    return ()


def _variants(tf: TargetForm, fixed: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Modifier lists that cover every value of every slot and each optional slot's absence,
    as ptxas takes them: .sem and .scope together or neither, spaces with or without them."""
    slots = tf.form.slots
    out: list[tuple[str, ...]] = []
    sems = _sem(tf)
    scope_slot = next((s for s in slots if s.values & {"cta", "cluster"}), None)
    space_slot = next((s for s in slots if s.values & set(SPACES)), None)
    scopes = sorted(scope_slot.values) if scope_slot else []
    spaces = sorted(space_slot.values) if space_slot else []
    cluster_ok = "noComplete" not in fixed
    combos = [((), ())] + [((s,), (c,)) for s in sems for c in scopes if cluster_ok or c == "cta"]
    for k, (sem, scope) in enumerate(combos):
        space = (spaces[k % len(spaces)],) if spaces and k else ()
        out.append((*fixed, *sem, *scope, *space, "b64"))
    for sp in spaces:  # every space, also without .sem/.scope
        out.append((*fixed, sp, "b64"))
    seen, uniq = set(), []
    for m in out:
        if m not in seen and tf.covered_by(m) is not None:
            seen.add(m)
            uniq.append(m)
    return uniq


def _name(tf: TargetForm, mods: tuple[str, ...]) -> str:
    return f"mbar{_line(tf)}_{tf.opcode.split('.')[-1]}_{_tag(mods)}"


def _mbarrier_instance(tf: TargetForm, mods: tuple[str, ...], k: int) -> Instance:
    op = tf.opcode.split(".", 1)[1]
    s = Script(_name(tf, mods) + (f"_{k}" if k else ""))
    cluster_sink = "shared::cluster" in mods and op in ("arrive", "arrive_drop")
    if op == "init":
        s.init(3, mods)
        a = s.arrive(2)
        s.wait(a)
        s.pending(a)
        b = s.arrive(1)
        s.wait(a)
        s.pending(b)
    elif op == "inval":
        s.init(2)
        a = s.arrive(2)
        s.wait(a)
        s.body.append(f"mbarrier.inval.{'.'.join(mods)} [{s.addr(mods)}];")
        s.init(1)  # the memory may hold a new object
        b = s.arrive()
        s.wait(b)
        s.pending(b)
    elif op in ("expect_tx", "complete_tx"):
        s.init(1)
        s.tx("expect_tx", 48, mods if op == "expect_tx" else None)
        a = s.arrive()
        s.wait(a)
        s.tx("complete_tx", 16, mods if op == "complete_tx" else None)
        s.parity(0)
        s.tx("complete_tx", 32, mods if op == "complete_tx" else None)
        s.wait(a)
        s.parity(0)
        s.parity(1)
    elif op in ("arrive", "arrive_drop"):
        drop = op == "arrive_drop"
        expect = "expect_tx" in mods
        nocomplete = "noComplete" in mods
        s.init(4)
        count = 2 if (k % 2 or nocomplete) and not expect else None
        a = s.arrive(count, mods, op=op, drop=drop, tx=24 if expect else 0, sink=cluster_sink)
        if a is not None:
            s.wait(a)
            s.pending(a)
        s.parity(0)
        b = s.arrive(s.bar.pending)  # the rest of the phase's arrivals
        s.parity(0)
        if expect:
            s.tx("complete_tx", 24)
            s.parity(0)
        if a is not None:
            s.wait(a)
        s.pending(b)
        c = s.arrive(1)  # the next phase expects the dropped count fewer
        s.pending(c)
        s.parity(1)
    elif op in ("test_wait", "try_wait"):
        parity = "parity" in mods
        hint = op == "try_wait" and k % 2 == 1
        s.init(2)
        a = s.arrive()
        if parity:
            s.parity(0, op, mods, hint)
            s.parity(1, op, mods, hint)
        else:
            s.wait(a, op, mods, hint)
        b = s.arrive()
        if parity:
            s.parity(0, op, mods, hint)
            s.parity(1, op, mods, hint)
        else:
            s.wait(a, op, mods, hint)
            s.wait(b, op, mods, hint)
    elif op == "pending_count":
        s.init(5)
        a = s.arrive(3)
        s.pending(a, mods)
        b = s.arrive()
        s.pending(b, mods)
        c = s.arrive()
        s.pending(c, mods)
        d = s.arrive()
        s.pending(d, mods)
    return s.instance(mods)


def mbarrier_instances(tf: TargetForm) -> list[Instance]:
    written = tf.syntax.split(" ")[0][len(tf.opcode):]  # the modifiers after the opcode
    fixed = tuple(m for m in ("expect_tx", "noComplete", "parity") if written.startswith(f".{m}"))
    out = []
    for k, mods in enumerate(_variants(tf, fixed)):
        out.append(_mbarrier_instance(tf, mods, k))
    if tf.opcode == "mbarrier.try_wait":  # the suspend-time hint with a space too
        mods = _variants(tf, fixed)[-1]
        out.append(_mbarrier_instance(tf, mods, 101))
    return out


# ---------------------------------------------------------------- cp.async.mbarrier.arrive
def cp_arrive_instance(mods: tuple[str, ...]) -> Instance:
    """Thread 0 copies 16 bytes with cp.async, then cp.async.mbarrier.arrive: with .noinc the
    arrival counts against the phase's expected arrivals, without it the pending count is
    incremented first (no net change). The copied bytes must be there after the wait."""
    name = f"cp_async_mbarrier_arrive_{_tag(mods)}"
    s = Script(name)
    s.init(2)
    src = _rng(name).integers(0, 2**32, 4, dtype=np.uint32)
    extra = [f"mov.u32 %rb, {name}_buf;"] + [f"mov.u32 %r1, {int(v)}; st.global.u32 [%rd0+{64 + 4 * i}], %r1;"
                                               for i, v in enumerate(src)]
    s.body.append("add.u64 %rd1, %rd0, 64;")
    s.body.append("cp.async.ca.shared.global [%rb], [%rd1], 16;")
    s.body.append(f"cp.async.mbarrier.arrive.{'.'.join(mods)} [{s.addr(mods)}];")
    if "noinc" in mods:  # one of the phase's two arrivals
        s.bar.arrive(1)
    a = s.arrive()
    s.wait(a)
    s.pending(a)
    b = s.arrive() if "noinc" not in mods else None
    if b is not None:
        s.wait(a)
    for i, v in enumerate(src):
        s.body.append(f"ld.shared.u32 %r2, [%rb+{4 * i}];")
        s.record("%r2", int(v))
    return s.instance(mods, decls=f".shared .align 16 .b8 {name}_buf[16];", extra=extra)


# ---------------------------------------------------------------- cp.async.bulk
def bulk_instance(mods: tuple[str, ...], tag: str, group: tuple[str, ...] = ("commit", ()),
                  refused: str | None = None, target: str = "sm_90", form_mods: tuple[str, ...] | None = None) -> Instance:
    """32 threads; thread 0 issues the copy. global -> shared and shared -> shared complete on
    the mbarrier (arrive.expect_tx of the size, wait on parity 0); shared -> global is a bulk
    group (commit, wait_group[.read] 0). `out` gets the bytes the destination holds."""
    name = f"bulk_{tag}_{_tag(mods)}"
    size = 256
    dst, src = [m for m in mods if m in ("global", "shared::cta", "shared::cluster")][:2]
    hint = "L2::cache_hint" in mods
    data = _rng(name).integers(0, 256, size, dtype=np.uint8)
    body = [f"ld.param.u64 %rd0, [{name}_out];", "cvta.to.global.u64 %rd0, %rd0;",
            f"ld.param.u64 %rd1, [{name}_in];", "cvta.to.global.u64 %rd1, %rd1;",
            f"mov.u32 %ra, {name}_bar;", f"mov.u32 %rb, {name}_buf;", f"mov.u32 %r7, {name}_src;",
            "mov.u32 %r0, %tid.x;", "createpolicy.fractional.L2::evict_last.b64 %pol, 1.0;"]
    # every thread stages 8 bytes of the pattern: into shared for the shared sources
    body += ["mul.wide.u32 %rd2, %r0, 8;", "add.u64 %rd3, %rd1, %rd2;", "ld.global.u64 %rd4, [%rd3];",
             "shl.b32 %r1, %r0, 3;", "add.u32 %r2, %r7, %r1;", "st.shared.u64 [%r2], %rd4;",
             "setp.ne.u32 %p0, %r0, 0;", "@!%p0 mbarrier.init.shared.b64 [%ra], 1;", "bar.sync 0;",
             f"@%p0 bra {name}_wait;"]
    pol = ", %pol" if hint else ""
    instr = f"cp.async.bulk.{'.'.join(mods)}"
    if dst == "global":
        mask = ", %rs1" if "cp_mask" in mods else ""  # a byte mask of all ones
        body += ["mov.u16 %rs1, 0xffff;"] if mask else []
        body += [f"{instr} [%rd0], [%r7], {size}{pol}{mask};", "cp.async.bulk.commit_group;",
                 f"cp.async.bulk.wait_group{''.join('.' + g for g in group[1])} 0;"]
    else:
        source = "[%rd1]" if src == "global" else "[%r7]"
        extra = ", %rs1" if "multicast::cluster" in mods else ""
        body += ["mov.u16 %rs1, 1;"] if extra else []
        body += [f"mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %st0, [%ra], {size};",
                 f"{instr} [%rb], {source}, {size}, [%ra]{extra}{pol};"]
    body += [f"{name}_wait:"]
    if dst != "global":  # everyone waits for phase 0
        body += [f"{name}_spin:", "mbarrier.try_wait.parity.shared.b64 %p1, [%ra], 0;", f"@!%p1 bra {name}_spin;",
                 "add.u32 %r3, %rb, %r1;", "ld.shared.u64 %rd4, [%r3];",
                 "add.u64 %rd5, %rd0, %rd2;", "st.global.u64 [%rd5], %rd4;"]
    entry = _entry(name, [f".param .u64 {name}_out", f".param .u64 {name}_in"],
                   [".reg .b16 %rs1;"] + body)
    decls = (f".shared .align 8 .b64 {name}_bar;\n.shared .align 128 .b8 {name}_buf[{size}];\n"
             f".shared .align 128 .b8 {name}_src[{size}];")

    def check(module, kname: str) -> None:
        inp = data.copy()
        out = np.zeros(size, np.uint8)
        module.launch(kname, (1,), (32,), [out, inp])
        assert bytes(out) == bytes(data), f"got {bytes(out).hex()}, expected {bytes(data).hex()}"

    return Instance(mods if form_mods is None else form_mods, name, entry, check, decls, target=target, refused=refused)


G2S = ("shared::cluster", "global", "mbarrier::complete_tx::bytes")
G2S_CTA = ("shared::cta", "global", "mbarrier::complete_tx::bytes")
S2S = ("shared::cluster", "shared::cta", "mbarrier::complete_tx::bytes")
S2G = ("global", "shared::cta", "bulk_group")


def bulk_instances(tf: TargetForm) -> list[Instance]:
    line = _line(tf)
    if tf.opcode == "cp.async.bulk.commit_group":
        return [bulk_instance(S2G, "commit", form_mods=())]
    if tf.opcode == "cp.async.bulk.wait_group":
        return [bulk_instance(S2G, "wait", ("wait", ()), form_mods=()),
                bulk_instance(S2G, "waitread", ("wait", ("read",)), form_mods=("read",))]
    if tf.opcode == "cp.async.bulk.prefetch":
        return [prefetch_instance(m) for m in (("L2", "global"), ("L2", "global", "L2::cache_hint"))]
    if line == 0:
        return [bulk_instance(G2S, "l0"), bulk_instance((*G2S_CTA, "L2::cache_hint"), "l0"),
                bulk_instance(S2S, "l0"), bulk_instance(S2G, "l0"),
                bulk_instance((*G2S, "multicast::cluster"), "l0", refused=r"cp\.async\.bulk.*multicast needs a cluster")]
    if line == 1:
        return [bulk_instance(S2G, "l1"), bulk_instance((*S2G, "L2::cache_hint"), "l1"),
                bulk_instance(G2S, "l1"), bulk_instance(G2S_CTA, "l1"),
                bulk_instance((*S2G, "cp_mask"), "l1", refused=r"cp\.async\.bulk.*byte-masked", target="sm_100a")]
    return [bulk_instance(G2S, "l2"), bulk_instance(G2S_CTA, "l2"), bulk_instance(S2S, "l2"),
            bulk_instance(S2G, "l2")]


def prefetch_instance(mods: tuple[str, ...]) -> Instance:
    """A prefetch into L2 is a hint: the kernel's data must be unaffected."""
    name = f"bulk_prefetch_{_tag(mods)}"
    hint = ", %pol" if "L2::cache_hint" in mods else ""
    body = [f"ld.param.u64 %rd0, [{name}_out];", "cvta.to.global.u64 %rd0, %rd0;",
            "createpolicy.fractional.L2::evict_last.b64 %pol, 1.0;",
            f"cp.async.bulk.prefetch.{'.'.join(mods)} [%rd0], 64{hint};",
            "mov.u32 %r0, %tid.x;", "mul.wide.u32 %rd2, %r0, 4;", "add.u64 %rd3, %rd0, %rd2;",
            "ld.global.u32 %r1, [%rd3];", "add.u32 %r1, %r1, 7;", "st.global.u32 [%rd3], %r1;"]

    def check(module, kname: str) -> None:
        out = np.arange(32, dtype=np.uint32) * 3
        module.launch(kname, (1,), (32,), [out])
        assert (out == np.arange(32, dtype=np.uint32) * 3 + 7).all(), out.tolist()

    return Instance(mods, name, _entry(name, [f".param .u64 {name}_out"], body), check)


def instances(tf: TargetForm) -> list[Instance]:
    if tf.opcode.startswith("mbarrier."):
        return mbarrier_instances(tf)
    if tf.opcode == "cp.async.mbarrier.arrive":
        return [cp_arrive_instance(m) for m in (("noinc", "shared", "b64"), ("shared::cta", "b64"), ("b64",),
                                                ("noinc", "b64"))]
    return bulk_instances(tf)
