"""Every corpus module parses, prints back to an equal AST, and ptxas accepts the printed text."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from zluda_py import ptx
from zluda_py.ptx import ast

from .corpus import BUILDS, HAND_WRITTEN, arch_of, build_id

PTXAS = "/usr/local/cuda/bin/ptxas"


def ptxas_accepts(text: str, arch: str, tmp_path: Path) -> None:
    path = tmp_path / "printed.ptx"
    path.write_text(text)
    res = subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", str(tmp_path / "out.cubin")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("build", BUILDS, ids=build_id)
def test_nvcc_corpus(build, nvcc, tmp_path):
    src, args = build
    path = nvcc([src], args, ".ptx")
    text = path.read_text()
    module = ptx.parse(text, path.name)
    assert module.kernels(), "every corpus source defines kernels"
    printed = ptx.format(module)
    assert ptx.parse(printed, "printed.ptx") == module
    ptxas_accepts(printed, arch_of(args), tmp_path)


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=lambda p: p.stem)
def test_hand_written_old_forms(path, tmp_path):
    module = ptx.parse(path.read_text(), path.name)
    printed = ptx.format(module)
    assert ptx.parse(printed, "printed.ptx") == module
    if module.address_size == 32:
        # ptxas 13 refuses 32-bit compilation outright ("32-Bit compilation is no longer
        # supported"), so for these the round trip above is the whole check.
        return
    ptxas_accepts(printed, "sm_75", tmp_path)


def _opcodes(module: ast.Module) -> set[str]:
    seen: set[str] = set()

    def walk(body):
        for s in body:
            if isinstance(s, ast.Instruction):
                seen.add(".".join((s.opcode,) + s.mods))
            elif isinstance(s, ast.Block):
                walk(s.body)

    for f in module.functions():
        walk(f.body or [])
    return seen


def test_corpus_covers_the_promised_features(nvcc):
    """The sources really exercise barriers, atomics, shuffles, vote, match, redux, calls,
    half/bf16/double, cooperative groups (grid sync), printf and function pointers."""
    seen: set[str] = set()
    for src in ("corpus_sync_atomics.cu", "corpus_types_cg.cu"):
        seen |= _opcodes(ptx.parse(nvcc([src], ["-ptx", "-arch=sm_90"], ".ptx").read_text()))
    expected_prefixes = [
        "bar.sync", "barrier.sync", "bar.red.popc", "bar.red.and", "bar.red.or", "membar.sys",
        "atom.global.add.u32", "atom.global.exch.b32", "atom.global.min.s32", "atom.global.max.u32",
        "atom.global.and.b32", "atom.global.or.b32", "atom.global.xor.b32", "atom.global.cas.b32",
        "atom.global.inc.u32", "atom.global.dec.u32", "atom.global.add.f32", "atom.global.add.f64",
        "atom.shared.add.u32", "atom.global.cta.", "atom.global.sys.", "atom.add.noftz.bf16",
        "atom.add.noftz.f16", "atom.add.release.gpu", "shfl.sync.idx", "shfl.sync.up", "shfl.sync.down",
        "shfl.sync.bfly", "vote.sync.ballot", "vote.sync.all", "vote.sync.any", "vote.sync.uni",
        "match.any.sync", "match.all.sync", "redux.sync.add", "activemask", "call.uni", "call",
        "fma.rn.f16", "fma.rn.bf16", "cvt.rn.f16.f32", "sqrt.rn.f64", "fma.rn.f64", "trap",
        "nanosleep", "brev.b32", "prmt.b32", "dp4a", "ld.global.nc", "st.global.cs",
    ]
    missing = [p for p in expected_prefixes if not any(s.startswith(p) for s in seen)]
    assert not missing, f"corpus lacks {missing}"
