"""Warp collectives whose lanes pass different member masks: each lane's result is taken over
the lanes of ITS mask (cooperative-groups tiles converged at one instruction, and divergent
groups). References are computed here in Python from the PTX ISA's definitions."""

from __future__ import annotations

import numpy as np

from zluda_py.compiler import compile

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry masks(.param .u64 out)
{
  .reg .b32 %r<24>; .reg .b64 %rd<4>; .reg .pred %p<6>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  mul.wide.u32 %rd2, %r1, 48;
  add.s64 %rd3, %rd1, %rd2;
  // v = ((tid * 2654435761) >> 20) - 2048: signed values in [-2048, 2048)
  mul.lo.u32 %r3, %r1, -1640531535;
  shr.u32 %r3, %r3, 20;
  sub.s32 %r3, %r3, 2048;
  // two 16-lane tiles, converged: lanes 0-15 pass 0x0000ffff, lanes 16-31 pass 0xffff0000
  setp.lt.u32 %p1, %r2, 16;
  selp.b32 %r4, 0xffff, 0xffff0000, %p1;
  redux.sync.add.s32 %r5, %r3, %r4;
  redux.sync.min.s32 %r6, %r3, %r4;
  redux.sync.max.u32 %r7, %r3, %r4;
  redux.sync.xor.b32 %r8, %r3, %r4;
  // four 8-lane groups: mask 0xff << (lane & ~7)
  and.b32 %r9, %r2, 24;
  shl.b32 %r10, 255, %r9;
  setp.lt.s32 %p2, %r3, 0;
  vote.sync.ballot.b32 %r11, %p2, %r10;
  vote.sync.any.pred %p3, %p2, %r10;
  selp.u32 %r12, 1, 0, %p3;
  elect.sync %r13|%p4, %r10;
  selp.u32 %r14, 1, 0, %p4;
  div.u32 %r15, %r2, 12;
  match.all.sync.b32 %r16|%p5, %r15, %r10;
  selp.u32 %r17, 1, 0, %p5;
  and.b32 %r18, %r3, 3;
  match.any.sync.b32 %r19, %r18, %r10;
  st.global.v4.u32 [%rd3], {%r5, %r6, %r7, %r8};
  st.global.v4.u32 [%rd3+16], {%r11, %r12, %r13, %r14};
  st.global.v2.u32 [%rd3+32], {%r16, %r17};
  st.global.u32 [%rd3+40], %r19;
  // divergent groups: even lanes reduce over the even lanes, odd lanes over the odd ones
  and.b32 %r20, %r2, 1;
  setp.eq.u32 %p1, %r20, 1;
  activemask.b32 %r21;
  @%p1 bra ODD;
  and.b32 %r22, %r21, 0x55555555;
  redux.sync.add.s32 %r23, %r3, %r22;
  bra.uni DONE;
ODD:
  and.b32 %r22, %r21, 0xaaaaaaaa;
  redux.sync.add.s32 %r23, %r3, %r22;
DONE:
  st.global.u32 [%rd3+44], %r23;
  ret;
}
"""


def _lanes_of(mask: int, warp: list[int]) -> list[int]:
    return [t for t in warp if mask >> (t % 32) & 1]


def test_collectives_with_a_member_mask_per_lane():
    threads = 48  # a full warp and a warp of 16 lanes
    out = np.zeros((threads, 12), np.uint32)
    compile(PTX).launch("masks", (1,), (threads,), [out])
    v = {t: ((t * 2654435761) % 2**32 >> 20) - 2048 for t in range(threads)}
    u32 = lambda x: x & 0xFFFFFFFF  # noqa: E731
    for t in range(threads):
        warp = list(range(t // 32 * 32, min(threads, t // 32 * 32 + 32)))
        lane = t % 32
        tile = _lanes_of(0xFFFF if lane < 16 else 0xFFFF0000, warp)
        xor = 0
        for u in tile:
            xor ^= u32(v[u])
        group = _lanes_of(0xFF << (lane & 24), warp)
        negative = sum(1 << (u % 32) for u in group if v[u] < 0)
        same_third = all(u % 32 // 12 == lane // 12 for u in group)
        group_bits = sum(1 << (u % 32) for u in group)
        same_low = sum(1 << (u % 32) for u in group if v[u] & 3 == v[t] & 3)
        parity = [u for u in warp if u % 2 == t % 2]
        expected = [u32(sum(v[u] for u in tile)), u32(min(v[u] for u in tile)), max(u32(v[u]) for u in tile), xor,
                    negative, int(negative != 0), group[0] % 32, int(t == group[0]),
                    group_bits if same_third else 0, int(same_third), same_low, u32(sum(v[u] for u in parity))]
        assert out[t].tolist() == expected, f"thread {t}"
