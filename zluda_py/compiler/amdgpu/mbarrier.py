"""mbarrier objects, cp.async.mbarrier.arrive and the bulk copies (cp.async.bulk) on AMDGPU.

The object and its state machine are `compiler/mbarrier.py`; it is a 64-bit word in LDS (or
wherever a generic address points). Every thread applies its own operation:

* arrive-on, expect-tx and complete-tx are a compare-and-swap loop on the word (ds_cmpst_rtn_b64,
  or the flat form for a generic address): the new word is a function of the old one (a phase
  completes when the last arrival or transaction comes in), which no single LDS atomic computes.
  Arrivals release and waits acquire at the instruction's scope (cta = workgroup, cluster =
  agent; a cluster is one CTA here), the .relaxed forms are monotonic.
* test_wait reads the word once; try_wait polls it a bounded number of times (PTX lets try_wait
  give up after a system-dependent time). A poll that finds the phase incomplete sleeps
  (s_sleep), so the waves that have yet to arrive get the SIMD; programs call both in a loop.
* cp.async.bulk is a copy loop (16 bytes a step) by each issuing thread, after which the copy
  is complete: the thread then performs the complete-tx of its mbarrier operand. The bulk
  groups' commit/wait therefore have nothing left to wait for, and cp.async.mbarrier.arrive
  (the thread's cp.async copies completed when they executed, op_cp) arrives at once.

Lanes of one wave share a program counter: a thread that waits for an arrival that another
lane of its own wave makes on a path the hardware runs after the wait never sees it (NVIDIA's
independent thread scheduling has no equivalent here; on wave64 a wave holds two CUDA warps).
LLVM's structurizer runs the two sides of a divergent branch one after the other, the branch's
second successor first, and its canonicalisation decides which that is. So where one side of a
branch may wait on an mbarrier before its join and the other does not, or arrives first
(`first_sides`), the lowering emits the branch on a condition LLVM cannot see through (an empty
inline asm) with that side second: it runs first, and its arrivals are in before the other
side's lanes wait (`tests/compiler/test_mbarrier.py`: an arrive_drop beside waiting lanes of the
same wave, a lane waiting for an arrival made for it by another).
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir
from llvmlite.ir.instructions import StoreAtomicInstr

from zluda_py.compiler import cfg
from zluda_py.compiler import mbarrier as M
from zluda_py.compiler.amdgpu.ir_extras import ScopedCmpXchg, insert
from zluda_py.compiler.memops import cp_async_form
from zluda_py.ptx import ast

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
V4I32 = ir.VectorType(I32, 4)
POLLS = 4  # reads of the word by one try_wait before it answers false (LLVM unrolls the loop)
SLEEP = 1  # s_sleep's argument: about 64 clocks between polls


class MbarrierMixin:
    def _mbar_scope(self, inst: ast.Instruction) -> str:
        return "agent" if inst.has("cluster") else "workgroup"

    def _mbar_pointer(self, addr: ast.Addr, inst: ast.Instruction, space: str | None = None) -> ir.Value:
        return self.pointer(addr, space or M.space(inst))

    def _mbar_update(self, inst: ast.Instruction, ptr: ir.Value, new: Callable[[ir.Value], ir.Value],
                     ordering: str = "acq_rel") -> ir.Value:
        """Replace the word at `ptr` by `new(old)` atomically; the old word."""
        b = self.b
        first = b.load_atomic(ptr, "monotonic", 8, typ=I64)
        head, loop, done = b.block, self.llfn.append_basic_block("mbar.cas"), self.llfn.append_basic_block("mbar.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(I64)
        old.add_incoming(first, head)
        pair = insert(b, ScopedCmpXchg(b.block, ptr, old, new(old), ordering, "monotonic", self._mbar_scope(inst)))
        seen = b.extract_value(pair, 0)
        old.add_incoming(seen, loop)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return old

    def _u64(self, op: ast.Operand) -> ir.Value:
        return self.b.zext(self.read(op, "u32"), I64)

    def _sleep(self) -> None:
        self.call_intrinsic("llvm.amdgcn.s.sleep", ir.VoidType(), [ir.Constant(I32, SLEEP)])

    def branch_first(self, cond: ir.Value, taken: ir.Block, fall: ir.Block, first: ir.Block) -> None:
        """`br cond, taken, fall` such that the lanes going to `first` run first: the structurizer
        runs a branch's second successor first, so `first` is made the second one, on a condition
        hidden from LLVM's canonicalisation (which would otherwise choose the order)."""
        b = self.b
        to_first = cond if first is taken else b.not_(cond)
        hidden = b.asm(ir.FunctionType(I32, [I32]), "", "=v,0", [b.zext(to_first, I32)], False)
        other = fall if first is taken else taken
        b.cbranch(b.icmp_unsigned("==", hidden, ir.Constant(I32, 0)), other, first)

    # ------------------------------------------------------------------ mbarrier.*
    def op_mbarrier(self, inst: ast.Instruction) -> None:
        M.mbarrier_form(inst)
        b = self.b
        what = M.operation(inst)
        ops = inst.operands
        if what == "pending_count":
            self.write(ops[0], M.pending_count(b, self.read(ops[1], "b64")), "u32")
            return
        if what == "inval":  # the memory is no longer an object and may be used for anything
            return
        ptr = self._mbar_pointer(ops[1] if what in ("arrive", "arrive_drop", *M.WAITS) else ops[0], inst)
        if what == "init":
            insert(b, StoreAtomicInstr(b.block, M.init(b, self._u64(ops[1])), ptr, "monotonic", 8))
            return
        ordering = "monotonic" if inst.has("relaxed") else "acq_rel"
        if what in ("expect_tx", "complete_tx"):
            n = self._u64(ops[1])
            self._mbar_update(inst, ptr, lambda old: M.tx_update(b, old, what, n), "monotonic")
            return
        if what in ("arrive", "arrive_drop"):
            count, tx = (None if op is None else self._u64(op) for op in M.arrive_operands(inst))
            # the state: the object before the arrive-on (an expect-tx changes neither the phase
            # nor the pending count, the two things a state is read for)
            self.write(ops[0], self._mbar_update(inst, ptr, lambda old: M.arrive(b, inst, old, count, tx), ordering),
                       "b64")
            return
        arg = self._u64(ops[2]) if inst.has("parity") else self.read(ops[2], "b64")
        self.write(ops[0], self._mbar_wait(inst, ptr, arg, POLLS if what == "try_wait" else 1), "pred")

    def _mbar_wait(self, inst: ast.Instruction, ptr: ir.Value, arg: ir.Value, polls: int) -> ir.Value:
        """Up to `polls` reads of the word, sleeping after each that finds the phase incomplete:
        whether it completed (with acquire ordering, unless .relaxed)."""
        b = self.b
        head = b.block
        poll, slept, out = (self.llfn.append_basic_block(f"mbar.{n}") for n in ("poll", "sleep", "waited"))
        b.branch(poll)
        b.position_at_end(poll)
        i = b.phi(I32)
        i.add_incoming(ir.Constant(I32, 0), head)
        done = M.completed(b, inst, b.load_atomic(ptr, "monotonic", 8, typ=I64), arg)
        b.cbranch(done, out, slept)
        b.position_at_end(slept)
        self._sleep()
        nxt = b.add(i, ir.Constant(I32, 1))
        i.add_incoming(nxt, slept)
        b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, polls)), poll, out)
        b.position_at_end(out)
        result = b.phi(ir.IntType(1))
        result.add_incoming(ir.Constant(ir.IntType(1), 1), poll)
        result.add_incoming(ir.Constant(ir.IntType(1), 0), slept)
        if not inst.has("relaxed"):
            b.fence("acquire", self._mbar_scope(inst))
        return result

    # ------------------------------------------------------------------ cp.async.mbarrier.arrive, cp.async.bulk
    def cp_async_mbarrier_arrive(self, inst: ast.Instruction) -> None:
        """The arrive-on that follows completion of the thread's earlier cp.async copies, which
        completed when they executed (op_cp): it happens now (M.cp_async_arrive)."""
        ptr = self._mbar_pointer(inst.operands[0], inst)
        self._mbar_update(inst, ptr, lambda old: M.cp_async_arrive(self.b, inst, old))

    def cp_async_bulk(self, inst: ast.Instruction) -> None:
        """The thread copies its `size` bytes now, then performs complete-tx(size) on its mbarrier
        operand if it has one (the bytes were expected by an expect-tx). PTX requires 16-byte
        aligned addresses and a size that is a multiple of 16."""
        cp_async_form(inst)
        mods = inst.mods
        if "commit_group" in mods or "wait_group" in mods or "prefetch" in mods:
            return  # every bulk copy has completed (reads and writes) when it executed
        b = self.b
        dst_space, src_space = M.bulk_spaces(inst)
        dst, src, size = inst.operands[:3]
        dp, sp = self.pointer(dst, dst_space), self.pointer(src, src_space)
        n = self._u64(size)
        head = b.block
        body, done = self.llfn.append_basic_block("bulk.copy"), self.llfn.append_basic_block("bulk.done")
        b.cbranch(b.icmp_unsigned("!=", n, ir.Constant(I64, 0)), body, done)
        b.position_at_end(body)
        off = b.phi(I64)
        off.add_incoming(ir.Constant(I64, 0), head)
        v = b.load(b.gep(sp, [off], source_etype=I8), typ=V4I32, align=16)
        b.store(v, b.gep(dp, [off], source_etype=I8), align=16)
        nxt = b.add(off, ir.Constant(I64, 16))
        off.add_incoming(nxt, body)
        b.cbranch(b.icmp_unsigned("<", nxt, n), body, done)
        b.position_at_end(done)
        if inst.has("mbarrier::complete_tx::bytes"):
            ptr = self._mbar_pointer(inst.operands[3], inst, "shared")
            self._mbar_update(inst, ptr, lambda old: M.tx_update(b, old, "complete_tx", n))


