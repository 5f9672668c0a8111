"""A function body checked at module load without building its AST (lazy loading, issue 14).

NVIDIA's driver refuses at load a module with an error in any function, used or not
(tests/hardware/golden/lazy_load_probe.txt), so a lazy load must check every body, but it needs
no AST of them: the kernels it builds later are parsed again from the text. `check_body` reads
a body one `_BODY` match per statement, as the parser's fast path does, and checks each
statement as `checks.Checker` would, with registers looked up by name in per-block dicts.

It is sound by construction, not complete: it says "fine" only for statements it fully
recognises, and gives up on anything else (a form the parser's fast path leaves to its general
path, an error, a guard or name it cannot resolve here, a call, a `.param`, `.global` or `.const`
declaration, a query the driver treats specially...). The parser then parses that body as
usual, so every error comes from the parser and the checker with today's message. What only the
whole module can settle (names declared outside the body, function names) is left to
`Checker.function` (`UnbuiltBody.pending`, `.names`); when that fails, the module is parsed
again in full (`Parser.module`).

A library repeats the same statements with other register numbers in function after function,
so an instruction's verdict is kept (`BodyChecker.verdicts`) under what it depends on: the
opcode text, the operand list with each register `%<letters><digits>` written as `%`, and what
each of those registers resolves to here (its type, or the state space of a non-register). The
key's register count tells a `%` written in the text from one put there, and only lists made of
such registers, constants, addresses of them and vectors of them (`_SIMPLE`) are kept: the
parser reads every one of them the same way whatever the registers' names, so the checks see
the same operands. A lone label operand is kept under the opcode and what its name resolves to.
A hit skips the checks, not their effects (the names a label adds).
"""

from __future__ import annotations

import re

from . import compare_forms, grammar
from .ast import Function, Instruction, UnbuiltBody, Variable
from .checks import EXPANDED_RANGE, Checker, _accepted, _special, constant_fits, held
from .parser import (
    _B_DECL, _B_INSN, _B_LABEL, _B_LOC, _BODY, _GENERAL, _K_ADDR_REG, _K_ADDR_SYM, _K_IMM, _K_PRED_OUT, _K_REG,
    _K_SINK, _K_SYM, _K_VEC, PREDEFINED_CONSTANTS, Parser, _bracket_pieces, _recipe,
)

# `.shared|.local .align N .type name[N];` inside a body (ptxas's spelling of a block's array)
_ARRAY = re.compile(r"\.(shared|local)[ \t]+\.align[ \t]+([1-9]\d{0,5})[ \t]+\.([a-z]\w*)[ \t]+"
                    r"([A-Za-z_$][\w$]*)\[([1-9]\d{0,17})\][ \t]*;")
_PRAGMA = re.compile(r'\.pragma[ \t]+"[^"\\\n]*"[ \t]*;')  # `.pragma "nounroll";`
# nvcc's registers, as a verdict's key writes them (module docstring)
_REG = r"%[a-z]+[0-9]+"
_REGISTER = re.compile(_REG)
# the operand lists whose verdicts are kept: registers, constants, `[reg+-N]`, `{reg, reg}`
_PIECE = rf"[ \t]?(?:{_REG}|\[{_REG}(?:[+-][0-9]+)?\]|\{{{_REG}(?:, ?{_REG})*\}}|-?[0-9][0-9a-fA-FxX]*)"
_SIMPLE = re.compile(f"{_PIECE}(?:,{_PIECE})*")
_LABEL = re.compile(r"[A-Za-z$][\w$]*")  # a branch target, as the parser reads a symbol
_MAX_DEPTH = 64  # nested `{ }` blocks followed here; deeper goes the general way
_ACCESSES = ("ld", "st", "atom", "red", "ldu")  # the opcodes Checker.check_space tests
_SPACES = ("global", "shared", "local", "const", "param")
_OP_REG, _OP_SYM, _OP_IMM, _OP_ADDR_REG, _OP_ADDR_SYM, _OP_ELEMENT = range(6)  # _OP_ELEMENT: a vector's register
_CONSTANT_KINDS = ("int", "float", "f32", "f64")  # ast.Imm.kind  # BodyChecker.operands' kinds


def _kind(v: Variable) -> str:
    """What a name resolves to, as a verdict's key has it: a register's type, else `.space`."""
    return v.type if v.space == "reg" else "." + v.space


