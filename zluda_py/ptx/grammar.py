"""The PTX syntax as data: loads ptx_grammar/ and answers questions about instructions.

The grammar files are written the way the PTX ISA manual writes instruction syntax (see
ptx_grammar/README.md for the format). This module turns them into `Opcode` records that
the parser (opcode names), the checker (modifiers, operand counts, version/target gating),
the coverage report and the docs all read.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .ast import SCALAR_TYPES

# Types a declaration or an instruction type modifier may name.
TYPES: frozenset[str] = SCALAR_TYPES


@dataclass(frozen=True)
class Slot:
    """One modifier position of a form: the values it accepts and whether it may be left out."""

    values: frozenset[str]
    optional: bool
    group: str | None  # the manual's name for it (".type"), None for a literal


@dataclass(frozen=True)
class Form:
    """One syntax line of the manual: `add{.sat}.s32 d, a, b;`."""

    opcode: str
    syntax: str
    slots: tuple[Slot, ...]
    min_operands: int
    max_operands: int
    ptx: tuple[int, int]
    sm: int


@dataclass
class Opcode:
    name: str
    title: str
    ptx: tuple[int, int]
    sm: int
    forms: list[Form] = field(default_factory=list)
    # modifier -> the (PTX ISA, sm) it needs in any form (`.relaxed`: 6.0 and sm_70)
    gates: dict[str, tuple[tuple[int, int], int]] = field(default_factory=dict)


@dataclass
class DirectiveSpec:
    name: str
    ptx: tuple[int, int]
    sm: int
    syntax: str


@dataclass
class Grammar:
    opcodes: dict[str, Opcode]
    directives: dict[str, DirectiveSpec]
    max_words: int


def _grammar_dir():
    try:
        root = resources.files("zluda_py.ptx_grammar")
        if root.joinpath("instructions.txt").is_file():
            return root
    except ModuleNotFoundError:
        pass
    # Source checkout without installation: the top-level ptx_grammar/ directory.
    return Path(__file__).resolve().parents[2] / "ptx_grammar"


_GROUP_DEF = re.compile(r"\s*\.([\w:]+)\s*=\s*\{([^}]*)\}\s*;")
_REQ = re.compile(r"\b(ptx|sm)\s*=?\s*([\d.]+)")


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def _requirements(text: str, ptx: tuple[int, int] = (1, 0), sm: int = 0) -> tuple[tuple[int, int], int]:
    """The `ptx=X.Y sm=N` of `text`, each defaulting to the given one."""
    for k, v in _REQ.findall(text):
        if k == "ptx":
            ptx = _version(v)
        else:
            sm = int(v)
    return ptx, sm


def _split_top(text: str) -> list[str]:
    """Split an operand list on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "[({":
            depth += 1
        elif c in "])}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _count_operands(text: str) -> tuple[int, int]:
    """(min, max) operand count of a form's operand text: `{, x}` parts are optional."""
    required = re.sub(r"\{\s*,[^{}]*(?:\{[^{}]*\}[^{}]*)*\}", "", text)
    optional = re.findall(r"\{\s*,([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}", text)
    lo = len(_split_top(required))
    hi = lo + sum(len(_split_top(o)) for o in optional)
    return lo, hi


_SLOT_TOKEN = re.compile(r"\{|\}|\.[\w:]+|::[\w]+")


def _parse_form(line: str, names: list[str], groups: dict[str, list[str]], ptx, sm) -> Form:
    body, _, note = line.partition(";")
    head, _, ops = body.strip().partition(" ")
    for name in names:
        if head == name or head.startswith(name + ".") or head.startswith(name + "{"):
            break
    else:
        raise ValueError(f"grammar: form {line!r} does not start with {names}")
    slots: list[Slot] = []
    optional = False
    for tok in _SLOT_TOKEN.findall(head[len(name):]):
        if tok == "{":
            optional = True
        elif tok == "}":
            optional = False
        elif tok.startswith("::"):
            prev = slots[-1]
            values = prev.values | {v + tok for v in prev.values}
            slots[-1] = Slot(frozenset(values), prev.optional, prev.group)
        else:
            key = tok[1:]
            if key in groups:
                slots.append(Slot(frozenset(groups[key]), optional, key))
            else:
                slots.append(Slot(frozenset([key]), optional, None))
    lo, hi = _count_operands(ops.strip()) if ops.strip() else (0, 0)
    ptx, sm = _requirements(note, ptx, sm)
    return Form(name, body.strip() + ";", tuple(slots), lo, hi, ptx, sm)


