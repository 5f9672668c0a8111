"""The form sweep: every instruction form the compiler supports (forms.py, enumerated from the
grammar) runs on the target against its reference model (models/), so that each supported form
has at least one conformance test. The family test files go deeper (exhaustive 16-bit inputs,
large random samples); the sweep guarantees breadth.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.forms import key, supported_forms
from conformance.models import Case, case_for
from conformance.values import check_bits

CHUNK = 32  # forms per kernel: one compilation each
XDIST_INDEPENDENT = True  # each chunk compiles its own kernel: spread them over the workers


def _chunks() -> list[tuple[str, list[tuple[str, ...]]]]:
    by_opcode: dict[str, list[tuple[str, ...]]] = {}
    for (opcode, *_), mods in sorted(supported_forms().items(), key=lambda kv: (kv[0][0], kv[1])):
        by_opcode.setdefault(opcode, []).append(mods)
    return [(op, forms[lo: lo + CHUNK]) for op, forms in by_opcode.items() for lo in range(0, len(forms), CHUNK)]


CHUNKS = _chunks()


def test_chunks_cover_every_supported_form():
    swept = {key(op, m) for op, forms in CHUNKS for m in forms}
    assert swept == set(supported_forms())


def _failures(text: str, case: Case, outs: list[np.ndarray]) -> list[str]:
    inputs = [s for s in case.srcs if isinstance(s, np.ndarray)]
    try:
        if case.check is not None:
            case.check(outs)
        else:
            assert len(case.expected) == len(outs), f"{len(outs)} outputs, model gives {len(case.expected)}"
            for k, (got, exp) in enumerate(zip(outs, case.expected)):
                check_bits(got, exp, inputs, f"{text} d{k}")
    except AssertionError as err:
        return [f"{text}: {err}"]
    return []


@pytest.mark.parametrize("opcode,forms", CHUNKS, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CHUNKS)])
def test_sweep(run, opcode, forms):
    texts = [".".join((opcode, *mods)) for mods in forms]
    cases = {text: case_for(opcode, mods) for text, mods in zip(texts, forms)}
    unmodelled = [t for t, c in cases.items() if c is None]
    modelled = {t: c for t, c in cases.items() if c is not None and run.runs(t, c.srcs, c.pred_out)}
    outs = run.batch({t: (t, c.srcs, c.pred_out) for t, c in modelled.items()}, group=CHUNK) if modelled else {}
    failures = [msg for t, c in modelled.items() for msg in _failures(t, c, outs[t])]
    assert not unmodelled, f"no reference model for: {', '.join(unmodelled)}"
    assert not failures, "\n".join(failures)
