"""A lazy load checks function bodies without building their AST where it can (ptx/fastcheck.py,
`cache.compile.checked`). It must refuse exactly what the full parse and checks refuse, with the
same message and CUresult, and give the load the same facts (items, kernels' declarations,
`whole_reason`, parts, the spans kernels are parsed from later): compared here on nvcc's output,
the hand-written and hostile corpora, fuzz kernels and systematic single-statement mutations of
real nvcc bodies. Messages are also checked against hand-written expectations."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from zluda_py.cache import compile as cache_compile
from zluda_py.cache.part_source import PartSource
from zluda_py.compiler.linker import link
from zluda_py.compiler.parts import declared_kernel, parts, whole_reason
from zluda_py.fuzz.generate import generate, module_ptx
from zluda_py.fuzz.hostile.cases import mutate_ptx
from zluda_py.ptx import PtxError, ast, parse

from .corpus import BUILDS, HAND_WRITTEN, build_id

CUDA_SOURCES = sorted(p.name for p in (Path(__file__).parents[1] / "cuda").glob("*.cu"))
HOSTILE = sorted((Path(__file__).parents[1] / "hostile" / "corpus").glob("*.ptx"))


def full(text: str) -> ast.Module:
    return link([parse(text)])


def loaded(text: str) -> ast.Module:
    return cache_compile.checked([text])


def outcome(make, text: str):
    """What the load learns from `text`: its error (message, position, CUresult), or the facts."""
    try:
        m = make(text)
    except PtxError as e:
        return "refused", type(e).__name__, str(e), e.cu_result
    items = []
    for item in m.items:
        if isinstance(item, ast.Function):
            facts = None if item.facts is None else (item.facts.functions, item.facts.whole, item.facts.absent_query)
            items.append((item.name, item.kind, item.linkage, item.params, item.returns, item.directives,
                          int(item.pos), item.body is None, facts))
        else:
            items.append((item, int(item.pos)))
    source = PartSource.of(m, text)
    return ("loaded", items, whole_reason(m), parts(m), [(k.name, declared_kernel(k)) for k in m.kernels()],
            None if source is None else source.items)


def unbuilt_share(text: str) -> float:
    fs = [f for f in loaded(text).functions() if f.body is not None]
    return sum(type(f.body) is ast.UnbuiltBody for f in fs) / max(1, len(fs))


def assert_same(text: str) -> tuple:
    want = outcome(full, text)
    assert outcome(loaded, text) == want
    return want


@pytest.fixture(scope="module")
def nvcc_texts(nvcc) -> dict[str, str]:
    texts = {build_id(b): nvcc([b[0]], b[1], ".ptx").read_text() for b in BUILDS}
    for src in CUDA_SOURCES:
        texts[src] = nvcc([src], ["-ptx", "-arch=sm_80", "-std=c++17", "-rdc=true"], ".ptx").read_text()
    return texts


def test_nvcc_output_loads_alike_mostly_unbuilt(nvcc_texts):
    shares = {}
    for name, text in nvcc_texts.items():
        assert assert_same(text)[0] == "loaded", name
        shares[name] = unbuilt_share(text)
    # nvcc's bodies are what the quick check is for: most of them are never built at load
    assert sum(shares.values()) / len(shares) > 0.5, shares
    assert shares["vector_add.cu"] == 1.0


@pytest.mark.parametrize("path", HAND_WRITTEN + HOSTILE, ids=lambda p: p.stem)
def test_hand_written_and_hostile_files(path):
    assert_same(path.read_text())


@pytest.mark.parametrize("seed", range(2800, 2812))
def test_fuzz_kernels(seed):
    text = module_ptx([generate(seed)])
    assert assert_same(text)[0] == "loaded"


@pytest.mark.parametrize("seed", range(40))
def test_hostile_mutations(nvcc_texts, seed):
    rng = random.Random(seed)
    text = nvcc_texts[rng.choice(["vector_add.cu", "corpus_sync_atomics-arch=sm_80", "e2e_warp.cu"])]
    for _ in range(rng.choice((1, 2, 3))):
        text = mutate_ptx(rng, text)
    assert_same(text)


# ---- single-statement mutations of real nvcc bodies ----
_INSN = re.compile(r"^\t(@!?%p\d+ )?([a-z][\w.:]*)(?:\t| )([^;]*);$", re.M)
_REG = re.compile(r"%(?:rd|r|rs|f|fd|p)\d+")
_LABEL_USE = re.compile(r"\b(bra(?:\.uni)?)\s+(\$L__\w+)")


def _mutations(text: str, line: re.Match, rng: random.Random) -> list[tuple[str, str]]:
    """(what, mutated text) for one instruction line of a body."""
    s, e = line.span()
    guard, opcode, ops = line.group(1, 2, 3)
    stmt = text[s:e]
    head = "\t" + (guard or "")

    def swap(new: str) -> str:
        return text[:s] + new + text[e:]

    out = [("unknown opcode", swap(stmt.replace(opcode, "frob" + opcode[opcode.find("."):] if "." in opcode
                                                  else "frob", 1))),
           ("stray token", swap(stmt[:-1] + " %r1;")),
           ("stray comma", swap(stmt[:-1] + ",;")),
           ("modifier typo", swap(stmt.replace(opcode, opcode + ".zz", 1))),
           ("guard not a predicate", swap("\t@%r1 " + stmt.lstrip("\t").split(" ", 1)[-1] if guard else
                                          "\t@%r1 " + stmt.lstrip("\t"))),
           ("undeclared guard", swap("\t@%p9999 " + stmt.lstrip("\t").removeprefix(guard or ""))),
           ("duplicated", swap(stmt + "\n" + stmt)),
           ("stray brace", swap(stmt + "\n}")),
           ("open block", swap("{\n" + stmt))]
    if "," in ops:
        out.append(("one operand fewer", swap(head + opcode + "\t" + ops.rsplit(",", 1)[0] + ";")))
        out.append(("one operand more", swap(head + opcode + "\t" + ops + ", " + ops.rsplit(",", 1)[1].strip() + ";")))
        out.append(("constant operands", swap(head + opcode + "\t" + ops.split(",", 1)[0] + ", 1;")))
    regs = list(_REG.finditer(stmt))
    if regs:
        r = rng.choice(regs)
        for what, new in [("undeclared register", "%zz7"), ("32-bit register", "%r1"), ("64-bit register", "%rd1"),
                          ("16-bit register", "%rs1"), ("float register", "%f1"), ("double register", "%fd1"),
                          ("predicate", "%p1"), ("a constant", "7"), ("a label", "$L__BB0_1"),
                          ("a module name", "undefined_symbol"), ("a sink", "_"), ("special register", "%tid.x"),
                          ("address", "[%rd1]")]:
            out.append((what, swap(stmt[:r.start()] + new + stmt[r.end():])))
    if (m := _LABEL_USE.search(stmt)) is not None:
        out.append(("undeclared label", swap(stmt.replace(m[2], "$L__nowhere"))))
        out.append(("label is a register", swap(stmt.replace(m[2], "%r1"))))
    for space in ("global", "shared", "param", "local", "const"):
        if f".{space}" in opcode:
            for other in ("param", "global", "shared"):
                out.append((f".{space} as .{other}", swap(stmt.replace(f".{space}", f".{other}", 1))))
    return out


def _declaration_mutations(text: str) -> list[tuple[str, str]]:
    out = []
    for m in re.finditer(r"^\t\.reg \.(\w+) (%\w+)<(\d+)>;$", text, re.M):
        s, e = m.span()
        out += [("declaration gone", text[:s] + text[e:]),
                ("declaration twice", text[:e] + "\n" + m[0] + text[e:]),
                ("declaration narrower", text[:s] + m[0].replace(f"<{m[3]}>", "<1>") + text[e:]),
                ("declaration retyped", text[:s] + m[0].replace(f".{m[1]}", ".b16" if m[1] != "b16" else ".b64") + text[e:])]
    for m in re.finditer(r"^(\$L__\w+):$", text, re.M):
        out.append(("label twice", text[:m.end()] + "\n" + m[0] + text[m.end():]))
        break
    for m in re.finditer(r"^\t\.shared \.align (\d+) \.b8 (\w+)\[(\d+)\];$", text, re.M):
        s, e = m.span()
        out += [("shared alignment not a power of two", text[:s] + m[0].replace(f".align {m[1]}", ".align 3") + text[e:]),
                ("shared array declared twice", text[:e] + "\n" + m[0] + text[e:]),
                ("shared array in .global", text[:s] + m[0].replace(".shared", ".global") + text[e:]),
                ("shared array gone", text[:s] + text[e:])]
        break
    return out


@pytest.mark.parametrize("source, lines", [("vector_add.cu", 40), ("corpus_sync_atomics-arch=sm_80", 25),
                                           ("e2e_warp.cu", 25), ("corpus_thrust.cu", 8)])
def test_single_statement_mutations(nvcc_texts, source, lines):
    """Each mutation the full path refuses is refused by the load, with the same message and
    CUresult; what it accepts loads with the same facts."""
    text = nvcc_texts[source]
    rng = random.Random(source)
    candidates = list(_INSN.finditer(text))
    chosen = rng.sample(candidates, min(lines, len(candidates)))
    cases = [m for line in chosen for m in _mutations(text, line, rng)] + _declaration_mutations(text)
    refused = 0
    for what, mutated in cases:
        want = outcome(full, mutated)
        assert outcome(loaded, mutated) == want, what
        refused += want[0] == "refused"
    assert refused > len(cases) // 3  # the mutations are mostly errors, so the errors are compared


# ---- against hand-written expectations ----
HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
USED = ".visible .entry used(.param .u64 p)\n{\n.reg .b64 %rd<3>;\nld.param.u64 %rd1, [p];\nret;\n}\n"


@pytest.mark.parametrize("body, message, at", [
    ("mov.u32 %zz1, 1;", "undeclared register '%zz1'", (3, 9)),
    ("add.s32 %r1, %rd1, 1;", "operand '%rd1' has type .b64, incompatible with .s32 of 'add'", (3, 14)),
    ("bra $L__nowhere;", "undeclared symbol '$L__nowhere'", (3, 5)),
    ("frob.u32 %r1, 1;", "unknown instruction 'frob'", (3, 1)),
    ("add.s32 %r1, %r1;", "'add' takes 3 operands, found 2", (3, 1)),
    ("ld.global.u32 %r1, [q];", "'q' is in .param space but 'ld' accesses .global", (3, 20)),
])
def test_an_unused_function_is_refused_at_load(body, message, at):
    """A function nothing calls still refuses the module (tests/hardware/golden/lazy_load_probe.txt)."""
    text = HEADER + ".func unused(.param .u64 q) {\n.reg .b32 %r<2>; .reg .b64 %rd<2>;\n" + body + "\nret;\n}\n" + USED
    with pytest.raises(PtxError) as e:
        loaded(text)
    assert e.value.message == message
    assert (e.value.line - 3, e.value.col) == at
    assert outcome(loaded, text) == outcome(full, text)


def test_a_kernel_left_out_for_an_absent_query():
    """NVIDIA builds no kernel that queries a texture handle's channel order (facts.py): which
    kernels reach the query is found by walking their bodies, so the load builds them."""
    text = (HEADER + ".func query(.param .u64 t) {\n.reg .b32 %r<2>; .reg .b64 %rd<2>;\nld.param.u64 %rd1, [t];\n"
            "txq.channel_order.b32 %r1, [%rd1];\nret;\n}\n"
            ".visible .entry asks(.param .u64 t)\n{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [t];\n"
            "{\n.param .b64 param0;\nst.param.b64 [param0], %rd1;\ncall.uni query, (param0);\n}\nret;\n}\n" + USED)
    want = assert_same(text)
    assert [k for k, _ in want[4]] == ["used"]


def test_a_lazy_load_builds_no_body():
    """vector_add's kernel is checked, not built, by the load: its body reads as an error."""
    text = HEADER + USED
    body = loaded(text).functions()[0].body
    assert type(body) is ast.UnbuiltBody
    with pytest.raises(RuntimeError):
        list(body)


