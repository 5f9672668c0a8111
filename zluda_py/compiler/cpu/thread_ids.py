"""%tid of a warp's lanes in a 2-D or 3-D block: the shared helper `zluda.tid_3d`.

A kernel that reads %tid computes it inline for a 1-D block (`first thread + lane`, y = z = 0).
Any other block shape calls this helper, compiled once in the shared helpers' module
(module.helpers_ir): its scalar divisions and two per-lane loops were ~45 instructions of every
such kernel's IR, optimised and code-generated per kernel for a path few launches take."""

from __future__ import annotations

from llvmlite import ir

from zluda_py.compiler.cpu import values as V

I32 = V.I32
TID_3D = "zluda.tid_3d"
_TID = ir.ArrayType(V.vec(I32), 3)  # %tid.x, %tid.y, %tid.z of the 32 lanes
_TYPE = ir.FunctionType(ir.VoidType(), [I32, I32, I32, V.PTR])  # (first thread, ntid.x, ntid.y, out)


def _function(module: ir.Module) -> ir.Function:
    fn = module.globals.get(TID_3D)
    if fn is None:
        fn = ir.Function(module, _TYPE, TID_3D)
        fn.attributes.add("nounwind")
    return fn


def call_tid_3d(b: ir.IRBuilder, first: ir.Value, nx: ir.Value, ny: ir.Value) -> list[ir.Value]:
    """%tid.x, .y, .z of lanes `first + lane` of a block of ntid.x = `nx`, ntid.y = `ny`."""
    out = V.entry_alloca(b, _TID)
    b.call(_function(b.module), [first, nx, ny, out])
    zero = ir.Constant(I32, 0)
    return [b.load(b.gep(out, [zero, ir.Constant(I32, k)], source_etype=_TID), typ=V.vec(I32), align=16)
            for k in range(3)]


def define_tid_3d(module: ir.Module) -> None:
    """`zluda.tid_3d`, defined (exported) in the shared helpers' module: scalar divisions only for
    the first lane (a vector division is 32 divides), then per lane the remainders stepped down."""
    fn = _function(module)
    first, nx, ny, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    qx = b.udiv(first, nx)
    tx, q = _divmod_lanes(b, fn, b.urem(first, nx), qx, nx, V.LANE_IDS)
    ty, tz = _divmod_lanes(b, fn, b.urem(qx, ny), b.udiv(qx, ny), ny, b.sub(q, V.splat(b, qx)))
    zero = ir.Constant(I32, 0)
    for k, value in enumerate((tx, ty, tz)):
        b.store(value, b.gep(out, [zero, ir.Constant(I32, k)], source_etype=_TID), align=16)
    b.ret_void()


def _divmod_lanes(b: ir.IRBuilder, fn: ir.Function, rem0: ir.Value, quot0: ir.Value, d: ir.Value,
                  offsets: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Per lane (n mod d, n div d) for n = quot0*d + rem0 + offsets, offsets small: start from
    rem0+offsets and subtract d while some lane is still >= d."""
    r0, q0, dv = b.add(V.splat(b, rem0), offsets), V.splat(b, quot0), V.splat(b, d)
    pre = b.block
    head = fn.append_basic_block("divmod")
    done = fn.append_basic_block("divmod.done")
    b.branch(head)
    b.position_at_end(head)
    r, q = b.phi(V.vec(I32)), b.phi(V.vec(I32))
    over = b.icmp_unsigned(">=", r, dv)
    r.add_incoming(r0, pre)
    q.add_incoming(q0, pre)
    r.add_incoming(b.select(over, b.sub(r, dv), r), head)
    q.add_incoming(b.add(q, b.zext(over, V.vec(I32))), head)
    b.cbranch(V.any_lane(b, over), head, done)
    b.position_at_end(done)
    return r, q
