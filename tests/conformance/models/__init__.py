"""Reference models for the form sweep (test_sweep.py).

A model turns one supported instruction form into a test case: inputs chosen for that form and
the outputs PTX defines for them, computed by an independent reference (numpy or exact Python),
never by the compiler. Each family module (compare, convert, integer, floating) exposes
`model(opcode, mods) -> Case | None`, answering None for forms it does not model; the sweep
asks them in turn, and a supported form that no family models fails the sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from conformance.harness import Imm


@dataclass
class Case:
    """One form's inputs and expected outputs, as unsigned bit patterns (pred and cc as 0/1).

    `expected` holds one entry per destination operand (a predicate output `p|q` counts as two).
    Where PTX only bounds the result (.approx), `check(outputs)` raises AssertionError instead,
    and `expected` is empty.
    """

    srcs: list[np.ndarray | Imm]
    expected: list[list[int] | np.ndarray] = field(default_factory=list)
    pred_out: bool = False
    check: Callable[[list[np.ndarray]], None] | None = None


Model = Callable[[str, tuple[str, ...]], "Case | None"]


def families() -> list[Model]:
    """The family modules' `model` functions, in the order the sweep asks them."""
    from conformance.models import compare, convert, floating, integer, video

    return [compare.model, convert.model, integer.model, floating.model, video.model]


def case_for(opcode: str, mods: tuple[str, ...]) -> Case | None:
    for model in families():
        case = model(opcode, mods)
        if case is not None:
            return case
    return None
