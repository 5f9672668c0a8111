"""The mbarrier object (PTX ISA "Parallel synchronization: mbarrier"): its 64-bit encoding
and every operation on it, defined once for the targets that model it (the CPU target:
cpu/mbarrier.py; AMDGPU: amdgpu/mbarrier.py).

PTX makes the object opaque; what it holds is fixed by the manual:
* the phase (only its parity is observable: test_wait/try_wait .parity),
* the pending arrival count of the current phase,
* the expected arrival count, which the pending count is reset to when a phase completes
  (set by mbarrier.init, lowered for later phases by arrive_drop),
* the tx-count (expect-tx adds, complete-tx subtracts; range -(2^20 - 1) .. 2^20 - 1).

A phase completes when its pending arrival count and its tx-count are both zero; the object
then moves to the next phase with pending = expected and tx-count 0. Our encoding (any is
allowed, programs may not read it):

    bits  0..20  pending arrival count
    bits 21..41  expected arrival count
    bits 42..62  tx-count, 21-bit two's complement
    bit  63      phase parity

The state that mbarrier.arrive/arrive_drop return is the object as it was before the
arrive-on operation (after the expect-tx of the .expect_tx forms): test_wait compares its
phase bit with the object's (the phase it names has completed once they differ), and
mbarrier.pending_count reads its pending field.

Counts beyond the manual's limits (2^20 - 1) and arrivals past zero are undefined in PTX; here
they wrap within their fields. `.noComplete` promises that the arrive does not complete the
phase (otherwise undefined): here such an arrive leaves the phase incomplete with pending 0,
so nothing silently moves on. The operations are scalar: a target applies them per active
lane, in lane order.
"""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.errors import unsupported
from zluda_py.ptx import ast

I1, I64 = ir.IntType(1), ir.IntType(64)
FIELD_BITS = 21
FIELD_MASK = (1 << FIELD_BITS) - 1
PENDING, EXPECTED, TX, PHASE = 0, 21, 42, 63
MAX_COUNT = (1 << 20) - 1  # the manual's limit on counts and tx-counts

# which operation each mbarrier instruction is (the first modifier after normalisation)
OPERATIONS = ("init", "inval", "expect_tx", "complete_tx", "arrive", "arrive_drop", "test_wait", "try_wait",
              "pending_count")
WAITS = ("test_wait", "try_wait")


def operation(inst: ast.Instruction) -> str:
    """The mbarrier operation of `inst` (opcode "mbarrier" after cfg.normalize, or the grammar's
    dotted "mbarrier.<op>")."""
    if inst.opcode.startswith("mbarrier."):
        return inst.opcode.split(".", 1)[1]
    return next((m for m in inst.mods if m in OPERATIONS), "")


def is_wait(inst: ast.Instruction) -> bool:
    """test_wait/try_wait: the instructions programs spin on (a target must let other threads
    run while a thread waits)."""
    return inst.opcode.startswith("mbarrier") and operation(inst) in WAITS


def space(inst: ast.Instruction) -> str:
    """The state space of the object's address: `.shared`, `.shared::cta` and `.shared::cluster`
    name a shared address (a cluster is one CTA on our targets, so a shared::cluster address
    is this CTA's own shared address), no space a generic one."""
    return "shared" if any(m == "shared" or m.startswith("shared::") for m in inst.mods) else "generic"


def mbarrier_form(inst: ast.Instruction) -> None:
    """Refuse forms we do not translate (none so far beyond what the grammar accepts)."""
    if operation(inst) not in OPERATIONS:
        raise unsupported(inst)


def bulk_form(inst: ast.Instruction) -> None:
    """The cp.async.bulk forms we translate: global -> shared (complete-tx on an mbarrier),
    shared -> global (bulk group), shared::cta -> shared::cluster (complete-tx), plus the bulk
    group's commit/wait and the L2 prefetch. Refused by name: multicast (needs a cluster of
    several CTAs), byte masks, the tensor and reduction forms."""
    mods = inst.mods
    if "tensor" in mods or inst.opcode.startswith("cp.reduce") or "reduce" in mods:
        raise unsupported(inst, "tensor and reduction bulk copies are not supported")
    if "commit_group" in mods or "wait_group" in mods or "prefetch" in mods:
        return
    if "multicast::cluster" in mods:
        raise unsupported(inst, "multicast needs a cluster of several CTAs")
    if "cp_mask" in mods:
        raise unsupported(inst, "byte-masked bulk copies are not supported")
    dst, src = bulk_spaces(inst)
    if (dst, src) not in (("shared", "global"), ("global", "shared"), ("shared", "shared")):
        raise unsupported(inst, f"bulk copy {dst} <- {src}")


def bulk_spaces(inst: ast.Instruction) -> tuple[str, str]:
    spaces = [m.split("::")[0] for m in inst.mods if m in ("global", "shared::cta", "shared::cluster")]
    return (spaces + ["?", "?"])[0], (spaces + ["?", "?"])[1]


# --------------------------------------------------------------------------- the state machine (IR, scalar i64)


def _k(like: ir.Value, value: int) -> ir.Constant:
    """The constant `value` of `like`'s type: i64, or a vector of them (lanes at once)."""
    t = like.type
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def _field(b: ir.IRBuilder, word: ir.Value, shift: int) -> ir.Value:
    return b.and_(b.lshr(word, _k(word, shift)), _k(word, FIELD_MASK))


