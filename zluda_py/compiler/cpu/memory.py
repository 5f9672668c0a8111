"""Memory on the CPU target: state-space addresses, ld/st, atomics, cvta and isspacep.

Device pointers are host pointers. A `.shared` address is an offset into the block's arena and
a `.local` address an offset into the lane's stack window, as on the GPU (so 32-bit shared and
local addresses work); cvta adds the arena or the lane's window base to make a generic
(host) address. How a warp's ld/st moves data follows from what `affine.py` knows about its
address register (see Access): one scalar access for a uniform address, one masked vector
load/store with a single range check for lane-consecutive addresses (proven, or tested at
run time), else a gather/scatter through an out-of-line helper that checks every lane.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable

from llvmlite import ir

from zluda_py.compiler.cpu import affine
from zluda_py.compiler.cpu import values as V
from zluda_py.compiler.cpu.abi import ABORTED, BOUNDS_CACHE_ENTRIES, WARP, Ctx
from zluda_py.compiler.errors import (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS, UnsupportedError,
                                      unsupported)
from zluda_py.compiler.lanes import ptx_bits
from zluda_py.compiler.memops import (cp_async_fill, cp_async_limit, cp_async_size, cp_async_src_size, space_of,
                                      vector_count)
from zluda_py.compiler.vector_constants import int_vector
from zluda_py.ptx import ast

I1, I32, I64, PTR = V.I1, V.I32, V.I64, V.PTR
STRONG_LOADS = ("volatile", "relaxed", "acquire")
HALF = WARP // 2  # lanes per row of a 16-wide 2-D block (the `halves` path of Access)
_HALF_STARTS = ir.Constant(ir.VectorType(I32, WARP), [ir.Constant(I32, i // HALF * HALF) for i in range(WARP)])



@dataclass
class Access:
    """One warp's ld/st: `host` is the host address (`<32 x i64>`, or a scalar for a symbol);
    `offsets` the register-based address in its space that is bounds-checked (None: valid by
    construction); `nbytes` per lane; `plan` how the data moves: scalar (one address, a
    symbol's), uniform (every active lane has the same address: checked and accessed once),
    contiguous (lane i at base + i*nbytes: one range check, one masked vector load/store),
    ends (contiguous if the last active lane is where it would be: see Form.two_lane_test),
    check (contiguous if every active lane is: a vector compare), else per lane (in a function
    without converged clones both only for a whole warp: MemoryMixin._whole_fits); gather
    (per-lane checks, gather/scatter). `rows`, for a whole warp when %ntid.x is a multiple of
    16 (`affine.Form.halves`): (stride in a half-warp, 0 or nbytes; whether each half's two
    ends are tested first), the two halves then moved by `halves` instead of the plan;
    `row_group`: where that test is shared by other accesses (`MemoryMixin.row_group`)."""

    host: ir.Value
    offsets: ir.Value | None
    space: str
    nbytes: int
    plan: str
    rows: tuple[int, bool] | None = None
    row_group: tuple | None = None
    kparam: int | None = None  # a kernel parameter's offset in the blob (a scalar plan's load of it)
    # lane -> (host address, offset) as scalars, from the address register's lane copies
    # (cpu/scalar_lanes.py): the fast paths' tests read them instead of the vectors
    lanes: dict[int, tuple[ir.Value, ir.Value]] | None = None
    # (lane, host address, offset) as scalars for the one active lane of a `lane == k` side
    # (MemoryMixin.one_lane), computed from that lane's operands (ScalarLanesMixin.one_lane_address)
    pinned: tuple[ir.Value, ir.Value, ir.Value] | None = None
    at_lane: Callable[[ir.Value], tuple[ir.Value, ir.Value] | None] | None = None  # lane -> pinned's pair


class MemoryMixin:
    # set while lowering the `lane == k` side of a split (FunctionLowering._run_side): an access
    # there tests first for exactly one active lane, then checks and moves that lane's element as
    # a scalar (the tail of a shuffle reduction: `if (lane == 0) out[w] = v`)
    one_lane = False
    # row group -> True where a test of the group's spans dominates (FunctionLowering._fork_rows):
    # its accesses in the rest of the block move their halves without testing again
    rows_decided: dict[tuple, bool] = {}
    # ids of the accesses whose window test that fork made too (`group_window`); each is taken
    # out at its first lowering after the fork, so any later copy tests its own again
    rows_checked: set[int] = set()
    cur_inst: ast.Instruction | None = None  # being lowered, and its _bounds_cache calls so far
    site_calls = 0

    # ------------------------------------------------------------------ addresses
    def lane_local_base(self) -> ir.Value:
        """Generic address of local offset 0 for each lane (its stack window)."""
        b = self.b
        t = b.zext(self.thread_index, V.vec(I64))
        return b.add(V.splat(b, self.ctx_i64(Ctx.STACK)), b.mul(t, V.splat(b, self.ctx_i64(Ctx.STACK_SIZE))))

    def space_base(self, space: str) -> ir.Value | None:
        """What to add to a `space` address to get a host address (None: it already is one)."""
        if space == "shared":
            return V.splat(self.b, self.ctx_i64(Ctx.SHARED))
        if space == "local":
            return self.lane_local_base()
        return None

    def symbol(self, name: str, pos: ast.Pos = ast.NOPOS):
        sym = self.symbols.get(name) or self.mod.symbol(name)
        if sym is None:
            raise UnsupportedError(f"symbol {name} (not declared)", pos)
        return sym

    def symbol_address(self, name: str, _space: str = "generic") -> ir.Value:
        """The value of a symbol used as an operand: its address in its own state space."""
        b = self.b
        sym = self.symbol(name)
        if sym.kind == "kparam":
            return V.splat(b, b.add(self.ctx_i64(Ctx.PARAMS), ir.Constant(I64, sym.offset)))
        if sym.kind == "local":
            return V.splat(b, b.add(self.sp, ir.Constant(I64, sym.offset)))
        if sym.kind == "shared":
            return V.splat_const(I64, sym.offset)
        if sym.kind in ("global", "const", "func"):
            return V.splat(b, b.ptrtoint(sym.ptr, I64))
        if sym.kind == "lparam":
            return self.lane_param_address(sym, 0)
        raise UnsupportedError(f"address of {name}")

    def lane_param_address(self, sym, offset: int) -> ir.Value:
        b = self.b
        base = V.splat(b, b.ptrtoint(sym.ptr, I64))
        lanes = V.lane_consts(I64, [i * sym.size + offset for i in range(WARP)])
        return b.add(base, lanes)

    def address(self, addr: ast.Addr, space: str, nbytes: int = 0, mask: ir.Value | None = None,
                align: int | None = None) -> ir.Value:
        """Host address per lane (`<32 x i64>`), or a scalar i64 when it is the same for all lanes.

        With a `mask`, an address computed from a register is checked for an access of
        `nbytes` per lane, aligned to `align` bytes (default: nbytes); addresses of symbols plus
        constant offsets are valid by construction.
        """
        host, offsets = self._locate(addr, space)
        if offsets is not None and mask is not None:
            self.check_bounds(offsets, space, nbytes, mask, align=nbytes if align is None else align)
        return host

    def _locate(self, addr: ast.Addr, space: str) -> tuple[ir.Value, ir.Value | None]:
        """(host address: scalar or per lane, the register-based address in its space to
        bounds-check: None when valid by construction)."""
        b = self.b
        off = ir.Constant(I64, addr.offset)
        if isinstance(addr.base, ast.Sym):
            sym = self.symbol(addr.base.name, addr.pos)
            if sym.kind == "kparam":
                return b.add(self.ctx_i64(Ctx.PARAMS), ir.Constant(I64, sym.offset + addr.offset)), None
            if sym.kind in ("global", "const"):
                return b.add(b.ptrtoint(sym.ptr, I64), off), None
            if sym.kind == "shared":
                return b.add(self.ctx_i64(Ctx.SHARED), ir.Constant(I64, sym.offset + addr.offset)), None
            if sym.kind == "local":
                local = V.splat(b, b.add(self.sp, ir.Constant(I64, sym.offset + addr.offset)))
                return b.add(self.lane_local_base(), local), None
            if sym.kind in ("lparam", "regparam"):
                return self.lane_param_address(sym, addr.offset), None
            raise UnsupportedError(f"memory operand {addr.base.name}", addr.pos)
        if addr.base is None:  # an absolute .shared/.local address is 32 bits, as in a register
            value = V.splat_const(I64, addr.offset & (0xFFFFFFFF if space in ("shared", "local") else (1 << 64) - 1))
        else:  # the offset is added in the register's width (a 32-bit address wraps modulo 2**32, as on
            # the GPU: nvcc's bases may lie "below" an array), then the address is zero-extended
            width = 64 if self.reg_bits(addr.base) == 64 else 32
            value = self.read(addr.base, f"u{width}")
            if addr.offset:
                value = b.add(value, V.splat_const(value.type.element, addr.offset & ((1 << width) - 1)))
            value = V.resize(b, value, 64, False)
        base = self.space_base(space)
        return (value if base is None else b.add(base, value)), value

    def access(self, inst: ast.Instruction, addr: ast.Addr, space: str, nbytes: int, checked: bool = True) -> Access:
        """Where `inst`'s warp access of `nbytes` per lane through `addr` goes, and how to make it
        (see Access); `checked=False`: skip the bounds check (the source may be partly invalid)."""
        host, offsets = self._locate(addr, space)
        if not isinstance(host.type, ir.VectorType):
            sym = self.symbol(addr.base.name) if isinstance(addr.base, ast.Sym) else None
            kparam = sym.offset + addr.offset if sym is not None and sym.kind == "kparam" else None
            return Access(host, None, space, nbytes, "scalar", kparam=kparam)
        if offsets is None:  # per-lane parameter buffers and .local variables
            sym = self.symbol(addr.base.name)
            plan = "contiguous" if sym.kind in ("lparam", "regparam") and sym.size == nbytes else "gather"
            return Access(host, None, space, nbytes, plan)
        if addr.base is None:
            return Access(host, offsets if checked else None, space, nbytes, "uniform")
        plan = self._plan_for_size(self._plan(inst, addr, space, nbytes))
        rows = self._rows(inst, addr, space, nbytes) if self.cloned else None
        at_lane = (lambda lane: self.one_lane_address(addr, space, lane)) \
            if self.one_lane and space in ("global", "shared", "generic") else None
        group = self.row_group(inst) if rows is not None and rows[1] else None
        return Access(host, offsets if checked else None, space, nbytes, plan, rows, group,
                      lanes=self._lanes(inst, addr, space), at_lane=at_lane)

    def _lanes(self, inst: ast.Instruction, addr: ast.Addr, space: str
               ) -> dict[int, tuple[ir.Value, ir.Value]] | None:
        """Access.lanes, where the address register has lane copies and one definition reaches
        this use (a known form; scalar_lanes.py's argument)."""
        name = addr.base.name
        if name not in self.lane_copies or space not in ("global", "shared", "generic") \
                or self._form(inst, addr, space) is None:
            return None
        b, out = self.b, {}
        width = 64 if self.reg_bits(addr.base) == 64 else 32
        for k in self.copy_lanes:  # as _locate computes each lane
            value = V.resize(b, self.lane_copy(name, k), width, False)
            if addr.offset:
                value = b.add(value, ir.Constant(value.type, addr.offset & ((1 << width) - 1)))
            value = V.resize(b, value, 64, False)
            out[k] = (b.add(self.ctx_i64(Ctx.SHARED), value) if space == "shared" else value), value
        return out

    def _lane_host(self, acc: Access, lane: ir.Value) -> ir.Value:
        """Lane `lane`'s host address: its scalar copy where there is one, else from the vector."""
        if acc.lanes and isinstance(lane, ir.Constant) and lane.constant in acc.lanes:
            return acc.lanes[lane.constant][0]
        if acc.pinned is not None and acc.pinned[0] is lane:
            return acc.pinned[1]
        return self._pick(acc, acc.host, lane)

    def _lane_offset(self, acc: Access, lane: ir.Value) -> ir.Value:
        if acc.lanes and isinstance(lane, ir.Constant) and lane.constant in acc.lanes:
            return acc.lanes[lane.constant][1]
        if acc.pinned is not None and acc.pinned[0] is lane:
            return acc.pinned[2]
        return self._pick(acc, acc.offsets, lane)

    def _pick(self, acc: Access, vector: ir.Value, lane: ir.Value) -> ir.Value:
        """An address vector's lane at a run-time index (a divergent access's first or last lane).
        .shared addresses, the arena's base plus a widened 32-bit offset, pick it from the 32-bit
        register (V.lane_of); others extract it: 64-bit permutes in the dispatcher's copies of
        the shuffle reduction made its converged path 1.4x slower (the whole function's register
        allocation), and a one-lane side reaches the vector only on its cold several-lanes path."""
        return V.lane_of(self.b, vector, lane) if acc.space == "shared" and not self.one_lane \
            else self.b.extract_element(vector, lane)

    def _form(self, inst: ast.Instruction, addr: ast.Addr, space: str) -> affine.Form | None:
        if space == "local":  # each lane's own stack window
            return None
        return affine.resize(self.affine().address_form(inst, addr.base.name, addr.offset), 64, False)

    def _plan(self, inst: ast.Instruction, addr: ast.Addr, space: str, nbytes: int) -> str:
        """The Access plan for an address `[reg+offset]` (see Access)."""
        if space == "local":
            return "gather"
        form = self._form(inst, addr, space)
        if form is None:
            return "check"
        if form.uniform:
            return "uniform"
        if form.stride != nbytes:
            return "gather"
        if not form.hazards:
            return "contiguous"
        return "ends" if form.two_lane_test else "check"

    def _rows(self, inst: ast.Instruction, addr: ast.Addr, space: str, nbytes: int) -> tuple[int, bool] | None:
        """Access.rows for `[reg+offset]`: the form of a whole warp's address in 16-wide rows."""
        form = self._form(inst, addr, space)
        if form is None or not form.hazards or form.halves is None or form.stride not in (0, nbytes) \
                or not self._reads_tid_yz():
            return None
        return form.stride, form.halves == "test"

    def row_group(self, inst: ast.Instruction) -> tuple | None:
        """For an ld/st whose address is a widened index plus uniform terms (`Form.root`; the
        stencil's in[i-1], in[i+1], in[i+w]): a key equal for the accesses whose half-warps span
        the same distance, so one test of the spans (`rows_go`) decides the rows for all of them."""
        if inst.opcode not in ("ld", "st") or not self._reads_tid_yz():
            return None
        addr = inst.operands[1 if inst.opcode == "ld" else 0]
        if not isinstance(addr, ast.Addr) or not isinstance(addr.base, ast.Reg) or addr.base.name not in self.regs:
            return None
        space = space_of(inst)
        form = self._form(inst, addr, space)
        if form is None or form.halves != "test":
            return None
        root = form.root
        if root is None and space == "shared" and addr.offset:
            # [reg+imm] in 32 bits: where the offset makes a half's lanes wrap around 2**32 and
            # the base's do not, that half starts within 60 bytes of 2**32, outside any window,
            # so the decided path's window test faults there and names the lane as each access
            # would; hence the base register's test decides for every offset from it
            base = self._form(inst, replace(addr, offset=0), space)
            if base is not None and base.halves == "test" and (base.scale, base.stride) == (form.scale, form.stride):
                root = base.root
        if root is None:
            return None
        return root, form.scale, form.stride

    def group_window(self, insts: list[ast.Instruction], group: tuple) -> tuple[set[int], ir.Value | None]:
        """For a fork on a .shared row group whose first access is insts[0]
        (`FunctionLowering._fork_rows`): the .shared accesses in `insts` whose rows the fork's test
        vouches for (the group's, and those with one address per half-warp, which need only its
        %ntid.x test), unguarded, through a 32-bit register nothing before them in `insts` writes,
        at offsets that are multiples of their size; and one test that all of them lie inside the
        window, aligned, none wrapping around 2**32 (so each half spans as its register's does).
        None: no such access."""
        ids: set[int] = set()
        spans: dict[str, tuple[int, int, int]] = {}  # register -> (lowest offset, highest end, alignment)
        changed: set[str] = set()
        for inst in insts:
            at = inst.operands[1 if inst.opcode == "ld" else 0] if inst.opcode in ("ld", "st") else None
            if isinstance(at, ast.Addr) and isinstance(at.base, ast.Reg) and at.base.name not in changed \
                    and inst.guard is None and not inst.has("bulk") and space_of(inst) == "shared" \
                    and self.reg_bits(at.base) == 32:
                nbytes = ptx_bits(self._mem_type(inst)) // 8 * vector_count(inst)
                rows = self._rows(inst, at, "shared", nbytes)
                offset = (at.offset + (1 << 31)) % (1 << 32) - (1 << 31)  # as the 32-bit add reads it
                if rows is not None and offset % nbytes == 0 and (not rows[1] or self.row_group(inst) == group):
                    ids.add(id(inst))
                    low, end, align = spans.get(at.base.name, (offset, offset, 1))
                    spans[at.base.name] = (min(low, offset), max(end, offset + (HALF - 1) * rows[0] + nbytes),
                                           max(align, nbytes))
            changed.update(affine.written(inst))
        b, fits = self.b, None
        for name, (low, end, align) in spans.items():
            base = self._locate(ast.Addr(ast.Reg(name)), "shared")[1]  # each lane's register, widened
            starts = [b.extract_element(base, ir.Constant(I32, h)) for h in (0, HALF)]
            below = b.icmp_unsigned("<", starts[0], starts[1])
            first, last = b.select(below, starts[0], starts[1]), b.select(below, starts[1], starts[0])
            ok = b.and_(b.icmp_signed(">=", b.add(first, ir.Constant(I64, low)), ir.Constant(I64, 0)),
                        b.icmp_unsigned("<=", b.add(last, ir.Constant(I64, end)), self._window_size("shared")))
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(b.or_(*starts), ir.Constant(I64, align - 1)),
                                            ir.Constant(I64, 0)))
            fits = ok if fits is None else b.and_(fits, ok)
        return ids, fits

    def rows_go(self, lane_host: Callable[[int], ir.Value], stride: int) -> ir.Value:
        """Whether a whole warp's addresses follow the 16-wide rows: %ntid.x a multiple of 16 and
        each half's last lane on its first one's line (`Form.halves` "test")."""
        b, go = self.b, self.rows_in_halves
        for h in (0, HALF):
            span = b.sub(lane_host(h + HALF - 1), lane_host(h))
            go = b.and_(go, b.icmp_unsigned("==", span, ir.Constant(I64, (HALF - 1) * stride)))
        return go

    def affine(self) -> affine.Analysis:
        """This function's uniform/affine register analysis (built at first use)."""
        if not hasattr(self, "_affine"):
            params = {n for n, s in self.symbols.items() if s.kind == "kparam"}
            self._affine = affine.Analysis(self.body, {n: bits for n, (_, bits) in self.regs.items()},
                                           self._uniform_symbol, params.__contains__)
        return self._affine

    def _plan_for_size(self, plan: str) -> str:
        """A function without converged clones tests `ends`/`check` accesses for a whole warp only
        (`_whole_fits`), and above WHOLE_WARP_LIMIT instructions (cub's scans and sorts) not at
        all: the per-lane helper then moves every access needing a run-time test (a few dozen IR
        lines less per site; their code generation time grows faster than linearly)."""
        return "gather" if plan in ("ends", "check") and not self.cloned and not self.whole_warp else plan

    def _uniform_symbol(self, name: str) -> bool:
        """The value of `name` as an operand is the same in every lane (per-lane .param buffers are not)."""
        sym = self.symbols.get(name) or self.mod.symbol(name)
        return sym is not None and sym.kind in ("kparam", "local", "shared", "global", "const", "func")

    # ------------------------------------------------------------------ bounds checks (error 700)
    def check_bounds(self, value: ir.Value, space: str, nbytes: int, mask: ir.Value,
                     cache: ir.Value | None = None, align: int | None = None) -> None:
        """Fault with 716 unless every active lane's address is a multiple of `align` (default:
        nbytes), then with 700 unless every active lane's [value, value+nbytes) is valid in `space`.

        .shared/.local offsets are checked against the arena / the lane's stack window; host
        addresses (global, const, generic) against the launch's range table: first the range
        this site hit last (cached in the launch record), then the out-of-line search `zluda.bounds`.
        """
        b = self.b
        if space == "param":  # kernel/.func parameter buffers: only symbol-based in practice
            return
        align = nbytes if align is None else align
        if space in ("shared", "local"):
            bad = _outside_window(b, value, self._window_size(space), ir.Constant(I64, nbytes))
            if _alignment_checked(align):
                bad = b.or_(bad, b.icmp_unsigned("!=", b.and_(value, V.splat_const(I64, align - 1)),
                                                 V.splat_const(I64, 0)))
            # one test inline; which lane faults, and how (716 before 700), is found out of line
            # by a call on a path that always leaves (a call the fast path went through would cost
            # run time: values live across it, and it may write memory)
            with b.if_then(V.any_lane(b, b.and_(mask, bad)), likely=False):
                self._window_fault(value, space, nbytes, mask, align)
            return
        self._check_aligned(value, align, mask)
        cache = cache if cache is not None else self._bounds_cache()
        ok = b.call(_lanes_check_function(self.mod), [self.ctx, value, mask, ir.Constant(I64, nbytes), cache])
        with b.if_then(b.not_(ok), likely=False):
            self._illegal_address()

    def _check_range(self, acc: Access, mask: ir.Value, first: ir.Value, last: ir.Value, cache: ir.Value | None) -> None:
        """check_bounds for active lanes at consecutive (or equal) addresses: all of them lie
        in [first lane's, last lane's + nbytes), unless that wraps around."""
        b = self.b
        if acc.offsets is None or acc.space == "param":
            return
        lo, top = self._lane_offset(acc, first), self._lane_offset(acc, last)
        if _alignment_checked(acc.nbytes):  # the lanes share the first one's address or its alignment
            with b.if_then(b.icmp_unsigned("!=", b.and_(lo, ir.Constant(I64, acc.nbytes - 1)), ir.Constant(I64, 0)),
                           likely=False):
                self._misaligned_address(b.shl(ir.Constant(I32, 1), first), lo)
        if acc.space in ("shared", "local"):
            window, size = self._window_size(acc.space), ir.Constant(I64, acc.nbytes)
            over = b.or_(b.or_(b.icmp_unsigned(">", top, b.sub(window, size)), b.icmp_unsigned("<", top, lo)),
                         b.icmp_unsigned("<", window, size))
            with b.if_then(over, likely=False):  # some lane is outside: name the first one
                self._window_fault(acc.offsets, acc.space, acc.nbytes, mask, acc.nbytes)
            return
        # the lanes' addresses again from lo (not the vector: the fast path then needs two lanes of it)
        stride = 0 if acc.plan == "uniform" else acc.nbytes
        start = b.sub(lo, b.mul(b.zext(first, I64), ir.Constant(I64, stride)))
        lanes = b.add(V.splat(b, start), _lane_offsets(stride))
        self._host_check(lo, top, lanes, acc.nbytes, mask, cache)

    def _whole_fits(self, acc: Access, mask: ir.Value, cache: ir.Value | None) -> ir.Value:
        """The run-time test of an `ends`/`check` access in a function without converged clones:
        all 32 lanes active and on lane 0's line (`ends`: lane 31 where the line puts it, as
        Form.two_lane_test argues; `check`: every lane compared), lane 0 aligned (so all are),
        and [lane 0, lane 31 + nbytes) inside the .shared window or the site's cached range.
        It decides no fault: where it fails, the per-lane helper checks every lane (716 before
        700, the first lane named) and moves them."""
        b, n = self.b, acc.nbytes
        checked = acc.offsets is not None and acc.space != "param"
        at = acc.offsets if acc.offsets is not None else acc.host
        lo = b.extract_element(at, ir.Constant(I32, 0))
        if acc.plan == "ends":
            top = b.extract_element(at, ir.Constant(I32, WARP - 1))
            go = b.icmp_unsigned("==", b.sub(top, lo), ir.Constant(I64, (WARP - 1) * n))
        else:
            top = b.add(lo, ir.Constant(I64, (WARP - 1) * n))
            go = V.reduce(b, "and", b.icmp_unsigned("==", at, b.add(V.splat(b, lo), _lane_offsets(n))))
        if mask is not V.ALL:
            go = b.and_(go, b.icmp_unsigned("==", V.mask_bits(b, mask), ir.Constant(I32, -1)))
        if not checked:
            return go
        if _alignment_checked(n):
            go = b.and_(go, b.icmp_unsigned("==", b.and_(lo, ir.Constant(I64, n - 1)), ir.Constant(I64, 0)))
        size = ir.Constant(I64, n)
        if acc.space == "shared":  # the lanes wrap exactly where top + size does
            hi = b.add(top, size)
            inside = b.and_(b.icmp_unsigned("<=", hi, self._window_size(acc.space)), b.icmp_unsigned(">=", hi, lo))
        else:
            inside = _in_cached_range(b, lo, top, size, cache)
        return b.and_(go, inside)

    def _check_halves(self, acc: Access, cache: ir.Value | None, stride: int) -> None:
        """check_bounds for a whole warp whose half-warps each hold addresses `stride` apart
        (consecutive, or one per half): alignment per lane, then [lowest half start, highest
        half end) against the window or the site's cached range (a miss checks every lane)."""
        b = self.b
        if acc.offsets is None or acc.space == "param":
            return
        starts = [self._lane_offset(acc, ir.Constant(I32, h)) for h in (0, HALF)]
        if _alignment_checked(acc.nbytes):  # a half's lanes share its first one's alignment
            low = [b.and_(s, ir.Constant(I64, acc.nbytes - 1)) for s in starts]
            with b.if_then(b.icmp_unsigned("!=", b.or_(*low), ir.Constant(I64, 0)), likely=False):
                first_bad = b.icmp_unsigned("!=", low[0], ir.Constant(I64, 0))
                self._misaligned_address(b.select(first_bad, ir.Constant(I32, 1), ir.Constant(I32, 1 << HALF)),
                                         b.select(first_bad, starts[0], starts[1]))
        lo = b.select(b.icmp_unsigned("<", starts[0], starts[1]), starts[0], starts[1])
        hi = b.select(b.icmp_unsigned("<", starts[0], starts[1]), starts[1], starts[0])
        top = b.add(hi, ir.Constant(I64, (HALF - 1) * stride))
        if acc.space in ("shared", "local"):
            window, size = self._window_size(acc.space), ir.Constant(I64, acc.nbytes)
            over = b.or_(b.or_(b.icmp_unsigned(">", top, b.sub(window, size)), b.icmp_unsigned("<", top, hi)),
                         b.icmp_unsigned("<", window, size))
            with b.if_then(over, likely=False):
                self._window_fault(acc.offsets, acc.space, acc.nbytes, V.ALL, acc.nbytes)
            return
        self._host_check(lo, top, acc.offsets, acc.nbytes, V.ALL, cache)

    def _window_fault(self, value: ir.Value, space: str, nbytes: int, mask: ir.Value, align: int) -> None:
        """Leave with the fault of a .shared/.local access that some active lane makes (the
        caller tested it: a failed range test of consecutive lanes also means some lane is
        outside): `zluda.window_fault` names the first misaligned lane (716), else the first
        outside the window (700). Out of line: inline it was about 10 lines of IR per check
        (compile time)."""
        b = self.b
        align_bits = align - 1 if _alignment_checked(align) else 0
        status = b.call(_window_fault_function(self.mod), [self.ctx, value, mask, ir.Constant(I64, nbytes),
                                                           ir.Constant(I64, align_bits), self._window_size(space)])
        self._leave_recorded(status)

    def _leave_recorded(self, status: ir.Value) -> None:
        """Leave with `status` (i32), whose lane and address a helper recorded in the launch
        record (FAULT_LANES, FAULT_ARG): one shared block per function."""
        b = self.b
        blocks = self.__dict__.setdefault("_fault_blocks", {})
        if "recorded" not in blocks:
            block = self.llfn.append_basic_block("fault_recorded")
            with b.goto_block(block):
                phi = b.phi(I32)
                self.set_ctx_i64(Ctx.STATUS, b.zext(phi, I64))
                self.set_ctx_i64(Ctx.FAULT_WARP, b.zext(self.warp, I64))
                b.ret(b.sub(ir.Constant(I32, 0), phi) if self.is_kernel else ir.Constant(I32, 0))
            blocks["recorded"] = (block, phi)
        block, phi = blocks["recorded"]
        phi.add_incoming(status, b.block)
        b.branch(block)

    def _window_size(self, space: str) -> ir.Value:
        return self.ctx_i64(Ctx.SHARED_WINDOW if space == "shared" else Ctx.STACK_SIZE)

    def _host_check(self, lo: ir.Value, top: ir.Value, value: ir.Value, nbytes: int, mask: ir.Value,
                    cache: ir.Value) -> None:
        """[lo, top+nbytes) inside the range this site hit last, else every active lane through `zluda.bounds`."""
        b = self.b
        size = ir.Constant(I64, nbytes)
        with b.if_then(b.not_(_in_cached_range(b, lo, top, size, cache)), likely=False):
            found = b.call(_bounds_function(self.mod), [self.ctx, value, mask, size, cache])
            with b.if_then(b.not_(found), likely=False):
                self._illegal_address()

    def _per_lane(self, acc: Access, mask: ir.Value, cache: ir.Value | None, elt: ir.IntType, n: int,
                  values: list[ir.Value] | None = None) -> list[ir.Value]:
        """Check every active lane's address, then gather n elements per lane (values None) or
        scatter `values`. Functions with converged clones (small ones) move .shared/.local 32/64-bit
        elements inline after the window check (a few lines); everything else, host addresses
        included, is one call of a shared out-of-line helper (`_lanes_function`), which checks
        host addresses lane by lane: inline, that path was about a quarter of a small kernel's IR."""
        host = acc.offsets is not None and acc.space not in ("shared", "local", "param")
        call = host or not self.cloned or elt.width not in (32, 64)  # byte gathers are 32 scalar branches each
        # the helper tests a .shared window itself: inline, the test and its fault call were ~13 % of
        # a large kernel's IR (one without clones); a .local window needs each lane's stack base
        shared = call and acc.offsets is not None and acc.space == "shared"
        if acc.offsets is not None and not host and not shared:
            self.check_bounds(acc.offsets, acc.space, acc.nbytes, mask)
        if call:
            return self._per_lane_call(acc, mask, cache if host else None, elt, n, values, shared)
        return _move_lanes(self.b, acc.host, mask, elt, n, values)

    def _per_lane_call(self, acc: Access, mask: ir.Value, cache: ir.Value | None, elt: ir.IntType, n: int,
                       values: list[ir.Value] | None, shared: bool = False) -> list[ir.Value]:
        """The per-lane move through `_lanes_function` (with a `cache`: it checks host addresses;
        `shared`: the lanes' offsets into the .shared window; alignment first, and a fault leaves
        through the function's shared fault block)."""
        b = self.b
        addrs, data = self._lane_buffers()
        b.store(acc.host, addrs)
        vt = V.vec(elt)
        slot = lambda k: b.bitcast(b.gep(data, [ir.Constant(I64, 0), ir.Constant(I64, k * WARP * elt.width // 8)]),  # noqa: E731
                                   vt.as_pointer())
        for k, v in enumerate(values or []):
            b.store(v, slot(k))
        fn = _lanes_function(self.mod, "gather" if values is None else "scatter", elt, n)
        size = acc.nbytes | (SHARED_WINDOW_CHECK if shared else 0)
        status = b.call(fn, [self.ctx, addrs, V.mask_bits(b, mask), ir.Constant(I64, size),
                             cache if cache is not None else ir.Constant(PTR, None), data])
        if cache is not None or shared:
            with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
                self._leave_recorded(status)
        if values is not None:
            return []
        return [b.load(slot(k)) for k in range(n)]

    def _lane_buffers(self) -> tuple[ir.Value, ir.Value]:
        """This function's buffers for the per-lane helpers: 32 addresses, and the data (at most
        32 bytes per lane: ld/st .v4.b64, .v8.b32)."""
        if getattr(self, "_lane_bufs", None) is None:
            b = self.b
            entry = b.function.entry_basic_block
            with b.goto_block(entry):
                b.position_at_start(entry)
                addrs, data = b.alloca(V.vec(I64)), b.alloca(ir.ArrayType(V.I8, 32 * WARP))
                addrs.align = data.align = 64
                self._lane_bufs = (addrs, data)
        return self._lane_bufs

    def _check_aligned(self, value: ir.Value, align: int, mask: ir.Value) -> None:
        """Fault with 716 (naming the first such lane and its address) unless every active
        lane's address is a multiple of `align`: PTX wants naturally aligned accesses (a vector
        access: aligned to its whole size). A low-bits test per lane, beside the bounds check."""
        if not _alignment_checked(align):
            return
        b = self.b
        low = b.and_(value, V.splat_const(I64, align - 1))
        bad = V.mask_bits(b, b.and_(mask, b.icmp_unsigned("!=", low, V.splat_const(I64, 0))))
        with b.if_then(b.icmp_unsigned("!=", bad, ir.Constant(I32, 0)), likely=False):
            first = V.intrinsic(b, "llvm.cttz.i32", I32, [bad, ir.Constant(I1, 1)])
            self._misaligned_address(b.shl(ir.Constant(I32, 1), first), b.extract_element(value, first))

    def _misaligned_address(self, lane: ir.Value, arg: ir.Value) -> None:
        """Leave with 716 naming the lane (its bit, i32) and its address."""
        self._leave_at(CUDA_ERROR_MISALIGNED_ADDRESS, lane, arg)

    def _illegal_address(self, lane: ir.Value | None = None, arg: ir.Value | None = None) -> None:
        """Leave with 700 naming the first faulting lane (`lane`: its bit, i32) and its address
        `arg`; without them, the ones `zluda.bounds` recorded in the launch record."""
        self._leave_at(CUDA_ERROR_ILLEGAL_ADDRESS, lane, arg)

    def _leave_at(self, status: int, lane: ir.Value | None, arg: ir.Value | None) -> None:
        """Leave with `status` naming a lane and an address (see _illegal_address). One shared
        block per function and status: a fault block per site costs compile time."""
        b = self.b
        blocks = self.__dict__.setdefault("_fault_blocks", {})
        named = arg is not None
        if (status, named) not in blocks:
            block = self.llfn.append_basic_block("illegal_address" if status == CUDA_ERROR_ILLEGAL_ADDRESS
                                                 else "misaligned_address")
            with b.goto_block(block):
                if named:
                    bit, value = b.phi(I32), b.phi(I64)
                else:
                    bit, value = b.trunc(self.ctx_i64(Ctx.FAULT_LANES), I32), None
                self.fault(status, V.bits_mask(b, bit), value)
            blocks[status, named] = (block, bit, value)
        block, bit, value = blocks[status, named]
        if named:
            bit.add_incoming(lane, b.block)
            value.add_incoming(arg, b.block)
        b.branch(block)

    def _bounds_cache(self) -> ir.Value:
        """[lo, hi) of the range this access site last hit: one of the worker's launch-record
        entries (zeroed per launch, kept across warps and blocks), shared round-robin by sites."""
        # an instruction lowered again (FunctionLowering._fork_rows's tails and clones) is the same
        # site: another entry could be shared with a hot site of another array and miss every warp
        key = (id(self.cur_inst), self.cur_mask is V.ALL, self.site_calls)
        self.site_calls += 1
        sites = self.__dict__.setdefault("_bounds_sites", {})
        entry = Ctx.BOUNDS_CACHE + 2 * (sites.setdefault(key, len(sites) + 1) % BOUNDS_CACHE_ENTRIES)
        return self.b.gep(self.ctx, [ir.Constant(I64, 8 * entry)], source_etype=V.I8)

    def reg_bits(self, op: ast.Operand) -> int:
        if isinstance(op, ast.Reg) and op.name in self.regs:
            return self.regs[op.name][1]
        return 64

    # ------------------------------------------------------------------ vector memory access
    def load(self, acc: Access, elt: ir.IntType, n: int, mask: ir.Value) -> list[ir.Value]:
        """n consecutive elements per lane starting at each lane's address."""
        b = self.b
        size = elt.width // 8
        if acc.plan == "scalar":
            if acc.kparam is not None and self.preloads_kernel_params():
                return [V.splat(b, self.kernel_param(acc.kparam + k * size, elt)) for k in range(n)]
            return [V.splat(b, v) for v in self._scalar_loads(acc.host, elt, n)]

        def uniform(first: ir.Value, _last: ir.Value, at: Access = acc) -> list[ir.Value]:
            return [V.splat(b, v) for v in self._scalar_loads(self._lane_host(at, first), elt, n)]

        def contiguous(first: ir.Value, _last: ir.Value, lanes: ir.Value = mask) -> list[ir.Value]:
            wide = ir.VectorType(elt, WARP * n)
            whole = V.intrinsic(b, f"llvm.masked.load.v{WARP * n}i{elt.width}.p0", wide,
                                [self._base(acc, first), ir.Constant(I32, size), self._widen_mask(lanes, n),
                                 ir.Constant(wide, None)])
            return [b.shuffle_vector(whole, ir.Constant(wide, None), V.lane_consts(I32, [i * n + k for i in range(WARP)]))
                    for k in range(n)]

        def halves(stride: int) -> list[ir.Value]:
            if stride == 0:  # one address per half: its element(s) splat over the half
                both = ir.Constant(ir.VectorType(elt, 2 * n), None)
                for j, v in enumerate(v for h in (0, HALF) for v in self._scalar_loads(self._half_base(acc, h, False), elt, n)):
                    both = b.insert_element(both, v, ir.Constant(I32, j))
                return [b.shuffle_vector(both, ir.Constant(both.type, None),
                                         V.lane_consts(I32, [i // HALF * n + k for i in range(WARP)]))
                        for k in range(n)]
            parts = [b.load(self._half_base(acc, h), typ=ir.VectorType(elt, HALF * n), align=size) for h in (0, HALF)]
            return [b.shuffle_vector(parts[0], parts[1], V.lane_consts(
                I32, [(i // HALF) * HALF * n + (i % HALF) * n + k for i in range(WARP)])) for k in range(n)]

        return self._emit(acc, mask, uniform, contiguous, lambda cache: self._per_lane(acc, mask, cache, elt, n),
                          [V.vec(elt)] * n, halves)

    def store(self, acc: Access, values: list[ir.Value], mask: ir.Value) -> None:
        b = self.b
        elt = values[0].type.element
        size, n = elt.width // 8, len(values)
        if acc.plan == "scalar":  # every lane stores to the same place: the last one's value stays
            last = b.sub(ir.Constant(I32, WARP - 1), V.intrinsic(b, "llvm.ctlz.i32", I32, [V.mask_bits(b, mask),
                                                                                           ir.Constant(I1, 0)]))
            with b.if_then(V.any_lane(b, mask)):
                self._scalar_stores(acc.host, [b.extract_element(v, last) for v in values])
            return

        def uniform(first: ir.Value, last: ir.Value, at: Access = acc) -> list[ir.Value]:
            # one active lane (_emit's one-lane path passes it as both): its value picked from the
            # registers; else the last active lane's, extracted (LLVM folds that of a splat)
            self._scalar_stores(self._lane_host(at, last), [V.lane_of(b, v, last) if first is last
                                                            else b.extract_element(v, last) for v in values])
            return []

        def contiguous(first: ir.Value, _last: ir.Value, lanes: ir.Value = mask) -> list[ir.Value]:
            whole = values[0]
            if n > 1:
                whole = _concat(b, values)
                order = [k * WARP + i for i in range(WARP) for k in range(n)]
                whole = b.shuffle_vector(whole, ir.Constant(whole.type, None),
                                         int_vector(ir.VectorType(I32, WARP * n), order))
            V.intrinsic(b, f"llvm.masked.store.v{WARP * n}i{elt.width}.p0", ir.VoidType(),
                        [whole, self._base(acc, first), ir.Constant(I32, size), self._widen_mask(lanes, n)])
            return []

        def halves(stride: int) -> list[ir.Value]:
            if stride == 0:  # one address per half: its last lane's values stay, the upper half's last
                for h in (0, HALF):
                    self._scalar_stores(self._half_base(acc, h, False), [b.extract_element(v, ir.Constant(I32, h + HALF - 1))
                                                                         for v in values])
                return []
            whole = _concat(b, values) if n > 1 else values[0]
            for h in (0, HALF):  # the upper half last: where the halves overlap, its lanes' values stay
                order = [k * WARP + h + i for i in range(HALF) for k in range(n)]
                part = b.shuffle_vector(whole, ir.Constant(whole.type, None),
                                        int_vector(ir.VectorType(I32, HALF * n), order))
                b.store(part, self._half_base(acc, h), align=size)
            return []

        self._emit(acc, mask, uniform, contiguous, lambda cache: self._per_lane(acc, mask, cache, elt, n, values), [],
                   halves)

    def _emit(self, acc: Access, mask: ir.Value, uniform, contiguous, per_lane, types: list[ir.Type],
              halves=None) -> list[ir.Value]:
        """Emit an access by its plan: `uniform(first, last)` / `contiguous(first, last[, lanes])`
        for the active lanes first..last after one range check; `per_lane(cache)` checks each lane;
        `halves(stride)`, for a whole warp whose two halves each hold addresses `stride` apart
        (Access.rows, or found contiguous when the run-time test of an ends/check plan fails).
        Returns the loaded values (merged over the paths taken)."""
        b = self.b
        cache = self._bounds_cache() if acc.offsets is not None else None
        full = mask is V.ALL
        known_rows = full and acc.rows is not None and halves is not None
        if known_rows and id(self.cur_inst) in self.rows_checked:  # the fork tested its rows and window
            self.rows_checked.discard(id(self.cur_inst))
            return halves(acc.rows[0])
        failed = known_rows and self.rows_decided.get(acc.row_group) is False
        if known_rows and self.rows_decided.get(acc.row_group):  # tested for the group: move the halves
            self._check_halves(acc, cache, acc.rows[0])
            return halves(acc.rows[0])
        # where the group's test failed (a block not in 16-wide rows, or a fault ahead) no rows
        # path: the plan's own test keeps the vector move of a warp contiguous as a whole
        known_rows = known_rows and not failed
        paths: list[tuple[ir.Block, list[ir.Value]]] = []
        # (a uniform plan's path is scalar already)
        one_lane = self.one_lane and not full and acc.plan != "uniform" and acc.offsets is not None \
            and acc.space not in ("local", "param")
        join = b.append_basic_block("mem.done") if one_lane else None
        if one_lane:
            # one lane: first == last, so the range check is that lane's scalar test (716 or 700
            # naming it, as on the other paths) and the move is the uniform plan's scalar one
            bits = V.mask_bits(b, mask)
            one, more = b.append_basic_block("mem.one"), b.append_basic_block("mem.more")
            b.cbranch(b.icmp_unsigned("==", V.popcount(b, bits), ir.Constant(I32, 1)), one, more).set_weights([1000, 1])
            b.position_at_end(one)
            lane = V.intrinsic(b, "llvm.cttz.i32", I32, [bits, ir.Constant(I1, 1)])
            at = acc.at_lane(lane) if acc.at_lane is not None else None
            one_acc = replace(acc, pinned=(lane, *at)) if at is not None else acc
            self._check_range(one_acc, mask, lane, lane, cache)
            paths.append((b.block, uniform(lane, lane, one_acc)))
            b.branch(join)
            b.position_at_end(more)
        if acc.plan == "gather" and not known_rows:
            return self._merge(join, paths, per_lane(cache), types) if paths else per_lane(cache)
        if not self.cloned and acc.plan in ("ends", "check"):  # a whole warp on its line, else per lane
            fast, lanes = b.append_basic_block("mem.fast"), b.append_basic_block("mem.lanes")
            join = join or b.append_basic_block("mem.done")
            b.cbranch(self._whole_fits(acc, mask, cache), fast, lanes).set_weights([1000, 1])
            b.position_at_end(fast)
            paths.append((b.block, contiguous(ir.Constant(I32, 0), ir.Constant(I32, WARP - 1), V.ALL)))
            b.branch(join)
            b.position_at_end(lanes)
            return self._merge(join, paths, per_lane(cache), types)
        join = join or b.append_basic_block("mem.done")
        bits = V.mask_bits(b, mask)
        first = ir.Constant(I32, 0) if full else V.intrinsic(b, "llvm.cttz.i32", I32, [bits, ir.Constant(I1, 0)])
        last = ir.Constant(I32, WARP - 1) if full else b.sub(
            ir.Constant(I32, WARP - 1), V.intrinsic(b, "llvm.ctlz.i32", I32, [bits, ir.Constant(I1, 0)]))
        some = ir.Constant(I1, 1) if full else V.any_lane(b, mask)
        if known_rows:  # proven to follow the rows of 16-wide blocks: scalar tests only
            stride, test = acc.rows
            go = self.rows_go(lambda k: self._lane_host(acc, ir.Constant(I32, k)), stride) if test \
                else self.rows_in_halves
            fast, other = b.append_basic_block("mem.rows"), b.append_basic_block("mem.other")
            b.cbranch(go, fast, other).set_weights([1000, 1])
            b.position_at_end(fast)
            self._check_halves(acc, cache, stride)
            paths.append((b.block, halves(stride)))
            b.branch(join)
            b.position_at_end(other)
        # else a whole warp of a 2-D block with 16-wide rows (16x16 tiles): each half-warp may be a row
        rows = full and not known_rows and not failed and acc.plan in ("ends", "check") and halves is not None \
            and self._reads_tid_yz()
        # an unknown form tests the rows only: a warp contiguous as a whole has contiguous halves,
        # and two 16-lane moves are the same two vector loads/stores as one of 32 lanes
        if acc.plan != "gather" and not (rows and acc.plan == "check"):
            if acc.plan == "ends":
                span = b.sub(self._lane_host(acc, last), self._lane_host(acc, first))
                go = b.select(some, b.icmp_unsigned("==", span, b.mul(b.zext(b.sub(last, first), I64),
                                                                       ir.Constant(I64, acc.nbytes))), ir.Constant(I1, 0))
            elif acc.plan == "check":  # contiguous if every active lane is at lane 0's address + lane * nbytes
                start = b.sub(self._pick(acc, acc.host, first), b.mul(b.zext(first, I64), ir.Constant(I64, acc.nbytes)))
                expect = b.add(V.splat(b, start), _lane_offsets(acc.nbytes))
                fits = V.reduce(b, "and", b.select(mask, b.icmp_unsigned("==", acc.host, expect), V.ALL))
                go = b.select(some, fits, ir.Constant(I1, 0))  # no active lane: the per-lane path does nothing
            else:
                go = some
            fast = b.append_basic_block("mem.fast")
            other = b.append_basic_block("mem.none" if acc.plan in ("uniform", "contiguous") else "mem.lanes")
            b.cbranch(go, fast, other).set_weights([1000, 1])
            b.position_at_end(fast)
            self._check_range(acc, mask, first, last, cache)
            moved = (uniform if acc.plan == "uniform" else contiguous)(first, last)
            paths.append((b.block, moved))
            b.branch(join)
            b.position_at_end(other)
        if rows:
            half_fast, lanes = b.append_basic_block("mem.halves"), b.append_basic_block("mem.lanes")
            row_lanes = b.add(b.shuffle_vector(acc.host, ir.Constant(acc.host.type, None), _HALF_STARTS),
                              _lane_offsets(acc.nbytes, HALF))
            b.cbranch(V.reduce(b, "and", b.icmp_unsigned("==", acc.host, row_lanes)), half_fast, lanes).set_weights([1000, 1])
            b.position_at_end(half_fast)
            self._check_halves(acc, cache, acc.nbytes)
            paths.append((b.block, halves(acc.nbytes)))
            b.branch(join)
            b.position_at_end(lanes)
        moved = [V.undef(t) for t in types] if acc.plan in ("uniform", "contiguous") else per_lane(cache)
        return self._merge(join, paths, moved, types)

    def _merge(self, join: ir.Block, paths: list[tuple[ir.Block, list[ir.Value]]], moved: list[ir.Value],
               types: list[ir.Type]) -> list[ir.Value]:
        """End _emit's last path (`moved` its values) at `join`; the loaded values over all paths."""
        b = self.b
        paths.append((b.block, moved))
        b.branch(join)
        b.position_at_end(join)
        out = []
        for k, t in enumerate(types):
            phi = b.phi(t)
            for block, values in paths:
                phi.add_incoming(values[k], block)
            out.append(phi)
        return out

    def _reads_tid_yz(self) -> bool:
        """Some function of the module reads %tid.y or %tid.z. Only then can the rows of a 2-D
        block be what a warp's addresses follow (`halves`); kernels indexed by %tid.x alone (the
        1-D ones, most) go without that path, 10-30 % of their compile time, and a 2-D launch of
        one still runs correctly through the per-lane path."""
        found = getattr(self.mod, "reads_tid_yz", None)
        if found is None:
            found = self.mod.reads_tid_yz = any(
                {"%tid.y", "%tid.z"} & ast.mentioned_names(f.body) for f in self.mod.ast.functions() if f.body)
        return found

    def _base(self, acc: Access, first: ir.Value) -> ir.Value:
        """Where lane 0's element would be, from the first active lane's address (contiguous lanes)."""
        b = self.b
        start = self._lane_host(acc, first)
        return b.inttoptr(b.sub(start, b.mul(b.zext(first, I64), ir.Constant(I64, acc.nbytes))), PTR)

    def _half_base(self, acc: Access, half: int, pointer: bool = True) -> ir.Value:
        start = self._lane_host(acc, ir.Constant(I32, half))
        return self.b.inttoptr(start, PTR) if pointer else start

    def _scalar_loads(self, address: ir.Value, elt: ir.IntType, n: int) -> list[ir.Value]:
        b = self.b
        return [b.load(b.inttoptr(b.add(address, ir.Constant(I64, k * elt.width // 8)), PTR), typ=elt) for k in range(n)]

    def _scalar_stores(self, address: ir.Value, values: list[ir.Value]) -> None:
        b = self.b
        for k, v in enumerate(values):
            b.store(v, b.inttoptr(b.add(address, ir.Constant(I64, k * v.type.width // 8)), PTR))

    def _widen_mask(self, mask: ir.Value, n: int) -> ir.Value:
        if n == 1:
            return mask
        return self.b.shuffle_vector(mask, ir.Constant(V.MASK, None), ir.Constant(
            ir.VectorType(I32, WARP * n), [ir.Constant(I32, i) for i in range(WARP) for _ in range(n)]))

    # ------------------------------------------------------------------ instructions
    def _mem_type(self, inst: ast.Instruction) -> str:
        types = inst.types
        if not types:
            raise unsupported(inst, "no type")
        return types[-1]

    def leave_if_stopped(self, inst: ast.Instruction, mask: ir.Value, spin: bool = False) -> None:
        """Strong loads and atomics (`zluda.atomic_checks`) on memory other blocks see are where a
        block can wait for another (spin-waits, grid.sync): once some block of the launch has
        faulted it will never arrive, so leave with ABORTED instead of waiting forever. `spin` (a strong load): in a
        cooperative launch, where every block is an OS thread, yield the core to the blocks
        being waited for (32 blocks on 2 cores would otherwise spin whole time slices away)."""
        if space_of(inst) in ("shared", "local", "param", "const"):
            return
        b = self.b
        stop = b.load_atomic(b.inttoptr(self.ctx_i64(Ctx.STOP), PTR), "monotonic", 4, typ=I32)
        with b.if_then(b.icmp_unsigned("!=", stop, ir.Constant(I32, 0)), likely=False):
            self.fault(ABORTED, mask)
        if spin:
            with b.if_then(b.icmp_unsigned("!=", self.ctx_i64(Ctx.GRID_WORKSPACE), ir.Constant(I64, 0))):
                b.call(self.mod.libc("sched_yield", I32, []), [])

    def op_ld(self, inst: ast.Instruction, mask: ir.Value) -> None:
        if any(inst.has(m) for m in STRONG_LOADS):
            self.leave_if_stopped(inst, mask, spin=True)
        t = self._mem_type(inst)
        dst, addr = inst.operands[0], inst.operands[1]
        bits = ptx_bits(t)
        n = vector_count(inst)
        values = self.load(self.access(inst, addr, space_of(inst), bits // 8 * n), ir.IntType(bits), n, mask)
        dests = dst.elems if isinstance(dst, ast.Vec) else [dst]
        for d, v in zip(dests, values):
            self.write(d, v, t, mask)

    op_ldu = op_ld

    def op_st(self, inst: ast.Instruction, mask: ir.Value) -> None:
        if inst.has("bulk"):
            self._st_bulk(inst, mask)
            return
        t = self._mem_type(inst)
        addr, src = inst.operands[0], inst.operands[1]
        srcs = src.elems if isinstance(src, ast.Vec) else [src]
        self.store(self.access(inst, addr, space_of(inst), ptx_bits(t) // 8 * len(srcs)),
                   [self.read(s, t) for s in srcs], mask)

    def _st_bulk(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """st.bulk [a], size, 0: each active lane zeroes its own `size` bytes at a."""
        addr, size = inst.operands[0], inst.operands[1]
        if not isinstance(size, ast.Imm):
            raise unsupported(inst, "non-constant size")
        b = self.b
        n = int(size.value)
        host = self.address(addr, space_of(inst), n, mask, align=8)
        if not isinstance(host.type, ir.VectorType):
            host = V.splat(b, host)
        for idx in V.each_active_lane(b, mask):
            p = b.inttoptr(b.extract_element(host, idx), PTR)
            V.intrinsic(b, "llvm.memset.p0.i64", ir.VoidType(),
                        [p, ir.Constant(V.I8, 0), ir.Constant(I64, n), ir.Constant(I1, 0)])

    def op_cvta(self, inst: ast.Instruction, mask: ir.Value) -> None:
        t = inst.types[-1]
        dst, src = inst.operands
        space = space_of(inst)  # shared::cta/::cluster and param::entry included
        value = V.resize(self.b, self.read(src, t), 64, False)
        base = self.space_base(space)
        if base is not None:
            value = self.b.sub(value, base) if inst.has("to") else self.b.add(value, base)
        self.write(dst, value, t, mask)

    def op_isspacep(self, inst: ast.Instruction, mask: ir.Value) -> None:
        b = self.b
        p, a = inst.operands
        space = space_of(inst)
        addr = self.read(a, "u64")
        if space in ("shared", "local"):
            lo = self.ctx_i64(Ctx.SHARED if space == "shared" else Ctx.STACK)
            threads = b.mul(b.mul(self.ctx_i64(Ctx.BLOCK_X), self.ctx_i64(Ctx.BLOCK_Y)), self.ctx_i64(Ctx.BLOCK_Z))
            size = self.ctx_i64(Ctx.SHARED_WINDOW) if space == "shared" else b.mul(threads, self.ctx_i64(Ctx.STACK_SIZE))
            off = b.sub(addr, V.splat(b, lo))
            result = b.icmp_unsigned("<", off, V.splat(b, size))
        elif space in ("global", "generic"):  # the const and param windows lie inside the global one
            result = b.not_(b.or_(self._in_window(addr, Ctx.SHARED), self._in_window(addr, Ctx.STACK)))
        elif space == "param":  # a kernel parameter: inside the launch's parameter buffer
            off = b.sub(addr, V.splat(b, self.ctx_i64(Ctx.PARAMS)))
            result = b.icmp_unsigned("<", off, V.splat(b, self.ctx_i64(Ctx.PARAM_SIZE)))
        else:  # const: inside one of the module's (or this function's) .const variables
            result = V.splat_const(I1, 0)
            for sym in {id(s): s for s in [*self.mod.symbols.values(), *self.symbols.values()]
                        if s.kind == "const"}.values():
                off = b.sub(addr, V.splat(b, b.ptrtoint(sym.ptr, I64)))
                result = b.or_(result, b.icmp_unsigned("<", off, V.splat_const(I64, sym.size)))
        self.write(p, result, "pred", mask)

    def _in_window(self, addr: ir.Value, which: int) -> ir.Value:
        b = self.b
        lo = self.ctx_i64(which)
        if which == Ctx.SHARED:
            size = self.ctx_i64(Ctx.SHARED_WINDOW)
        else:
            threads = b.mul(b.mul(self.ctx_i64(Ctx.BLOCK_X), self.ctx_i64(Ctx.BLOCK_Y)), self.ctx_i64(Ctx.BLOCK_Z))
            size = b.mul(threads, self.ctx_i64(Ctx.STACK_SIZE))
        return b.icmp_unsigned("<", b.sub(addr, V.splat(b, lo)), V.splat(b, size))

    def op_cp(self, inst: ast.Instruction, mask: ir.Value) -> None:
        """cp.async: the copy completes at once (see cp_async_size)."""
        if inst.has("bulk") or inst.has("reduce"):
            self.cp_async_bulk(inst, mask)
            return
        if inst.has("mbarrier"):
            self.cp_async_mbarrier_arrive(inst, mask)
            return
        n = cp_async_size(inst)
        if n is None:
            return
        dst, src = inst.operands[:2]
        src_size = cp_async_src_size(inst)
        # with a src-size operand the source may legally be partly (or wholly, size 0) invalid
        loaded = self.load(self.access(inst, src, "global", n, checked=src_size is None), I32, n // 4, mask)
        if src_size is not None:  # bytes past src-size are zero-filled
            limit = cp_async_limit(self.lanes, src_size, self.reg_bits(src_size) == 1, n, self.read)
            loaded = [cp_async_fill(self.lanes, v, k, limit) for k, v in enumerate(loaded)]
        self.store(self.access(inst, dst, "shared", n), loaded, mask)


def _alignment_checked(align: int) -> bool:
    """Alignments the accesses check: powers of two above 1 (ld/st/atom sizes, vectors whole)."""
    return align > 1 and align & (align - 1) == 0


HOST_BOUNDS = 3  # zluda_host kind: is [a, b) registered now (memory registered during the launch)?


def _bounds_function(mod) -> ir.Function:
    """`i1 zluda.bounds(ctx, <32 x i64> addr, <32 x i1> mask, i64 size, ptr cache)`: every active lane's
    [addr, addr+size) lies in the shared arena, the stacks, the parameter blob or a registered
    range (binary search of the launch's table, then the host's live table). Updates `cache` to
    the range last found; on failure stores the first bad lane's address in FAULT_ARG and its
    bit in FAULT_LANES."""
    fn = mod.ir.globals.get("zluda.bounds")
    if fn is not None:
        return fn
    fn = _helper(mod, "zluda.bounds", I1, [PTR, V.vec(I64), V.MASK, I64, PTR], cold=True)
    if not _defined_here(mod, fn.name):
        return fn
    ctx, addrs, mask, size, cache = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = functools.partial(_ctx_slot, b, ctx)
    cache_hi = b.gep(cache, [ir.Constant(I64, 1)], source_etype=I64)
    threads = b.mul(b.mul(slot(Ctx.BLOCK_X), slot(Ctx.BLOCK_Y)), slot(Ctx.BLOCK_Z))
    windows = [(slot(Ctx.SHARED), slot(Ctx.SHARED_WINDOW)), (slot(Ctx.STACK), b.mul(threads, slot(Ctx.STACK_SIZE))),
               (slot(Ctx.PARAMS), slot(Ctx.PARAM_SIZE))]
    table = b.inttoptr(slot(Ctx.RANGES), PTR)
    count = slot(Ctx.NRANGES)
    fail = fn.append_basic_block("fail")
    for lane in V.each_active_lane(b, mask):
        p = b.extract_element(addrs, lane)
        e = b.add(p, size)
        next_lane = fn.append_basic_block("next")
        found = fn.append_basic_block("found")

        def record() -> None:  # lanes go lowest first: this is the first faulting lane
            b.store(p, b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_ARG)], source_etype=V.I8))
            b.store(b.shl(ir.Constant(I64, 1), b.zext(lane, I64)),
                    b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_LANES)], source_etype=V.I8))
            b.branch(fail)

        with b.if_then(b.icmp_unsigned("<", e, p), likely=False):  # wraps around: never valid
            record()
        hit = b.and_(b.icmp_unsigned(">=", p, b.load(cache, typ=I64)), b.icmp_unsigned("<=", e, b.load(cache_hi, typ=I64)))
        search = fn.append_basic_block("search")
        b.cbranch(hit, next_lane, search)
        b.position_at_end(search)
        start, end = ir.Constant(I64, 0), ir.Constant(I64, 0)
        for base, length in windows:  # the launch's own windows, then the table
            inside = b.and_(b.icmp_unsigned(">=", p, base), b.icmp_unsigned("<=", e, b.add(base, length)))
            start, end = b.select(inside, base, start), b.select(inside, b.add(base, length), end)
        in_window = b.icmp_unsigned("!=", end, ir.Constant(I64, 0))
        bsearch = fn.append_basic_block("bsearch")
        window_hit = b.block
        b.cbranch(in_window, found, bsearch)
        b.position_at_end(bsearch)
        lo_i, hi_i = b.phi(I64), b.phi(I64)
        lo_i.add_incoming(ir.Constant(I64, 0), window_hit)
        hi_i.add_incoming(count, window_hit)
        step = fn.append_basic_block("bsearch.step")
        after = fn.append_basic_block("bsearch.done")
        b.cbranch(b.icmp_unsigned("<", lo_i, hi_i), step, after)
        b.position_at_end(step)
        mid = b.lshr(b.add(lo_i, hi_i), ir.Constant(I64, 1))
        below = b.icmp_unsigned("<=", b.load(b.gep(table, [b.shl(mid, ir.Constant(I64, 1))], source_etype=I64), typ=I64), p)
        lo_i.add_incoming(b.select(below, b.add(mid, ir.Constant(I64, 1)), lo_i), step)
        hi_i.add_incoming(b.select(below, hi_i, mid), step)
        b.branch(bsearch)
        b.position_at_end(after)
        idx = b.shl(b.sub(lo_i, ir.Constant(I64, 1)), ir.Constant(I64, 1))
        have = b.icmp_unsigned("!=", lo_i, ir.Constant(I64, 0))
        safe = b.select(have, idx, ir.Constant(I64, 0))
        t_start = b.load(b.gep(table, [safe], source_etype=I64), typ=I64)
        t_end = b.load(b.gep(table, [b.add(safe, ir.Constant(I64, 1))], source_etype=I64), typ=I64)
        in_table = b.and_(have, b.icmp_unsigned("<=", e, t_end))
        ask_host = fn.append_basic_block("host")
        table_hit = fn.append_basic_block("table")
        b.cbranch(in_table, table_hit, ask_host)
        b.position_at_end(table_hit)
        b.branch(found)
        b.position_at_end(ask_host)
        zero = ir.Constant(I64, 0)
        live = b.call(mod.host_fn(), [ir.Constant(I32, HOST_BOUNDS), ctx, p, e, zero, zero, zero])
        with b.if_then(b.icmp_unsigned("==", live, zero), likely=False):
            record()
        host_hit = b.block
        b.branch(found)
        b.position_at_end(found)
        f_start, f_end = b.phi(I64), b.phi(I64)
        f_start.add_incoming(start, window_hit)
        f_end.add_incoming(end, window_hit)
        f_start.add_incoming(t_start, table_hit)
        f_end.add_incoming(t_end, table_hit)
        f_start.add_incoming(p, host_hit)
        f_end.add_incoming(e, host_hit)
        b.store(f_start, cache)
        b.store(f_end, cache_hi)
        b.branch(next_lane)
        b.position_at_end(next_lane)
    b.ret(ir.Constant(I1, 1))
    b.position_at_end(fail)
    b.ret(ir.Constant(I1, 0))
    return fn


def _ctx_slot(b: ir.IRBuilder, ctx: ir.Value, i: int) -> ir.Value:
    """A helper's load of launch-record slot `i` (i64)."""
    return b.load(b.gep(ctx, [ir.Constant(I64, 8 * i)], source_etype=V.I8), typ=I64)


@functools.lru_cache(maxsize=None)
def _lane_offsets(stride: int, period: int = WARP) -> ir.Constant:
    """<0, stride, 2*stride, ...> as i64, restarting every `period` lanes (one object per
    argument pair: llvmlite prints constants slowly)."""
    return V.lane_consts(I64, [i % period * stride for i in range(WARP)])


def _in_cached_range(b: ir.IRBuilder, lo: ir.Value, top: ir.Value, size: ir.Value, cache: ir.Value) -> ir.Value:
    """[lo, top+size) lies in the range a site hit last (`cache`: [lo, hi) u64) and does not wrap
    (with top less than 2**63 above lo, mod 2**64, it wraps exactly when top+size < lo: one test)."""
    hi = b.add(top, size)
    c_lo = b.load(cache, typ=I64)
    c_hi = b.load(b.gep(cache, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
    return b.and_(b.and_(b.icmp_unsigned(">=", lo, c_lo), b.icmp_unsigned("<=", hi, c_hi)),
                  b.icmp_unsigned(">=", hi, lo))


def _window_fault_function(mod) -> ir.Function:
    """`i32 zluda.window_fault(ctx, <32 x i64> offsets, <32 x i1> mask, i64 size, i64 align_bits,
    i64 window)`: what check_bounds does inline for a .shared/.local window: the first active lane
    whose offset has any of `align_bits` set gives 716 (misaligned), else the first whose
    [offset, offset+size) is not inside [0, window) gives 700; its bit goes to FAULT_LANES and its
    offset to FAULT_ARG. 0: no fault."""
    fn = mod.ir.globals.get("zluda.window_fault")
    if fn is not None:
        return fn
    fn = _helper(mod, "zluda.window_fault", I32, [PTR, V.vec(I64), V.MASK, I64, I64, I64], cold=True)
    if not _defined_here(mod, fn.name):
        return fn
    ctx, value, mask, size, align_bits, window = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    misaligned = b.icmp_unsigned("!=", b.and_(value, V.splat(b, align_bits)), V.splat_const(I64, 0))
    outside = _outside_window(b, value, window, size)
    for status, lanes in ((CUDA_ERROR_MISALIGNED_ADDRESS, misaligned), (CUDA_ERROR_ILLEGAL_ADDRESS, outside)):
        _return_first_lane(b, ctx, value, b.and_(mask, lanes), status)
    b.ret(ir.Constant(I32, 0))
    return fn


def _outside_window(b: ir.IRBuilder, value: ir.Value, window: ir.Value, size: ir.Value) -> ir.Value:
    """Per lane: [value, value+size) is not inside [0, window) (a window smaller than an access
    holds nothing)."""
    return b.or_(b.icmp_unsigned(">", value, V.splat(b, b.sub(window, size))),
                 V.splat(b, b.icmp_unsigned("<", window, size)))


def _return_first_lane(b: ir.IRBuilder, ctx: ir.Value, addrs: ir.Value, bad: ir.Value, status: int) -> None:
    """In a helper returning a status: if any lane of `bad` is set, record the first one (its bit
    in FAULT_LANES, its address in FAULT_ARG) and return `status`."""
    bits = V.mask_bits(b, bad)
    with b.if_then(b.icmp_unsigned("!=", bits, ir.Constant(I32, 0)), likely=False):
        first = V.intrinsic(b, "llvm.cttz.i32", I32, [bits, ir.Constant(I1, 1)])
        b.store(b.extract_element(addrs, first), b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_ARG)], source_etype=V.I8))
        b.store(b.shl(ir.Constant(I64, 1), b.zext(first, I64)),
                b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_LANES)], source_etype=V.I8))
        b.ret(ir.Constant(I32, status))


def _lanes_check_function(mod) -> ir.Function:
    """`i1 zluda.check_lanes(ctx, <32 x i64> addr, <32 x i1> mask, i64 size, ptr cache)`: the
    per-lane check of host addresses (out of line: the rare path of most accesses): the active
    lanes' [min, max+size) against the site's cached range, else `zluda.bounds`."""
    fn = mod.ir.globals.get("zluda.check_lanes")
    if fn is not None:
        return fn
    fn = _helper(mod, "zluda.check_lanes", I1, [PTR, V.vec(I64), V.MASK, I64, PTR])
    if not _defined_here(mod, fn.name):
        return fn
    ctx, addrs, mask, size, cache = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lo = V.reduce(b, "umin", b.select(mask, addrs, V.splat_const(I64, -1)))
    top = V.reduce(b, "umax", b.select(mask, addrs, V.splat_const(I64, 0)))
    with b.if_then(_in_cached_range(b, lo, top, size, cache), likely=True):
        b.ret(ir.Constant(I1, 1))
    b.ret(b.call(_bounds_function(mod), [ctx, addrs, mask, size, cache]))
    return fn


def _lanes_function(mod, kind: str, elt: ir.IntType, n: int) -> ir.Function:
    """`i32 zluda.<kind>.iW.xN(ctx, ptr addrs, i32 mask, i64 size, ptr cache, ptr data)`: with a
    `cache` (host addresses), check every active lane's address first: the first misaligned lane
    gives 716, else a lane out of bounds 700 (lane and address recorded in the launch record,
    nothing moved); with SHARED_WINDOW_CHECK set in `size`, the same for the lanes' offsets into
    the .shared window (address - arena base), as `zluda.window_fault` finds them; then gather N
    consecutive elements per lane into `data` (N vectors) or scatter them from it, in lane order
    (the highest lane's value stays where lanes collide). Returns the status (0: moved). Out of
    line, with its operands in memory: a 32-lane gather is much machine code and the rare path
    of most accesses. (LLVM 22's preserve_allcc, which would spare the caller its spills around
    the call, lost the upper quarters of vector registers here.)"""
    name = _lanes_name(kind, elt.width, n)
    fn = mod.ir.globals.get(name)
    if fn is not None:
        return fn
    fn = _helper(mod, name, I32, [PTR, PTR, I32, I64, PTR, PTR])
    if not _defined_here(mod, fn.name):
        return fn
    ctx, addrs_p, bits, size, cache, data = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    addrs, mask, vt = b.load(addrs_p, typ=V.vec(I64)), V.bits_mask(b, bits), V.vec(elt)
    check_helper_lanes(b, mod, ctx, addrs, mask, size, cache)
    slots = [b.gep(data, [ir.Constant(I64, k * WARP * elt.width // 8)], source_etype=V.I8) for k in range(n)]
    values = None if kind == "gather" else [b.load(p, typ=vt) for p in slots]
    if n == 1:  # active lanes at consecutive elements (a large kernel's tile loads): one masked move
        _contiguous_move(b, addrs, bits, mask, elt, values, slots[0])
    moved = _move_lanes(b, addrs, mask, elt, n, values)
    for v, p in zip(moved, slots):
        b.store(v, p)
    b.ret(ir.Constant(I32, 0))
    return fn


def check_helper_lanes(b: ir.IRBuilder, mod, ctx: ir.Value, addrs: ir.Value, mask: ir.Value, size: ir.Value,
                       cache: ir.Value) -> None:
    """A per-lane helper's checks before it touches memory (see _lanes_function): with a `cache`,
    the lanes' host addresses (716 for the first misaligned lane, else 700); with
    SHARED_WINDOW_CHECK in `size`, their .shared window offsets. A fault returns its status."""
    shared = b.icmp_unsigned("!=", b.and_(size, ir.Constant(I64, SHARED_WINDOW_CHECK)), ir.Constant(I64, 0))
    size = b.and_(size, ir.Constant(I64, SHARED_WINDOW_CHECK - 1))
    # PTX wants natural alignment: the access size when it is a power of two
    pow2 = b.icmp_unsigned("==", b.and_(size, b.sub(size, ir.Constant(I64, 1))), ir.Constant(I64, 0))
    low = b.select(pow2, b.sub(size, ir.Constant(I64, 1)), ir.Constant(I64, 0))
    with b.if_then(shared):
        offsets = b.sub(addrs, V.splat(b, _ctx_slot(b, ctx, Ctx.SHARED)))
        window = _ctx_slot(b, ctx, Ctx.SHARED_WINDOW)
        bad = b.or_(_outside_window(b, offsets, window, size),
                    b.icmp_unsigned("!=", b.and_(offsets, V.splat(b, low)), V.splat_const(I64, 0)))
        with b.if_then(V.any_lane(b, b.and_(mask, bad)), likely=False):
            b.ret(b.call(_window_fault_function(mod), [ctx, offsets, mask, size, low, window]))
    with b.if_then(b.icmp_unsigned("!=", cache, ir.Constant(PTR, None))):
        misaligned = b.icmp_unsigned("!=", b.and_(addrs, V.splat(b, low)), V.splat_const(I64, 0))
        _return_first_lane(b, ctx, addrs, b.and_(mask, misaligned), CUDA_ERROR_MISALIGNED_ADDRESS)
        ok = b.call(_lanes_check_function(mod), [ctx, addrs, mask, size, cache])
        with b.if_then(b.not_(ok), likely=False):
            b.ret(ir.Constant(I32, CUDA_ERROR_ILLEGAL_ADDRESS))


def _contiguous_move(b: ir.IRBuilder, addrs: ir.Value, bits: ir.Value, mask: ir.Value, elt: ir.IntType,
                     values: list[ir.Value] | None, slot: ir.Value) -> None:
    """In a per-lane helper (lanes checked): if every active lane's address is the first one's
    plus (lane - first) elements, move them with one masked vector load/store (into `slot`) and
    return 0; else fall through to the gather/scatter."""
    size = elt.width // 8
    first = V.intrinsic(b, "llvm.cttz.i32", I32, [bits, ir.Constant(I1, 0)])
    some = b.icmp_unsigned("!=", bits, ir.Constant(I32, 0))
    start = b.sub(b.extract_element(addrs, b.select(some, first, ir.Constant(I32, 0))),
                  b.mul(b.zext(first, I64), ir.Constant(I64, size)))
    on_line = b.icmp_unsigned("==", addrs, b.add(V.splat(b, start), _lane_offsets(size)))
    fits = V.reduce(b, "and", b.select(mask, on_line, V.ALL))
    with b.if_then(b.and_(some, fits), likely=True):
        base, align, vt = b.inttoptr(start, PTR), ir.Constant(I32, size), V.vec(elt)
        if values is None:
            whole = V.intrinsic(b, f"llvm.masked.load.v{WARP}i{elt.width}.p0", vt, [base, align, mask, ir.Constant(vt, None)])
            b.store(whole, slot)
        else:
            V.intrinsic(b, f"llvm.masked.store.v{WARP}i{elt.width}.p0", ir.VoidType(), [values[0], base, align, mask])
        b.ret(ir.Constant(I32, 0))


def _move_lanes(b: ir.IRBuilder, addrs: ir.Value, mask: ir.Value, elt: ir.IntType, n: int,
                values: list[ir.Value] | None) -> list[ir.Value]:
    """Gather n consecutive elements per active lane from `addrs` (values None; returns n
    vectors) or scatter `values` there; scatters store in lane order, so where lanes collide
    the highest one's value stays, as LLVM defines llvm.masked.scatter."""
    vt, size = V.vec(elt), elt.width // 8
    out = []
    for k in range(n):
        p = b.inttoptr(b.add(addrs, V.splat_const(I64, k * size)), ir.VectorType(PTR, WARP))
        align = ir.Constant(I32, size)
        if values is None:
            out.append(V.intrinsic(b, f"llvm.masked.gather.v{WARP}i{elt.width}.v{WARP}p0", vt,
                                   [p, align, mask, ir.Constant(vt, None)]))
        else:
            V.intrinsic(b, f"llvm.masked.scatter.v{WARP}i{elt.width}.v{WARP}p0", ir.VoidType(),
                        [values[k], p, align, mask])
    return out


# a flag in the per-lane helpers' size operand: test the lanes' .shared window offsets first (a
# flag, not a seventh argument: that one would go on the stack at every call, host ones included)
SHARED_WINDOW_CHECK = 1 << 32


# a flag beside it for `zluda.atomic_checks`: leave with ABORTED first if some block of the launch
# has faulted (an atomic on memory other blocks see may be a spin-wait that would never end)
STOP_CHECK = 1 << 33


def atomic_checks_function(mod) -> ir.Function:
    """`i32 zluda.atomic_checks(ctx, ptr addrs, i32 mask, i64 size, ptr cache)`: what the atomic
    helpers (cpu/atomics.py) test before their first lane, once for every kind: with STOP_CHECK
    in `size`, the launch's stop flag (ABORTED, the active lanes in FAULT_LANES), then the lanes'
    addresses as `check_helper_lanes` does. Returns the status (0: go on)."""
    fn = mod.ir.globals.get("zluda.atomic_checks")
    if fn is not None:
        return fn
    fn = _helper(mod, "zluda.atomic_checks", I32, [PTR, PTR, I32, I64, PTR])
    if not _defined_here(mod, fn.name):
        return fn
    ctx, addrs_p, bits, size, cache = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with b.if_then(b.icmp_unsigned("!=", b.and_(size, ir.Constant(I64, STOP_CHECK)), ir.Constant(I64, 0))):
        stop = b.load_atomic(b.inttoptr(_ctx_slot(b, ctx, Ctx.STOP), PTR), "monotonic", 4, typ=I32)
        with b.if_then(b.icmp_unsigned("!=", stop, ir.Constant(I32, 0)), likely=False):
            b.store(b.zext(bits, I64), b.gep(ctx, [ir.Constant(I64, 8 * Ctx.FAULT_LANES)], source_etype=V.I8))
            b.ret(ir.Constant(I32, ABORTED))
    check_helper_lanes(b, mod, ctx, b.load(addrs_p, typ=V.vec(I64)), V.bits_mask(b, bits), size, cache)
    b.ret(ir.Constant(I32, 0))
    return fn


def _lanes_name(kind: str, width: int, n: int) -> str:
    return f"zluda.{kind}.i{width}.x{n}"


# The helpers every kernel may call are compiled once, in a module of their own (`helpers_ir`),
# which every loaded part links to (runtime.py): defined in each kernel's module they were 11-23 %
# of a small kernel's compile time. Other lane-move shapes stay in the kernel's module.
_SHARED_LANES = [(kind, width, n) for kind in ("gather", "scatter") for width in (8, 16, 32, 64) for n in (1, 2, 4)]
SHARED_HELPERS = frozenset({"zluda.bounds", "zluda.window_fault", "zluda.check_lanes", "zluda.atomic_checks",
                            *(_lanes_name(*shape) for shape in _SHARED_LANES)})


def define_shared_helpers(mod) -> None:
    """Every SHARED_HELPERS function, defined (exported) in `mod`, a lowering with `helpers_here`."""
    _bounds_function(mod)
    _window_fault_function(mod)
    _lanes_check_function(mod)
    atomic_checks_function(mod)
    for kind, width, n in _SHARED_LANES:
        _lanes_function(mod, kind, ir.IntType(width), n)


def _helper(mod, name: str, ret: ir.Type, args: list[ir.Type], cold: bool = False) -> ir.Function:
    """A helper function of `mod`: a declaration where the shared helpers' module defines it
    (the caller then leaves its body out), else to be defined here."""
    fn = ir.Function(mod.ir, ir.FunctionType(ret, args), name)
    fn.attributes.add("nounwind")
    if cold:
        fn.attributes.add("cold")
    if _defined_here(mod, name):
        fn.attributes.add("noinline")
        if not mod.helpers_here:
            fn.linkage = "internal"
    return fn


def _defined_here(mod, name: str) -> bool:
    return mod.helpers_here or name not in SHARED_HELPERS


def _concat(b: ir.IRBuilder, values: list[ir.Value]) -> ir.Value:
    """Concatenate equal-length vectors into one."""
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values), 2):
            a, c = values[i], values[i + 1]
            n = a.type.count
            nxt.append(b.shuffle_vector(a, c, int_vector(ir.VectorType(I32, 2 * n), range(2 * n))))
        values = nxt
    return values[0]