# ---------------------------------------------------------------------------- which side of a branch runs first
NO_WAIT, ARRIVES_FIRST, MAY_WAIT_FIRST = 0, 1, 2


def _arrives(inst: ast.Instruction) -> bool:
    if inst.opcode == "mbarrier":
        return M.operation(inst) in ("arrive", "arrive_drop", "complete_tx")
    return inst.opcode == "cp" and (inst.has("mbarrier") or inst.has("mbarrier::complete_tx::bytes"))


def _post_dominators(succs: list[list[int]]) -> list[set[int]]:
    """Each block's post-dominators (blocks without successors lead to a common exit)."""
    n = len(succs)
    pdom = [set(range(n)) for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            new = set.intersection(*(pdom[s] for s in succs[i])) if succs[i] else set()
            new.add(i)
            if new != pdom[i]:
                pdom[i], changed = new, True
    return pdom


def _side_rank(body: cfg.FunctionBody, start: int, stop: set[int]) -> int:
    """What the lanes entering block `start` do before reaching a block of `stop` (the branch and
    its join): nothing with an mbarrier wait, arrive before every wait, or maybe wait first."""
    rank = NO_WAIT
    seen: set[tuple[int, bool]] = set()
    work = [(start, False)]
    while work:
        block, arrived = work.pop()
        if block in stop or (block, arrived) in seen:
            continue
        seen.add((block, arrived))
        for inst in body.blocks[block].insts:
            if M.is_wait(inst):
                if not arrived:
                    return MAY_WAIT_FIRST
                rank = ARRIVES_FIRST
            arrived = arrived or _arrives(inst)
        work += [(s, arrived) for s in body.blocks[block].succs]
    return rank


def first_sides(body: cfg.FunctionBody) -> dict[int, int]:
    """block -> the successor whose lanes should run first, for the two-way branches of a
    function with mbarrier waits whose sides differ (`_side_rank`: the lower rank first)."""
    if not any(M.is_wait(i) for blk in body.blocks for i in blk.insts):
        return {}
    succs = [blk.succs for blk in body.blocks]
    pdom = _post_dominators(succs)
    out = {}
    for blk in body.blocks:
        if len(set(blk.succs)) != 2:
            continue
        a, b = blk.succs
        join = pdom[a] & pdom[b]
        # the nearest common post-dominator: the one every other common post-dominator post-dominates
        near = next((j for j in join if join <= pdom[j]), None)
        stop = {blk.index} | ({near} if near is not None else set())
        ra, rb = _side_rank(body, a, stop), _side_rank(body, b, stop)
        if ra != rb:
            out[blk.index] = a if ra < rb else b
    return out
