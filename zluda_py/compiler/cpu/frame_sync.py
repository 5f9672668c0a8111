"""Which registers a warp may have changed since its frame last held them.

At a block barrier a kernel's warp function saves the registers live after the barrier into its
frame and returns to the block runner; resuming, it loads them back (`CallMixin.lower_barrier`,
`_emit_resume`). A register that no lane can have written since the warp last resumed still
equals its frame slot: it is live after this barrier and not written on the way here, so it was
live where the warp resumed and was loaded from that slot (from a divergent warp's save of
every register too), and only this warp's saves write its frame. Such a register need not be
saved again; the tree reduction's `%tid`-derived address vectors are, every round.
"""

from __future__ import annotations

from zluda_py.compiler import cfg
from zluda_py.compiler.cpu.affine import written


def written_since_resume(body: cfg.FunctionBody, registers: set[str]) -> dict[int, set[str]]:
    """For each block that follows a block barrier the warp returns at (the barrier's next block):
    the registers some lane may have written since the warp last resumed, over every path into
    that block, the barrier's own included. From the kernel's start that is every register
    (`registers`): its frame holds nothing yet."""
    blocks = body.blocks
    defs = [set().union(*(written(i) for i in blk.insts)) for blk in blocks]
    # the edge out of a barrier block is a resume: nothing is unsaved after it but a bar.red result
    resumed = {blk.index: set(written(blk.insts[-1])) for blk in blocks
               if blk.insts and cfg.is_block_barrier(blk.insts[-1]) and not blk.insts[-1].has("arrive")}
    dirty_in = [set() for _ in blocks]
    if blocks:
        dirty_in[0] = set(registers)
    changed = True
    while changed:
        changed = False
        for blk in blocks:
            out = resumed.get(blk.index)
            if out is None:
                out = dirty_in[blk.index] | defs[blk.index]
            for s in blk.succs:
                if not out <= dirty_in[s]:
                    dirty_in[s] |= out
                    changed = True
    before: dict[int, set[str]] = {}
    for blk in blocks:  # what flows into each barrier's next block before the resume
        if blk.index in resumed and blk.fallthrough is not None:
            before[blk.fallthrough] = dirty_in[blk.fallthrough] | dirty_in[blk.index] | defs[blk.index]
    return before
