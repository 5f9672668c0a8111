"""Which register values are uniform or affine in the lane, at each memory access (CPU target).

A value is *affine* when lane i of the warp holds U + i*stride (mod 2**bits), where U is the
same in every lane and in every execution during the warp's life: it is built only from launch
constants (kernel parameters, %ctaid, %ntid, %nctaid, %warpid, immediates, symbol addresses)
and the lane's position (%laneid, %tid.x) by integer add/sub/mul/mad/shl/cvt/cvta. *Uniform*
is stride 0 (any pure instruction on uniform values is uniform). Lanes of a divergent warp may
run a definition at different times; the result is the same because U never changes.

A register used by an instruction has the form of its definition only when that one definition
reaches the use on every path (reaching definitions over the CFG; function entry counts as a
definition and a guarded write does not kill the ones before it). So a register redefined in a
loop, or on two paths, is unknown at a use both definitions reach; so is anything that is not
understood here. Some forms hold only under conditions known at run time (`Form` hazards):
the memory access then tests them (`Form.two_lane_test`) and keeps a per-lane path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.abi import WARP
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.ptxtypes import immediate_bits
from zluda_py.compiler.semantics import SEMANTICS
from zluda_py.ptx import ast


@dataclass(frozen=True)
class Form:
    """Lane i holds U + i*stride mod 2**bits; `const` is U when known (uniform values only).

    Without the hazards below the form is exact. `tid`: built from %tid.x, which is lane-linear
    only in a 1-D block or when %ntid.x is a multiple of 32 (else it wraps to 0 within the
    warp). `ext`: the width of the one non-uniform value widened on the way (it may wrap around
    between lanes), `scale` the constant factor applied since. `tangled`: hazards combined in a
    way `two_lane_test` cannot vouch for. `rows`: built from %tid.y/%tid.z (or from two
    lane-dependent values): exact for the warp only when %ntid.x is a multiple of 32, with no
    two-lane test otherwise; see `halves`. `scope`: blocks (first, last) of the loop outside
    which the form does not hold: built from a loop's induction register (`_inductions`), whose
    U changes from one iteration to the next but is the same in every lane running one.
    `origin`: the definition whose value this is, as a register read gives it (None: a value
    computed from it). `root`: for a widened form, (origin of the narrow value, signed, its
    width), kept through adding uniform terms and constant factors: two forms with the same
    root, scale and stride are the same lane-dependent value plus different uniform ones, so
    their lanes' differences (each half-warp's span, `halves` "test") are equal.
    """

    stride: int
    bits: int
    const: int | None = None
    tid: bool = False
    ext: int = 0
    scale: int = 1
    tangled: bool = False
    rows: bool = False
    scope: tuple[int, int] | None = None
    origin: int | None = field(default=None, compare=False)
    root: tuple[int, bool, int] | None = field(default=None, compare=False)

    @property
    def hazards(self) -> bool:
        return self.tid or self.ext != 0 or self.tangled or self.rows

    @property
    def uniform(self) -> bool:
        return self.stride == 0 and not self.hazards

    @property
    def two_lane_test(self) -> bool:
        """Whether lanes first..last all lie on first + (lane - first) * stride once the last
        one does. A hazard makes values jump off that line: %tid.x wrapping by %ntid.x <= 1024
        (the jumps add up to stride * ntid * k, below 2**(ext-1) as the widened stride is
        small), or the widened value crossing its sign/zero boundary (once: a jump of 2**ext).
        Jumps only accumulate, and their sum scaled by `scale` is not 0 mod 2**64 while `scale`
        has fewer than 64 - ext trailing zero bits, so a lane off the line moves the last one."""
        if self.tangled or self.rows or self.stride == 0:
            return False
        if self.tid and self.ext == 0 and abs(_signed(self.stride, self.bits)) >> (self.bits - 1 - WIDEN_SHIFT):
            return False  # %tid.x's jumps, k * ntid * stride, could be 0 mod 2**bits with a wide stride
        return self._ext_testable

    @property
    def halves(self) -> str | None:
        """When %ntid.x is a multiple of 16 every half-warp lies in one row of the block, where
        %tid.x counts up by one and %tid.y/%tid.z stay: lane i of half h then holds
        U_h + (i % 16) * stride. "exact": so it is; "test": so it is once each half's last lane
        is where it would be (a widened value crossing its boundary inside a half moves it, as
        in `two_lane_test`); None: no such claim."""
        if self.tangled or not self._ext_testable:
            return None
        return "exact" if self.ext == 0 or self.stride == 0 else "test"

    @property
    def row_uniform(self) -> bool:
        """The same in every lane of a half-warp when %ntid.x is a multiple of 16 (`halves`)."""
        return self.stride == 0 and self.halves == "exact"

    @property
    def _ext_testable(self) -> bool:
        if self.ext == 0:
            return True
        return self.scale != 0 and (self.scale & -self.scale).bit_length() - 1 < 64 - self.ext


UNIFORM_32 = Form(0, 32)
# Instructions whose register operands `Analysis.constant` resolves: nvcc passes shuffle offsets,
# clamps and member masks in registers set by mov, and a constant one makes the collective one
# vector operation (a shufflevector) instead of a per-lane chain or a loop over member masks.
CONSTANT_OPERANDS = {"shfl", "vote", "match", "redux", "elect"}
RECORDED_OPERANDS = CONSTANT_OPERANDS | {"setp"}  # register operands whose forms `at` keeps
# A widened value's stride must stay below 2**(bits - 1 - WIDEN_SHIFT): with up to 31 lanes
# and %ntid.x <= 1024 (2**15 > 31 * 1024), its %tid.x jumps stay below 2**(bits - 1).
WIDEN_SHIFT = 16
# Pure instructions (results depend only on the operands): uniform sources give a uniform result.
# addc/subc/madc are left out: they read the carry flag, an implicit operand.
PURE = {"abs", "add", "and", "bfe", "bfi", "bfind", "bmsk", "brev", "clz", "cnot", "copysign", "cos", "cvt",
        "div", "dp2a", "dp4a", "ex2", "fma", "fns", "lg2", "lop3", "mad", "mad24", "max", "min", "mov", "mul",
        "mul24", "neg", "not", "or", "popc", "prmt", "rcp", "rem", "rsqrt", "sad", "selp", "set", "setp", "shf",
        "shl", "shr", "sin", "slct", "sqrt", "sub", "szext", "tanh", "testp", "xor"}
INT_TYPES = {f"{k}{n}" for k in "sub" for n in (8, 16, 32, 64)}
# Special registers: uniform over the warp (launch constants), or the lane's position.
SPECIAL = {**{f"%{r}.{a}": UNIFORM_32 for r in ("ctaid", "ntid", "nctaid") for a in "xyz"},
           "%warpid": UNIFORM_32, "%nwarpid": UNIFORM_32, "%laneid": Form(1, 32), "%tid.x": Form(1, 32, tid=True),
           "%tid.y": Form(0, 32, rows=True), "%tid.z": Form(0, 32, rows=True)}


def resize(f: Form | None, bits: int, signed: bool) -> Form | None:
    """The form of a value truncated or extended (by `signed`) to `bits`."""
    if f is None or f.bits == bits:
        return f
    if f.uniform:
        const = f.const
        if const is not None:
            const = _wrap(_signed(const, f.bits) if signed and bits > f.bits else const, bits)
        return Form(0, bits, const)
    if f.row_uniform:  # one value per half-warp widens exactly
        return replace(f, bits=bits, const=None, origin=None)
    if bits < f.bits:  # truncation keeps U + i*s exact mod 2**bits; past a widening only when
        # back within the widened width (the widened value is then the narrow one mod 2**bits)
        narrow = bits <= f.ext
        return replace(f, stride=_wrap(f.stride, bits), bits=bits, tangled=f.tangled or (f.ext != 0 and not narrow),
                       ext=0 if narrow else f.ext, scale=1 if narrow else f.scale, origin=None,
                       root=None if narrow else f.root)
    # without wrap-around between the lanes, U + i*s widens to ext(U) + i*s (s read as signed)
    s = _signed(f.stride, f.bits)
    wild = f.ext != 0 or f.tangled or abs(s) >> max(f.bits - 1 - WIDEN_SHIFT, 0) != 0
    root = None if wild or f.origin is None else (f.origin, signed, f.bits)
    return Form(_wrap(s, bits), bits, None, f.tid, f.bits, 1, wild, f.rows, root=root)


def _wrap(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _add(a: Form, b: Form, bits: int, sign: int = 1) -> Form:
    stride = _wrap(a.stride + sign * b.stride, bits)
    if a.uniform or b.uniform:  # U + affine keeps the affine side's hazards
        side = a if b.uniform else b
        const = None if a.const is None or b.const is None else _wrap(a.const + sign * b.const, bits)
        return replace(side, stride=stride, bits=bits, const=const, origin=None)
    # two lane-dependent values: fine when both are exact, else their jumps could cancel out;
    # two exact in each half-warp's row add up to one (`Form.halves`)
    if a.hazards or b.hazards:
        return Form(stride, bits, rows=True) if a.halves == b.halves == "exact" else Form(stride, bits, tangled=True)
    return Form(stride, bits)


def _mul(a: Form, b: Form, bits: int) -> Form | None:
    if b.const is not None:
        a, b = b, a
    if a.const is not None:  # c * (U + i*s) = cU + i*cs
        c = a.const
        if c == 0:
            return Form(0, bits, 0)
        if b.uniform:
            return Form(0, bits, None if b.const is None else _wrap(c * b.const, bits))
        return replace(b, stride=_wrap(c * b.stride, bits), bits=bits, const=None, origin=None,
                       scale=_wrap(b.scale * c, 64) if b.ext else 1)
    if a.uniform and b.uniform:
        return Form(0, bits)
    return _per_row(a, b, bits)


def _per_row(a: Form, b: Form, bits: int) -> Form | None:
    """Any function of values uniform in each half-warp's row (`Form.halves`, stride 0) is too."""
    if a.row_uniform and b.row_uniform:
        return Form(0, bits, rows=True)
    return None


