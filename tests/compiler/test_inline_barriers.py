"""Block barriers inside `.func`s (compiler/inline.py): the calls are inlined into the kernels,
so warps still exchange values through shared memory across a barrier inside the callee;
recursion and indirect calls through such functions are refused with 218."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler import compile
from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.inline import inline_barrier_calls
from zluda_py.ptx import ast, parse

HEAD = ".version 7.0\n.target sm_80\n.address_size 64\n"


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line of `text` containing `needle`."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[nth - 1]


# Each of `rounds` rounds: buf[tid] = v; barrier; v += buf[(tid + 32) % ntid]; barrier. The
# callee has labels and registers named like the kernel's, and a .reg parameter.
ROTATE = HEAD + """
.shared .align 4 .b32 buf[256];

.func (.param .b32 out) rotate_sum(.param .b32 v_in, .reg .b32 rounds)
{
  .reg .b32 %r<10>;
  .reg .pred %p;
  ld.param.b32 %r1, [v_in];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r6, buf;
  mov.u32 %r4, 0;
$L1:
  setp.ge.u32 %p, %r4, rounds;
  @%p bra $L2;
  shl.b32 %r5, %r2, 2;
  add.u32 %r5, %r6, %r5;
  st.shared.u32 [%r5], %r1;
  bar.sync 0;
  add.u32 %r7, %r2, 32;
  rem.u32 %r7, %r7, %r3;
  shl.b32 %r7, %r7, 2;
  add.u32 %r7, %r6, %r7;
  ld.shared.u32 %r8, [%r7];
  add.u32 %r1, %r1, %r8;
  barrier.sync.aligned 0;
  add.u32 %r4, %r4, 1;
  bra $L1;
$L2:
  st.param.b32 [out], %r1;
  ret;
}

.visible .entry rotate(.param .u64 data, .param .u32 rounds)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [data];
  ld.param.u32 %r7, [rounds];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r1, %r1, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3];
$L1:
  {
  .param .b32 param0;
  .param .b32 retval0;
  st.param.b32 [param0], %r2;
  call.uni (retval0), rotate_sum, (param0, %r7);
  ld.param.b32 %r3, [retval0];
  }
  st.global.u32 [%rd3], %r3;
  ret;
}
"""


def rotate_reference(x: np.ndarray, threads: int, rounds: int) -> np.ndarray:
    v = x.astype(np.int64).reshape(-1, threads)
    for _ in range(rounds):
        v = v + np.roll(v, -32, axis=1)  # thread t adds thread (t + 32) % threads
    return (v.ravel() % 2**32).astype(np.uint32)


def test_barrier_in_a_loop_inside_a_func():
    m = compile(ROTATE)
    threads, blocks, rounds = 160, 3, 5  # five warps a block
    x = np.random.default_rng(1).integers(0, 2**31, threads * blocks).astype(np.uint32)
    data = x.copy()
    m.launch("rotate", (blocks,), (threads,), [data, np.uint32(rounds)])
    np.testing.assert_array_equal(data, rotate_reference(x, threads, rounds))


# bar.red results returned through a .param and two .reg returns; the call is guarded by a
# block-uniform predicate, so the return registers keep their values when it is skipped.
VOTES = HEAD + """
.func (.param .b32 count, .reg .pred all, .reg .b32 any) votes(.param .b32 v)
{
  .reg .b32 %r<4>;
  .reg .pred %p<3>;
  ld.param.b32 %r1, [v];
  and.b32 %r2, %r1, 1;
  setp.eq.u32 %p1, %r2, 1;
  bar.red.popc.u32 %r3, 0, %p1;
  st.param.b32 [count], %r3;
  setp.ge.s32 %p2, %r1, 0;
  bar.red.and.pred all, 0, %p2;
  setp.eq.s32 %p2, %r1, 77;
  bar.red.or.pred %p1, 0, %p2;
  selp.u32 any, 1, 0, %p1;
}

