"""A memory access in the `lane == k` side of a split that a converged warp runs in place
(`FunctionLowering._run_side`) first tests for one active lane, then checks and moves that
lane's element as a scalar (`MemoryMixin._emit`). The lane is any one (not only lane 0), the
access may sit at the allocation's last valid byte, and a fault stays the one the per-lane
check gives: 716 for a misaligned address before 700 for one outside, naming the lane and its
address. Expected values: numpy; faults: the lane and address worked out by hand."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.function import FunctionLowering
from zluda_py.compiler.cpu.target import CPU
from zluda_py.ptx import parse

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"


def _global_kernel(t: str, size: int) -> str:
    """Thread `sel` alone: dst[doff + size*tid] = src[soff + size*tid] + 1 (byte offsets)."""
    return HEAD + f"""
.visible .entry one_{t}(.param .u64 src, .param .u64 dst, .param .u32 sel, .param .u64 soff, .param .u64 doff)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u32 %r2, [sel];
    ld.param.u64 %rd3, [soff];
    ld.param.u64 %rd4, [doff];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, {size};
    setp.ne.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    add.s64 %rd6, %rd1, %rd3;
    add.s64 %rd7, %rd6, %rd5;
    add.s64 %rd8, %rd2, %rd4;
    add.s64 %rd9, %rd8, %rd5;
    ld.global.{t} %r3, [%rd7];
    add.u32 %r3, %r3, 1;
    st.global.{t} [%rd9], %r3;
DONE:
    ret;
}}
"""


# thread `sel` alone: sm[off + 4*tid] = tid + 7, read back into out[0]; sm is 64 bytes
SHARED = HEAD + """
.visible .entry one_shared(.param .u64 out, .param .u32 sel, .param .u32 off)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<2>;
    .shared .align 4 .b8 sm[64];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [sel];
    ld.param.u32 %r3, [off];
    mov.u32 %r1, %tid.x;
    mov.u32 %r4, sm;
    mad.lo.s32 %r5, %r1, 4, %r4;
    setp.eq.s32 %p1, %r1, %r2;
    @!%p1 bra DONE;
    add.s32 %r6, %r5, %r3;
    add.u32 %r7, %r1, 7;
    st.shared.u32 [%r6], %r7;
    ld.shared.u32 %r7, [%r6];
    st.global.u32 [%rd1], %r7;
DONE:
    ret;
}
"""

TYPES = {"u8": (np.uint8, 1), "u32": (np.uint32, 4)}


@pytest.fixture(scope="module")
def mods():
    return {t: compile(_global_kernel(t, size)) for t, (_, size) in TYPES.items()} | {"shared": compile(SHARED)}


def _run_global(mods, t: str, sel: int, soff: int, doff: int, block: int = 32, n: int = 40):
    dtype, size = TYPES[t]
    src = (np.arange(n) * 5 + 2).astype(dtype)
    dst = np.zeros(n, dtype)
    mods[t].launch(f"one_{t}", (1,), (block,), [src, dst, np.uint32(sel), np.uint64(soff), np.uint64(doff)])
    return src, dst


@pytest.mark.parametrize("t", ["u8", "u32"])
@pytest.mark.parametrize("sel, block", [(0, 32), (13, 32), (31, 64), (37, 40)])  # 37: a partial second warp
def test_the_last_element_of_both_arrays(mods, t, sel, block):
    """Lane sel loads src's last element and stores dst's last element."""
    n, size = 40, TYPES[t][1]
    edge = (n - 1) * size - sel * size
    src, dst = _run_global(mods, t, sel, edge, edge, block, n)
    want = np.zeros(n, TYPES[t][0])
    want[-1] = src[-1] + 1
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("t", ["u8", "u32"])
@pytest.mark.parametrize("sel, block", [(5, 32), (37, 40)])
@pytest.mark.parametrize("past", ["src", "dst"])
def test_one_element_past_the_end_faults_at_that_lane(mods, t, sel, block, past):
    """The load (or, after a valid load, the store) one element past the allocation: 700."""
    n, size = 40, TYPES[t][1]
    edge = n * size - sel * size  # the byte just past the array for lane sel
    dtype = TYPES[t][0]
    src, dst = (np.arange(n) * 5 + 2).astype(dtype), np.zeros(n, dtype)
    soff, doff = (edge, 0) if past == "src" else (0, edge)
    with pytest.raises(LaunchError) as e:
        mods[t].launch(f"one_{t}", (1,), (block,), [src, dst, np.uint32(sel), np.uint64(soff), np.uint64(doff)])
    assert e.value.cu_result == 700
    base = (src if past == "src" else dst).ctypes.data
    assert str(e.value).endswith(f"lane {sel % 32} (thread ({sel},0,0)), address 0x{base + n * size:x}"), str(e.value)
    if past == "dst":  # the load before it was valid, the store did not happen
        assert not dst.any()


@pytest.mark.parametrize("past", ["src", "dst"])
def test_misaligned_before_outside(mods, past):
    """Lane 9's u32 address 2 bytes past the last element's start: misaligned and reaching past
    the end; 716 comes first."""
    n, sel = 40, 9
    off = (n - 1) * 4 + 2 - sel * 4
    src, dst = np.arange(n, dtype=np.uint32), np.zeros(n, np.uint32)
    soff, doff = (off, 0) if past == "src" else (0, off)
    with pytest.raises(LaunchError) as e:
        mods["u32"].launch("one_u32", (1,), (32,), [src, dst, np.uint32(sel), np.uint64(soff), np.uint64(doff)])
    assert e.value.cu_result == 716
    base = (src if past == "src" else dst).ctypes.data
    assert str(e.value).endswith(f"lane {sel} (thread ({sel},0,0)), address 0x{base + (n - 1) * 4 + 2:x}"), \
        str(e.value)


def test_no_lane_no_access(mods):
    """No thread is `sel`: nothing is read or written, even through an address far outside."""
    src, dst = _run_global(mods, "u32", 99, 1 << 40, 1 << 40)
    assert not dst.any()


@pytest.mark.parametrize("sel, block", [(0, 32), (6, 32), (45, 64), (37, 40)])
def test_shared_last_word(mods, sel, block):
    """Lane sel stores and reloads sm's last word (bytes 60..63)."""
    out = np.zeros(1, np.uint32)
    mods["shared"].launch("one_shared", (1,), (block,), [out, np.uint32(sel), np.uint32((60 - 4 * sel) % 2**32)])
    assert out[0] == sel + 7