class Analysis:
    """Forms of the registers memory instructions address through, for one function body."""

    def __init__(self, body: cfg.FunctionBody, reg_bits: dict[str, int],
                 uniform_symbol: Callable[[str], bool], kernel_param: Callable[[str], bool]) -> None:
        self.body = body
        self.reg_bits = reg_bits
        self.uniform_symbol = uniform_symbol  # the address of this symbol is the same in every lane
        self.kernel_param = kernel_param  # ld.param from this symbol reads the kernel's parameter blob
        self.at: dict[tuple[int, str], Form] = {}  # (id(inst), address register) -> form before inst
        self._defs: list[Form | None] = []  # def id -> the form it writes (None: unknown / entry)
        self._def_inst: dict[int, ast.Instruction] = {}  # def id -> the instruction writing it
        self._guard_def: dict[int, int | None] = {}  # id(guarded bra) -> its predicate's one reaching def
        self._run()

    def address_form(self, inst: ast.Instruction, reg: str, offset: int = 0) -> Form | None:
        """The form of the address `[reg+offset]` as `inst` forms it: in 64 bits for a 64-bit
        register, else in 32 (so a 32-bit base plus its offset wraps modulo 2**32 as the access
        does); None: unknown."""
        f = self.at.get((id(inst), reg))
        if f is None:
            return None
        bits = 64 if f.bits == 64 else 32
        f = resize(f, bits, False)
        return _add(f, Form(0, bits, const=_wrap(offset, bits)), bits) if offset else f

    def constant(self, inst: ast.Instruction, reg: str) -> int | None:
        """The value (as unsigned 32 bits) register `reg` holds when `inst` (one of
        CONSTANT_OPERANDS) reads it, if that is one known constant in every lane; else None."""
        f = resize(self.at.get((id(inst), reg)), 32, False)
        return f.const if f is not None and f.uniform else None

    def equality_setp(self, bra: ast.Instruction) -> ast.Instruction | None:
        """The unguarded integer `setp.eq/ne` that alone defines a guarded `bra`'s predicate, if one does."""
        d = self._guard_def.get(id(bra))
        setp = self._def_inst.get(d) if d is not None else None
        if setp is None or setp.opcode != "setp" or setp.guard is not None or len(setp.operands) != 3 \
                or not isinstance(setp.operands[0], ast.Reg) or not ({"eq", "ne"} & set(setp.mods)) \
                or setp.types[-1][0] not in "sub":  # integers: a float compare is not affine
            return None
        return setp

    def one_lane_side(self, bra: ast.Instruction) -> bool | None:
        """For a guarded `bra` whose predicate is `setp.eq/ne` of a value distinct in every lane
        (affine, stride not 0) against a uniform one, which side a whole warp never takes (at
        most one lane, or a few in 2-D blocks): True the branch, False the fall-through
        (`if (threadIdx.x == 0)`); else None."""
        setp = self.equality_setp(bra)
        if setp is None:
            return None
        bits = ptx_bits(setp.types[-1])
        forms = []
        for op in setp.operands[1:]:
            f = Form(0, bits) if isinstance(op, ast.Imm) else \
                self.at.get((id(setp), op.name)) if isinstance(op, ast.Reg) else None
            forms.append(resize(f, bits, False))
        if None in forms or sum(f.uniform for f in forms) != 1:
            return None
        # %tid.x wrapping in a 2-D block repeats values, but all 32 lanes are equal only when
        # %ntid.x is 1; the caller's use (no converged clone) stays correct if a warp does arrive
        lanes = next(f for f in forms if not f.uniform)
        if lanes.tangled or lanes.rows or not all(lanes.stride * k % (1 << bits) for k in range(1, WARP)):
            return None
        return ("eq" in setp.mods) != bra.guard.negated

    # ------------------------------------------------------------------ reaching definitions
    def _run(self) -> None:
        blocks = self.body.blocks
        defs_of: dict[str, int] = {}  # register -> bit set of its definitions
        entry_defs = 0
        for name in self.reg_bits:  # function entry defines every register (params, or undefined)
            d = self._new_def(None)
            defs_of[name] = 1 << d
            entry_defs |= 1 << d
        block_defs: list[list[list[tuple[str, int]]]] = []  # per block, per inst: (reg, def id)
        for blk in blocks:
            per_inst = []
            for inst in blk.insts:
                ids = []
                for name in written(inst):
                    if name in self.reg_bits:
                        d = self._new_def(None)
                        self._def_inst[d] = inst
                        defs_of[name] |= 1 << d
                        ids.append((name, d))
                per_inst.append(ids)
            block_defs.append(per_inst)
        gen, keep = [], []  # OUT = gen | (IN & keep)
        for blk, per_inst in zip(blocks, block_defs):
            g, k = 0, -1
            for inst, ids in zip(blk.insts, per_inst):
                for name, d in ids:
                    if inst.guard is None:
                        g &= ~defs_of[name]
                        k &= ~defs_of[name]
                    g |= 1 << d
            gen.append(g)
            keep.append(k)
        preds: list[list[int]] = [[] for _ in blocks]
        for blk in blocks:
            for s in blk.succs:
                preds[s].append(blk.index)
        reach_in = [0] * len(blocks)
        reach_out = [0] * len(blocks)
        changed = True
        while changed:
            changed = False
            for i in range(len(blocks)):
                new_in = entry_defs if i == 0 else 0
                for p in preds[i]:
                    new_in |= reach_out[p]
                new_out = gen[i] | (new_in & keep[i])
                if new_in != reach_in[i] or new_out != reach_out[i]:
                    reach_in[i], reach_out[i] = new_in, new_out
                    changed = True
        inductions = self._inductions(blocks, preds, block_defs, defs_of, reach_in)
        stepped = {key: self._new_def(None) for key in inductions}  # the form inside the loop
        # Forms in reverse post-order: a single reaching definition comes earlier in this order
        # (in a reducible CFG); one not evaluated yet reads as unknown.
        evaluated: set[int] = set()
        for blk, per_inst in zip(blocks, block_defs):
            current: dict[str, int | None] = {}  # register -> its one reaching def (None: several)
            scopes: list[tuple[int, int]] = []  # of the forms the instruction at hand read

            def reaching(name: str, i: int = blk.index) -> int | None:
                if name not in current:
                    bits = reach_in[i] & defs_of[name]
                    one = bits.bit_length() - 1 if bits and bits & (bits - 1) == 0 else None
                    loop = inductions.get((name, bits))
                    if one is None and loop is not None and loop[0] <= i <= loop[1]:
                        one = stepped[(name, bits)]
                    current[name] = one
                return current[name]

            def lookup(name: str, i: int = blk.index) -> Form | None:
                d = reaching(name)
                f = self._defs[d] if d is not None and d in evaluated else None
                if f is not None and f.scope is not None:
                    if not f.scope[0] <= i <= f.scope[1]:
                        return None
                    scopes.append(f.scope)
                # the value of definition d (`Form.root`); within a block a def of the register
                # moves `current`, and d reaches a use only if it ran before it on every path
                return f if f is None or f.uniform or f.origin == d else replace(f, origin=d)

            for key, (head, last, d0, update) in inductions.items():
                if head == blk.index:  # the forms of d0 and of the update's other sources reach the whole loop
                    start = self._defs[d0] if d0 in evaluated else None
                    self._defs[stepped[key]] = self._stepped(start, update, key[0], lookup, (head, last))
                    evaluated.add(stepped[key])
            for inst, ids in zip(blk.insts, per_inst):
                scopes.clear()
                if inst.opcode == "bra" and inst.guard is not None:
                    self._guard_def[id(inst)] = reaching(inst.guard.reg)
                for op in inst.operands:
                    if isinstance(op, ast.Addr) and isinstance(op.base, ast.Reg):
                        op = op.base
                    elif not (isinstance(op, ast.Reg) and inst.opcode in RECORDED_OPERANDS):
                        continue
                    f = lookup(op.name) if op.name in self.reg_bits else None
                    if f is not None:
                        self.at[(id(inst), op.name)] = f
                results = self._evaluate(inst, lookup)
                if scopes:  # values computed from a loop's forms hold in that loop only
                    scope = (max(a for a, _ in scopes), min(b for _, b in scopes))
                    results = {n: replace(f, scope=scope) for n, f in results.items()} if scope[0] <= scope[1] else {}
                for name, d in ids:
                    self._defs[d] = results.get(name)
                    evaluated.add(d)
                    current[name] = d if inst.guard is None else None

    def _inductions(self, blocks: list[cfg.BasicBlock], preds: list[list[int]], block_defs, defs_of: dict[str, int],
                    reach_in: list[int]) -> dict[tuple[str, int], tuple[int, int, int, ast.Instruction]]:
        """Induction registers: `r = f(r, x...)` (unguarded) in the one latch L of a loop that is
        the blocks head..L (entered at its head only), r defined nowhere else in the loop, the
        other sources x not at all, and one definition d0 of r before it. Blocks are in
        reconvergence order and the dispatcher runs the lowest one a lane waits at, so a lane
        crosses the back edge only when every lane still in the loop waits at L too: all lanes
        running a block of the loop have run L equally often, and hold f applied k times to d0
        with the same k (`_stepped` says which f keep a form). Returns {(r, its definitions
        reaching the loop): (head, L, d0, the update)}."""
        found = {}
        for last, (blk, per_inst) in enumerate(zip(blocks, block_defs)):
            back = [s for s in blk.succs if s <= last]
            if len(back) != 1:
                continue
            head = back[0]
            loop = range(head, last + 1)
            if any(p not in loop for x in loop[1:] for p in preds[x]) or any(p in loop and p != last for p in preds[head]):
                continue
            inside = 0
            for ids in (ids for x in loop for ids in block_defs[x]):
                for _, d in ids:
                    inside |= 1 << d
            for inst, ids in zip(blk.insts, per_inst):
                if inst.guard is not None or len(ids) != 1 or inst.opcode not in PURE:
                    continue
                name, d1 = ids[0]
                srcs = inst.operands[1:]
                if ast.Reg(name) not in srcs or any(isinstance(x, ast.Reg) and x.name in defs_of
                                                    and defs_of[x.name] & inside for x in srcs if x != ast.Reg(name)):
                    continue
                reach = reach_in[head] & defs_of[name]
                before = reach & ~(1 << d1)
                if defs_of[name] & inside != 1 << d1 or not reach >> d1 & 1 or before & (before - 1) or not before:
                    continue
                found[(name, reach)] = (head, last, before.bit_length() - 1, inst)
        return found

    def _stepped(self, start: Form | None, update: ast.Instruction, name: str, lookup: Callable[[str], Form | None],
                 scope: tuple[int, int]) -> Form | None:
        """The form of an induction register inside its loop. `add r, r, step` with a uniform
        step: the start's, U moved by the step. Any other pure update of a uniform start by
        uniform sources (`stride >>= 1` in a tree reduction): uniform, one value per iteration."""
        if start is None:
            return None
        if update.opcode == "add":
            ptype = update.types[-1] if update.types else ""
            if len(update.operands) != 3 or ptype not in INT_TYPES or any(m not in INT_TYPES for m in update.mods) \
                    or ptx_bits(ptype) != self.reg_bits[name]:
                return None
            a, b = update.operands[1:]
            step = self._read(b if a == ast.Reg(name) else a, ptype, lookup)
        elif start.uniform:
            step = self._evaluate(update, lambda n: start if n == name else lookup(n)).get(name)
        else:
            return None
        if step is None or not step.uniform:
            return None
        for f in (start, step):
            if f.scope is not None:
                scope = (max(scope[0], f.scope[0]), min(scope[1], f.scope[1]))
        return replace(start, const=None, scope=scope, origin=None) if scope[0] <= scope[1] else None

    def _new_def(self, form: Form | None) -> int:
        self._defs.append(form)
        return len(self._defs) - 1

    # ------------------------------------------------------------------ transfer functions
    def _read(self, op: ast.Operand, ptype: str, lookup: Callable[[str], Form | None]) -> Form | None:
        """The form of a source operand read as `ptype` (mirrors FunctionLowering.read)."""
        bits = ptx_bits(ptype)
        if isinstance(op, ast.Reg):
            if op.name in self.reg_bits:
                return resize(lookup(op.name), bits, ptype.startswith("s"))
            return resize(SPECIAL.get(op.name), bits, False)
        if isinstance(op, ast.Imm):
            return Form(0, bits, const=immediate_bits(op, ptype))
        if isinstance(op, ast.Sym) and self.uniform_symbol(op.name):
            return Form(0, bits)
        if isinstance(op, ast.Addr) and op.base is None:
            return Form(0, bits, const=_wrap(op.offset, bits))
        if isinstance(op, ast.Not):
            f = self._read(op.operand, ptype, lookup)
            return Form(0, bits) if f is not None and f.uniform else None
        return None

    def _evaluate(self, inst: ast.Instruction, lookup: Callable[[str], Form | None]) -> dict[str, Form]:
        """The forms `inst` writes, by destination register (absent: unknown)."""
        op = inst.opcode
        if op == "ld" and inst.has("param") and len(inst.operands) == 2:
            dst, addr = inst.operands
            if isinstance(addr, ast.Addr) and isinstance(addr.base, ast.Sym) and self.kernel_param(addr.base.name):
                return self._store_all(dst, Form(0, ptx_bits(inst.types[-1])), inst.types[-1])
            return {}
        if op == "cvta":
            return self._cvta(inst, lookup)
        if op not in PURE:
            return {}
        try:
            types = SEMANTICS[op].operands(inst)
        except UnsupportedError:  # a form its handler lowers itself (mov.b128, mov.v2): unknown
            return {}
        if "cc" in types.dst or "cc" in types.src:
            return {}
        ops = list(inst.operands)
        dests: list[ast.Operand] = []
        while len(dests) < len(types.dst) and ops:
            o = ops.pop(0)
            dests.extend([o.dest, o.pred] if isinstance(o, ast.PredOut) else [o])
        if len(dests) != len(types.dst) or len(ops) != len(types.src) or any(isinstance(o, ast.Vec) for o in ops):
            return {}  # mov's pack/unpack forms, or a shape not understood here
        srcs = [self._read(o, t, lookup) for o, t in zip(ops, types.src)]
        result = self._arith(inst, types.src, types.dst, srcs)
        if result is None:
            if any(s is None or not s.row_uniform for s in srcs):
                return {}
            rows = not all(s.uniform for s in srcs)  # a function of values uniform per row (`_per_row`)
            return {name: form for d, t in zip(dests, types.dst)
                    for name, form in self._store_all(d, Form(0, ptx_bits(t), rows=rows), t).items()}
        return self._store_all(dests[0], result, types.dst[0])

    def _arith(self, inst: ast.Instruction, src_t: list[str], dst_t: list[str],
               srcs: list[Form | None]) -> Form | None:
        """Integer mov/add/sub/mul/mad/shl/cvt on affine sources (None: not one of those)."""
        op = inst.opcode
        if any(s is None for s in srcs) or len(dst_t) != 1 or dst_t[0] not in INT_TYPES:
            return None
        if any(t not in INT_TYPES for t in src_t):
            return None
        plain = {m for m in inst.mods if m not in INT_TYPES}
        bits = ptx_bits(dst_t[0])
        if op == "mov" and not plain:
            return srcs[0]
        if op in ("add", "sub") and not plain:
            return _add(srcs[0], srcs[1], bits, 1 if op == "add" else -1)
        if op in ("mul", "mad") and plain in ({"lo"}, {"wide"}):
            wide = "wide" in plain
            a, b = (resize(s, bits, src_t[0].startswith("s")) for s in srcs[:2]) if wide else srcs[:2]
            product = _mul(a, b, bits)
            if op == "mul" or product is None:
                return product
            return _add(product, srcs[2], bits)
        if op == "shl" and not plain and srcs[1].const is not None:
            k = srcs[1].const
            return _mul(srcs[0], Form(0, bits, const=0 if k >= bits else 1 << k), bits)
        if op == "cvt" and not plain:
            return resize(srcs[0], bits, src_t[0].startswith("s"))
        return None

    def _cvta(self, inst: ast.Instruction, lookup: Callable[[str], Form | None]) -> dict[str, Form]:
        """cvta adds (or with .to subtracts) the space's base: the same for every lane except in .local."""
        if inst.has("local") or len(inst.operands) != 2:
            return {}
        t = inst.types[-1]
        f = resize(self._read(inst.operands[1], t, lookup), 64, False)
        if f is None:
            return {}
        if any(m.startswith("shared") for m in inst.mods):  # +- the arena's address
            f = replace(f, const=None, origin=None)
        return self._store_all(inst.operands[0], f, t)

    def _store_all(self, dst: ast.Operand, f: Form, ptype: str) -> dict[str, Form]:
        """The form each destination register holds after a write of `f` as `ptype`."""
        regs = dst.elems if isinstance(dst, ast.Vec) else [dst]
        out = {}
        for r in regs:
            if isinstance(r, ast.Reg) and r.name in self.reg_bits:
                g = resize(f, self.reg_bits[r.name], ptype.startswith("s"))
                if g is not None:
                    out[r.name] = g
        return out


