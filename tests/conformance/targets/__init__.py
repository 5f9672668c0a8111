"""Instances for the target sweep (test_target_sweep.py), one module per family.

Each family module exports `OPCODES` (grammar opcode names it answers for) and
`instances(tf: TargetForm) -> list[Instance]`. Together a family's instances for a form line
must cover every requirement of `tf.requirements()` (each modifier value, and the absence of
each optional slot); the sweep checks that mechanically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from zluda_py.compiler.cpu.runtime import CompiledModule


@dataclass
class Instance:
    """One use of a form, in a kernel of its own, with the check that proves it right.

    `entry` is the whole `.entry NAME(...) { ... }` text (NAME unique in the sweep, e.g. built
    from the modifiers), `decls` any module-scope declarations it needs (names prefixed with
    NAME so that instances can share a module). `check(module, name)` launches the kernel with
    numpy buffers and asserts the result against an independent reference (exact Python or
    numpy), never against our own output. `refused` names the precise unsupported error the
    compiler must raise instead (then `check` is not called).
    """

    mods: tuple[str, ...]  # the instruction's modifiers in grammar order, as the form writes them
    name: str
    entry: str
    check: Callable[[CompiledModule, str], None]
    decls: str = ""
    target: str = "sm_90"  # the lowest .target the form needs; instances are grouped by it
    version: str = "8.7"
    address_size: int = 64  # 32: a legacy module, which ptxas 13 no longer assembles (not checked by it)
    refused: str | None = None
    notes: list[str] = field(default_factory=list)