# ---- verdicts kept for repeated statements (fastcheck.BodyChecker.verdicts) ----
# One body, written again in each kernel with its registers renumbered, as a library repeats
# template instances: the verdicts of the first kernel's statements answer the later ones.
TWIN = """.visible .entry {k}(.param .u64 p)
{{
.reg .pred %p<16>;
.reg .b32 %r<40>;
.reg .b64 %rd<20>;
.reg .f32 %f<20>;
ld.param.u64 %rd{a}, [p];
mov.u32 %r{a}, %tid.x;
add.s32 %r{b}, %r{a}, 7;
mul.wide.s32 %rd{b}, %r{b}, 4;
add.s64 %rd{c}, %rd{a}, %rd{b};
ld.global.f32 %f{a}, [%rd{c}+8];
setp.lt.s32 %p{a}, %r{b}, -1;
@%p{a} bra $L__{k}_done;
{{
.reg .b32 %r<4>;
add.s32 %r3, %r2, %r1;
}}
fma.rn.f32 %f{b}, %f{a}, 0f3F800000, %f{a};
st.global.v2.f32 [%rd{c}], {{%f{a}, %f{b}}};
$L__{k}_done:
{extra}
ret;
}}
"""
TWIN_INSTRUCTIONS = 12  # in a kernel, nested block included, `extra` empty


