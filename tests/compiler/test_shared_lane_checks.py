"""The per-lane path's .shared window check inside the out-of-line lane helper
(`memory._lanes_function`, `shared`): taken by every per-lane .shared access of a function
without converged clones, and by 8/16-bit ones of any function. Four access sites in one
kernel, one lane of one site given a bad offset: the launch stops at that site (earlier sites'
effects are there, its own and later ones' are not), with 716 for the first misaligned active
lane, else 700 for the first lane outside the window, naming that lane and its offset, as the
inline check of a cloned function's 32-bit accesses does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py import reference
from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.memory import SHARED_WINDOW_CHECK
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

SITES = 4
FAR = 0x1000_0000  # far outside any shared window


def kernel(bits: int, padding: int) -> str:
    """sites(bad_site, lane_a, off_a, lane_b, off_b, out): site k moves a `bits`-wide element of
    the shared buffer at offset 16*tid + 4*k (stride 16: the per-lane path), except that at site
    `bad_site` lanes lane_a and lane_b use off_a and off_b; after site k every lane writes its
    running value to out[32*k + tid]. Sites 0 and 2 store, 1 and 3 load. `padding` add/xor steps
    (their result is stored) make the kernel large enough to lose its converged clones."""
    t = f"u{bits}"
    r = "%h" if bits == 16 else "%r"
    steps = "\n".join(f"  add.u32 %r9, %r9, {k * 7919 + 1};\n  xor.b32 %r9, %r9, {k};" for k in range(padding))
    sites = []
    for k in range(SITES):
        move = (f"st.shared.{t} [%r20], {r}5;" if k % 2 == 0 else f"ld.shared.{t} {r}5, [%r20];")
        sites.append(f"""
  mad.lo.u32 %r20, %r1, 16, {4 * k};
  setp.eq.u32 %p1, %r2, {k};
  setp.eq.u32 %p2, %r1, %r3;
  and.pred %p3, %p1, %p2;
  selp.u32 %r20, %r4, %r20, %p3;
  setp.eq.u32 %p2, %r1, %r6;
  and.pred %p3, %p1, %p2;
  selp.u32 %r20, %r7, %r20, %p3;
  add.u32 %r20, %r20, %r22;
  {move}
  {"cvt.u32.u16 %r8, %h5;" if bits == 16 else "mov.u32 %r8, %r5;"}
  add.u32 %r9, %r9, %r8;
  add.u32 %r21, %r1, {k * 32};
  mul.wide.u32 %rd3, %r21, 4;
  add.u64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r9;
  add.u{bits} {r}5, {r}5, {k + 1};""")
    return f""".version 8.0
.target sm_80
.address_size 64
.shared .align 8 .b8 buf[512];
.visible .entry sites(.param .u32 bad_site, .param .u32 lane_a, .param .u32 off_a, .param .u32 lane_b,
                      .param .u32 off_b, .param .u64 out)
{{
  .reg .pred %p<4>; .reg .b16 %h<8>; .reg .b32 %r<24>; .reg .b64 %rd<6>;
  ld.param.u32 %r2, [bad_site];
  ld.param.u32 %r3, [lane_a];
  ld.param.u32 %r4, [off_a];
  ld.param.u32 %r6, [lane_b];
  ld.param.u32 %r7, [off_b];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r22, buf;
  mov.u32 %r9, %r1;
{steps}
  {"cvt.u16.u32 %h5, %r9;" if bits == 16 else "mov.u32 %r5, %r9;"}
{"".join(sites)}
  ret;
}}
"""


# (bits, padding, converged clones): a cloned kernel's 16-bit accesses and a clone-less kernel's
# 32-bit ones take the helper; a cloned kernel's 32-bit ones keep the inline check (the control)
SHAPES = [(16, 0, True), (32, 260, False), (32, 0, True)]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: f"u{s[0]}-{'cloned' if s[2] else 'no-clones'}")
def case(request):
    bits, padding, cloned = request.param
    text = kernel(bits, padding)
    part = CPU.lower_part(link([parse(text)]), "sites").text
    assert bool(re.search(r"^all\d+:", part, re.M)) is cloned
    # where the helper moves the lanes it checks the window (the flag in its size operand), and a
    # kernel without clones (no fast paths) makes no window test of its own
    call = r"call i32 @\"zluda\.(?:gather|scatter)\.i\d+\.x1\"\(ptr %\S+, [^,]+, i32 %\S+, i64 (\d+),"
    sizes = re.findall(call, part)
    helped = sum(int(size) == SHARED_WINDOW_CHECK | bits // 8 for size in sizes)
    assert helped == (0 if bits == 32 and cloned else SITES * (2 if cloned else 1))  # a clone: two copies
    assert ("zluda.window_fault" in part) is cloned
    ref = np.zeros(SITES * 32, np.uint32)
    reference.run(text, "sites", (1,), (32,), [SITES, 0, 0, 0, 0, ref])  # no site is bad
    return bits, compile(text), ref


def launch_fault(m, site: int, lane_a: int, off_a: int, lane_b: int, off_b: int) -> tuple[int, str, np.ndarray]:
    out = np.full(SITES * 32, 0xFFFFFFFF, np.uint32)
    with pytest.raises(LaunchError) as e:
        m.launch("sites", 1, 32, [site, lane_a, off_a, lane_b, off_b, out])
    return e.value.cu_result, str(e.value), out


def test_no_fault_matches_the_reference(case):
    _, m, ref = case
    out = np.zeros(SITES * 32, np.uint32)
    m.launch("sites", 1, 32, [SITES, 0, 0, 0, 0, out])
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("site", range(SITES))
def test_outside_the_window_names_the_first_such_lane_at_its_site(case, site):
    bits, m, ref = case
    status, message, out = launch_fault(m, site, 21, FAR + 8, 6, FAR)  # lanes 6 and 21 outside
    assert status == 700, message
    assert "lane 6 " in message and f"address 0x{FAR:x}" in message, message
    np.testing.assert_array_equal(out[:32 * site], ref[:32 * site])  # the sites before ran
    assert (out[32 * site:] == 0xFFFFFFFF).all()  # the faulting site and those after did not


@pytest.mark.parametrize("site", range(SITES))
def test_a_misaligned_lane_comes_before_a_lower_lane_outside(case, site):
    bits, m, ref = case
    odd = 16 * 9 + 4 * site + 1  # lane 9's own offset, plus one byte: inside, misaligned
    status, message, out = launch_fault(m, site, 3, FAR, 9, odd)
    assert status == 716, message
    assert "lane 9 " in message and f"address 0x{odd:x}" in message, message
    np.testing.assert_array_equal(out[:32 * site], ref[:32 * site])
    assert (out[32 * site:] == 0xFFFFFFFF).all()


def test_the_module_still_runs_after_a_fault(case):
    bits, m, ref = case
    launch_fault(m, 1, 0, FAR, 0, FAR)
    out = np.zeros(SITES * 32, np.uint32)
    m.launch("sites", 1, 32, [SITES, 0, 0, 0, 0, out])
    np.testing.assert_array_equal(out, ref)