def _parse_instructions(text: str) -> dict[str, Opcode]:
    opcodes: dict[str, Opcode] = {}
    sections = re.split(r"^==\s*", text, flags=re.M)[1:]
    for sec in sections:
        header, _, rest = sec.partition("\n")
        title, _, reqs = header.partition("|")
        names = sorted(title.split(), key=len, reverse=True)
        ptx, sm = _requirements(reqs)
        rest = re.sub(r"#[^\n]*", "", rest)
        groups: dict[str, list[str]] = {}
        for m in _GROUP_DEF.finditer(rest):
            groups[m.group(1)] = [v.strip().lstrip(".") for v in m.group(2).split(",") if v.strip()]
        rest = _GROUP_DEF.sub("", rest)
        gates: dict[str, tuple[tuple[int, int], int]] = {}
        for stmt in re.findall(r"[^;]+;[^\n]*", rest):
            stmt = " ".join(stmt.split())
            if not stmt:
                continue
            if stmt.startswith("gate "):
                _parse_gate(stmt, gates)
                continue
            form = _parse_form(stmt, names, groups, ptx, sm)
            op = opcodes.get(form.opcode)
            if op is None:
                op = opcodes[form.opcode] = Opcode(form.opcode, title.strip(), ptx, sm)
            op.forms.append(form)
        for name in names:
            if name in opcodes:
                opcodes[name].gates.update(gates)
    return opcodes


def _parse_gate(stmt: str, gates: dict[str, tuple[tuple[int, int], int]]) -> None:
    """`gate .relaxed .acquire; ptx=6.0 sm=70`: what those modifiers need wherever they appear."""
    body, _, note = stmt.partition(";")
    for mod in body.split()[1:]:
        gates[mod.lstrip(".")] = _requirements(note)


def _parse_directives(text: str) -> dict[str, DirectiveSpec]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        syntax, _, reqs = rest.partition("|")
        ptx, sm = _requirements(reqs)
        out[name.lstrip(".")] = DirectiveSpec(name.lstrip("."), ptx, sm, syntax.strip())
    return out


@lru_cache(maxsize=1)
def load() -> Grammar:
    """The grammar, read once from ptx_grammar/."""
    root = _grammar_dir()
    ops = _parse_instructions(root.joinpath("instructions.txt").read_text())
    dirs = _parse_directives(root.joinpath("directives.txt").read_text())
    return Grammar(ops, dirs, max(n.count(".") + 1 for n in ops))


_split_cache: dict[str, tuple[str | None, tuple[str, ...]]] = {}


@lru_cache(maxsize=None)
def _dotted_values(opcode: str) -> frozenset[str]:
    return frozenset(v for f in load().opcodes[opcode].forms for s in f.slots for v in s.values if "." in v)


def _join_dotted(opcode: str, parts: list[str]) -> tuple[str, ...]:
    """The modifiers after the opcode, with the values that contain a dot (fence.proxy's
    `async.global`) as one."""
    dotted = _dotted_values(opcode)
    out: list[str] = []
    for part in parts:
        if out and f"{out[-1]}.{part}" in dotted:
            out[-1] = f"{out[-1]}.{part}"
        else:
            out.append(part)
    return tuple(out)


def split_opcode(text: str) -> tuple[str | None, tuple[str, ...]]:
    """`ld.global.v4.f32` -> ("ld", ("global", "v4", "f32")); (None, ()) for an unknown opcode."""
    hit = _split_cache.get(text)
    if hit is not None:
        return hit
    g = load()
    parts = text.split(".")
    result: tuple[str | None, tuple[str, ...]] = (None, ())
    for k in range(min(g.max_words, len(parts)), 0, -1):
        name = ".".join(parts[:k])
        if name in g.opcodes:
            result = (name, _join_dotted(name, parts[k:]))
            break
    if len(_split_cache) < 100_000:
        _split_cache[text] = result
    return result


def expand(form: Form, limit: int = 4096) -> tuple[list[tuple[str, ...]], bool]:
    """The modifier lists `form` allows (optional slots present or not), and whether that is
    all of them. Above `limit` combinations, a sample in which every value of every slot
    occurs is returned instead, with False."""
    choices = [sorted(s.values) + ([None] if s.optional else []) for s in form.slots]
    total = 1
    for c in choices:
        total *= len(c)
    if total <= limit:
        combos = itertools.product(*choices)
        complete = True
    else:
        width = max(len(c) for c in choices)
        combos = (tuple(c[i % len(c)] for c in choices) for i in range(width))
        complete = False
    return [tuple(m for m in combo if m is not None) for combo in combos], complete


def opcodes() -> dict[str, Opcode]:
    return load().opcodes
