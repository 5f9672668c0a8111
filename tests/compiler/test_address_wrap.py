"""Addresses are computed in the width PTX gives them: a 32-bit .shared/.local address (and a
32-bit generic one under `.address_size 32`) plus its immediate offset wraps modulo 2**32, as
on the GPU. Rodinia nw (nvcc -O3) forms `temp - 68*tid + ...` in a 32-bit register that lies
"below" the shared array for most lanes; only `[%r+68]` is inside. A fault names the first
faulting lane and that lane's address."""

from __future__ import annotations

import mmap
import platform
import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile, register_memory, unregister_memory
from zluda_py.compiler.amdgpu import lower
from zluda_py.compiler.cpu import memory
from zluda_py.ptx import parse

HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"
VECTORS = {1: "", 2: ".v2", 4: ".v4"}


def wrapped(space: str, n: int) -> str:
    """A kernel that stores and loads n u32 per lane through `[%r6+68]`, %r6 = X + 4n*lane - 68
    (X a `space` array at offset 0, so %r6 wraps below 0 for the low lanes), then reads the
    same place back through the plain address and writes out[lane*2n..]: loaded, then reread.
    In .local every lane uses element (lane & 3) of its own window."""
    e = 4 * n
    regs = lambda first: "{" + ", ".join(f"%v{first + k}" for k in range(n)) + "}" if n > 1 else f"%v{first}"  # noqa: E731
    index = "and.b32 %r9, %r1, 3;" if space == "local" else "mov.u32 %r9, %r1;"
    stores = "\n    ".join(f"add.s32 %v{k}, %r1, {100 * k};" for k in range(n))
    out = "\n    ".join(f"st.global.u32 [%rd3+{4 * k}], %v{n + k};\n    st.global.u32 [%rd3+{4 * (n + k)}], %v{2 * n + k};"
                       for k in range(n))
    return HEAD + f"""
.visible .entry k(.param .u64 out)
{{
    .{space} .align 16 .b8 X[512];
    .reg .b32 %r<12>;
    .reg .b32 %v<16>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    {index}
    neg.s32 %r2, %r9;
    mov.u32 %r3, X;
    mad.lo.s32 %r4, %r2, 68, %r3;
    mad.lo.s32 %r5, %r9, {68 + e}, %r4;
    add.s32 %r6, %r5, -68;
    {stores}
    st.{space}{VECTORS[n]}.u32 [%r6+68], {regs(0)};
    bar.sync 0;
    ld.{space}{VECTORS[n]}.u32 {regs(n)}, [%r6+68];
    ld.{space}{VECTORS[n]}.u32 {regs(2 * n)}, [%r5];
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, {8 * n};
    add.s64 %rd3, %rd1, %rd2;
    {out}
    ret;
}}
"""


