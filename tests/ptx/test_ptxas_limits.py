"""Sizes ptxas 13.0 refuses, so NVIDIA's driver refuses the module at load: each boundary here is
checked against ptxas itself, and the cases NVIDIA's driver answered on an H100 (the hostile
suite's declarations, golden/hostile_nvidia.txt) against that record."""

from __future__ import annotations

import subprocess

import pytest

from tests.hardware.record_fuzz import _ptxas
from zluda_py import ptx

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
USE_A = ".visible .entry k(.param .u64 o)\n{\n.reg .b64 %rd<3>;\nld.param.u64 %rd1, [o];\nmov.u64 %rd2, a;\n" \
        "st.global.u64 [%rd1], %rd2;\nret;\n}\n"
CASES = {  # name: (module, accepted by ptxas)
    "const 64 KiB": (".const .align 1 .b8 a[65536];\n" + USE_A, True),
    "const 64 KiB + 1": (".const .align 1 .b8 a[65536];\n.const .align 1 .b8 b[1];\n" + USE_A, False),
    "const 16 MiB unused": (".const .align 1 .b8 a[16777216];\n.visible .entry k()\n{\nret;\n}\n", False),
    "reg 2^24": (".visible .entry k()\n{\n.reg .b32 %r<16777216>;\nret;\n}\n", True),  # 2^31: see the H100 record
    "reg 2^32": (".visible .entry k()\n{\n.reg .b32 %r<4294967296>;\nret;\n}\n", False),
    "maxntid 2^31": (".visible .entry k() .maxntid 2147483648, 1, 1\n{\nret;\n}\n", True),
    "maxntid 2^32": (".visible .entry k() .maxntid 4294967296, 1, 1\n{\nret;\n}\n", False),
    "maxntid 0": (".visible .entry k() .maxntid 0, 1, 1\n{\nret;\n}\n", False),
    "reqntid 0": (".visible .entry k() .reqntid 32, 0\n{\nret;\n}\n", False),
    # whole modules: the .target line itself (a NUL byte cut one hostile case to `.target sm_`)
    "target sm_": (".version 8.0\n.target sm_\n.address_size 64\n", False),
    "target foo": (".version 8.0\n.target foo\n.address_size 64\n", False),
    "target compute_80": (".version 8.0\n.target compute_80\n.address_size 64\n", True),
    "target texmode_independent": (".version 8.0\n.target sm_80, texmode_independent\n.address_size 64\n", True),
}


def module(text: str) -> str:
    return text if text.startswith(".version") else HEAD + text


def accepted_by_us(text: str) -> bool:
    try:
        ptx.parse(module(text))
    except ptx.PtxError as e:
        assert e.cu_result == 218 and ":" in str(e)
        return False
    return True


@pytest.mark.parametrize("name", CASES)
def test_limits_as_ptxas_draws_them(name):
    text, ptxas_accepts = CASES[name]
    try:
        _ptxas(module(text) + ".visible .entry k0()\n{\nret;\n}\n", "sm_90")
        ptxas_said = True
    except subprocess.CalledProcessError:
        ptxas_said = False
    assert ptxas_said == ptxas_accepts, "ptxas changed its mind: update CASES"
    assert accepted_by_us(text) == ptxas_accepts


def test_the_messages_say_what_and_how_much():
    with pytest.raises(ptx.PtxError, match=r":5:21: error: the module's .const variables take 65537 bytes up to 'b', "
                                           r"more than 65536"):
        ptx.parse(HEAD + CASES["const 64 KiB + 1"][0])
    with pytest.raises(ptx.PtxError, match=r"'%r<4294967296>': more than 4294967295 registers"):
        ptx.parse(HEAD + CASES["reg 2^32"][0])
    with pytest.raises(ptx.PtxError, match=r"\.maxntid 0, 1, 1: each size must be from 1 to 4294967295"):
        ptx.parse(HEAD + CASES["maxntid 0"][0])
    with pytest.raises(ptx.PtxError, match=r":2:9: error: unsupported \.target 'sm_'"):
        ptx.parse(CASES["target sm_"][0])
