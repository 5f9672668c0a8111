"""Random PTX kernels for differential testing of control flow, memory and warp collectives.

`generate(seed)` builds a `Kernel`: a tree of statement nodes plus its launch configuration and
input buffers, all a pure function of the seed. `Kernel.ptx()` renders a module holding just
that kernel; `module_ptx(kernels)` renders many kernels into one module (one compile per batch).

Every generated kernel is deterministic PTX (no undefined behaviour), so any two correct
executors must agree bit for bit:
* registers are all initialised at entry; every thread writes only its own output slots;
* shared memory is zeroed before the first barrier; other threads' slots and the shared atomic
  accumulators are read only between two barriers (`Sync`) that every live thread reaches;
* atomics only use order-independent operations, each accumulator word one fixed operation;
* `bar.sync` appears only where every live thread of the block arrives (block-uniform code);
* warp collectives appear only where the generator knows the exact set of converged lanes
  (a `Ctx` with `known=True`), and their membermask is computed from the same conditions that
  formed that set (ballot of the branch condition, `match.any` of a switch index, the live-lane
  mask kept in `%alive` and narrowed by `vote.ballot` at each top-level exit).

Nodes carry everything they render (register names, masks, labels), and a node's validity
never depends on a sibling, so the minimiser may delete any subtree (`Node.dead`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

PTX_HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
BLOCK_SIZES = (20, 32, 33, 48, 64, 70, 96, 128)
NSTATE = 6                      # state registers %s0..%s5 written to the output
NOUT = NSTATE + 2               # + trace hash %h + id of the place the thread finished
NIN = 256                       # input words (indices are masked with NIN - 1)
NACC = 16                       # atomic accumulator words: 8 operations x 2 words
# Accumulator word 2k and 2k+1 always take operation ATOMIC_OPS[k] (order independent).
ATOMIC_OPS = ("add.u32", "or.b32", "and.b32", "xor.b32", "min.u32", "max.u32", "min.s32", "max.s32")
FNV = 16777619
FULL = "0xffffffff"


class Node:
    """One statement (or structured region) of a generated kernel."""

    dead = False
    shape = ""

    def children(self) -> list[list["Node"]]:
        return []

    def render(self, r: "Renderer") -> None:
        raise NotImplementedError


class Renderer:
    """Collects PTX lines; `live_targets` holds the ids of goto targets still in the tree."""

    def __init__(self, live_targets: set[int], check_masks: bool = False) -> None:
        self.lines: list[str] = []
        self.live_targets = live_targets
        self.check_masks = check_masks

    def emit(self, *lines: str) -> None:
        self.lines.extend("\t" + ln if not ln.endswith(":") else ln for ln in lines)

    def body(self, nodes: list[Node]) -> None:
        for n in nodes:
            if not n.dead:
                n.render(self)


@dataclass
class Leaf(Node):
    """Straight-line instructions that need no context (arithmetic, loads, atomics, marks)."""

    lines: list[str]
    shape: str = "arith"

    def render(self, r: Renderer) -> None:
        r.emit(*self.lines)


@dataclass
class Collective(Node):
    """A warp collective; `mask` is the membermask operand (register or immediate)."""

    lines: list[str]
    mask: str
    shape: str = "collective"

    def render(self, r: Renderer) -> None:
        if r.check_masks:  # debugging aid: trap where the active lanes are not the mask
            r.emit("activemask.b32 %t6;", f"setp.ne.b32 %p1, %t6, {self.mask};", "@%p1 trap;")
        r.emit(*self.lines)


@dataclass
class If(Node):
    """`pre` computes the predicate (and the masks of both sides); branches on `pred`."""

    pre: list[str]
    pred: str
    then: list[Node]
    other: list[Node]
    label: str
    marks: tuple[int, int, int]
    shape: str = "if"

    def children(self) -> list[list[Node]]:
        return [self.then, self.other]

    def render(self, r: Renderer) -> None:
        r.emit(*self.pre, f"@!{self.pred} bra {self.label}_else;")
        r.emit(mark(self.marks[0]))
        r.body(self.then)
        r.emit(f"bra.uni {self.label}_end;", f"{self.label}_else:", mark(self.marks[1]))
        r.body(self.other)
        r.emit(f"{self.label}_end:", mark(self.marks[2]))


@dataclass
class Loop(Node):
    """A counted loop; `layout` picks the back-edge form:
    'bottom'  - `@%p bra HEAD` falls through to the exit;
    'latch'   - `@%p bra EXIT; bra.uni HEAD;` (the back edge in a block of its own);
    'top'     - the test at the head, `bra.uni HEAD` at the end.
    `alt` is the body of a second exit, reached only by a `Break` to `<label>_alt`."""

    pre: list[str]          # computes the trip count into `n`
    i: str
    n: str
    pred: str
    layout: str
    body: list[Node]
    alt: list[Node]
    label: str
    marks: tuple[int, int, int]
    shape: str = "loop"

    def children(self) -> list[list[Node]]:
        return [self.body, self.alt]

    def render(self, r: Renderer) -> None:
        L = self.label
        r.emit(*self.pre, f"mov.u32 {self.i}, 0;", f"{L}_head:")
        if self.layout == "top":
            r.emit(f"setp.ge.u32 {self.pred}, {self.i}, {self.n};", f"@{self.pred} bra {L}_exit;")
        r.emit(mark(self.marks[0]))
        r.body(self.body)
        r.emit(f"{L}_cont:", f"add.u32 {self.i}, {self.i}, 1;")
        if self.layout == "bottom":
            r.emit(f"setp.lt.u32 {self.pred}, {self.i}, {self.n};", f"@{self.pred} bra {L}_head;")
        elif self.layout == "latch":
            r.emit(f"setp.ge.u32 {self.pred}, {self.i}, {self.n};", f"@{self.pred} bra {L}_exit;",
                   f"bra.uni {L}_head;")
        else:
            r.emit(f"bra.uni {L}_head;")
        r.emit(f"{L}_exit:", mark(self.marks[1]))
        if self.alt:
            r.emit(f"bra.uni {L}_join;", f"{L}_alt:", mark(self.marks[2]))
            r.body(self.alt)
            r.emit(f"{L}_join:")


@dataclass
class Break(Node):
    """`@p bra` to a loop's exit, its second exit, its continue label or an outer loop's exit."""

    pre: list[str]
    pred: str
    target: str
    shape: str = "break"

    def render(self, r: Renderer) -> None:
        r.emit(*self.pre, f"@{self.pred} bra {self.target};")


@dataclass
class Switch(Node):
    """`brx.idx` over a `.branchtargets` table; each case ends with a branch to the end."""

    pre: list[str]
    index: str
    cases: list[list[Node]]
    label: str
    marks: list[int]
    shape: str = "switch"

    def children(self) -> list[list[Node]]:
        return self.cases

    def render(self, r: Renderer) -> None:
        L = self.label
        targets = ", ".join(f"{L}_c{k}" for k in range(len(self.cases)))
        r.emit(*self.pre, f"{L}_tbl: .branchtargets {targets};", f"brx.idx {self.index}, {L}_tbl;")
        for k, case in enumerate(self.cases):
            r.emit(f"{L}_c{k}:", mark(self.marks[k]))
            r.body(case)
            r.emit(f"bra.uni {L}_end;")
        r.emit(f"{L}_end:", mark(self.marks[-1]))


@dataclass
class Goto(Node):
    """A forward branch of some lanes to `Target(tid)`, possibly into the middle of a region."""

    pre: list[str]
    pred: str
    target: int
    shape: str = "goto"

    def render(self, r: Renderer) -> None:
        if self.target in r.live_targets:
            r.emit(*self.pre, f"@{self.pred} bra T{self.target};")


@dataclass
class Target(Node):
    tid: int
    mark_id: int
    shape: str = "target"

    def render(self, r: Renderer) -> None:
        r.emit(f"T{self.tid}:", mark(self.mark_id))


@dataclass
class Exit(Node):
    """Some lanes write their state and leave (`exit`, or `ret` at kernel level). `pre`
    computes the predicate and, at top level, narrows `%alive` with a ballot first."""

    pre: list[str]
    pred: str
    mark_id: int
    label: str
    op: str
    shape: str = "exit"

    def render(self, r: Renderer) -> None:
        r.emit(*self.pre, f"@!{self.pred} bra {self.label};", mark(self.mark_id), *write_state(self.mark_id),
               f"{self.op};", f"{self.label}:")


@dataclass
class FuncDef:
    """A `.func` with `.param` arguments (a, b, membermask, input pointer, depth)."""

    name: str
    body: list[Node]
    recursive: bool
    counts: dict[str, int]
    label: str
    marks: tuple[int, int]


def mark(ident: int) -> str:
    """Fold a block id into the thread's trace hash (the path it took)."""
    return f"mad.lo.u32 %h, %h, {FNV}, {ident};"