class BodyChecker:
    """`check_body` for one parse: per-module caches of the instruction forms met."""

    def __init__(self, parser: Parser, checker: Checker) -> None:
        self.parser = parser
        self.checker = checker
        # (opcode text, operand count) -> `form`
        self.forms: dict[tuple[str, int], tuple | None] = {}
        self.loc_allowed = checker.gate_of("loc") == ""
        self.pragma_allowed = checker.gate_of("pragma") == ""
        # operand list text -> what `operands` makes of it (half of nvcc's lists repeat)
        self.ops_of: dict[str, tuple[int, list]] = {}
        # (opcode text, operand list's template or None for a label, what its names resolve to)
        # of the instructions found fine (module docstring)
        self.verdicts: set[tuple] = set()
        self.checked = 0  # instructions checked operand by operand (the others by `verdicts`)

    def form(self, name: str, n: int) -> tuple | None:
        """(operand roles, the register types each operand position wants (see `operands`),
        the state space an access names, the constant kinds each operand takes (None: any)),
        or None for a form the checker refuses or treats specially."""
        key = (name, n)
        if key in self.forms:
            return self.forms[key]
        opcode, mods = self.parser.split_opcode(name)
        info = None
        if opcode is not None:
            insn = Instruction(opcode, mods, [None] * n)
            verdict, roles, want_types, accepts, query = self.checker.plan(insn)
            if not verdict and not query:
                spaces = [m.split("::")[0] for m in mods if m.split("::")[0] in _SPACES]
                space = spaces[0] if spaces and opcode in _ACCESSES else None
                # per operand what it accepts; then what `d` of `d|p` accepts; any; what `p` of `d|p`
                # accepts (nothing where the form writes one predicate, `setp.f16`: the general path
                # reports it); what a vector's elements accept (ld/st: `held`, else any)
                dests = tuple(None if role == "p" else a for role, a in zip(roles, accepts))
                constants = tuple(None if w is None else frozenset(k for k in _CONSTANT_KINDS if constant_fits(k, w))
                                  for w in want_types)
                second = frozenset() if compare_forms.one_predicate(opcode, insn.types) else _accepted("pred", False)
                elements = next((held(w, True) for role, w in zip(roles, want_types) if role == "W"), None)
                info = (roles, accepts + dests + (None, second, elements), space, constants)
        self.forms[key] = info
        return info

    def operands(self, text: str) -> tuple[int, list[tuple[int, str | None, int]]] | None:
        """The operand count of the operand list `text` and what its operands ask of names:
        (kind, name, index of the wanted types in the form's `wants`), those that ask nothing
        left out; None where the general path must parse it."""
        pieces = text.split(",")
        if "{" in text or "(" in text:
            pieces = _bracket_pieces(pieces)
        n = len(pieces)
        out: list[tuple[int, str | None, int]] = []
        for j, piece in enumerate(pieces):
            r = _recipe(piece)
            if r is _GENERAL:
                return None
            kind = r[0]
            if kind == _K_ADDR_REG or kind == _K_ADDR_SYM:
                out.append((_OP_ADDR_REG if kind == _K_ADDR_REG else _OP_ADDR_SYM, r[2], 0))
            elif kind == _K_IMM:
                out.append((_OP_IMM, r[3], j))  # its kind
            elif kind == _K_REG or kind == _K_SYM:
                out.append((_OP_REG if kind == _K_REG else _OP_SYM, r[2], j))
            elif kind == _K_VEC or kind == _K_PRED_OUT:
                for e, (element, _) in enumerate(r[2]):
                    # a vector's elements want what the form says (`elements`); `d|p`: d what the
                    # operand wants, p a .pred
                    if kind == _K_VEC:
                        if element[0] == _K_SYM:
                            return None  # a register without '%' in a vector: rare
                        if element[0] == _K_REG:
                            out.append((_OP_ELEMENT, element[2], 2 * n + 2))
                    elif element[0] == _K_REG or element[0] == _K_SYM:
                        out.append((_OP_REG if element[0] == _K_REG else _OP_SYM, element[2],
                                    n + j if e == 0 else 2 * n + 1))
            elif kind != _K_SINK:
                return None  # argument lists (calls)
        return n, out

    def check_body(self, fn: Function) -> UnbuiltBody | None:
        """The body that starts at the parser's position (just past its `{`) checked, the
        parser moved past its `}`; None (the parser not moved) where the general path must
        parse it."""
        text = self.parser.text
        params: dict[str, Variable] = {}
        kind_of: dict[str, str] = {}  # `lookup` of every name in scope, as `_kind` writes it
        hidden: list[list[tuple[str, str | None]]] = []  # per nested block: what it hides
        for v in fn.returns + fn.params:
            params[v.name] = v
            kind_of[v.name] = _kind(v)
        local: dict[str, Variable] = {}
        scopes = [params, local]  # innermost last
        labels: set[str] = set()
        pending: list[tuple[str, str | None]] = []
        names: set[str] = set()
        add_name = names.add
        types = grammar.TYPES
        ops_of, forms, verdicts = self.ops_of, self.forms, self.verdicts
        template, registers, lone_label = _REGISTER.sub, _REGISTER.findall, _LABEL.fullmatch

        def declare(declared, kind: str) -> None:
            if len(scopes) > 2:
                hidden[-1].extend([(d, kind_of.get(d)) for d in declared])
            kind_of.update(dict.fromkeys(declared, kind))

        def lookup(name: str) -> Variable | None:
            for scope in reversed(scopes):
                v = scope.get(name)
                if v is not None:
                    return v
            return None

        at = self.parser.i
        scan = _BODY.scanner(text, at).match
        while True:
            m = scan()
            k = m.lastindex
            if k == _B_INSN:
                guard, name, operands = m.group(3, 4, 5)
                key = None
                if operands is not None and (guard is None or guard[0] == "%" and kind_of.get(guard) == "pred"):
                    if lone_label(operands) and operands not in PREDEFINED_CONSTANTS:
                        kind = kind_of.get(operands)
                        key = (name, None, kind)
                        if key in verdicts:
                            add_name(operands)
                            if kind is None:
                                pending.append((operands, None))
                            continue
                    else:
                        key = (name, template("%", operands), tuple(map(kind_of.get, registers(operands))))
                        if key in verdicts:
                            continue
                self.checked += 1
                if operands:
                    ops = ops_of.get(operands)
                    if ops is None:
                        ops = self.operands(operands)
                        if ops is None:
                            return None
                        if len(ops_of) < 1 << 20:
                            ops_of[operands] = ops
                    n, ops = ops
                else:
                    n, ops = 0, ()
                info = forms.get((name, n)) or self.form(name, n)
                if info is None:
                    return None
                roles, wants, space, constants = info
                if guard is not None:
                    if guard[0] != "%":
                        add_name(guard)
                    v = local.get(guard) or lookup(guard)
                    if v is None:
                        if not _special(guard):
                            return None  # resolved against labels and the module: the general path
                    elif v.type != "pred":
                        return None
                joint = None  # the type of an ld/st vector's registers: one for all here (Checker.check_elements)
                for kind, name, j in ops:
                    if kind == _OP_REG or kind == _OP_ELEMENT:
                        v = local.get(name)
                        if v is None:
                            v = lookup(name)
                            if v is None:
                                if _special(name):
                                    continue
                                return None  # resolved against labels and the module: the general path
                        if v.space == "reg" and (want := wants[j]) is not None:
                            if v.type not in want:
                                return None
                            if kind == _OP_ELEMENT:
                                if joint is not None and v.type != joint:
                                    return None
                                joint = v.type
                    elif kind == _OP_SYM:
                        add_name(name)
                        v = lookup(name)
                        if v is None:
                            pending.append((name, None))
                        elif v.space == "reg" and (want := wants[j]) is not None and v.type not in want:
                            return None
                    elif kind == _OP_IMM:
                        if roles[j] == "p" or (c := constants[j]) is not None and name not in c:
                            return None  # a constant of the wrong kind (Checker.instruction)
                    else:  # an address: its access names a state space (Checker.check_space)
                        if kind == _OP_ADDR_SYM:
                            add_name(name)
                        v = lookup(name)
                        if v is None:
                            if kind == _OP_ADDR_SYM:
                                pending.append((name, space))
                            elif not _special(name):
                                return None
                        elif v.space != "reg" and space is not None and v.space != space:
                            return None
                if key is not None and (key[1] is None or None not in key[2] and _SIMPLE.fullmatch(operands)):
                    verdicts.add(key)
                continue
            if k == _B_LABEL:
                if m[7] in labels:
                    return None
                labels.add(m[7])
                continue
            if k == _B_LOC:
                if not self.loc_allowed:
                    return None
                continue
            if k == _B_DECL:
                if m[19] != "reg" or m[20] not in types:
                    return None
                var = Variable(m[21], "reg", m[20], count=None if m[22] is None else int(m[22]))
                if var.count is None:
                    if var.name in local:
                        return None
                    local[var.name] = var
                    declare((var.name,), var.type)
                    continue
                if var.count > EXPANDED_RANGE:
                    return None
                declared = [f"{var.name}{n}" for n in range(var.count)]
                if not local.keys().isdisjoint(declared):
                    return None
                local.update(dict.fromkeys(declared, var))
                declare(declared, var.type)
                continue
            at = m.start(k)
            c = text[at:at + 1]
            if c == "{":
                if len(scopes) - 2 == _MAX_DEPTH:
                    return None
                local = {}
                scopes.append(local)
                hidden.append([])
                at += 1
            elif c == "}":
                at += 1
                if len(scopes) == 2:
                    self.parser.i = at
                    pending = [p for p in pending if p[0] not in labels]
                    return UnbuiltBody(pending, names)
                scopes.pop()
                local = scopes[-1]
                for d, kind in reversed(hidden.pop()):
                    if kind is None:
                        del kind_of[d]
                    else:
                        kind_of[d] = kind
            else:
                p = _PRAGMA.match(text, at)
                if p is not None:
                    if not self.pragma_allowed:
                        return None
                    at = p.end()
                    scan = _BODY.scanner(text, at).match
                    continue
                a = _ARRAY.match(text, at)
                if a is None or a[3] not in types or a[4] in local:
                    return None
                local[a[4]] = Variable(a[4], a[1], a[3], align=int(a[2]), array=(int(a[5]),))
                if self.checker.layout_problems(local[a[4]]):
                    return None
                declare((a[4],), _kind(local[a[4]]))
                at = a.end()
            scan = _BODY.scanner(text, at).match
