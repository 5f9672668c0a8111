"""`zluda ptx coverage`: every grammar form, and what the compiler says about it."""

from __future__ import annotations

import json

import pytest

from zluda_py.cli import main
from zluda_py.cli.ptx_cmd import coverage_rows
from zluda_py.ptx import grammar

pytest.importorskip("llvmlite")
from zluda_py.compiler.coverage import cpu_support  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return coverage_rows(cpu_support)


def _forms(rows, opcode):
    return {r["form"]: r for r in rows if r["opcode"] == opcode}


def test_one_row_per_grammar_form(rows):
    forms = [(name, f.syntax) for name, op in grammar.opcodes().items() for f in op.forms]
    assert sorted((r["opcode"], r["form"]) for r in rows) == sorted(forms)
    for r in rows:
        assert 0 <= r["supported"] <= r["combinations"]
        assert r["status"] == ("yes" if r["supported"] == r["combinations"]
                               else "no" if r["supported"] == 0 else "partial")


def test_supported_and_refused_families(rows):
    assert _forms(rows, "add")["add{.sat}.s32 d, a, b;"]["status"] == "yes"
    assert _forms(rows, "add")["add{.sat}.s32 d, a, b;"]["how"] == ["semantics"]
    assert any(r["status"] == "yes" for r in _forms(rows, "mad").values())
    assert all(r["status"] == "yes" and r["how"] == ["target"] for r in _forms(rows, "ld").values()
               if "ld{" in r["form"] or r["form"].startswith("ld."))
    for refused in ("wgmma.mma_async", "mma.sp", "tcgen05.mma"):
        found = _forms(rows, refused)
        assert found and all(r["status"] == "no" for r in found.values()), refused
    mma = _forms(rows, "mma")  # mma.sync: the f16/bf16/tf32/f64/8-bit forms, not fp8, 4-bit or 1-bit
    assert mma["mma.sync.aligned.m16n8k16.row.col.dtype.f16.f16.ctype d, a, b, c;"]["status"] == "partial"
    assert mma["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c;"]["status"] == "yes"
    assert mma["mma.sync.aligned.m8n8k4.alayout.blayout.dtype.f16.f16.ctype d, a, b, c;"]["status"] == "partial"
    assert mma["mma.sync.aligned.bshape.row.col.s32.b1.b1.s32.bitOp.popc d, a, b, c;"]["status"] == "no"
    wmma = _forms(rows, "wmma.mma")  # wmma: m16n16k16 (.f16/.bf16/.s8/.u8), m16n16k8 .tf32, m8n8k4 .f64
    assert wmma["wmma.mma.sync.aligned.alayout.blayout.m16n16k16.dtype.ctype d, a, b, c;"]["status"] == "yes"
    assert wmma["wmma.mma.sync.aligned.alayout.blayout.m16n16k8.f32.tf32.tf32.f32 d, a, b, c;"]["status"] == "yes"
    assert wmma["wmma.mma.sync.aligned.alayout.blayout.wshape.dtype.ctype d, a, b, c;"]["status"] == "no"
    for texture in ("tex", "tld4", "txq", "suld", "sust", "sured", "suq", "istypep"):  # objects (CPU target)
        assert all(r["status"] == "yes" and r["how"] == ["target"] for r in _forms(rows, texture).values()), texture
    assert all(r["status"] == "yes" for r in _forms(rows, "bra").values())


def test_status_counts_each_modifier_combination():
    def only_sat(opcode, mods):
        return "x" if opcode == "add" and "sat" in mods else None

    row = _forms(coverage_rows(only_sat), "add")["add{.sat}.s32 d, a, b;"]
    assert (row["status"], row["supported"], row["combinations"]) == ("partial", 1, 2)


def test_expand_samples_huge_forms():
    form = next(f for f in grammar.opcodes()["ld"].forms if f.syntax.startswith("ld.relaxed.scope"))
    combos, complete = grammar.expand(form)
    assert not complete
    for slot in form.slots:  # every value of every slot is asked at least once
        assert slot.values <= {m for c in combos for m in c}


def test_cli_json_and_unsupported(capsys, rows):
    assert main(["ptx", "coverage", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    t = data["totals"]
    assert t["forms"] == len(rows) == t["yes"] + t["partial"] + t["no"] == len(data["forms"])
    assert main(["ptx", "coverage", "--unsupported"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("mma ") for line in lines)
    assert not any(line.split()[1:2] == ["yes"] for line in lines if line.strip())
    assert f"{t['forms']} forms on the cpu target: {t['yes']} supported" in lines[-1]