.visible .entry vote_kernel(.param .u64 data, .param .u64 out, .param .u32 flag)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<6>;
  .reg .pred %p<3>;
  ld.param.u64 %rd1, [data];
  ld.param.u64 %rd4, [out];
  ld.param.u32 %r7, [flag];
  setp.ne.u32 %p1, %r7, 0;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r1, %r1, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3];
  mov.u32 %r4, 1000;
  mov.u32 %r5, 2000;
  setp.eq.u32 %p2, %r4, 0;
  {
  .param .b32 param0;
  .param .b32 retval0;
  st.param.b32 [param0], %r2;
  @%p1 call.uni (retval0, %p2, %r5), votes, (param0);
  @%p1 ld.param.b32 %r4, [retval0];
  }
  selp.u32 %r6, 1, 0, %p2;
  mul.wide.u32 %rd2, %r1, 12;
  add.u64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r4;  // 12-byte rows: a .v2 store would be misaligned for odd rows
  st.global.u32 [%rd5+4], %r5;
  st.global.u32 [%rd5+8], %r6;
}
"""


@pytest.mark.parametrize("flag", [1, 0])
def test_bar_red_results_returned_from_a_func(flag):
    m = compile(VOTES)
    threads, blocks = 96, 4
    x = np.random.default_rng(2).integers(0, 1000, threads * blocks).astype(np.int32)
    x[5] = 77  # block 0 has a 77; block 1 has a negative value
    x[threads + 7] = -3
    out = np.zeros((threads * blocks, 3), np.int32)
    m.launch("vote_kernel", (blocks,), (threads,), [x, out, np.uint32(flag)])
    per_block = x.reshape(blocks, threads)
    if flag:
        expect = np.stack([(per_block % 2 != 0).sum(axis=1), (per_block == 77).any(axis=1),
                           (per_block >= 0).all(axis=1)], axis=1).astype(np.int32)  # count, any, all
    else:  # the call did not run: the return registers hold what they held before
        expect = np.tile(np.array([1000, 2000, 0], np.int32), (blocks, 1))
    np.testing.assert_array_equal(out.reshape(blocks, threads, 3), np.repeat(expect[:, None, :], threads, axis=1))


# kernel -> outer (twice) -> exchange (twice each) with the barrier. exchange keeps a static
# .shared array declared in its body: one per block, shared by all call sites, so the value the
# first call stores is what the second call (another site) reads. outer keeps a value in .local
# across the calls.
NESTED = HEAD + """
.func (.reg .b32 r) exchange(.reg .b32 v, .reg .b32 store)
{
  .shared .align 4 .b32 slots[128];
  .reg .b32 %r<6>;
  .reg .pred %p;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, slots;
  shl.b32 %r3, %r1, 2;
  add.u32 %r3, %r2, %r3;
  setp.eq.u32 %p, store, 0;
  @%p bra $L1;
  st.shared.u32 [%r3], v;
$L1:
  bar.sync 0;
  mov.u32 %r4, %ntid.x;
  sub.u32 %r4, %r4, %r1;
  sub.u32 %r4, %r4, 1;
  shl.b32 %r4, %r4, 2;
  add.u32 %r4, %r2, %r4;
  ld.shared.u32 r, [%r4];
  bar.sync 0;
  ret;
}

.func (.param .b32 out) outer(.param .b32 v, .param .b32 k)
{
  .local .align 4 .b32 keep;
  .reg .b32 %r<6>;
  ld.param.b32 %r1, [v];
  ld.param.b32 %r2, [k];
  mul.lo.u32 %r3, %r1, %r2;
  st.local.u32 [keep], %r3;
  call.uni (%r4), exchange, (%r3, 1);
  call.uni (%r5), exchange, (0, 0);
  ld.local.u32 %r3, [keep];
  add.u32 %r4, %r4, %r5;
  add.u32 %r4, %r4, %r3;
  st.param.b32 [out], %r4;
  ret;
}

