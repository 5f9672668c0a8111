"""Shrink a kept divergence: delete statement subtrees of the generated kernel while it still diverges.

The generator's tree makes every deletion valid PTX with the same guarantees (a node never relies
on a sibling), so plain greedy deletion to a fixpoint is enough: parents are tried before their
children, so whole regions go first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from zluda_py.fuzz.campaign import Executor, compare, compile_for, run_module, run_reference
from zluda_py.fuzz.generate import Kernel, generate


def diverges(k: Kernel, opt: int | None, reference: Executor = run_reference, target: str = "cpu") -> str | None:
    """The divergence message of `k` alone (compiled as its own module) on `target`, or None."""
    try:
        module = compile_for(target, k.ptx(), opt)
    except Exception as e:  # noqa: BLE001 - a compile failure is a divergence too
        return f"{target} compile error: {type(e).__name__}: {e}"
    return compare(k, reference(k), run_module(module, k), target)


def minimize_kernel(k: Kernel, still_bad: Callable[[Kernel], bool], report: Callable[[str], None] = print) -> Kernel:
    """Greedy deletion of nodes (and of extra blocks) while `still_bad` holds; `k` is modified."""
    if k.grid > 1:
        grid, k.grid = k.grid, 1
        if not still_bad(k):
            k.grid = grid
    changed = True
    while changed:
        changed = False
        for node in k.nodes():
            if node.dead:
                continue
            node.dead = True
            if still_bad(k):
                changed = True
                report(f"  removed {node.shape}; {sum(not n.dead for n in k.nodes())} nodes left")
            else:
                node.dead = False
    return k


def minimize(case: Path, report: Callable[[str], None] = print, reference: Executor = run_reference) -> Path:
    """Minimise the kept case (its case.json or directory); writes minimized.ptx beside it."""
    d = case if case.is_dir() else case.parent
    info = json.loads((d / "case.json").read_text())
    opt, target = info.get("opt"), info.get("target", "cpu")
    k = generate(info["seed"], info.get("width") is not None)
    first = diverges(k, opt, reference, target)
    if first is None:
        raise SystemExit(f"seed {info['seed']} does not diverge on {target} (alone, at opt {opt}): nothing to minimise")
    report(f"seed {info['seed']} ({target}): {first}")
    minimize_kernel(k, lambda kk: diverges(kk, opt, reference, target) is not None, report)
    out = d / "minimized.ptx"
    out.write_text(k.ptx())
    report(f"minimised: {out} (grid {k.grid}, block {k.block_dims}): {diverges(k, opt, reference, target)}")
    return out