def twins(extra: str = "", copies: int = 4, template: str = TWIN, header: str = HEADER) -> str:
    """`copies` kernels of `template`, the last with `extra` added ({a}, {b}, {c}: its
    registers), after `header`."""
    kernels = []
    for i in range(copies):
        a, b, c = 1 + 3 * i, 2 + 3 * i, 3 + 3 * i
        last = extra.format(a=a, b=b, c=c) if i == copies - 1 else ""
        kernels.append(template.format(k=f"k{i}", a=a, b=b, c=c, extra=last))
    return header + "".join(kernels)


def checked_count(text: str, monkeypatch) -> int:
    """The instructions the parse with unbuilt bodies checked operand by operand."""
    from zluda_py.ptx import fastcheck

    made = []
    init = fastcheck.BodyChecker.__init__

    def record(self, *args):
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(fastcheck.BodyChecker, "__init__", record)
    module = parse(text, unbuilt=True)
    assert all(type(f.body) is ast.UnbuiltBody for f in module.functions())
    return made[0].checked


def test_repeated_statements_are_checked_once(monkeypatch):
    """The first kernel's statements are checked in full; in the next three only `%tid.x`'s
    (a `%` name followed by `.`) is: the others hit their verdicts (registers renumbered, of the
    same types; another label; the parameter `[p]`; `ret`, which has no operands)."""
    text = twins()
    assert assert_same(text)[0] == "loaded"
    assert checked_count(text, monkeypatch) == TWIN_INSTRUCTIONS + 3


