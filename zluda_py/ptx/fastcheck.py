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
"""

from __future__ import annotations

import re

from . import grammar
from .ast import Function, Instruction, UnbuiltBody, Variable
from .checks import _RELAXED, EXPANDED_RANGE, Checker, _accepted, _special, constant_fits
from .parser import (
    _B_DECL, _B_INSN, _B_LABEL, _B_LOC, _BODY, _GENERAL, _K_ADDR_REG, _K_ADDR_SYM, _K_IMM, _K_PRED_OUT, _K_REG,
    _K_SINK, _K_SYM, _K_VEC, Parser, _bracket_pieces, _recipe,
)

# `.shared|.local .align N .type name[N];` inside a body (ptxas's spelling of a block's array)
_ARRAY = re.compile(r"\.(shared|local)[ \t]+\.align[ \t]+([1-9]\d{0,5})[ \t]+\.([a-z]\w*)[ \t]+"
                    r"([A-Za-z_$][\w$]*)\[([1-9]\d{0,17})\][ \t]*;")
_PRAGMA = re.compile(r'\.pragma[ \t]+"[^"\\\n]*"[ \t]*;')  # `.pragma "nounroll";`
_MAX_DEPTH = 64  # nested `{ }` blocks followed here; deeper goes the general way
_ACCESSES = ("ld", "st", "atom", "red", "ldu")  # the opcodes Checker.check_space tests
_SPACES = ("global", "shared", "local", "const", "param")
_OP_REG, _OP_SYM, _OP_IMM, _OP_ADDR_REG, _OP_ADDR_SYM = range(5)
_CONSTANT_KINDS = ("int", "float", "f32", "f64")  # ast.Imm.kind  # BodyChecker.operands' kinds


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
            verdict, roles, want_types, accepts, query = self.checker.plan(Instruction(opcode, mods, [None] * n))
            if not verdict and not query:
                spaces = [m.split("::")[0] for m in mods if m.split("::")[0] in _SPACES]
                space = spaces[0] if spaces and opcode in _ACCESSES else None
                # per operand what it accepts; then what `d` of `d|p` accepts; any; a .pred
                dests = tuple(None if role == "p" else a for role, a in zip(roles, accepts))
                constants = tuple(None if w is None else frozenset(k for k in _CONSTANT_KINDS if constant_fits(k, w))
                                  for w in want_types)
                info = (roles, accepts + dests + (None, _accepted("pred", opcode in _RELAXED)), space, constants)
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
                    # a vector's elements want any type; `d|p`: d what the operand wants, p a .pred
                    want = 2 * n if kind == _K_VEC else n + j if e == 0 else 2 * n + 1
                    if element[0] == _K_REG or element[0] == _K_SYM:
                        out.append((_OP_REG if element[0] == _K_REG else _OP_SYM, element[2], want))
            elif kind != _K_SINK:
                return None  # argument lists (calls)
        return n, out

    def check_body(self, fn: Function) -> UnbuiltBody | None:
        """The body that starts at the parser's position (just past its `{`) checked, the
        parser moved past its `}`; None (the parser not moved) where the general path must
        parse it."""
        text = self.parser.text
        params: dict[str, Variable] = {}
        for v in fn.returns + fn.params:
            params[v.name] = v
        local: dict[str, Variable] = {}
        scopes = [params, local]  # innermost last
        labels: set[str] = set()
        pending: list[tuple[str, str | None]] = []
        names: set[str] = set()
        add_name = names.add
        types = grammar.TYPES
        ops_of, forms = self.ops_of, self.forms

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
                for kind, name, j in ops:
                    if kind == _OP_REG:
                        v = local.get(name)
                        if v is None:
                            v = lookup(name)
                            if v is None:
                                if _special(name):
                                    continue
                                return None  # resolved against labels and the module: the general path
                        if v.space == "reg" and (want := wants[j]) is not None and v.type not in want:
                            return None
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
                    continue
                if var.count > EXPANDED_RANGE:
                    return None
                declared = [f"{var.name}{n}" for n in range(var.count)]
                if not local.keys().isdisjoint(declared):
                    return None
                local.update(dict.fromkeys(declared, var))
                continue
            at = m.start(k)
            c = text[at:at + 1]
            if c == "{":
                if len(scopes) - 2 == _MAX_DEPTH:
                    return None
                local = {}
                scopes.append(local)
                at += 1
            elif c == "}":
                at += 1
                if len(scopes) == 2:
                    self.parser.i = at
                    pending = [p for p in pending if p[0] not in labels]
                    return UnbuiltBody(pending, names)
                scopes.pop()
                local = scopes[-1]
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
                at = a.end()
            scan = _BODY.scanner(text, at).match