.visible .entry nested(.param .u64 data)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [data];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r1, %r1, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3];
  {
  .param .b32 param0;
  .param .b32 param1;
  .param .b32 retval0;
  st.param.b32 [param0], %r2;
  st.param.b32 [param1], 3;
  call.uni (retval0), outer, (param0, param1);
  ld.param.b32 %r4, [retval0];
  }
  {
  .param .b32 param0;
  .param .b32 param1;
  .param .b32 retval0;
  st.param.b32 [param0], %r4;
  st.param.b32 [param1], 5;
  call.uni (retval0), outer, (param0, param1);
  ld.param.b32 %r5, [retval0];
  }
  st.global.u32 [%rd3], %r5;
}
"""


def test_nested_calls_with_a_static_shared_variable():
    m = compile(NESTED)
    threads, blocks = 128, 3
    x = np.random.default_rng(3).integers(0, 2**20, threads * blocks).astype(np.uint32)
    data = x.copy()
    m.launch("nested", (blocks,), (threads,), [data])

    def outer(v: np.ndarray, k: int) -> np.ndarray:  # per block: v*k of the mirrored thread, twice, + own v*k
        p = v * k
        return 2 * p[:, ::-1] + p

    v = x.astype(np.int64).reshape(blocks, threads)
    np.testing.assert_array_equal(data, (outer(outer(v, 3), 5).ravel() % 2**32).astype(np.uint32))


def test_the_inlined_module():
    """The barrier functions leave the module; the static variable moves to module scope;
    every inlined instruction keeps its source position."""
    m = parse(NESTED, "nested.ptx")
    out = inline_barrier_calls(m)
    assert [f.name for f in out.functions()] == ["nested"]
    assert [(v.name, v.space) for v in out.variables()] == [("slots.fn.exchange", "shared")]

    def insts(stmts):
        for s in stmts:
            if isinstance(s, ast.Block):
                yield from insts(s.body)
            elif isinstance(s, ast.Instruction):
                yield s

    bars = [i for i in insts(out.kernels()[0].body) if i.opcode == "bar"]
    assert len(bars) == 8  # 2 outer calls x 2 exchange calls x 2 barriers
    assert {i.pos.line for i in bars} == {line_of(NESTED, "bar.sync 0;", 1), line_of(NESTED, "bar.sync 0;", 2)}
    no_barrier = parse(HEAD + ".func f() { ret; }\n.visible .entry k() { call f; ret; }\n")
    assert inline_barrier_calls(no_barrier) is no_barrier


def test_positions_of_inlined_instructions_in_errors():
    text = HEAD + """
.func f(.reg .b32 a)
{
  .reg .b32 %r<3>;
  bar.sync 0;
  mma.sync.aligned.m8n8k32.row.col.s32.u4.u4.s32 {%r1, %r2}, {a}, {a}, {%r1, %r2};
  ret;
}
.visible .entry k()
{
  .reg .b32 %r1;
  mov.u32 %r1, 0;
  call f, (%r1);
}
"""
    with pytest.raises(UnsupportedError) as e:
        compile(parse(text, "pos.ptx"))
    assert str(e.value).endswith(f"at pos.ptx:{line_of(text, 'mma.sync')}")


RECURSIVE = HEAD + """
.func (.param .b32 r) fact(.param .b32 n)
{
  .reg .b32 %r<4>;
  .reg .pred %p;
  ld.param.b32 %r1, [n];
  bar.sync 0;
  setp.le.u32 %p, %r1, 1;
  @%p bra $BASE;
  sub.u32 %r2, %r1, 1;
  {
  .param .b32 param0;
  .param .b32 retval0;
  st.param.b32 [param0], %r2;
  call.uni (retval0), fact, (param0);
  ld.param.b32 %r3, [retval0];
  }
  mul.lo.u32 %r1, %r1, %r3;
$BASE:
  st.param.b32 [r], %r1;
  ret;
}
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<3>;
  mov.u32 %r1, 5;
  {
  .param .b32 param0;
  .param .b32 retval0;
  st.param.b32 [param0], %r1;
  call.uni (retval0), fact, (param0);
  ld.param.b32 %r2, [retval0];
  }
}
"""


def test_recursive_func_with_a_barrier_is_refused():
    with pytest.raises(UnsupportedError) as e:
        compile(parse(RECURSIVE, "rec.ptx"))
    assert e.value.cu_result == 218
    bar, call = line_of(RECURSIVE, "bar.sync"), line_of(RECURSIVE, "call.uni (retval0), fact")
    assert str(e.value) == (f"unsupported: recursive call to .func fact, which reaches a barrier (bar.sync at "
                            f"rec.ptx:{bar}; barriers in .funcs work by inlining the calls, which recursion rules "
                            f"out) at rec.ptx:{call}")


def test_mutual_recursion_through_a_barrier_function_is_refused():
    text = HEAD + """
