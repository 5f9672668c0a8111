"""Registers live across a block barrier: a warp that waits at `bar.sync` keeps only the
registers live into the next block (cfg.live_in), so a register a later instruction reads must
count as live. Instructions whose first operand is an address (`sust`, `sured`, `mbarrier.init`,
`st`) read it rather than write it, and a texture or surface address's coordinates
(`[%rd1, {%r1, %r2}]`) are read too. Once, both were missed: a kernel doing `sust`, `bar.sync`,
`suld` on one surface read and wrote the wrong texels after the barrier."""

from __future__ import annotations

from zluda_py.compiler import cfg
from zluda_py.ptx import parse

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 s, .param .u64 out)
{
  .reg .b32 %r<12>; .reg .b64 %rd<4>;
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [s];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 7;
  shr.u32 %r3, %r1, 3;
  mov.u32 %r4, bar;
  mov.u32 %r5, 32;
  mov.u32 %r6, 9;
  mov.u32 %r7, 1;
  bar.sync 0;
  sust.b.2d.b32.zero [%rd1, {%r2, %r3}], {%r1};
  sured.b.add.2d.u32.trap [%rd1, {%r2, %r7}], %r6;
  mbarrier.init.shared.b64 [%r4], %r5;
  ret;
}
"""


def test_addresses_and_surface_coordinates_are_read_across_a_barrier() -> None:
    body = cfg.build(parse(PTX).kernels()[0].body)
    live = cfg.live_in(body)
    after = next(i for i, blk in enumerate(body.blocks) if any(inst.opcode == "sust" for inst in blk.insts))
    assert {"%rd1", "%r1", "%r2", "%r3", "%r4", "%r5", "%r6", "%r7"} <= live[after], live[after]