@pytest.mark.parametrize("space", ["shared", "local"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_wrapped_32_bit_base_plus_offset(space, n):
    m = compile(wrapped(space, n))
    out = np.zeros((32, 2 * n), np.uint32)
    m.launch("k", 1, 32, [out])
    expect = np.arange(32)[:, None] + 100 * np.arange(n)[None, :]
    np.testing.assert_array_equal(out[:, :n], expect)  # loaded through the wrapped address
    np.testing.assert_array_equal(out[:, n:], expect)  # stored where the plain address is


def test_lane_consecutive_wrapped_addresses_take_the_vector_path(monkeypatch):
    """`X + 4*tid - 68` is affine (stride 4) modulo 2**32; with the offset added in 32 bits the
    widened address is too, so the access is planned as lane-consecutive ("ends": %tid.x) and
    the two-lane test passes: lanes 0..16 wrap below 0, [%r6+68] does not."""
    ptx = wrapped("shared", 1).replace("mad.lo.s32 %r4, %r2, 68, %r3;", "mov.u32 %r4, %r3;") \
        .replace("mad.lo.s32 %r5, %r9, 72, %r4;", "mad.lo.s32 %r5, %r9, 4, %r4;")
    plans = []
    original = memory.MemoryMixin._plan
    monkeypatch.setattr(memory.MemoryMixin, "_plan", lambda self, inst, addr, *rest: plans.append(
        (inst.opcode, addr.offset, original(self, inst, addr, *rest))) or plans[-1][2])
    m = compile(ptx)
    assert ("st", 68, "ends") in plans and ("ld", 68, "ends") in plans
    out = np.zeros((32, 2), np.uint32)
    m.launch("k", 1, 32, [out])
    np.testing.assert_array_equal(out, np.repeat(np.arange(32)[:, None], 2, axis=1))


ATOM = HEAD + r"""
.visible .entry k(.param .u64 out)
{
    .shared .align 4 .b8 X[128];
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    neg.s32 %r2, %r1;
    mov.u32 %r3, X;
    mad.lo.s32 %r4, %r2, 68, %r3;
    and.b32 %r9, %r1, 7;
    mad.lo.s32 %r5, %r1, 68, %r4;
    shl.b32 %r7, %r9, 2;
    add.s32 %r5, %r5, %r7;
    add.s32 %r6, %r5, -68;
    st.shared.u32 [%r5], 0;
    bar.sync 0;
    atom.shared.add.u32 %r8, [%r6+68], 1;
    red.shared.add.u32 [%r6+68], 2;
    bar.sync 0;
    ld.shared.u32 %r8, [%r5];
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r8;
    ret;
}
"""


def test_atomics_on_a_wrapped_shared_address():
    out = np.zeros(32, np.uint32)
    compile(ATOM).launch("k", 1, 32, [out])
    assert (out == 4 * 3).all()  # X[tid & 7]: 4 lanes each add 1 and 2


WRAP32 = r"""
.version 7.8
.target sm_80
.address_size 32
.visible .entry k(.param .u32 base, .param .u32 out)
{
    .reg .b32 %r<6>;
    ld.param.u32 %r1, [base];
    ld.param.u32 %r2, [out];
    mov.u32 %r3, %tid.x;
    shl.b32 %r4, %r3, 2;
    add.s32 %r1, %r1, %r4;
    add.s32 %r2, %r2, %r4;
    ld.u32 %r5, [%r1+OFFSET];
    st.u32 [%r2], %r5;
    ret;
}
"""


def test_generic_32_bit_addresses_wrap_too():
    """Under .address_size 32 a generic address is 32 bits: 0xFFFFFFF0 + (low + 16) is `low`."""
    if platform.machine() != "x86_64":
        pytest.skip("MAP_32BIT (memory below 2 GiB) is x86-64 only")
    low = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40)  # MAP_32BIT
    data = np.frombuffer(low, np.uint32)
    address = data.ctypes.data
    register_memory(address, 4096)
    try:
        data[:32] = np.arange(32) * 5
        m = compile(WRAP32.replace("OFFSET", str(address + 16)))
        m.launch("k", 1, 32, [np.uint32(0xFFFFFFF0), np.uint32(address + 512)])
        np.testing.assert_array_equal(data[128:160], np.arange(32) * 5)
        message = _illegal(m.launch, "k", 1, 32, [np.uint32((1 << 32) - address - 16), np.uint32(address + 512)])
        assert ", address 0x0" in message  # wrapped to 0 in 32 bits, not 0x100000000
    finally:
        unregister_memory(address)
        del data
        low.close()


FAULT = HEAD + r"""
// lane 5 alone is out of bounds: p[tid] for the others, p[tid + far/4] for lane 5
.visible .entry k(.param .u64 p, .param .u32 far, .param .u32 space)
{
    .shared .align 4 .b8 X[128];
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    ld.param.u32 %r3, [far];
    setp.eq.u32 %p1, %r1, 5;
    selp.b32 %r4, %r3, 0, %p1;
    add.s32 %r5, %r2, %r4;
    ld.param.u32 %r6, [space];
    setp.ne.u32 %p2, %r6, 0;
    @%p2 bra GLOBAL;
    mov.u32 %r7, X;
    add.s32 %r7, %r7, %r5;
    ld.shared.u32 %r6, [%r7];
    ret;
GLOBAL:
    ld.param.u64 %rd1, [p];
    cvt.u64.u32 %rd2, %r5;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    ret;
}
"""


def _illegal(fn, *args) -> str:
    with pytest.raises(LaunchError) as e:
        fn(*args)
    assert e.value.cu_result == 700, e.value
    return str(e.value)


@pytest.mark.parametrize("global_", [0, 1])
def test_fault_names_the_first_faulting_lane_and_its_address(global_):
    m = compile(FAULT)
    p = np.zeros(64, np.uint32)
    register_memory(p.ctypes.data, p.nbytes)
    try:
        m.launch("k", 1, 32, [p.ctypes.data, 0, global_])
        message = _illegal(m.launch, "k", 1, 32, [p.ctypes.data, 4096, global_])
    finally:
        unregister_memory(p.ctypes.data)
    address = (p.ctypes.data if global_ else 0) + 5 * 4 + 4096
    assert re.search(rf"warp 0, lane 5 \(thread \(5,0,0\)\), address 0x{address:x}$", message), message


def test_contiguous_shared_overflow_names_the_first_lane_past_the_end():
    """Lanes 0..27 are inside the 128-byte array, 28..31 past it: lane 28 is named, not lane 0."""
    ptx = FAULT.replace("selp.b32 %r4, %r3, 0, %p1;", "mov.u32 %r4, %r3;")
    message = _illegal(compile(ptx).launch, "k", 1, 32, [0, 16, 0])
    assert re.search(r"lane 28 \(thread \(28,0,0\)\), address 0x80$", message), message


def test_amdgpu_lds_address_and_offset_are_32_bit():
    """LDS pointers are 32-bit: the register plus its offset is an i32 add, then the pointer."""
    ir_text, _ = lower(parse(wrapped("shared", 1), "wrap.ptx"), "gfx942")
    adds = dict(re.findall(r"(%\S+) = add i32 (%\S+, 68)\n", ir_text))
    ptrs = re.findall(r"inttoptr i32 (%\S+) to ptr addrspace\(3\)", ir_text)
    assert ptrs and all(p in adds for p in ptrs[:2]), ir_text  # st and ld through [%r6+68]
    assert "to ptr addrspace(3)" not in re.sub(r"inttoptr i32 \S+ to ptr addrspace\(3\)", "", ir_text)


def test_amdgpu_32_bit_generic_address_wraps_before_widening():
    ir_text, _ = lower(parse(WRAP32.replace("OFFSET", "16"), "wrap32.ptx"), "gfx942")
    widened = re.search(r"(%\S+) = add i32 (%\S+), 16\n\s+(%\S+) = zext i32 \1 to i64\n\s+%\S+ = inttoptr i64 \3 to ptr",
                        ir_text)
    assert widened, ir_text