@pytest.mark.parametrize("off, status", [(64, 700), (61, 716), (62, 716)])
@pytest.mark.parametrize("sel, block", [(0, 32), (21, 32), (37, 40)])
def test_shared_past_the_end_or_misaligned(mods, sel, block, off, status):
    """sm + off for lane sel: one word past the end (700) or misaligned across the end (716)."""
    out = np.zeros(1, np.uint32)
    with pytest.raises(LaunchError) as e:
        mods["shared"].launch("one_shared", (1,), (block,), [out, np.uint32(sel), np.uint32((off - 4 * sel) % 2**32)])
    assert e.value.cu_result == status
    assert f"lane {sel % 32} (thread ({sel},0,0))" in str(e.value), str(e.value)
    assert out[0] == 0


@pytest.mark.parametrize("text, name", [(_global_kernel("u32", 4), "one_u32"), (SHARED, "one_shared")],
                         ids=["global", "shared"])
def test_the_side_accesses_take_the_one_lane_path(text, name):
    """The side's two lane-dependent accesses test for one lane (the shared kernel's uniform
    store to out[0] is scalar already); the dispatcher's copy of the side does not."""
    ir = CPU.lower_part(parse(text), name).text
    assert len(re.findall(r"^mem\.one[.0-9]*:", ir, re.M)) == 2


# thread `sel` alone: dst[sel] = src[sel >> 1]; the side computes the load's address (a shift on
# the way) and then writes %r5 and %rd5, which the store's address read before
REDEFINED = HEAD + """
.visible .entry redefined(.param .u64 src, .param .u64 dst, .param .u32 sel)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u32 %r2, [sel];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    setp.ne.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    shr.u32 %r5, %r1, 1;
    mul.wide.u32 %rd6, %r5, 4;
    add.s64 %rd7, %rd1, %rd6;
    add.s64 %rd8, %rd2, %rd5;
    mov.b64 %rd5, 0;
    mov.u32 %r5, 3;
    ld.global.u32 %r3, [%rd7];
    st.global.u32 [%rd8], %r3;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("sel, block", [(0, 32), (13, 32), (31, 64), (37, 40)])
def test_an_address_from_registers_the_side_writes_later(sel, block):
    src, dst = np.arange(100, 140, dtype=np.uint32), np.zeros(40, np.uint32)
    compile(REDEFINED).launch("redefined", (1,), (block,), [src, dst, np.uint32(sel)])
    want = np.zeros(40, np.uint32)
    want[sel] = src[sel >> 1]
    np.testing.assert_array_equal(dst, want)


def test_a_store_past_the_end_after_the_side_redefines_its_register():
    src, dst = np.arange(100, 140, dtype=np.uint32), np.zeros(13, np.uint32)
    with pytest.raises(LaunchError) as e:
        compile(REDEFINED).launch("redefined", (1,), (32,), [src, dst, np.uint32(13)])
    assert e.value.cu_result == 700
    assert str(e.value).endswith(f"lane 13 (thread (13,0,0)), address 0x{dst.ctypes.data + 13 * 4:x}"), str(e.value)


def test_the_lane_address_is_evaluated_where_the_side_defines_it(monkeypatch):
    """The load's address comes from the side's shr/mul.wide/add at width 1; the store's reads
    %rd5, which the side writes after that read, so it is the lane of the vector."""
    found = []
    address = FunctionLowering.one_lane_address
    monkeypatch.setattr(FunctionLowering, "one_lane_address",
                        lambda self, *a: found.append(address(self, *a)) or found[-1])
    compile(REDEFINED)
    assert [f is not None for f in found] == [True, False]
