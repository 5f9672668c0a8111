"""`.version` / `.target` pairs against NVIDIA's driver: golden/version_target_probe.txt holds what
driver 580 (CUDA 13.0) loads on an H100, one trivial module per pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from zluda_py import ptx
from zluda_py.ptx import versions

GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "version_target_probe.txt"
# Targets the H100 could run: NVIDIA's answer depends on the .version alone. Newer targets fail
# there because the GPU is older; our CPU device runs them, so only their refusals are compared.
RUNNABLE = {"sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86",
            "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a"}


def ours(version: str, target: str) -> int:
    try:
        ptx.parse(f".version {version}\n.target {target}\n.address_size 64\n.visible .entry k()\n{{\n  ret;\n}}\n")
    except ptx.PtxError as e:  # PtxErrors too: its code is its first error's
        return e.cu_result
    return 0


def golden() -> list[tuple[str, str, int]]:
    rows = [line.split() for line in GOLDEN.read_text().splitlines() if not line.startswith("#")]
    # PTX ISA 9.1 is newer than that driver (222); ours accepts up to versions.NEWEST_ISA.
    return [(v, t, int(c)) for v, t, c, _ in rows if tuple(map(int, v.split("."))) <= (9, 0)]


def test_the_golden_file_covers_every_runnable_target():
    rows = golden()
    assert {t for _, t, _ in rows} >= RUNNABLE and len(rows) > 600
    assert sum(c == 218 for _, t, c in rows if t in RUNNABLE) == 79  # the pairs refused by .version


@pytest.mark.parametrize("target", sorted(RUNNABLE))
def test_runnable_targets_load_as_on_an_h100(target):
    wrong = [(v, c, ours(v, t)) for v, t, c in golden() if t == target and ours(v, t) != c]
    assert not wrong, f"{target}: (version, H100, ours) {wrong}"


def test_newer_targets_are_refused_only_where_nvidia_refuses_them():
    newer = [(v, t, c) for v, t, c in golden() if t not in RUNNABLE]
    assert newer
    assert all(c == 218 for v, t, c in newer if ours(v, t) != 0)
    # below the manual's first ISA for the target, refused by us as well
    assert ours("8.5", "sm_100") == 218 and ours("8.6", "sm_100") == 0 and ours("8.7", "sm_110") == 218


def test_the_refusal_names_the_target_and_both_versions():
    with pytest.raises(ptx.PtxError) as e:
        ptx.parse(".version 8.0\n.target sm_100\n.address_size 64\n")
    assert ":2:9: error: .target sm_100 requires PTX ISA 8.6 or later (module has .version 8.0)" in str(e.value)
    assert e.value.cu_result == 218
    assert versions.target_isa("sm_90a") == (8, 0) and versions.target_isa("compute_90") is None
