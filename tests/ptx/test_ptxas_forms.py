"""Instruction forms against ptxas 13.0, which NVIDIA's driver shares its front end with: integer
and floating-point arithmetic, min/max, selp, setp and set (ptx/compare_forms.py), and ld, st
(ptx/access_forms.py), atom and red with their types, orders, scopes, spaces and cache
modifiers (the grammar's `gate` lines), one module per .version/.target pair. ptxas reports an error line for each
form it refuses; our parse, built and unbuilt (a lazy load's check), must refuse the same lines,
apart from the few forms below that ptxas takes without the manual defining them."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from zluda_py import ptx

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
pytestmark = pytest.mark.skipif(not os.path.exists(PTXAS), reason="needs ptxas, the reference")

# every register type ptxas declares, also as `%<type>_N` (the ld/st register test)
TYPED_REGS = ["b8", "u8", "s8", "b16", "u16", "s16", "f16", "b32", "u32", "s32", "f32", "f16x2", "b64", "u64", "s64",
              "f64"]
PRELUDE = (".visible .entry k()\n{\n.reg .pred %p<4>;\n.reg .b16 %h<4>;\n.reg .b32 %r<4>;\n.reg .f32 %f<4>;\n"
           ".reg .b64 %d<4>;\n.reg .f64 %g<4>;\n" + "".join(f".reg .{t} %{t}_<4>;\n" for t in TYPED_REGS))
REG = {"u8": "%h", "u16": "%h", "s16": "%h", "b16": "%h", "f16": "%h", "bf16": "%h", "u32": "%r", "s32": "%r", "b32": "%r",
       "f16x2": "%r", "bf16x2": "%r", "u16x2": "%r", "f32": "%f", "u64": "%d", "s64": "%d", "b64": "%d",
       "f64": "%g", "pred": "%p"}
WIDE = {"u16": "%r", "s16": "%r", "u32": "%d", "s32": "%d"}
INTEGERS = ["u16", "s16", "u32", "s32", "u64", "s64", "b16", "b32", "b64"]
FLOATS = ["f16", "f16x2", "bf16", "bf16x2", "f32", "f64"]
# each gate of these forms is crossed by some pair: f16 (4.2, sm_53), 64-bit carries (4.3), an
# integer result of an f16 compare (6.5), .NaN (7.0, sm_80), .xorsign.abs (7.2, sm_86), bf16
# compares and tanh (7.8, sm_90)
PAIRS = [("4.2", "sm_53"), ("4.3", "sm_53"), ("6.4", "sm_75"), ("6.5", "sm_75"), ("7.0", "sm_80"),
         ("7.2", "sm_86"), ("7.8", "sm_89"), ("7.8", "sm_90"), ("8.8", "sm_120")]
# ptxas takes these, but the manual gives them no meaning: we refuse them, loudly
UNDEFINED = {*(f"{op}.{t}" for op in ("addc", "subc") for t in ("u16", "s16")), "addc.sat.s32", "subc.sat.s32",
             *(f"madc.{m}.{t}" for m in ("lo", "hi") for t in ("u16", "s16")), "madc.hi.sat.s32",
             *(f"rcp.{r}.ftz.f64" for r in ("rn", "rz", "rm", "rp")),
             *(f"fma.{r}.{t}" for r in ("rz", "rm", "rp") for t in ("bf16", "bf16x2"))}


def arithmetic() -> list[str]:
    mods = ["", ".rn", ".rz", ".ftz", ".sat", ".rn.ftz", ".rn.sat", ".rn.ftz.sat", ".lo", ".hi", ".wide", ".cc",
            ".lo.cc", ".hi.cc", ".approx", ".full", ".approx.ftz", ".rn.relu", ".relu", ".hi.sat"]
    ops = [("add", 2), ("sub", 2), ("mul", 2), ("mad", 3), ("fma", 3), ("div", 2), ("addc", 2), ("subc", 2),
           ("madc", 3), ("rem", 2), ("sad", 3), ("mul24", 2), ("mad24", 3)]
    lines = []
    for (op, n), m, t in itertools.product(ops, mods, INTEGERS + FLOATS):
        dest = (WIDE.get(t, REG[t]) if ".wide" in m else REG[t]) + "1"
        srcs = [REG[t] + "2"] * n
        if op == "mad" and ".wide" in m:
            srcs[2] = dest
        lines.append(f"{op}{m}.{t} {dest}, {', '.join(srcs)};")
    for op, m, t in itertools.product(["rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"],
                                      ["", ".approx", ".approx.ftz", ".rn", ".rz.ftz", ".full", ".ftz"], FLOATS):
        lines.append(f"{op}{m}.{t} {REG[t]}1, {REG[t]}2;")
    for op, m, t in itertools.product(["min", "max", "abs", "neg"],
                                      ["", ".ftz", ".NaN", ".ftz.NaN", ".xorsign.abs", ".NaN.xorsign.abs", ".relu"],
                                      INTEGERS + FLOATS):
        srcs = ", ".join([REG[t] + "2"] * (1 if op in ("abs", "neg") else 2))
        lines.append(f"{op}{m}.{t} {REG[t]}1, {srcs};")
    lines += [f"selp.{t} {REG[t]}1, {REG[t]}2, {REG[t]}2, %p1;" for t in INTEGERS + FLOATS + ["pred"]]
    return lines


def comparisons() -> list[str]:
    cmps = ["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
            "num", "nan"]
    lines = []
    for c, ftz, t in itertools.product(cmps, ["", ".ftz"], INTEGERS + FLOATS):
        lines += [f"setp.{c}{ftz}.{t} %p1, {REG[t]}2, {REG[t]}2;",
                  f"setp.{c}{ftz}.{t} %p1|%p2, {REG[t]}2, {REG[t]}2;",
                  f"setp.{c}.or{ftz}.{t} %p1|%p2, {REG[t]}2, {REG[t]}2, !%p3;",
                  f"setp.{c}.and{ftz}.{t} %p1, {REG[t]}2, {REG[t]}2, %p3;"]
    dests = ["u32", "s32", "f32", "u16", "s16", "f16", "bf16", "f16x2", "bf16x2", "u16x2", "b32"]
    for c, ftz, t, d in itertools.product(["eq", "lt", "hs", "nan"], ["", ".ftz"], INTEGERS + FLOATS, dests):
        lines.append(f"set.{c}{ftz}.{d}.{t} {REG[d]}1, {REG[t]}2, {REG[t]}2;")
        if c == "lt":
            lines.append(f"set.{c}.xor{ftz}.{d}.{t} {REG[d]}1, {REG[t]}2, {REG[t]}2, %p1;")
    return lines


def memory() -> list[str]:
    spaces = ["", ".global", ".shared", ".shared::cta", ".shared::cluster", ".local", ".const", ".param"]
    orders = ["", ".weak", ".volatile", ".relaxed.gpu", ".acquire.sys", ".release.cta", ".relaxed", ".acquire.gpu",
              ".mmio.relaxed.sys", ".relaxed.cluster"]
    caching = ["", ".ca", ".cg", ".cs", ".lu", ".cv", ".wb", ".wt", ".nc", ".L1::evict_last", ".L1::no_allocate",
               ".L2::64B", ".L2::256B", ".L1::evict_first.L2::256B"]
    lines = []
    for q, sp, c, t in itertools.product(orders, spaces, caching, ["b32", "u8", "f64"]):
        lines.append(f"ld{q}{sp}{c}.{t} {REG[t]}1, [%d1];")
        if sp not in (".const", ".param") and c != ".nc":
            lines.append(f"st{q}{sp}{c}.{t} [%d1], {REG[t]}1;")
    for op, sp, v, t in itertools.product(["ld", "st"], ["", ".global", ".shared"], [2, 4, 8],
                                          ["b32", "f16", "b64", "f32", "u8", "b16"]):
        regs = "{" + ", ".join([REG[t] + "1"] * v) + "}"
        lines.append(f"ld{sp}.v{v}.{t} {regs}, [%d1];" if op == "ld" else f"st{sp}.v{v}.{t} [%d1], {regs};")
    ops = ["and", "or", "xor", "add", "inc", "dec", "min", "max", "exch", "cas"]
    types = ["b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64", "f16", "f16x2", "bf16", "bf16x2", "b16", "u16"]
    for op, t, sp, sem in itertools.product(ops, types, ["", ".global", ".shared::cta", ".shared::cluster"],
                                            ["", ".relaxed.gpu", ".acq_rel.sys", ".release", ".acquire.cta",
                                             ".cluster", ".sys"]):
        c = f", {REG[t]}2" if op == "cas" else ""
        lines.append(f"atom{sem}{sp}.{op}.{t} {REG[t]}1, [%d1], {REG[t]}2{c};")
        if op not in ("exch", "cas"):
            lines.append(f"red{sem}{sp}.{op}.{t} [%d1], {REG[t]}2;")
    for t in ["f32", "f16", "bf16", "f16x2", "bf16x2"]:
        lines += [f"atom.global.add.noftz.{t} {REG[t]}1, [%d1], {REG[t]}2;",
                  f"red.global.add.noftz.{t} [%d1], {REG[t]}2;",
                  f"atom.global.L2::cache_hint.add.noftz.{t} {REG[t]}1, [%d1], {REG[t]}2, %d2;"]
    return lines


def module(version: str, target: str, lines: list[str]) -> str:
    return f".version {version}\n.target {target}\n.address_size 64\n{PRELUDE}" + "\n".join(lines) + "\nret;\n}\n"


FIRST = 4 + PRELUDE.count("\n")  # the line number of lines[0]


def ptxas_refused(version: str, target: str, lines: list[str]) -> set[int]:
    """Indices of `lines` ptxas reports an error for (built for sm_90, or the target if newer)."""
    arch = target if int(target[3:]) > 90 else "sm_90"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(module(version, target, lines))
        r = subprocess.run([PTXAS, f"-arch={arch}", path, "-o", os.path.join(d, "k.cubin")], capture_output=True,
                           text=True)
    refused = {int(m[1]) - FIRST for m in re.finditer(r"line (\d+); error", r.stderr)}
    assert refused and min(refused) >= 0, r.stderr[-2000:]  # every error is a form's
    return refused


def ours_refused(version: str, target: str, lines: list[str], unbuilt: bool) -> set[int]:
    try:
        ptx.parse(module(version, target, lines), "k.ptx", unbuilt=unbuilt)
    except ptx.PtxError as e:
        errors = getattr(e, "errors", [e])
        assert {x.cu_result for x in errors} == {218}
        return {x.line - FIRST for x in errors}
    return set()


@pytest.mark.parametrize("family", [arithmetic, comparisons, memory], ids=["arithmetic", "comparisons", "memory"])
@pytest.mark.parametrize("version,target", PAIRS)
def test_forms_are_refused_where_ptxas_refuses_them(family, version, target):
    lines = family()
    theirs = ptxas_refused(version, target, lines)
    assert len(theirs) < len(lines)
    ours = ours_refused(version, target, lines, unbuilt=False)
    differ = sorted(lines[k] for k in ours ^ theirs)
    assert [line for line in differ if line.split()[0] not in UNDEFINED] == []
    assert all(k in ours for k, line in enumerate(lines) if line.split()[0] in UNDEFINED)
    assert ours_refused(version, target, lines, unbuilt=True) == ours  # the lazy load's check agrees


def test_messages_say_what_is_wrong():
    cases = {"setp.lt.b32 %p1, %r2, %r2;": "'setp.lt.b32': comparison .lt does not apply to .b32",
             "setp.eq.ftz.s32 %p1, %r2, %r2;": ".ftz applies only to f32, f16 and f16x2",
             "set.eq.f16x2.f32 %r1, %f2, %f2;": "set does not write .f16x2 from a .f32 comparison",
             "setp.lt.f16 %p1|%p2, %h1, %h2;": "writes one predicate, not 'p|q'",
             "add.b32 %r1, %r2, %r2;": "unknown modifier .b32 for 'add'",
             "div.f32 %f1, %f2, %f2;": "'div.f32' needs one of: .approx; .full; .rm .rn .rp .rz",
             "mul.wide.u64 %d1, %d2, %d2;": "'mul.wide.u64' matches no form",
             "set.eq.u32.f16 %r1, %h1, %h2;": "requires PTX ISA 6.5 or later",
             "atom.global.and.u32 %r1, [%d1], %r2;": "'atom.global.and.u32' matches no form",
             "atom.global.min.b32 %r1, [%d1], %r2;": "'atom.global.min.b32' matches no form",
             "ld.shared.v8.b32 {%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, [%d1];": "to global or generic addresses only",
             "ld.relaxed.cluster.global.b32 %r1, [%d1];": "requires sm_90 or later",
             "ld.global.u32 %f1, [%d1];": "operand '%f1' has type .f32, incompatible with .u32 of 'ld'",
             "st.global.v2.b32 [%d1], {%f1, %u32_1};": "a vector's registers of types .f32 and .u32 do not combine"}
    for line, want in cases.items():
        version = "6.4" if "6.5" in want else "8.0"
        with pytest.raises(ptx.PtxError, match=re.escape(want)) as e:
            ptx.parse(module(version, "sm_75", [line]))
        assert e.value.cu_result == 218


def test_register_types_are_those_ptxas_takes():
    """Every instruction type of mov, arithmetic, logic, compares, selp, cvt (same and other types)
    with every register type: our parse, built and unbuilt, refuses exactly the lines ptxas
    refuses. An .f16x2 register takes integer instructions (`add.u32`), a cvt takes a wider
    bit-size register for f16/f32 (`cvt.f16.f16 %b32_1, ...`): both used to be refused; a bf16
    instruction takes .b16 registers only, where we used to take .u16, .s16 and .f16 ones; atom and
    red registers follow the same rules (we used to take any, `atom.global.min.u32 %fd1, ...`), as do
    set's sources, testp, sad, mul24/mad24, prmt, shfl and cvta (also unchecked before)."""
    types = ["b16", "u16", "s16", "f16", "bf16", "b32", "u32", "s32", "f32", "f16x2", "bf16x2", "b64", "u64", "s64",
             "f64"]
    forms = ["mov.{t} {r}1, {r}2;", "add.{t} {r}1, {r}2, {r}3;", "and.{t} {r}1, {r}2, {r}3;",
             "setp.eq.{t} %p1, {r}2, {r}3;", "selp.{t} {r}1, {r}2, {r}3, %p1;", "cvt.{t}.{t} {r}1, {r}2;",
             "abs.{t} {r}1, {r}2;", "shl.{t} {r}1, {r}2, 1;", "cvt.rn.f32.{t} %f32_1, {r}2;",
             "cvt.rzi.{t}.f32 {r}1, %f32_2;", "neg.{t} {r}1, {r}2;", "fma.rn.{t} {r}1, {r}2, {r}3, {r}1;",
             "atom.global.add.{t} {r}1, [%d1], {r}2;", "atom.global.add.noftz.{t} {r}1, [%d1], {r}2;",
             "atom.global.cas.{t} {r}1, [%d1], {r}2, {r}3;", "atom.global.min.{t} {r}1, [%d1], 7;",
             "atom.global.L2::cache_hint.exch.{t} {r}1, [%d1], {r}2, %b64_1;", "red.global.add.{t} [%d1], {r}2;",
             "red.global.add.noftz.{t} [%d1], {r}2;", "red.global.L2::cache_hint.add.{t} [%d1], {r}2, %b64_1;",
             "set.eq.u32.{t} %u32_1, {r}2, {r}3;", "testp.finite.{t} %p1, {r}2;", "sad.{t} {r}1, {r}2, {r}3, {r}1;",
             "mul24.lo.{t} {r}1, {r}2, {r}3;", "mad24.lo.{t} {r}1, {r}2, {r}3, {r}1;", "prmt.{t} {r}1, {r}2, {r}3, {r}1;",
             "shfl.sync.idx.{t} {r}1, {r}2, 1, 31, -1;", "cvta.to.global.{t} {r}1, {r}2;"]
    lines = [f.format(t=t, r=f"%{r}_") for f, t, r in itertools.product(forms, types, TYPED_REGS)]
    # and constants where those take a register
    lines += [f.format(t=t, r=f"%{t}_", c=c)
              for f, t, c in itertools.product(["set.eq.u32.{t} %u32_1, {r}2, {c};", "sad.{t} {r}1, {r}2, {c}, {r}1;",
                                                "prmt.{t} {r}1, {r}2, {r}3, {c};", "atom.global.add.{t} {r}1, [%d1], {c};",
                                                "red.global.add.{t} [%d1], {c};", "shfl.sync.idx.{t} {r}1, {c}, 1, 31, -1;"],
                                               ["u16", "f16", "b32", "u32", "s32", "f32", "u64", "f64"],
                                               ["5", "-1", "0f3F800000", "0d3FF0000000000000", "1.5"])]
    theirs = ptxas_refused("8.0", "sm_90", lines)
    assert 0 < len(theirs) < len(lines)
    for unbuilt in (False, True):
        ours = ours_refused("8.0", "sm_90", lines, unbuilt)
        assert sorted(lines[k] for k in ours ^ theirs) == []


