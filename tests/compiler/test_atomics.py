"""atom/red on global and shared memory: every operation, 32/64-bit and float types, in lane
order and under real multi-threaded contention (many blocks on the worker pool)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from zluda_py.compiler import compile

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def atom_kernel(op: str, t: str, space: str = "global") -> str:
    """Every thread does `atom.<op>.<t> old, [target], its_value`; old values go to `olds`."""
    bits = 64 if t.endswith("64") else 32
    reg = "%rd" if bits == 64 else "%r"
    cas = op == "cas"
    shared = space == "shared"
    body = f"""
.visible .entry k(.param .u64 target, .param .u64 vals, .param .u64 olds)
{{
  .reg .b32 %r<10>; .reg .b64 %rd<12>; .reg .pred %p<2>;
  .shared .align 8 .b64 cell;
  ld.param.u64 %rd1, [target];
  ld.param.u64 %rd2, [vals];
  ld.param.u64 %rd3, [olds];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd4, %r4, {bits // 8};
  add.s64 %rd5, %rd2, %rd4;
  ld.global.b{bits} {reg}6, [%rd5];
  {"setp.eq.u32 %p1, %r1, 0; @%p1 ld.global.b" + str(bits) + " " + reg + "9, [%rd1]; @%p1 st.shared.b" + str(bits) + " [cell], " + reg + "9; bar.sync 0;" if shared else ""}
  {"atom.shared" if shared else "atom.global"}.{op}.{t} {reg}7, [{"cell" if shared else "%rd1"}], {reg}6{", " + reg + "6" if cas else ""};
  {"bar.sync 0; @%p1 ld.shared.b" + str(bits) + " " + reg + "9, [cell]; @%p1 st.global.b" + str(bits) + " [%rd1], " + reg + "9;" if shared else ""}
  add.s64 %rd8, %rd3, %rd4;
  st.global.b{bits} [%rd8], {reg}7;
  ret;
}}
"""
    return HEAD + body


REFS = {
    "add": lambda a, v: a + v, "min": min, "max": max, "and": lambda a, v: a & v, "or": lambda a, v: a | v,
    "xor": lambda a, v: a ^ v, "exch": lambda a, v: v,
}


@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("op, t", [("add", "u32"), ("add", "u64"), ("min", "s32"), ("max", "u32"), ("min", "s64"),
                                   ("and", "b32"), ("or", "b64"), ("xor", "b32"), ("exch", "b32"),
                                   ("add", "f32"), ("add", "f64")])
def test_atomic_operation_final_value_and_olds(op, t, space):
    dtype = {"u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64, "s64": np.int64,
             "b64": np.uint64, "f32": np.float32, "f64": np.float64}[t]
    blocks, threads = (1, 96) if space == "shared" else (40, 96)
    n = blocks * threads
    rng = np.random.default_rng(zlib.crc32(f"{op}.{t}".encode()))  # reproducible across processes
    if t.startswith("f"):
        vals = rng.integers(-100, 100, n).astype(dtype)  # integers: the sum is exact in any order
    elif t.startswith("s"):
        vals = rng.integers(-1000, 1000, n).astype(dtype)
    else:
        vals = rng.integers(0, 1 << 30, n).astype(dtype)
    init = dtype(vals[0] // 2 if op in ("min", "max") else 7)
    target = np.array([init], dtype)
    olds = np.zeros(n, dtype)
    compile(atom_kernel(op, t, space)).launch("k", (blocks,), (threads,), [target, vals, olds])
    if op == "exch":
        assert target[0] in vals and sorted(np.append(olds, target[0]).tolist()) == sorted([init, *vals.tolist()])
        return
    expect = init.item()
    for v in vals.tolist():
        expect = REFS[op](expect, v)
    if not t.startswith("f"):  # wrap to the type's width (Python ints do not)
        expect = np.array(expect % (1 << (8 * dtype().itemsize)), np.uint64).astype(dtype)
    assert target[0] == expect
    if op == "add" and not t.startswith("f"):
        # Atomicity, in any order: every old value plus its addend is the next one's old value.
        produced = sorted((olds + vals).tolist() + [int(init)])
        consumed = sorted(olds.tolist() + [int(target[0])])
        assert produced == consumed


def test_inc_dec_cas_wrap_like_ptx():
    src = HEAD + """
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<6>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  atom.global.inc.u32 %r1, [%rd1], 4;
  atom.global.dec.u32 %r2, [%rd1+4], 4;
  atom.global.cas.b32 %r3, [%rd1+8], 0, 1;
  mov.u32 %r4, %tid.x;
  red.global.add.u32 [%rd1+12], %r4;
  ret;
}
"""
    cells = np.array([0, 0, 0, 0], np.uint32)
    compile(src).launch("k", (1,), (23,), [cells])
    inc = 0
    dec = 0
    for _ in range(23):
        inc = 0 if inc >= 4 else inc + 1
        dec = 4 if dec == 0 or dec > 4 else dec - 1
    assert cells.tolist() == [inc, dec, 1, sum(range(23))]
