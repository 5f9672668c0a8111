"""The hostile-input suite in CI (docs/hostile.md): a seeded subset of every category through
the driver's entry points, each case in a child process under the memory and CPU-time
ceilings. None may crash, hang or be answered wrongly, and every case is classified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zluda_py.fuzz.hostile.cases import CATEGORIES
from zluda_py.fuzz.hostile.runner import OUTCOMES

ROOT = Path(__file__).resolve().parents[2]
FIRST, LAST = 0, 359  # 40 seeds per slot of the cycle: about a minute on two cores


@pytest.mark.xdist_group("hostile")
def test_seeded_hostile_inputs(tmp_path):
    report = tmp_path / "hostile.json"
    r = subprocess.run([sys.executable, "-m", "zluda_py.fuzz.hostile", "--seeds", f"{FIRST}-{LAST}", "--jobs", "2",
                        "--json", str(report)], capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert report.exists(), r.stdout + r.stderr
    result = json.loads(report.read_text())
    total = result["total"]
    assert total["cases"] == LAST - FIRST + 1
    assert sum(total[o] for o in OUTCOMES) == total["cases"]
    assert set(result["summary"]) == set(CATEGORIES)
    assert (total["crash"], total["hang"], total["wrong"]) == (0, 0, 0), r.stdout
    assert total["error"] > total["cases"] // 2 and total["ok"] > 0, r.stdout  # the inputs reach both answers
    assert r.returncode == 0, r.stdout + r.stderr
