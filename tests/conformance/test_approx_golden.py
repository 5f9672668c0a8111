"""The `.approx` references against the worst cases an NVIDIA H200 gave over whole input ranges
(tests/hardware/golden/approx_bounds.txt, recorded by tests/hardware/approx_probe.py): the bound
each reference accepts must hold every output the hardware produced, or the suite would call
NVIDIA's own results wrong when it runs with `--target cuda`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.models.floating import accepts, approx_want
from conformance.refs import FORMATS

GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "approx_bounds.txt"
LINE = re.compile(r"^(\S+) (0x[0-9a-f]+)-(0x[0-9a-f]+) step (\d+) \((\d+) inputs\): (.*)$")
CELL = re.compile(r"(abs|rel|ulp) (\S+) at (0x[0-9a-f]+) -> (0x[0-9a-f]+)")


def _worst_cases() -> list[tuple[str, str, int, int]]:
    cases = []
    for line in GOLDEN.read_text().splitlines():
        m = LINE.match(line)
        if m:
            insn, cells = m.group(1), m.group(6)
            cases += [(insn, kind, int(x, 16), int(got, 16)) for kind, _, x, got in CELL.findall(cells)]
    return cases


CASES = _worst_cases()


def test_golden_file_covers_each_function() -> None:
    assert {c[0].split(".")[0] for c in CASES} == {"lg2", "ex2", "rsqrt", "rcp", "sqrt", "sin", "cos", "tanh"}
    assert len(CASES) == 36  # 12 ranges, three worst cases each


@pytest.mark.parametrize("insn,kind,x,got", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]:#x}" for c in CASES])
def test_reference_accepts_the_h200s_worst_case(insn: str, kind: str, x: int, got: int) -> None:
    opcode = insn.split(".")[0]
    want = approx_want(opcode, "f32", False, [x])
    assert accepts(want, got, FORMATS["f32"], False), f"{insn}({x:#010x}) = {got:#010x} on the H200; reference allows {want}"
