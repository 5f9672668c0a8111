"""Scalar `cvt` modifiers (ptx/cvt_forms.py) against ptxas 13.0, which NVIDIA's driver follows:
every combination of the twelve scalar types, rounding, .sat, .ftz and .relu goes through ptxas
in one module, whose error lines say which it refuses; ours must refuse exactly those."""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import subprocess
import tempfile

import pytest

from zluda_py import ptx
from zluda_py.ptx import cvt_forms

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
pytestmark = pytest.mark.skipif(not os.path.exists(PTXAS), reason="needs ptxas, the reference")

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
PRELUDE = (".visible .entry k()\n{\n.reg .b16 %h<4>;\n.reg .b32 %r<4>;\n.reg .f32 %f<4>;\n.reg .b64 %d<4>;\n"
           ".reg .f64 %g<4>;\n")
REG = {"u8": "%h", "s8": "%h", "u16": "%h", "s16": "%h", "f16": "%h", "bf16": "%h", "u32": "%r", "s32": "%r",
       "f32": "%f", "u64": "%d", "s64": "%d", "f64": "%g"}
ROUNDING = ["", ".rn", ".rz", ".rm", ".rp", ".rni", ".rzi", ".rmi", ".rpi", ".rna"]


def forms() -> list[tuple[str, str, tuple[str, ...], str]]:
    out = []
    for d, s, r, ftz, relu, sat in itertools.product(REG, REG, ROUNDING, ["", ".ftz"], ["", ".relu"], ["", ".sat"]):
        mods = f"{r}{ftz}{relu}{sat}"
        out.append((d, s, tuple(mods.split(".")[1:]), f"cvt{mods}.{d}.{s} {REG[d]}1, {REG[s]}2;"))
    return out


def kernel(lines: list[str]) -> str:
    return HEAD + PRELUDE + "\n".join(lines) + "\nret;\n}\n"


def ptxas_refused(lines: list[str]) -> set[int]:
    """The indices of `lines` ptxas reports an error for."""
    first = (HEAD + PRELUDE).count("\n") + 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(kernel(lines))
        r = subprocess.run([PTXAS, "-arch=sm_90", path, "-o", os.path.join(d, "k.cubin")], capture_output=True, text=True)
    return {int(m[1]) - first for m in re.finditer(r"line (\d+); error", r.stderr)}


def test_every_scalar_cvt_form_is_decided_as_ptxas_decides_it():
    all_forms = forms()
    refused = ptxas_refused([f[3] for f in all_forms])
    assert 500 < len(all_forms) - len(refused) < len(all_forms)  # ptxas answered line by line
    wrong = [line for k, (d, s, mods, line) in enumerate(all_forms)
             if (cvt_forms.problem(d, s, mods) == "") != (k not in refused)]
    assert wrong == []


def test_the_checker_refuses_them_at_parse():
    sample = random.Random(11).sample(forms(), 300)
    for d, s, mods, line in sample:
        try:
            ptx.parse(kernel([line]))
            taken = True
        except ptx.PtxError as e:
            assert e.cu_result == 218
            taken = False
        assert taken == (cvt_forms.problem(d, s, mods) == ""), line
    with pytest.raises(ptx.PtxError, match=r"'cvt\.u32\.f32': a float-to-integer conversion requires \.rni"):
        ptx.parse(kernel(["cvt.u32.f32 %r1, %f1;"]))