def test_cvt_registers_are_those_ptxas_takes():
    """Every scalar cvt between two of twelve types, each side with every register type (the
    other side's register of its type): refused exactly where ptxas refuses, built and unbuilt.
    In a cvt with a bf16 side ptxas takes no wider register (`cvt.rn.bf16.f32 %rs1, %rd1`,
    `cvt.rzi.u16.bf16 %r1, %rs2`), which we used to take. Apart: ptxas converts bf16 to and from
    8-bit integers in 8-bit registers, which we refuse (cvt_forms: not supported, loudly)."""
    types = ["u8", "s8", "u16", "s16", "f16", "bf16", "u32", "s32", "f32", "u64", "s64", "f64"]
    own = {t: f"%{t}_" for t in types} | {"bf16": "%b16_"}
    floats = {"f16", "bf16", "f32", "f64"}

    def rounding(d: str, a: str) -> str:
        if (a in floats) != (d in floats):
            return ".rzi" if a in floats else ".rn"
        narrower = d in floats and int(d[-2:].lstrip("f")) < int(a[-2:].lstrip("f"))
        return ".rn" if narrower or {d, a} == {"f16", "bf16"} else ""
    lines = []
    for d, a, r in itertools.product(types, types, TYPED_REGS):
        m = rounding(d, a)
        lines += [f"cvt{m}.{d}.{a} %{r}_1, {own[a]}2;", f"cvt{m}.{d}.{a} {own[d]}1, %{r}_2;"]
    theirs = ptxas_refused("8.0", "sm_90", lines)
    assert 0 < len(theirs) < len(lines)
    for unbuilt in (False, True):
        ours = ours_refused("8.0", "sm_90", lines, unbuilt)
        assert sorted(lines[k] for k in theirs - ours) == []
        apart = sorted(lines[k] for k in ours - theirs)
        assert apart and all("bf16" in line and ("8." in line or "8 " in line) for line in apart), apart