def write_state(place: int) -> list[str]:
    lines = [f"st.global.u32 [%rdo+{4 * j}], %s{j};" for j in range(NSTATE)]
    lines += [f"st.global.u32 [%rdo+{4 * NSTATE}], %h;", f"mov.u32 %t7, {place};",
              f"st.global.u32 [%rdo+{4 * NSTATE + 4}], %t7;"]
    return lines


@dataclass
class Ctx:
    """What the generator knows at a program point.
    known: the converged lanes are exactly the lanes of `mask` (a register or immediate);
    prefix: that set is lanes 0..k-1 of the warp (so shfl up/down/bfly clamp to it);
    block: every live thread of the block executes this point equally often (bar.sync ok);
    top: directly in the kernel's top-level sequence (exits may narrow %alive);
    loops: enclosing loops, innermost last, as (label, per_lane, counter register);
    exit_ok: lanes may exit here (not inside a loop whose body holds collectives)."""

    known: bool
    mask: str
    prefix: bool
    block: bool
    top: bool
    loops: tuple[tuple[str, bool, str], ...] = ()
    exit_ok: bool = True
    depth: int = 0
    in_func: bool = False

    def but(self, **kw) -> "Ctx":
        d = dict(self.__dict__)
        d.update(kw)
        return Ctx(**d)