.func g(.reg .b32 n);
.func f(.reg .b32 n)
{
  .reg .pred %p;
  setp.eq.u32 %p, n, 0;
  @%p ret;
  call g, (n);
  ret;
}
.func g(.reg .b32 n)
{
  .reg .b32 %r1;
  barrier.sync 0;
  sub.u32 %r1, n, 1;
  call f, (%r1);
  ret;
}
.visible .entry k()
{
  call f, (3);
}
"""
    with pytest.raises(UnsupportedError) as e:
        compile(parse(text, "mutual.ptx"))
    assert e.value.cu_result == 218
    msg = str(e.value)
    assert msg.startswith("unsupported: recursive call to .func f, which reaches a barrier (barrier.sync at "
                          f"mutual.ptx:{line_of(text, 'barrier.sync')};")
    assert msg.endswith(f"at mutual.ptx:{line_of(text, 'call f, (%r1)')}")


def test_indirect_call_to_a_barrier_function_is_refused():
    text = HEAD + """
.func f(.reg .b32 a)
{
  bar.sync 0;
  ret;
}
.visible .entry k()
{
  .reg .b64 %rd1;
  proto: .callprototype _ (.reg .b32 _);
  mov.u64 %rd1, f;
  call %rd1, (7), proto;
}
"""
    with pytest.raises(UnsupportedError) as e:
        compile(parse(text, "ind.ptx"))
    assert e.value.cu_result == 218
    assert str(e.value) == (f"unsupported: indirect call that may reach .func f, which reaches a barrier (bar.sync at "
                            f"ind.ptx:{line_of(text, 'bar.sync')}; barriers in .funcs work by inlining the calls, "
                            f"which needs direct calls) at ind.ptx:{line_of(text, 'call %rd1')}")


# A struct passed and returned by value (.param byte arrays): the parameter is read and the
# result written on both sides of barriers, so both must outlive the warp function's returns.
STRUCTS = HEAD + """
.shared .align 8 .b64 cells[128];

.func (.param .align 8 .b8 out[16]) swap_halves(.param .align 8 .b8 in[16])
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.b64 %rd1, [in];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, cells;
  shl.b32 %r3, %r1, 3;
  add.u32 %r3, %r2, %r3;
  st.shared.b64 [%r3], %rd1;
  bar.sync 0;
  xor.b32 %r4, %r1, 32;
  shl.b32 %r4, %r4, 3;
  add.u32 %r4, %r2, %r4;
  ld.shared.b64 %rd2, [%r4];
  st.param.b64 [out+8], %rd2;
  bar.sync 0;
  ld.param.b64 %rd3, [in+8];
  st.param.b64 [out], %rd3;
  ret;
}

.visible .entry structs(.param .u64 data)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [data];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 16;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.v2.u64 {%rd4, %rd5}, [%rd3];
  {
  .param .align 8 .b8 param0[16];
  .param .align 8 .b8 retval0[16];
  st.param.v2.b64 [param0], {%rd4, %rd5};
  call.uni (retval0), swap_halves, (param0);
  ld.param.v2.b64 {%rd6, %rd7}, [retval0];
  }
  st.global.v2.u64 [%rd3], {%rd6, %rd7};
}
"""


def test_struct_parameters_across_barriers():
    m = compile(STRUCTS)
    threads = 128
    x = np.random.default_rng(4).integers(0, 2**63, (threads, 2), dtype=np.uint64)
    data = x.copy()
    m.launch("structs", (1,), (threads,), [data])
    expect = np.stack([x[:, 1], x[np.arange(threads) ^ 32, 0]], axis=1)  # (own in[8], partner's in[0])
    np.testing.assert_array_equal(data, expect)