def _with(b: ir.IRBuilder, pending: ir.Value, expected: ir.Value, tx: ir.Value, phase: ir.Value) -> ir.Value:
    word = pending  # for the constants' type
    m = _k(word, FIELD_MASK)
    word = b.and_(pending, m)
    word = b.or_(word, b.shl(b.and_(expected, m), _k(word, EXPECTED)))
    word = b.or_(word, b.shl(b.and_(tx, m), _k(word, TX)))
    return b.or_(word, b.shl(b.and_(phase, _k(word, 1)), _k(word, PHASE)))


def init(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    """mbarrier.init: phase 0, pending = expected = count, tx-count 0."""
    return _with(b, count, count, _k(count, 0), _k(count, 0))


def update(b: ir.IRBuilder, word: ir.Value, arrivals: ir.Value, drop: ir.Value, tx: ir.Value,
           may_complete: bool = True) -> ir.Value:
    """The object after: tx-count += tx (expect-tx; complete-tx passes -bytes), expected count
    -= drop (arrive_drop), pending count -= arrivals (arrive-on); then, if pending and tx-count
    are both 0 (and `may_complete`), the phase completes."""
    pending = b.and_(b.sub(_field(b, word, PENDING), arrivals), _k(word, FIELD_MASK))
    expected = b.and_(b.sub(_field(b, word, EXPECTED), drop), _k(word, FIELD_MASK))
    txc = b.and_(b.add(_field(b, word, TX), tx), _k(word, FIELD_MASK))
    phase = b.lshr(word, _k(word, PHASE))
    stay = _with(b, pending, expected, txc, phase)
    if not may_complete:
        return stay
    zero = _k(word, 0)
    done = b.and_(b.icmp_unsigned("==", pending, zero), b.icmp_unsigned("==", txc, zero))
    nxt = _with(b, expected, expected, zero, b.xor(phase, _k(word, 1)))
    return b.select(done, nxt, stay)


def tx_update(b: ir.IRBuilder, word: ir.Value, what: str, n: ir.Value) -> ir.Value:
    """mbarrier.expect_tx (`what`) adds `n` to the tx-count, complete_tx (and a bulk copy's
    completion) subtracts it."""
    zero = _k(word, 0)
    return update(b, word, zero, zero, n if what == "expect_tx" else b.sub(zero, n))


def arrive_operands(inst: ast.Instruction) -> tuple[ast.Operand | None, ast.Operand | None]:
    """The (count, tx-count) operands of mbarrier.arrive/arrive_drop after the state and the
    address: a count (absent: 1) or, in the .expect_tx forms, a tx-count."""
    rest = inst.operands[2:3]
    if inst.has("expect_tx"):
        return None, rest[0]
    return (rest[0] if rest else None), None


def arrive(b: ir.IRBuilder, inst: ast.Instruction, word: ir.Value, count: ir.Value | None,
           tx: ir.Value | None) -> ir.Value:
    """The object after mbarrier.arrive/arrive_drop `inst` of `count` arrivals (None: 1) with an
    expect-tx of `tx` (None: none); the values are i64 like `word`."""
    n = _k(word, 1) if count is None else count
    drop = n if operation(inst) == "arrive_drop" else _k(word, 0)
    return update(b, word, n, drop, _k(word, 0) if tx is None else tx, may_complete=not inst.has("noComplete"))


def cp_async_arrive(b: ir.IRBuilder, inst: ast.Instruction, word: ir.Value) -> ir.Value:
    """cp.async.mbarrier.arrive, once the thread's earlier cp.async copies have completed: an
    arrive-on. Without .noinc the pending count is first incremented by one, so the arrival does
    not count against the phase's expected arrivals (it can still complete a phase waiting only
    for it); with .noinc it does."""
    one, zero = _k(word, 1), _k(word, 0)
    if not inst.has("noinc"):
        word = update(b, word, _k(word, -1), zero, zero, may_complete=False)
    return update(b, word, one, zero, zero)


def completed(b: ir.IRBuilder, inst: ast.Instruction, word: ir.Value, arg: ir.Value) -> ir.Value:
    """test_wait/try_wait `inst`: has the phase named by `arg` (a state, or with .parity a
    parity; i64 like `word`) completed?"""
    return parity_completed(b, word, arg) if inst.has("parity") else phase_completed(b, word, arg)


def phase_completed(b: ir.IRBuilder, word: ir.Value, state: ir.Value) -> ir.Value:
    """test_wait/try_wait with a state: has the phase `state` was taken in completed?"""
    return b.icmp_unsigned("!=", b.lshr(word, _k(word, PHASE)), b.lshr(state, _k(word, PHASE)))


def parity_completed(b: ir.IRBuilder, word: ir.Value, parity: ir.Value) -> ir.Value:
    """The .parity forms: `parity` names the current phase (0 until it completes) or the one
    before it (complete): the phase of that parity has completed when the current phase's
    parity differs."""
    return b.icmp_unsigned("!=", b.lshr(word, _k(word, PHASE)), b.and_(parity, _k(word, 1)))


def pending_count(b: ir.IRBuilder, state: ir.Value) -> ir.Value:
    """mbarrier.pending_count: the pending arrival count held in a state."""
    return _field(b, state, PENDING)