def written(inst: ast.Instruction) -> list[str]:
    """Registers `inst` may write (an over-approximation is safe: it only makes forms unknown)."""
    names: list[str] = []
    ops = inst.operands
    if inst.opcode == "call":
        ops = [o for o in ops if isinstance(o, ast.ArgList)]
    elif ops:
        ops = ops[:1]
    for op in ops:
        for e in (op.args if isinstance(op, ast.ArgList) else [op]):
            names += _direct_regs(e)
    if "cc" in inst.mods or inst.opcode in ("addc", "subc", "madc"):
        names.append("%cc")
    return names


def _direct_regs(op: ast.Operand) -> list[str]:
    if isinstance(op, ast.Reg):
        return [op.name]
    if isinstance(op, ast.Vec):
        return [n for e in op.elems for n in _direct_regs(e)]
    if isinstance(op, ast.PredOut):
        return [n for e in (op.dest, op.pred) for n in _direct_regs(e)]
    return []


def warp_uniform(body: cfg.FunctionBody, reg_bits: dict[str, int], uniform_symbol: Callable[[str], bool],
                 kernel_param: Callable[[str], bool]) -> set[str]:
    """Registers whose value is the same in every live lane of a warp whenever a lane reads it,
    so the CPU target keeps them as one scalar instead of a 32-lane vector (a divergence analysis).

    A register qualifies when every instruction writing it is unguarded, computes a value from
    uniform sources only (immediates, uniform symbols, launch-constant special registers, kernel
    parameters, other such registers; pure instructions, `cvta` outside .local, `ld.param` of a
    kernel parameter), and lies in a block every live lane of the warp runs together. A block is
    run by only some of the live lanes when it is control dependent (post-dominance) on a branch
    whose predicate is not uniform, or on any branch of such a block; all other lanes of the warp
    wait at reconvergence points (blocks are dispatched in reconvergence order), so each write
    reaches every live lane at once. Optimistic: start from every candidate and drop those whose
    sources or blocks turn out divergent, until nothing changes. Functions where some block cannot
    reach an exit (no post-dominators) get none."""
    blocks = body.blocks
    deps = _control_dependences(blocks)
    if deps is None:
        return set()
    defs: dict[str, list[tuple[int, ast.Instruction]]] = {}
    for blk in blocks:
        for inst in blk.insts:
            for name in written(inst):
                if name in reg_bits:
                    defs.setdefault(name, []).append((blk.index, inst))
    uniform = {r for r, ds in defs.items()
               if r != "%cc" and all(_uniform_sources(i, kernel_param) is not None for _, i in ds)}
    while True:
        def source_uniform(op: ast.Operand) -> bool:
            if isinstance(op, ast.Reg):
                return op.name in uniform if op.name in reg_bits else op.name in SPECIAL and SPECIAL[op.name].uniform
            if isinstance(op, ast.Not):
                return source_uniform(op.operand)
            if isinstance(op, ast.Sym):
                return uniform_symbol(op.name)
            return isinstance(op, ast.Imm) or (isinstance(op, ast.Addr) and op.base is None)

        splitting = set()  # blocks ending in a branch that may send live lanes different ways
        for blk in blocks:
            last = blk.insts[-1] if blk.insts else None
            if len(set(blk.succs)) > 1 and not (last is not None and last.opcode == "bra" and last.guard is not None
                                                and source_uniform(ast.Reg(last.guard.reg))):
                splitting.add(blk.index)
        divergent: set[int] = set()
        changed = True
        while changed:  # a branch inside a divergent block splits the lanes that reached it further
            changed = False
            for i, on in enumerate(deps):
                if i not in divergent and on & (splitting | divergent):
                    divergent.add(i)
                    changed = True
        keep = {r for r in uniform
                if all(b not in divergent and all(map(source_uniform, _uniform_sources(i, kernel_param)))
                       for b, i in defs[r])}
        if keep == uniform:
            return uniform
        uniform = keep