@dataclass
class Kernel:
    seed: int
    name: str
    block: int
    grid: int
    body: list[Node]
    funcs: list[FuncDef]
    counts: dict[str, int]
    inputs: np.ndarray
    acc_init: np.ndarray
    shapes: dict[str, int] = field(default_factory=dict)
    # %ntid.x of a 2-D launch (`generate(rows=True)`): the block's `block` threads as rows of
    # `width`, the thread index flattened from %tid.x/%tid.y; None: a 1-D launch
    width: int | None = None

    @property
    def threads(self) -> int:
        return self.block * self.grid

    @property
    def block_dims(self) -> tuple[int, int, int]:
        """The launch's block shape."""
        return (self.width, self.block // self.width, 1) if self.width else (self.block, 1, 1)

    def buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh (input, output, global accumulators) arrays for one launch."""
        return self.inputs.copy(), np.zeros(self.threads * NOUT, np.uint32), self.acc_init.copy()

    def nodes(self) -> list[Node]:
        """Every node in the tree, parents before children."""
        out: list[Node] = []

        def walk(seq: list[Node]) -> None:
            for n in seq:
                out.append(n)
                for c in n.children():
                    walk(c)
        walk(self.body)
        for f in self.funcs:
            walk(f.body)
        return out

    def ptx(self, check_masks: bool = False) -> str:
        return module_ptx([self], check_masks)

    def render(self, check_masks: bool = False) -> str:
        """This kernel's module-level declarations, functions and entry."""
        live = {n.tid for n in self.nodes() if isinstance(n, Target) and not n.dead and not under_dead(self, n)}
        out = [f".shared .align 4 .b32 {self.name}_sx[{self.block}];",
               f".shared .align 4 .b32 {self.name}_sa[{NACC}];"]
        for f in self.funcs:
            out += _render_func(f, live, check_masks, self.width is not None)
        r = Renderer(live, check_masks)
        r.body(self.body)
        out += [f".visible .entry {self.name}(.param .u64 {self.name}_in, .param .u64 {self.name}_out, "
                f".param .u64 {self.name}_acc)", ".maxntid " + ", ".join(map(str, self.block_dims)), "{"]
        out += _decls(self.counts)
        out += ["\t" + ln for ln in _kernel_prologue(self)]
        out += r.lines
        out += ["\t" + ln for ln in write_state(0)] + ["\tret;", "}", ""]
        return "\n".join(out)


def under_dead(k: Kernel, node: Node) -> bool:
    """True when some ancestor of `node` is dead (so it is not rendered either)."""
    def walk(seq: list[Node], dead: bool) -> bool | None:
        for n in seq:
            if n is node:
                return dead
            for c in n.children():
                found = walk(c, dead or n.dead)
                if found is not None:
                    return found
        return None
    for seq in [k.body] + [f.body for f in k.funcs]:
        found = walk(seq, False)
        if found is not None:
            return found
    return False


def module_ptx(kernels: list[Kernel], check_masks: bool = False) -> str:
    """One module holding `kernels`; `check_masks` adds a trap before each collective whose
    membermask differs from `activemask` (for checking the generator on an executor)."""
    return PTX_HEADER + "\n" + "\n".join(k.render(check_masks) for k in kernels)


def _decls(c: dict[str, int]) -> list[str]:
    return [f"\t.reg .b32 %s<{NSTATE}>;", "\t.reg .b32 %t<8>;", f"\t.reg .b32 %m<{c['m'] + 1}>;",
            f"\t.reg .b32 %i<{c['l'] + 1}>;", f"\t.reg .b32 %n<{c['l'] + 1}>;", f"\t.reg .pred %p<{c['p'] + 1}>;",
            "\t.reg .b64 %rd<4>;", "\t.reg .b64 %rdi, %rdo, %rda;",
            "\t.reg .b32 %h, %tx, %lane, %alive, %junk, %depth;"]


def _init_regs(c: dict[str, int], rows: bool = False) -> list[str]:
    """Registers zeroed, %tx the thread's index in its block (flattened from %tid.x/%tid.y in rows)."""
    lines = [f"mov.u32 %m{j}, 0;" for j in range(c["m"] + 1)]
    lines += [f"mov.u32 %i{j}, 0;" for j in range(c["l"] + 1)]
    lines += [f"mov.u32 %n{j}, 0;" for j in range(c["l"] + 1)]
    lines += [f"mov.u32 %t{j}, 0;" for j in range(8)]
    lines += ["mov.u32 %junk, 0;", "mov.u32 %depth, 0;", "mov.u32 %tx, %tid.x;", "mov.u32 %lane, %laneid;"]
    if rows:
        lines += ["mov.u32 %t0, %tid.y;", "mov.u32 %t1, %ntid.x;", "mad.lo.u32 %tx, %t0, %t1, %tx;",
                  "mov.u32 %t0, 0;", "mov.u32 %t1, 0;"]
    return lines


def _block_size(dst: str, scratch: str, rows: bool) -> list[str]:
    """`dst` = the threads of a block: %ntid.x, times %ntid.y (through `scratch`) in rows."""
    return [f"mov.u32 {dst}, %ntid.x;"] + ([f"mov.u32 {scratch}, %ntid.y;", f"mul.lo.u32 {dst}, {dst}, {scratch};"]
                                           if rows else [])


def _kernel_prologue(k: Kernel) -> list[str]:
    n = k.name
    lines = [f"ld.param.u64 %rdi, [{n}_in];", "cvta.to.global.u64 %rdi, %rdi;",
             f"ld.param.u64 %rdo, [{n}_out];", "cvta.to.global.u64 %rdo, %rdo;",
             f"ld.param.u64 %rda, [{n}_acc];", "cvta.to.global.u64 %rda, %rda;"]
    rows = k.width is not None
    lines += _init_regs(k.counts, rows)
    lines += ["mov.u32 %t0, %ctaid.x;", *_block_size("%t1", "%t2", rows), "mad.lo.u32 %t0, %t0, %t1, %tx;",
              f"mul.wide.u32 %rd0, %t0, {4 * NOUT};", "add.u64 %rdo, %rdo, %rd0;"]
    # state: two input words picked by thread index, the rest mixed from them and the indices
    rng = random.Random(k.seed * 7919 + 1)
    for j in range(2):
        a, b = rng.randrange(1, 64) | 1, rng.randrange(NIN)
        lines += [f"mad.lo.u32 %t1, %tx, {a}, {b};", f"and.b32 %t1, %t1, {NIN - 1};",
                  "mul.wide.u32 %rd0, %t1, 4;", "add.u64 %rd0, %rdi, %rd0;", f"ld.global.u32 %s{j}, [%rd0];"]
    if rows:  # input word %tx twice, by the rows path (an affine index) and per lane (a masked one):
        # they cancel out, so the state is the 1-D launch's unless one path reads the wrong word
        lines += ["mul.wide.u32 %rd0, %tx, 4;", "add.u64 %rd0, %rdi, %rd0;", "ld.global.u32 %t3, [%rd0];",
                  f"and.b32 %t4, %tx, {NIN - 1};", "mul.wide.u32 %rd0, %t4, 4;", "add.u64 %rd0, %rdi, %rd0;",
                  "ld.global.u32 %t4, [%rd0];", "xor.b32 %t3, %t3, %t4;", "add.u32 %s0, %s0, %t3;"]
    lines += [f"xor.b32 %s2, %s0, {rng.randrange(1 << 32)};", "add.u32 %s3, %s1, %t0;",
              f"mul.lo.u32 %s4, %tx, {rng.randrange(1 << 32) | 1};", f"mad.lo.u32 %s5, %s0, %s1, %t0;"]
    lines.append(f"mov.u32 %h, {rng.randrange(1 << 32)};")
    # live lanes of this warp: all 32, or the block's tail in a partial last warp
    lines += ["and.b32 %t1, %tx, -32;", *_block_size("%t2", "%t3", rows), "sub.u32 %t1, %t2, %t1;",
              "min.u32 %t1, %t1, 32;", "setp.eq.u32 %p0, %t1, 32;", "shl.b32 %t2, 1, %t1;",
              "add.u32 %t2, %t2, -1;", "selp.b32 %alive, -1, %t2, %p0;"]
    # shared memory: own exchange slot zeroed, accumulator word w = acc_init[w] (threads 0..15,
    # from the input array's tail, where the host put acc_init), then a barrier
    lines += [f"mov.u32 %t1, {n}_sx;", "shl.b32 %t2, %tx, 2;", "add.u32 %t1, %t1, %t2;", "st.shared.u32 [%t1], 0;",
              f"setp.ge.u32 %p0, %tx, {NACC};", f"@%p0 bra {n}_init_done;", f"mov.u32 %t1, {n}_sa;",
              "add.u32 %t1, %t1, %t2;", "mul.wide.u32 %rd0, %tx, 4;", "add.u64 %rd0, %rdi, %rd0;",
              f"ld.global.u32 %t2, [%rd0+{4 * (NIN - NACC)}];", "st.shared.u32 [%t1], %t2;"]
    lines += [f"{n}_init_done:", "bar.sync 0;"]
    return lines


def _render_func(f: FuncDef, live: set[int], check_masks: bool, rows: bool = False) -> list[str]:
    r = Renderer(live, check_masks)
    r.body(f.body)
    p = f.name
    out = [f".func (.param .b32 {p}_ret) {p}(.param .b32 {p}_a, .param .b32 {p}_b, .param .b32 {p}_m, "
           f".param .u64 {p}_in, .param .u64 {p}_out, .param .u64 {p}_acc, .param .b32 {p}_d)", "{"]
    out += _decls(f.counts)
    pro = _init_regs(f.counts, rows)
    pro += [f"ld.param.b32 %s0, [{p}_a];", f"ld.param.b32 %s1, [{p}_b];", f"ld.param.b32 %alive, [{p}_m];",
            f"ld.param.u64 %rdi, [{p}_in];", f"ld.param.u64 %rdo, [{p}_out];", f"ld.param.u64 %rda, [{p}_acc];", f"ld.param.b32 %depth, [{p}_d];",
            "xor.b32 %s2, %s0, 0x5bd1e995;", "add.u32 %s3, %s1, %tx;", "mul.lo.u32 %s4, %s0, %s1;",
            "shl.b32 %s5, %s1, 3;", f"mov.u32 %h, {f.marks[0]};"]
    out += ["\t" + ln for ln in pro]
    if f.recursive:  # depth-bounded: recurse on depth-1 (at most 3 levels below the caller)
        out += ["\t" + ln for ln in [
            "setp.eq.u32 %p0, %depth, 0;", f"@%p0 bra {f.label}_base;", "add.u32 %t0, %depth, -1;",
            "xor.b32 %t1, %s0, %depth;"] + call_lines(p, "%t1", "%s1", "%alive", "%t0", "%t2") + [
            "add.u32 %s2, %s2, %t2;", mark(f.marks[1])]]
        out.append(f"{f.label}_base:")
    out += r.lines
    out += ["\t" + ln for ln in ["xor.b32 %t0, %s0, %s1;", "add.u32 %t0, %t0, %s2;", "xor.b32 %t0, %t0, %s3;",
                                 "add.u32 %t0, %t0, %s4;", "xor.b32 %t0, %t0, %s5;", "add.u32 %t0, %t0, %h;",
                                 f"st.param.b32 [{p}_ret], %t0;", "ret;"]]
    out += ["}", ""]
    return out


def call_lines(fname: str, a: str, b: str, mask: str, depth: str, result: str) -> list[str]:
    return ["{", ".param .b32 ca;", ".param .b32 cb;", ".param .b32 cm;", ".param .b64 ci;", ".param .b64 co;",
            ".param .b64 cc;", ".param .b32 cd;", ".param .b32 cr;",
            f"st.param.b32 [ca], {a};", f"st.param.b32 [cb], {b};", f"st.param.b32 [cm], {mask};",
            "st.param.b64 [ci], %rdi;", "st.param.b64 [co], %rdo;", "st.param.b64 [cc], %rda;",
            f"st.param.b32 [cd], {depth};", f"call (cr), {fname}, (ca, cb, cm, ci, co, cc, cd);", f"ld.param.b32 {result}, [cr];", "}"]


@dataclass
class Call(Node):
    lines: list[str]
    shape: str = "call"

    def render(self, r: Renderer) -> None:
        r.emit(*self.lines)


class Generator:
    """Builds one kernel's tree; `self.alive_known` turns false once lanes may have exited at a
    point the generator cannot follow (then no collective comes after it)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.name = f"k{seed}"
        self.block = self.rng.choice(BLOCK_SIZES)
        self.grid = self.rng.choice((1, 1, 2, 3))
        self.ids = 0
        self.budget = self.rng.randrange(6, 30)
        self.funcs: list[FuncDef] = []
        self.alive_known = True
        self.exited = False          # some lanes may have exited (masks no longer static)
        self.counts = {"m": 0, "l": 0, "p": 1}  # %p0, %p1: scratch predicates
        self.shapes: dict[str, int] = {}
        self.traps = self.rng.random() < 0.03

    # ---- bookkeeping -------------------------------------------------------------------
    def new_id(self) -> int:
        self.ids += 1
        return self.ids

    def new(self, kind: str) -> str:
        self.counts[kind] += 1
        return {"m": "%m", "l": "", "p": "%p"}[kind] + str(self.counts[kind])

    def saw(self, shape: str) -> None:
        self.shapes[shape] = self.shapes.get(shape, 0) + 1

    def s(self) -> str:
        return f"%s{self.rng.randrange(NSTATE)}"

    def label(self) -> str:
        return f"{self.name}_L{self.new_id()}"

    # ---- kernel --------------------------------------------------------------------------
    def kernel(self) -> Kernel:
        rng = self.rng
        full = self.block % 32 == 0
        ctx = Ctx(known=True, mask=FULL if full else "%alive", prefix=True, block=True, top=True)
        body = self.seq(ctx, rng.randrange(4, 10))
        acc = np.array([rng.randrange(1 << 32) for _ in range(NACC)], np.uint32)
        inputs = np.array([rng.randrange(1 << 32) for _ in range(NIN - NACC)], np.uint32)
        inputs = np.concatenate([inputs, acc]).view(np.int32)  # the tail seeds the shared accumulators
        return Kernel(self.seed, self.name, self.block, self.grid, body, self.funcs, dict(self.counts),
                      inputs, acc, dict(self.shapes))

    def mask_of(self, ctx: Ctx) -> str:
        """The membermask operand for a collective at `ctx` (requires ctx.known)."""
        if not ctx.mask.startswith("%") and self.exited:
            return "%alive"  # lanes exited since the mask was taken as static: use the register
        return ctx.mask

    def seq(self, ctx: Ctx, n: int) -> list[Node]:
        out: list[Node] = []
        while n > 0 and self.budget > 0:
            n -= 1
            self.budget -= 1
            if self.rng.random() < 0.08 and ctx.depth < 3:
                out += self.goto_region(ctx)
            else:
                out.append(self.stmt(ctx))
        return out

    def stmt(self, ctx: Ctx) -> Node:
        rng = self.rng
        known = ctx.known and self.alive_known
        choices: list[tuple[float, str]] = [(6, "arith"), (2, "load"), (1.5, "shared"), (1.5, "atomic")]
        if ctx.depth < 4:
            choices += [(2, "if_lane"), (2, "if_data"), (2, "loop"), (1, "switch"), (1, "call")]
        if known:
            choices += [(4, "collective")]
        if ctx.loops and ctx.loops[-1][1]:
            choices += [(2, "break")]
        if ctx.block:
            choices += [(1.5, "sync")]
            if ctx.depth < 3:
                choices += [(0.7, "bar_call")]
        if ctx.exit_ok and not (ctx.in_func and ctx.known):
            choices += [(1.0 if ctx.top else 0.25, "exit")]
        if self.traps:
            choices += [(0.3, "trap")]
        total = sum(w for w, _ in choices)
        x = rng.random() * total
        for w, kind in choices:
            x -= w
            if x <= 0:
                break
        self.saw(kind)
        return getattr(self, "g_" + kind)(ctx)

    # ---- leaves --------------------------------------------------------------------------
    def g_arith(self, ctx: Ctx) -> Node:
        rng = self.rng
        lines = []
        for _ in range(rng.randrange(1, 4)):
            d, a, b = self.s(), self.s(), self.s()
            imm = rng.choice((rng.randrange(1 << 32), rng.randrange(-8, 9), rng.randrange(1, 32)))
            imm_u = imm & 0xFFFFFFFF
            op = rng.choice(("add", "sub", "mul", "xor", "and", "or", "shl", "shr", "sar", "min", "max", "selp",
                             "mad", "popc", "brev", "bfe", "imm", "not", "rem", "slct"))
            if op in ("add", "sub", "xor", "and", "or"):
                t = "u32" if op in ("add", "sub") else "b32"
                src = b if rng.random() < 0.6 else str(imm_u)
                lines.append(f"{op}.{t} {d}, {a}, {src};")
            elif op == "mul":
                lines.append(f"mul.lo.u32 {d}, {a}, {b if rng.random() < 0.5 else imm_u | 1};")
            elif op == "mad":
                lines.append(f"mad.lo.u32 {d}, {a}, {b}, {imm_u};")
            elif op in ("shl", "shr", "sar"):
                inst = {"shl": "shl.b32", "shr": "shr.u32", "sar": "shr.s32"}[op]
                amount = b if rng.random() < 0.3 else str(rng.randrange(32))  # register amounts may be >= 32
                lines.append(f"{inst} {d}, {a}, {amount};")
            elif op in ("min", "max"):
                lines.append(f"{op}.{rng.choice(('u32', 's32'))} {d}, {a}, {b};")
            elif op == "selp":
                p = self.new("p")
                cmp = rng.choice(("lt.u32", "gt.s32", "eq.u32", "ne.b32", "le.s32", "ge.u32"))
                lines += [f"setp.{cmp} {p}, {a}, {b};", f"selp.b32 {d}, {a}, {imm_u}, {p};"]
            elif op == "slct":
                lines.append(f"slct.b32.s32 {d}, {a}, {b}, {self.s()};")
            elif op == "popc":
                lines.append(f"popc.b32 %t0, {a};")
                lines.append(f"add.u32 {d}, {d}, %t0;")
            elif op == "brev":
                lines.append(f"brev.b32 {d}, {a};")
            elif op == "bfe":
                lines.append(f"bfe.u32 {d}, {a}, {rng.randrange(32)}, {rng.randrange(1, 17)};")
            elif op == "not":
                lines.append(f"not.b32 {d}, {a};")
            elif op == "rem":
                lines += [f"or.b32 %t0, {b}, 1;", f"rem.u32 {d}, {a}, %t0;"]
            else:
                lines.append(f"mov.u32 {d}, {imm_u};")
        return Leaf(lines, "arith")

    def g_load(self, ctx: Ctx) -> Node:
        a, d = self.s(), self.s()
        return Leaf([f"and.b32 %t0, {a}, {NIN - 1};", "mul.wide.u32 %rd0, %t0, 4;", "add.u64 %rd0, %rdi, %rd0;",
                     "ld.global.u32 %t0, [%rd0];", f"{self.rng.choice(('xor.b32', 'add.u32'))} {d}, {d}, %t0;"],
                    "load")

    def g_shared(self, ctx: Ctx) -> Node:
        """Own exchange slot through a negative 32-bit base: only the wrapped sum is in range."""
        rng = self.rng
        off = rng.choice((4096, 65536, 0x10000000, 0x7FFF0000, -4096, -0x100000))
        lines = [f"mov.u32 %t1, {self.name}_sx;", f"add.u32 %t1, %t1, {(-off) & 0xFFFFFFFF};",
                 "neg.s32 %t0, %tx;", "mad.lo.s32 %t0, %t0, -4, %t1;"]
        if rng.random() < 0.5:
            lines.append(f"st.shared.u32 [%t0+{off}], {self.s()};")
        else:
            d = self.s()
            lines += [f"ld.shared.u32 %t2, [%t0+{off}];", f"xor.b32 {d}, {d}, %t2;"]
        return Leaf(lines, "shared")

    def g_atomic(self, ctx: Ctx) -> Node:
        rng = self.rng
        k = rng.randrange(len(ATOMIC_OPS))
        op = ATOMIC_OPS[k]
        v = self.s()
        lines = [f"and.b32 %t0, {self.s()}, 1;", f"add.u32 %t0, %t0, {2 * k};"]
        red = rng.random() < 0.5
        if rng.random() < 0.5:
            lines += ["mul.wide.u32 %rd0, %t0, 4;", "add.u64 %rd0, %rda, %rd0;"]
            addr = "[%rd0]"
            space = "global"
        else:
            lines += ["shl.b32 %t0, %t0, 2;", f"mov.u32 %t1, {self.name}_sa;", "add.u32 %t0, %t0, %t1;"]
            addr = "[%t0]"
            space = "shared"
        if red:
            lines.append(f"red.{space}.{op} {addr}, {v};")
        else:
            lines.append(f"atom.{space}.{op} %junk, {addr}, {v};")  # the old value depends on order: unused
        return Leaf(lines, "atomic")

    def g_trap(self, ctx: Ctx) -> Node:
        p = self.new("p")
        return Leaf([f"and.b32 %t0, {self.s()}, 1023;", f"setp.eq.u32 {p}, %t0, {self.rng.randrange(1024)};",
                     f"@{p} trap;"], "trap")

    def g_collective(self, ctx: Ctx) -> Node:
        rng = self.rng
        m = self.mask_of(ctx)
        a, d = self.s(), self.s()
        mix = rng.choice(("xor.b32", "add.u32"))
        kinds = ["idx", "vote", "ballot", "match", "match_all", "redux", "activemask"]
        if ctx.prefix and not self.exited:
            kinds += ["up", "down", "bfly", "up", "down", "bfly"]
        kind = rng.choice(kinds)
        self.saw("coll_" + kind)
        lines: list[str] = []
        if m.startswith("%"):
            mreg = m
        else:
            lines.append(f"mov.u32 %t3, {m};")
            mreg = "%t3"
        if kind == "idx":
            # source: the next lane of the mask after this one (wrapping to the lowest), or the highest
            if rng.random() < 0.5:
                lines += [f"fns.b32 %t1, {mreg}, %lane, 2;", f"neg.s32 %t2, {mreg};", f"and.b32 %t2, %t2, {mreg};",
                          "bfind.u32 %t2, %t2;", "setp.eq.u32 %p0, %t1, -1;", "selp.b32 %t1, %t2, %t1, %p0;"]
            else:
                lines.append(f"bfind.u32 %t1, {mreg};")
            lines += [f"shfl.sync.idx.b32 %t0, {a}, %t1, 31, {m};", f"{mix} {d}, {d}, %t0;"]
        elif kind in ("up", "down", "bfly"):
            delta = rng.choice((1, 2, 3, 4, 8, 16, 5))
            # prefix mask: clamp to its highest lane (down/bfly); up never leaves lane 0..k-1
            if kind == "up":
                c = "0"
            else:
                lines.append(f"bfind.u32 %t2, {mreg};")
                c = "%t2"
            if rng.random() < 0.5:
                lines += [f"shfl.sync.{kind}.b32 %t0|%p0, {a}, {delta}, {c}, {m};", f"selp.b32 %t1, 7, 11, %p0;",
                          f"add.u32 {d}, {d}, %t1;"]
            else:
                lines.append(f"shfl.sync.{kind}.b32 %t0, {a}, {delta}, {c}, {m};")
            lines.append(f"{mix} {d}, {d}, %t0;")
        elif kind == "vote":
            mode = rng.choice(("any", "all", "uni"))
            lines += [f"setp.{rng.choice(('lt.u32', 'gt.s32', 'ne.b32'))} %p0, {a}, {self.s()};",
                      f"vote.sync.{mode}.pred %p1, {rng.choice(('', '!'))}%p0, {m};", f"selp.b32 %t0, {rng.randrange(1 << 16)}, 3, %p1;",
                      f"{mix} {d}, {d}, %t0;"]
        elif kind == "ballot":
            lines += [f"and.b32 %t0, {a}, {1 << rng.randrange(32)};", "setp.ne.u32 %p0, %t0, 0;",
                      f"vote.sync.ballot.b32 %t0, %p0, {m};", f"{mix} {d}, {d}, %t0;"]
        elif kind == "match":
            lines += [f"and.b32 %t0, {a}, {rng.choice((1, 3, 7, 0xF0))};", f"match.any.sync.b32 %t0, %t0, {m};",
                      f"{mix} {d}, {d}, %t0;"]
        elif kind == "match_all":
            lines += [f"and.b32 %t0, {a}, {rng.choice((1, 3, 0))};", f"match.all.sync.b32 %t0|%p0, %t0, {m};",
                      "selp.b32 %t1, 5, 9, %p0;", f"add.u32 {d}, {d}, %t1;", f"{mix} {d}, {d}, %t0;"]
        elif kind == "redux":
            op = rng.choice(("add.u32", "min.u32", "max.u32", "min.s32", "max.s32", "and.b32", "or.b32", "xor.b32"))
            lines += [f"redux.sync.{op} %t0, {a}, {m};", f"{mix} {d}, {d}, %t0;"]
        else:  # activemask reads which lanes execute together: only a warp barrier over the known
            # set makes that the set (without it, lanes that diverged earlier may still run apart:
            # seed 19396 on the reference, 8 non-recursive kernels on an H200)
            lines += [f"bar.warp.sync {m};", "activemask.b32 %t0;", f"{mix} {d}, {d}, %t0;"]
        return Collective(lines, m)

    def g_sync(self, ctx: Ctx) -> Node:
        """Barrier, read another thread's slot (mirror, via a negative base) and an accumulator, barrier."""
        rng = self.rng
        off = rng.choice((65536, 0x20000000, 4096))
        k = rng.randrange(NACC)
        d1, d2 = self.s(), self.s()
        lines = ["bar.sync 0;", f"mov.u32 %t1, {self.name}_sx;",
                 f"add.u32 %t1, %t1, {(4 * (self.block - 1) - off) & 0xFFFFFFFF};",
                 "neg.s32 %t0, %tx;", "mad.lo.s32 %t0, %t0, 4, %t1;", f"ld.shared.u32 %t2, [%t0+{off}];",
                 f"xor.b32 {d1}, {d1}, %t2;", f"ld.shared.u32 %t2, [{self.name}_sa+{4 * k}];",
                 f"add.u32 {d2}, {d2}, %t2;"]
        if rng.random() < 0.5:  # and a rotated neighbour's slot
            lines += [f"add.u32 %t0, %tx, {rng.randrange(1, self.block)};", f"rem.u32 %t0, %t0, {self.block};",
                      "shl.b32 %t0, %t0, 2;", f"mov.u32 %t1, {self.name}_sx;", "add.u32 %t0, %t0, %t1;",
                      "ld.shared.u32 %t2, [%t0];", f"add.u32 {d1}, {d1}, %t2;"]
        lines.append("bar.sync 0;")
        return Leaf(lines, "sync")

    # ---- regions -------------------------------------------------------------------------
    def body_ctx(self, ctx: Ctx, **kw) -> Ctx:
        d = dict(depth=ctx.depth + 1, top=False, block=False)
        d.update(kw)
        return ctx.but(**d)

    def g_if_lane(self, ctx: Ctx) -> Node:
        """Branch on a lane pattern: the converged set on each side is outer & pattern."""
        rng = self.rng
        p = self.new("p")
        kind = rng.choice(("lt", "ge", "bits"))
        if kind == "lt":
            k = rng.randrange(1, 32)
            pre = [f"setp.lt.u32 {p}, %lane, {k};"]
            pat = (1 << k) - 1
        elif kind == "ge":
            k = rng.randrange(1, 32)
            pre = [f"setp.ge.u32 {p}, %lane, {k};"]
            pat = 0xFFFFFFFF ^ ((1 << k) - 1)
        else:
            bits = rng.choice((1, 2, 3, 5, 16, 24))
            val = rng.randrange(32) & bits
            pre = [f"and.b32 %t0, %lane, {bits};", f"setp.eq.u32 {p}, %t0, {val};"]
            pat = sum(1 << ln for ln in range(32) if ln & bits == val)
        tctx = self.body_ctx(ctx, known=False, mask="", prefix=False)
        ectx = tctx
        if ctx.known and self.alive_known:
            outer = self.mask_of(ctx)
            mt, me = self.new("m"), self.new("m")
            if outer.startswith("%"):
                pre += [f"and.b32 {mt}, {outer}, {pat};", f"and.b32 {me}, {outer}, {pat ^ 0xFFFFFFFF};"]
            else:
                pre += [f"mov.u32 {mt}, {int(outer, 0) & pat};", f"mov.u32 {me}, {int(outer, 0) & ~pat & 0xFFFFFFFF};"]
            # an immediate membermask when the set is static (whole warps, nothing exited yet)
            tm = hex(pat) if outer == FULL and rng.random() < 0.5 else mt
            tctx = self.body_ctx(ctx, known=True, mask=tm, prefix=ctx.prefix and not self.exited and kind == "lt")
            ectx = self.body_ctx(ctx, known=True, mask=me, prefix=False)
        lab = self.label()
        then = self.seq(tctx, rng.randrange(1, 4))
        other = self.seq(ectx, rng.randrange(0, 3)) if rng.random() < 0.6 else []
        return If(pre, p, then, other, lab, (self.new_id(), self.new_id(), self.new_id()), "if_lane")

    def cond(self) -> tuple[list[str], str]:
        """A data-dependent predicate (state registers, input words, thread index)."""
        rng = self.rng
        p = self.new("p")
        a = self.s()
        kind = rng.choice(("bit", "cmp", "tid", "input"))
        if kind == "bit":
            return [f"and.b32 %t0, {a}, {1 << rng.randrange(32)};", f"setp.ne.u32 {p}, %t0, 0;"], p
        if kind == "cmp":
            return [f"setp.{rng.choice(('lt.u32', 'gt.s32', 'le.u32'))} {p}, {a}, {self.s()};"], p
        if kind == "tid":
            return [f"mul.lo.u32 %t0, %tx, {rng.randrange(1, 40)};", f"xor.b32 %t0, %t0, {a};",
                    f"and.b32 %t0, %t0, 3;", f"setp.eq.u32 {p}, %t0, {rng.randrange(4)};"], p
        return [f"add.u32 %t0, %tx, {a};", f"and.b32 %t0, %t0, {NIN - 1};", "mul.wide.u32 %rd0, %t0, 4;",
                "add.u64 %rd0, %rdi, %rd0;", "ld.global.u32 %t0, [%rd0];",
                f"and.b32 %t0, %t0, {rng.choice((1, 3, 7))};", f"setp.eq.u32 {p}, %t0, 0;"], p

    def g_if_data(self, ctx: Ctx) -> Node:
        """Branch on data: the converged sets are ballot(p) and outer & ~ballot(p)."""
        rng = self.rng
        pre, p = self.cond()
        tctx = ectx = self.body_ctx(ctx, known=False, mask="", prefix=False)
        if ctx.known and self.alive_known:
            outer = self.mask_of(ctx)
            mt, me = self.new("m"), self.new("m")
            pre += [f"vote.sync.ballot.b32 {mt}, {p}, {outer};", f"not.b32 {me}, {mt};"]
            pre.append(f"and.b32 {me}, {me}, {outer};")
            tctx = self.body_ctx(ctx, known=True, mask=mt, prefix=False)
            ectx = self.body_ctx(ctx, known=True, mask=me, prefix=False)
        lab = self.label()
        then = self.seq(tctx, rng.randrange(1, 4))
        other = self.seq(ectx, rng.randrange(0, 3)) if rng.random() < 0.5 else []
        return If(pre, p, then, other, lab, (self.new_id(), self.new_id(), self.new_id()), "if_data")

    def g_loop(self, ctx: Ctx) -> Node:
        rng = self.rng
        lid = self.new("l")
        i, n, p = f"%i{lid}", f"%n{lid}", self.new("p")
        layout = rng.choice(("bottom", "latch", "latch", "top"))
        lab = self.label()
        uniform = ctx.known and self.alive_known and rng.random() < 0.5
        if uniform:
            # same trip count in every lane of the warp (redux) or of the block (immediate):
            # the body keeps the outer converged set; no exits inside (they would change it)
            if ctx.block and rng.random() < 0.6:
                pre = [f"mov.u32 {n}, {rng.randrange(1, 4)};"]
                block = True
            else:
                pre = [f"and.b32 %t0, {self.s()}, 3;", f"redux.sync.max.u32 {n}, %t0, {self.mask_of(ctx)};"]
                block = False
            self.saw(f"loop_uniform_{layout}")
            bctx = ctx.but(depth=ctx.depth + 1, top=False, block=ctx.block and block, exit_ok=False,
                           loops=ctx.loops + ((lab, False, i),))
        else:
            # per-lane trip count 0..7 from input data, the thread index and the state
            a, b = rng.randrange(1, 64), rng.randrange(NIN)
            pre = [f"mad.lo.u32 %t0, %tx, {a}, {b};"]
            if ctx.loops and rng.random() < 0.5:  # depends on the enclosing loop's counter
                pre.append(f"add.u32 %t0, %t0, {ctx.loops[-1][2]};")
            pre += [f"and.b32 %t0, %t0, {NIN - 1};", "mul.wide.u32 %rd0, %t0, 4;", "add.u64 %rd0, %rdi, %rd0;",
                    "ld.global.u32 %t0, [%rd0];", f"xor.b32 %t0, %t0, {self.s()};",
                    f"and.b32 {n}, %t0, {rng.choice((3, 7))};"]
            self.saw(f"loop_lane_{layout}")
            bctx = ctx.but(depth=ctx.depth + 1, top=False, block=False, known=False, mask="", prefix=False,
                           loops=ctx.loops + ((lab, True, i),))
        body = self.seq(bctx, rng.randrange(1, 5))
        alt: list[Node] = []
        if not uniform and rng.random() < 0.4:
            actx = self.body_ctx(ctx, known=False, mask="", prefix=False)
            alt = self.seq(actx, rng.randrange(1, 3)) or [self.g_arith(actx)]
            pre_b, pb = self.cond()
            body.insert(rng.randrange(len(body) + 1), Break(pre_b, pb, f"{lab}_alt", "break_alt"))
            self.saw("loop_two_exits")
        return Loop(pre, i, n, p, layout, body, alt, lab, (self.new_id(), self.new_id(), self.new_id()), "loop")

    def g_break(self, ctx: Ctx) -> Node:
        """break/continue of the innermost loop, or a break out of enclosing per-lane loops."""
        rng = self.rng
        lab = ctx.loops[-1][0]
        pre, p = self.cond()
        kind = rng.choice(("break", "continue", "outer"))
        if kind == "outer":
            # any loop of the innermost run of per-lane loops (never out of a warp-uniform one)
            j = len(ctx.loops) - 1
            while j > 0 and ctx.loops[j - 1][1]:
                j -= 1
            lab = ctx.loops[rng.randrange(j, len(ctx.loops))][0]
        self.saw("continue" if kind == "continue" else "break_outer" if kind == "outer" else "break_inner")
        return Break(pre, p, f"{lab}_cont" if kind == "continue" else f"{lab}_exit", "break")

    def g_switch(self, ctx: Ctx) -> Node:
        rng = self.rng
        ncase = rng.randrange(2, 5)
        idx = self.s()
        pre = [f"rem.u32 %t0, {idx}, {ncase};"]
        cctx = self.body_ctx(ctx, known=False, mask="", prefix=False)
        if ctx.known and self.alive_known:
            # lanes that took the same case are exactly those with the same index
            m = self.new("m")
            pre.append(f"match.any.sync.b32 {m}, %t0, {self.mask_of(ctx)};")
            cctx = self.body_ctx(ctx, known=True, mask=m, prefix=False)
        cases = [self.seq(cctx, rng.randrange(0, 3)) for _ in range(ncase)]
        marks = [self.new_id() for _ in range(ncase + 1)]
        return Switch(pre, "%t0", cases, self.label(), marks, "switch")

    def g_exit(self, ctx: Ctx) -> Node:
        pre, p = self.cond()
        lab = self.label()
        op = "ret" if ctx.top and not ctx.in_func and self.rng.random() < 0.4 else "exit"
        if ctx.top and not ctx.in_func and ctx.known and self.alive_known:
            # everyone is here: the lanes that stay are ballot(!p) over the live lanes
            pre.append(f"vote.sync.ballot.b32 %alive, !{p}, %alive;")
            self.saw("exit_top")
        else:
            self.alive_known = False
            self.saw("exit_nested")
        self.exited = True
        return Exit(pre, p, self.new_id(), lab, op)

    def g_call(self, ctx: Ctx) -> Node:
        """Call a new .func: plain (gets the converged mask) or recursive (bounded depth)."""
        rng = self.rng
        known = ctx.known and self.alive_known
        recursive = rng.random() < 0.5
        fname = f"{self.name}_f{len(self.funcs)}_{self.new_id()}"
        if recursive:
            self.saw("call_recursive")
        fctx = Ctx(known=known and not recursive, mask="%alive", prefix=ctx.prefix and not recursive,
                   block=False, top=False, exit_ok=ctx.exit_ok and not known, depth=ctx.depth + 1, in_func=True)
        fbody = self.func_body(fctx, rng.randrange(1, 5))
        self.funcs.append(FuncDef(fname, fbody[0], recursive, fbody[1], self.label(), (self.new_id(), self.new_id())))
        d = self.s()
        mask = self.mask_of(ctx) if known else "0"
        depth = "0"
        pre: list[str] = []
        if recursive:
            pre = [f"and.b32 %t4, {self.s()}, 3;"]
            depth = "%t4"
        return Call(pre + call_lines(fname, self.s(), self.s(), mask, depth, "%t5") + [f"add.u32 {d}, {d}, %t5;"])

    def func_body(self, ctx: Ctx, n: int) -> tuple[list[Node], dict[str, int]]:
        """Generate a function body with its own register counters (PTX registers are per function)."""
        saved = self.counts
        self.counts = {"m": 0, "l": 0, "p": 1}
        body = self.seq(ctx, n)
        counts, self.counts = self.counts, saved
        return body, counts

    def g_bar_call(self, ctx: Ctx) -> Node:
        """Call a .func that itself holds barriers: only where every live thread calls it."""
        fname = f"{self.name}_f{len(self.funcs)}_{self.new_id()}"
        fctx = Ctx(known=self.alive_known, mask="%alive", prefix=ctx.prefix and not self.exited, block=True,
                   top=False, exit_ok=False, depth=ctx.depth + 1, in_func=True)
        body, counts = self.func_body(fctx, self.rng.randrange(2, 5))
        if not any(isinstance(x, Leaf) and x.shape == "sync" for x in body):
            body.append(self.g_sync(fctx))
        self.funcs.append(FuncDef(fname, body, False, counts, self.label(), (self.new_id(), self.new_id())))
        d = self.s()
        mask = self.mask_of(ctx) if self.alive_known else "0"
        return Call(call_lines(fname, self.s(), self.s(), mask, "0", "%t5") + [f"xor.b32 {d}, {d}, %t5;"],
                    "bar_call")

    def goto_region(self, ctx: Ctx) -> list[Node]:
        """`@p bra T` then some statements the jumping lanes skip, with T either in this sequence
        or inside a later if's body (a jump into the middle of a region)."""
        rng = self.rng
        pre, p = self.cond()
        tid = self.new_id()
        uctx = self.body_ctx(ctx, known=False, mask="", prefix=False, depth=ctx.depth)
        out: list[Node] = [Goto(pre, p, tid)]
        out += self.seq(uctx.but(depth=ctx.depth + 1), rng.randrange(0, 3))
        target = Target(tid, self.new_id())
        if rng.random() < 0.5:
            cpre, cp = self.cond()
            then = self.seq(uctx.but(depth=ctx.depth + 1), rng.randrange(0, 2))
            then.insert(rng.randrange(len(then) + 1), target)
            then += self.seq(uctx.but(depth=ctx.depth + 1), rng.randrange(0, 2))
            out.append(If(cpre, cp, then, [], self.label(), (self.new_id(), self.new_id(), self.new_id()), "if_data"))
            self.saw("goto_into_if")
        else:
            out.append(target)
            self.saw("goto")
        return out


def generate(seed: int, rows: bool = False) -> Kernel:
    """The kernel for `seed` (deterministic: the same seed always gives the same kernel). `rows`:
    the same kernel launched as a 2-D block, rows of a width that divides its size, drawn from
    the seed with 16 twice as likely as 32, 8, 4, 5, 3, 7 or 11 (so both 16-wide rows and the
    other tails come up), its thread index flattened from %tid.x/%tid.y: the outcome is the 1-D
    launch's, through the memory lowering's rows paths."""
    k = Generator(seed).kernel()
    if rows:
        widths = [w for w in (16, 32, 16, 8, 4, 5, 3, 7, 11) if k.block % w == 0 and w < k.block]
        k.width = random.Random(seed * 31 + 17).choice(widths) if widths else k.block
    return k