def assert_outcome(text: str, want: str | None) -> None:
    """The full parse's outcome, the last of four twins: refused (with the message `want` where
    given, its registers those of that kernel), or loaded where `want` says so."""
    got = assert_same(text)
    assert got[0] == ("loaded" if want == "loaded" else "refused")
    if want not in (None, "loaded"):
        i = 3
        assert want.format(a=1 + 3 * i, b=2 + 3 * i, c=3 + 3 * i) in got[2]


@pytest.mark.parametrize("extra, want", [
    # the same template as `add.s64 %rd{c}, %rd{a}, %rd{b}` with one register of another type
    ("add.s64 %rd{c}, %rd{a}, %r{b};", "operand '%r{b}' has type .b32, incompatible with .s64 of 'add'"),
    ("add.s32 %r{b}, %r{a}, 7.5;", None),  # not a kept operand list
    ("add.s32 %r{b}, %r39, 7;\nadd.s32 %r{b}, %r40, 7;", "undeclared register '%r40'"),  # past %r<40>
    ("add.s32 %r{b}, %, 7;", None),  # a `%` of the text where the template has a register
    ("add.s32 %r{b}, %r{a}%r{a}, 7;", None),
    ("@%r{a} bra $L__k3_done;", None),  # a guard of another type
    ("@%p16 bra $L__k3_done;", "undeclared register '%p16'"),
    ("bra $L__k3_nowhere;", "undeclared symbol '$L__k3_nowhere'"),  # a label the body lacks
    ("bra p;", "loaded"),  # a lone operand naming a parameter, not a label
    # a register of the nested block, after it; the block's `%r3` hiding the kernel's
    ("{{\n.reg .b32 %q<2>;\n}}\nadd.s32 %r{b}, %q1, 7;", "undeclared register '%q1'"),
    ("{{\n.reg .b64 %r<4>;\nadd.s32 %r3, %r2, %r1;\n}}", None),
    # an address's register and a vector's elements may have any type
    ("ld.global.f32 %f{a}, [%rd{c}+8];\nld.global.f32 %f{a}, [%r{c}+8];", "loaded"),
    ("st.global.v2.f32 [%rd{c}], {{%f{a}, %r{b}}};", "loaded"),
])
def test_a_kept_verdict_hides_no_error(extra, want, monkeypatch):
    """A statement that differs from one with a kept verdict only where the key looks (a
    register's type or declaration, a `%` of the text, a guard, a label, a nested block's
    registers) has the full parse's outcome: refused (with the message `want` where given), or
    loaded where `want` says so."""
    assert_outcome(twins(extra), want)
    assert checked_count(twins(), monkeypatch) < 2 * TWIN_INSTRUCTIONS