def test_ld_st_registers_are_those_ptxas_takes():
    """Every access type (ld, st, vectors, four spaces, ldu) with every register type: our parse,
    built and unbuilt, refuses exactly the lines ptxas refuses. A narrower register
    (`ld.global.b64 %r1`) used to load the low half; a float register for an integer access
    (`ld.global.u32 %f1`), an integer one for a scalar float access (`ld.global.f32 %r1` with
    `.reg .u32 %r1`) or one of another float type (`ld.global.f32 %fd1`) used to be taken, and so
    were a vector's registers of types that do not combine (`{%f1, %u32_1}`, `{%b8_1, %b64_1}`)."""
    access = ["b8", "u8", "s8", "b16", "u16", "s16", "f16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64",
              "f16x2", "bf16"]
    forms = ["ld.global.{t} {r}1, [%d1];", "st.shared.{t} [%d1], {r}1;", "ld.local.{t} {r}1, [%d1];",
             "ld.param.{t} {r}1, [%d1];", "ldu.global.{t} {r}1, [%d1];", "ld.global.v2.{t} {{{r}1, {r}2}}, [%d1];",
             "st.global.v2.{t} [%d1], {{{r}1, {r}2}};", "ld.shared.v4.{t} {{{r}1, {r}2, {r}1, {r}2}}, [%d1];",
             "st.global.v4.{t} [%d1], {{%b64_1, {r}1, %b64_1, %b64_1}};"]
    lines = [f.format(t=t, r=f"%{r}_") for f, t, r in itertools.product(forms, access, TYPED_REGS)]
    # a vector's registers of two types: taken where the types combine into one ptxas takes
    lines += [f"st.global.v2.{t} [%d1], {{%{a}_1, %{b}_1}};"
              for t, a, b in itertools.product(["b8", "u8", "b32", "u32", "f32", "b64", "f64"], TYPED_REGS, TYPED_REGS)]
    theirs = ptxas_refused("8.0", "sm_90", lines)
    assert 0 < len(theirs) < len(lines)
    for unbuilt in (False, True):
        ours = ours_refused("8.0", "sm_90", lines, unbuilt)
        assert sorted(lines[k] for k in ours ^ theirs) == []