def _uniform_sources(inst: ast.Instruction, kernel_param: Callable[[str], bool]) -> list[ast.Operand] | None:
    """The source operands of `inst` if it computes the same value in every lane from uniform
    sources (what `warp_uniform` admits), else None."""
    op = inst.opcode
    if inst.guard is not None or not inst.operands or not isinstance(inst.operands[0], (ast.Reg, ast.PredOut)):
        return None
    if op == "ld":
        addr = inst.operands[-1]
        ok = inst.has("param") and len(inst.operands) == 2 and isinstance(inst.operands[0], ast.Reg) \
            and isinstance(addr, ast.Addr) and isinstance(addr.base, ast.Sym) and kernel_param(addr.base.name)
        return [] if ok else None
    if op == "cvta":
        return None if inst.has("local") or len(inst.operands) != 2 else [inst.operands[1]]
    if op not in PURE:
        return None
    try:
        types = SEMANTICS[op].operands(inst)
    except UnsupportedError:
        return None
    if "cc" in types.dst or "cc" in types.src:
        return None
    srcs = list(inst.operands[1:])
    if len(srcs) != len(types.src) or any(isinstance(o, (ast.Vec, ast.Addr, ast.PredOut)) and
                                          not (isinstance(o, ast.Addr) and o.base is None) for o in srcs):
        return None
    return srcs


