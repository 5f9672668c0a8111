""".global/generic atom and red through one out-of-line helper per (operation, type, vector count)
(cpu/atomics.py): the kernel's IR holds no such atomic instruction of its own, each kind's helper
is defined once however many sites use it, .shared atomics stay inline, and the results keep
PTX's per-lane order within a warp (lowest active lane first), checked against values computed
here by hand."""

from __future__ import annotations

import re

import numpy as np

from zluda_py.compiler import compile
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

PTX = r"""
.version 8.0
.target sm_80
.address_size 64

// lanes where (tid & pick) == pick do, on cells[0..3] and olds[4 * tid ..]:
//   atom.add.u32 (value tid + 1), atom.exch.b32 (tid), atom.cas.b32 (compare tid, new tid + 1),
//   red.add.u32 (tid) twice, and atom.shared.add.u32 (1) on a .shared word written back to cells[4]
.visible .entry lanes(.param .u64 cells, .param .u64 olds, .param .u32 pick)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    .shared .align 4 .b32 word;
    ld.param.u64 %rd1, [cells];
    ld.param.u64 %rd2, [olds];
    ld.param.u32 %r1, [pick];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 st.shared.u32 [word], 100;
    bar.sync 0;
    and.b32 %r3, %r2, %r1;
    setp.ne.u32 %p1, %r3, %r1;
    @%p1 bra DONE;
    add.u32 %r4, %r2, 1;
    atom.global.add.u32 %r5, [%rd1], %r4;
    atom.global.exch.b32 %r6, [%rd1+4], %r2;
    atom.global.cas.b32 %r7, [%rd1+8], %r2, %r4;
    red.global.add.u32 [%rd1+12], %r2;
    red.global.add.u32 [%rd1+12], %r2;
    atom.shared.add.u32 %r8, [word], 1;
    mul.wide.u32 %rd3, %r2, 16;
    add.s64 %rd4, %rd2, %rd3;
    st.global.v4.u32 [%rd4], {%r5, %r6, %r7, %r8};
DONE:
    bar.sync 0;
    @%p2 ld.shared.u32 %r9, [word];
    @%p2 st.global.u32 [%rd1+16], %r9;
    ret;
}
"""


SHARED_ATOM = "    atom.shared.add.u32 %r8, [word], 1;\n"


def _warp(text: str) -> str:
    return re.search(r'define [^\n]*@"?lanes\.warp"?\(.*?\n}\n', text, re.S).group(0)


def test_each_atomic_kind_is_one_helper_called_from_its_sites():
    text = CPU.lower(link([parse(PTX.replace(SHARED_ATOM, ""))])).text
    warp = _warp(text)
    assert "atomicrmw" not in warp and "cmpxchg" not in warp
    defined = re.findall(r'define internal i32 @"(zluda\.atom\.[^"]+)"', text)
    assert sorted(defined) == ["zluda.atom.add.u32.x1", "zluda.atom.cas.b32.x1", "zluda.atom.exch.b32.x1"]
    # the two red sites and the atom.add call one helper (a converged clone may call it again)
    assert warp.count('call i32 @"zluda.atom.add.u32.x1"') in (3, 6)
    for name in defined:
        body = re.search(r'define internal i32 @"' + re.escape(name) + r'".*?\n}\n', text, re.S).group(0)
        assert body.count("atomicrmw") + body.count("cmpxchg") == 1  # one lane loop, not 32 copies
        assert 'call i32 @"zluda.atomic_checks"' in body  # the checks shared by every kind


def test_shared_atomics_stay_inline():
    with_shared, without = (_warp(CPU.lower(link([parse(text)])).text) for text in (PTX, PTX.replace(SHARED_ATOM, "")))
    assert with_shared.count("atomicrmw add") in (1, 2) and "atomicrmw" not in without


def _expected(pick: int, threads: int) -> tuple[list[int], np.ndarray]:
    """cells and olds as PTX defines them: a warp's active lanes act lowest first, warps one
    after another here (one block of `threads` <= 32)."""
    cells = [5, 9, 0, 0, 100]
    olds = np.zeros((threads, 4), np.uint32)
    for t in range(threads):
        if t & pick != pick:
            continue
        olds[t, 0], cells[0] = cells[0], cells[0] + t + 1
        olds[t, 1], cells[1] = cells[1], t
        olds[t, 2] = cells[2]
        if cells[2] == t:
            cells[2] = t + 1
        cells[3] += 2 * t
        olds[t, 3], cells[4] = cells[4], cells[4] + 1
    return cells, olds


def test_old_values_follow_lane_order():
    m = compile(PTX)
    for pick, threads in ((0, 32), (1, 32), (3, 29), (4, 7)):
        cells = np.array([5, 9, 0, 0, 0], np.uint32)
        olds = np.zeros((threads, 4), np.uint32)
        m.launch("lanes", (1,), (threads,), [cells, olds, np.uint32(pick)])
        want_cells, want_olds = _expected(pick, threads)
        assert cells.tolist() == want_cells, (pick, threads)
        np.testing.assert_array_equal(olds, want_olds)
