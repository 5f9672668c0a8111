"""The video instructions against what an NVIDIA H200 computed (tests/hardware/golden/video.npz,
its header names the GPU and driver): every recorded form runs on the target through the
conformance harness, and through the reference of models/video.py, and both must give the
recorded d bit for bit. The rows are the recorded ones that the manual's definition gets wrong
(all with edge operands, a sample of the random ones) and a sample of the others, per form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.models import video as ref
from conformance.values import check_bits

GOLDEN = Path(__file__).resolve().parents[1] / "hardware" / "golden" / "video.npz"


def _golden() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    z = np.load(GOLDEN)
    assert "H200" in str(z["header"])
    rows = {}
    for i, form in enumerate(str(f) for f in z["ops"]):
        sel = z["op"] == i
        rows[form] = tuple(z[k][sel] for k in ("a", "b", "c", "d"))
    return rows


ROWS = _golden()


def _uses_c(form: str) -> bool:
    opcode, *mods = form.split(".")
    return opcode not in ref.SCALAR or any(m in mods for m in ref.SECONDARY)


def test_golden_holds_the_records():
    """665 forms: every scalar one in every type/.sat/secondary combination, vmad's, and the SIMD
    forms of the edge rows."""
    ops = {f.split(".")[0] for f in ROWS}
    assert {"vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vset", "vmad"} <= ops
    assert len(ROWS) == 665 and sum(len(r[3]) for r in ROWS.values()) > 60000


def test_reference_matches_h200():
    bad = []
    for form, (a, b, c, d) in ROWS.items():
        for x, y, z, w in zip(a.tolist(), b.tolist(), c.tolist(), d.tolist()):
            got = ref.form_result(form, x, y, z)
            if got != w:
                bad.append(f"{form}({x:#x}, {y:#x}, {z:#x}) = {got:#x}, H200 {w:#x}")
    assert not bad, f"{len(bad)} rows differ, e.g.\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("op", sorted({f.split(".")[0] for f in ROWS}))
def test_target_matches_h200(run, op):
    forms = [f for f in ROWS if f.split(".")[0] == op]
    cases = {f: (f, [ROWS[f][0], ROWS[f][1]] + ([ROWS[f][2]] if _uses_c(f) else [])) for f in forms}
    outs = run.batch(cases, group=32)
    for f in forms:
        a, b, c, d = ROWS[f]
        check_bits(outs[f][0], d.tolist(), [a, b, c], f"{f} against the H200")