# Statements naming symbols (parameters, `.shared` arrays, inline assembly's registers, module
# names, labels) or special registers, as CUB's do: kept in `BodyChecker.replays` under what each
# name resolves to, their effects (the names, the symbols pending) repeated on a hit.
NAMED = """.visible .entry {k}(.param .u64 p, .param .u32 q)
{{
.reg .pred %p<4>;
.reg .b32 %r<20>;
.reg .b32 %q_1;
.reg .b64 %rd<20>;
.shared .align 4 .b8 s_{k}[64];
ld.param.u64 %rd{a}, [p];
ld.param.u32 %r{a}, [q];
mov.u32 %r{b}, %laneid;
add.u32 %r{b}, %q_1, 1;
ld.shared.u32 %r{c}, [s_{k}+8];
mov.u32 %r{c}, s_{k};
ld.global.u32 %r{b}, [g+4];
mov.u64 %rd{b}, g;
{{
.reg .b32 datum;
mov.b32 datum, %r{a};
add.u32 %r{b}, datum, 1;
}}
{{
.shared .align 4 .b8 _[8];
ld.shared.u32 %r{c}, [_+4];
}}
bra $L__{k}_end;
$L__{k}_end:
{extra}
ret;
}}
"""
NAMED_HEADER = HEADER + ".global .align 4 .b32 g[4];\n.func f()\n{\nret;\n}\n"
# checked in full: f's `ret`, the first kernel's statements (`extra` empty), and in the others
# `[_+4]`: `_` (a sink where it stands alone) is a name `_NAMES` leaves in the text, so its
# statement is not kept
NAMED_CHECKED = 1 + 12 + 3


def test_statements_naming_symbols_are_checked_once(monkeypatch):
    """The later kernels' statements hit what the first kernel's left, their arrays and labels
    named otherwise."""
    text = twins(template=NAMED, header=NAMED_HEADER)
    assert assert_same(text)[0] == "loaded"
    assert checked_count(text, monkeypatch) == NAMED_CHECKED


@pytest.mark.parametrize("extra, want", [
    ("ld.global.u32 %r{b}, [h+4];", "undeclared symbol 'h'"),  # a module name the module lacks
    ("ld.shared.u32 %r{c}, [s_k0+8];", "undeclared symbol 's_k0'"),  # another kernel's array
    ("ld.shared.u32 %r{c}, [q+8];", "'q' is in .param space but 'ld' accesses .shared"),
    ("mov.u32 %r{b}, %laneidx;", "undeclared register '%laneidx'"),  # not a special register
    ("{{\n.reg .b64 datum;\nadd.u32 %r{b}, datum, 1;\n}}",
     "operand 'datum' has type .b64, incompatible with .u32 of 'add'"),
    ("{{\n.reg .b32 datum;\n}}\nadd.u32 %r{b}, datum, 1;", "undeclared symbol 'datum'"),  # after its block
    # a function's name where the template has a module variable's, a register's or a `%` name's
    ("mov.u64 %rd{b}, f;", "loaded"),
    ("mov.u64 %rd{b}, k0;", "loaded"),
    ("{{\n.reg .b32 g;\nadd.u32 %r{b}, g, 1;\n}}", "loaded"),
    ("{{\n.reg .b32 f;\nadd.u32 %r{b}, f, 1;\n}}", "loaded"),
    ("add.u32 %r{b}, WARP_SZ, 1;", "loaded"),  # a constant, not a name
    ("ld.shared.u32 %r{c}, [_+4];", "undeclared symbol '_'"),  # the template's `_`, after its block
])
def test_a_kept_replay_hides_no_error(extra, want, monkeypatch):
    """A statement that differs from one kept in `replays` only in its names (a symbol that
    resolves to nothing, to another state space or type, or to a function; a `%` name that is
    no special register) has the full parse's outcome."""
    assert_outcome(twins(extra, template=NAMED, header=NAMED_HEADER), want)
    assert checked_count(twins(template=NAMED, header=NAMED_HEADER), monkeypatch) == NAMED_CHECKED