def _control_dependences(blocks: list[cfg.BasicBlock]) -> list[set[int]] | None:
    """For each block, the blocks ending in a branch it is control dependent on: it post-dominates
    one successor of the branch but not the branch's block. None when a block cannot reach an exit."""
    n = len(blocks)
    exit_ = n  # a virtual exit after every block without successors
    succs = [sorted(set(b.succs)) or [exit_] for b in blocks]
    preds: list[list[int]] = [[] for _ in range(n + 1)]
    for i, ss in enumerate(succs):
        for s in ss:
            preds[s].append(i)
    reaches, todo = {exit_}, [exit_]
    while todo:
        for p in preds[todo.pop()]:
            if p not in reaches:
                reaches.add(p)
                todo.append(p)
    if len(reaches) != n + 1:
        return None
    everything = frozenset(range(n + 1))
    pdom = [everything] * n + [frozenset({exit_})]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            new = frozenset.intersection(*(pdom[s] for s in succs[i])) | {i}
            if new != pdom[i]:
                pdom[i], changed = new, True
    deps: list[set[int]] = [set() for _ in range(n)]
    for b in range(n):
        if len(succs[b]) < 2:
            continue
        for s in succs[b]:
            for x in pdom[s]:
                if x != exit_ and (x == b or x not in pdom[b]):
                    deps[x].add(b)
    return deps
