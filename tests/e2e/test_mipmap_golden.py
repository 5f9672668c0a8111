"""Mipmap level selection against an NVIDIA H100 (tests/hardware/golden/mipmap_probe.txt, from
tests/hardware/mipmap_probe.cu): every level k of the probe's chains holds k, so a fetch returns
the LOD (linear mip filtering) or the level (point) the GPU chose. Two references: the golden
lines themselves, and the conformance suite's independent model of the recorded rule
(tests/conformance/models/texture.py, "Mipmap level selection").

Bit-exact: every tex2DLod line and every point-filtered line. The linear lines of tex*DGrad
match bit for bit except 246 of the 4,940, each 1/256 or 2/256 off (up to 4/256 with anisotropy,
whose sharpened blend doubles a step): the H100's footprint arithmetic rounds below the
documented rule somewhere we could not pin down from constant-per-level chains
(docs/semantics.md names the cases), so those lines are held to that bound and the count of
exact lines may not drop."""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from conformance.models import texture as model

GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "mipmap_probe.txt"
PROBE = Path(__file__).parents[1] / "hardware" / "mipmap_probe.cu"
IMPLICIT_GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "mipmap_implicit_probe.txt"
IMPLICIT_PROBE = Path(__file__).parents[1] / "hardware" / "mipmap_implicit_probe.cu"
CLAMP_GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "mipmap_clamp_probe.txt"
CLAMP_PROBE = Path(__file__).parents[1] / "hardware" / "mipmap_clamp_probe.cu"
# chain -> (level-0 extent per gradient axis, levels); unnormalized gradients scale the same
CHAINS = {"lod": ((64, 32), 7), "grad2": ((64, 32), 7), "grad1": ((64,), 7), "grad3": ((16, 8, 4), 5),
          "unnorm": ((64, 32), 7)}
EXACT_LINES = 13212 - 246  # lines the model reproduces bit for bit (measured; may only grow)


def _float(bits: str) -> float:
    return struct.unpack("<f", struct.pack("<I", int(bits, 16)))[0]


def _lines() -> list[str]:
    return [ln for ln in GOLDEN.read_text().splitlines() if not ln.startswith("#")]


def expected(line: str) -> float:
    """What the model says the probe's fetch on this line returns."""
    case, inputs = line.split(" -> ")[0].split(" ", 1)
    parts = case.split(".")
    extent, levels = CHAINS[parts[0]]
    linear = parts[1] == "L"
    values = [float.fromhex(x) for x in inputs.split()]
    anisotropy = 0
    if parts[0] == "lod":
        bias = 0.75 if len(parts) > 2 else 0.0
        lod = model.mip_lod(values[0], bias, 0.0, levels - 1.0, levels)
    else:
        anisotropy = int(parts[2][1:]) if len(parts) > 2 else 0
        d = len(extent)  # the probe's gradients are f32, as the kernel reads them
        dx = [float(np.float32(v)) * e for v, e in zip(values[:d], extent)]
        dy = [float(np.float32(v)) * e for v, e in zip(values[d:], extent)]
        lod = model.mip_lod(model.mip_gradient_lod(dx, dy, anisotropy), 0.0, 0.0, levels - 1.0, levels)
    total = sum((min(level, levels - 1) * w for level, w in model.mip_levels(lod, linear, anisotropy)), Fraction(0))
    return float(total)


def _tolerance(line: str) -> float:
    """Steps of 1/256 a line may be off (module docstring)."""
    case = line.split()[0]
    if case.startswith("lod") or ".P" in case:
        return 0
    return 4 if case.split(".")[-1] in ("a2", "a4", "a16") else 2


def _compare(got: list[float], golden: list[str]) -> tuple[int, list[str]]:
    """(lines equal bit for bit, descriptions of lines past their tolerance)."""
    exact, beyond = 0, []
    for value, line in zip(got, golden):
        want = _float(line.split(" -> ")[1])
        exact += value == want
        if abs(value - want) * 256 > _tolerance(line):
            beyond.append(f"{line}: got {value!r}")
    return exact, beyond


def test_model_reproduces_the_h100():
    """The model, line by line, against the recorded bits."""
    golden = _lines()
    assert len(golden) == 13212
    exact, beyond = _compare([expected(ln) for ln in golden], golden)
    assert not beyond, f"{len(beyond)} lines past tolerance:\n" + "\n".join(beyond[:20])
    assert exact >= EXACT_LINES, f"{exact} of {len(golden)} lines bit-exact, {EXACT_LINES} before"


def test_driver_reproduces_the_h100(nvcc, run):
    """mipmap_probe.cu under our driver: the golden lines within their tolerance, and every line
    exactly what the model says."""
    if not GOLDEN.exists():
        pytest.skip("golden/mipmap_probe.txt not recorded: tests/hardware/run_nvidia.sh on an NVIDIA GPU writes it")
    golden = _lines()
    r = run(nvcc([PROBE], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    ours = r.stdout.splitlines()
    assert len(ours) == len(golden)
    assert [o.split(" -> ")[0] for o in ours] == [g.split(" -> ")[0] for g in golden]  # same cases, same inputs
    got = [_float(o.split(" -> ")[1]) for o in ours]
    exact, beyond = _compare(got, golden)
    assert not beyond, f"{len(beyond)} lines past tolerance:\n" + "\n".join(beyond[:20])
    assert exact >= EXACT_LINES, f"{exact} of {len(golden)} lines bit-exact, {EXACT_LINES} before"
    differ = [f"{g}: ours {o}" for g, o, v in zip(golden, ours, got) if v != expected(g)]
    assert not differ, f"{len(differ)} lines differ from the model:\n" + "\n".join(differ[:20])


def test_plain_tex_takes_lod_zero_as_the_h100(nvcc, run):
    """tex2D without .level or .grad on a mipmapped texture: LOD 0 without the bias, then the
    clamps, whatever the coordinates of the other lanes of its quad (no implicit derivatives), as
    golden/mipmap_implicit_probe.txt recorded, line for line."""
    golden = [ln for ln in IMPLICIT_GOLDEN.read_text().splitlines() if not ln.startswith("#")]
    assert len(golden) == 8 * 1212 and len({ln.split(" -> ")[1] for ln in golden}) == 3  # levels 0, 1 and LOD 0.5
    r = run(nvcc([IMPLICIT_PROBE], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == golden


def test_lod_bias_and_clamps_combine_as_on_the_h100(nvcc, run):
    """tex2DLod's LOD is cut to 1/256 toward zero, the bias added (the sum cut toward -inf), then
    the clamps: golden/mipmap_clamp_probe.txt (lods off the 1/256 grid, seven bias and clamp
    settings), line for line; the floor of the unrounded sum misses 171 of its 3,815 lines."""
    golden = [ln for ln in CLAMP_GOLDEN.read_text().splitlines() if not ln.startswith("#")]
    assert len(golden) == 7 * 545
    r = run(nvcc([CLAMP_PROBE], [], ""))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == golden
