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
so an instruction's verdict is kept under what it depends on, in two tables:
* `verdicts`: the opcode text and the operand list split at each register `%<letters><digits>`,
  the registers replaced by what they resolve to here (`_kind`: a type, or the state space of a
  non-register). Only lists made of such registers, constants, addresses of them and vectors of
  them (`_SIMPLE`) are kept: the parser reads every one of them the same way whatever the
  registers' names, so the checks see the same operands. One regex call per instruction.
* `replays`, asked when `verdicts` has no answer: the list split at every name (`_NAMES`: a
  `%` name not followed by `.`, or a symbol; CUB's parameters, `.shared` arrays, inline
  assembly's registers, labels, `%laneid`), each replaced by what it resolves to, tagged by its
  class (`_kind`), a `%` name that resolves to nothing by itself (a special register or an
  error: its name decides) and a symbol that resolves to nothing by None (a label or a module
  name: `Checker.unbuilt` resolves it). Kept only where no name is left between the names
  (`_NAMELESS`: not `%tid.x`, `_`, `WARP_SZ`), where a name's reading by the parser's fast path
  depends only on its class and place. A hit skips the checks, not their effects: the value
  says, per name, whether it is a symbol (added to the body's names) and, for one that resolves
  to nothing, the state space it is pending with.
"""

from __future__ import annotations

import re

from . import compare_forms, grammar
from .ast import Function, Instruction, UnbuiltBody, Variable
from .checks import EXPANDED_RANGE, Checker, _accepted, _special, constant_fits, held
from .parser import (
    _B_DECL, _B_INSN, _B_LABEL, _B_LOC, _BODY, _GENERAL, _K_ADDR_REG, _K_ADDR_SYM, _K_IMM, _K_PRED_OUT, _K_REG,
    _K_SINK, _K_SYM, _K_VEC, Parser, _bracket_pieces, _recipe,
)

# `.shared|.local .align N .type name[N];` inside a body (ptxas's spelling of a block's array)
_ARRAY = re.compile(r"\.(shared|local)[ \t]+\.align[ \t]+([1-9]\d{0,5})[ \t]+\.([a-z]\w*)[ \t]+"
                    r"([A-Za-z_$][\w$]*)\[([1-9]\d{0,17})\][ \t]*;")
_PRAGMA = re.compile(r'\.pragma[ \t]+"[^"\\\n]*"[ \t]*;')  # `.pragma "nounroll";`
# nvcc's registers, where `verdicts` splits an operand list (module docstring)
_REG = r"%[a-z]+[0-9]+"
_REGISTER = re.compile(f"({_REG})")
# the operand lists whose verdicts are kept: registers, constants, `[reg+-N]`, `{reg, reg}`
_PIECE = rf"[ \t]?(?:{_REG}|\[{_REG}(?:[+-][0-9]+)?\]|\{{{_REG}(?:, ?{_REG})*\}}|-?[0-9][0-9a-fA-FxX]*)"
_SIMPLE = re.compile(f"{_PIECE}(?:,{_PIECE})*")
# where `replays` splits one: whole names as the fast path reads them, a `%` name (not `%tid.x`)
# or a symbol (not `_`, nor `WARP_SZ`, which it reads as constants; nor inside a number);
# each alternative starts with its first character, for the regex engine's quick scan
_SYMBOL = r"(?:[A-Za-z$]|_(?=[\w$]))(?<![\w$%.].)(?!(?<=W)ARP_SZ(?![\w$]))[\w$]*+"
_NAMES = re.compile(rf"(%[A-Za-z_$][\w$]*+(?!\.)|{_SYMBOL})")
_LONE = re.compile(_SYMBOL)  # a list that is one symbol (a branch target), which `_NAMES` splits as such
# what may lie between the names of a list `replays` keeps: no name, nor `%`; numbers
_NAMELESS = re.compile(r"(?:[^\w$%]|[0-9][\w$.]*+)*+")
_MAX_DEPTH = 64  # nested `{ }` blocks followed here; deeper goes the general way
_ACCESSES = ("ld", "st", "atom", "red", "ldu")  # the opcodes Checker.check_space tests
_SPACES = ("global", "shared", "local", "const", "param")
_OP_REG, _OP_SYM, _OP_IMM, _OP_ADDR_REG, _OP_ADDR_SYM, _OP_ELEMENT = range(6)  # _OP_ELEMENT: a vector's register
_CONSTANT_KINDS = ("int", "float", "f32", "f64")  # ast.Imm.kind  # BodyChecker.operands' kinds


def _kind(v: Variable) -> str:
    """What a name resolves to, as a verdict's key has it: a register's type, else `.space`;
    after a `,` for a symbol (a name without `%`), so that a key tells the two apart."""
    kind = v.type if v.space == "reg" else "." + v.space
    return kind if v.name[0] == "%" else "," + kind


def _replay(toks: list[str], kinds: tuple, pending: list[tuple[str, str | None]]) -> tuple | None:
    """`replays`' value for an instruction found fine whose list has the names `toks`, which
    resolve to `kinds`, and which left `pending` pending; None where those are not one per name
    that resolves to nothing, in order (a replay names every symbol: no fewer than the check,
    and a name more can only send the module to the full check, `Checker.unbuilt`)."""
    if [p[0] for p in pending] != [t for t, k in zip(toks, kinds) if k is None]:
        return None
    spaces = iter([p[1] for p in pending])
    return tuple(False if t[0] == "%" else True if k is not None else next(spaces) for t, k in zip(toks, kinds))


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
        # the instructions found fine, by their keys (module docstring); `replays`' values: per
        # name of the list, False for a `%` name, True for a symbol that resolves, else the state
        # space (or None) the symbol is pending with
        self.verdicts: set[tuple] = set()
        self.replays: dict[tuple, tuple] = {}
        self.checked = 0  # instructions checked operand by operand (the others by `verdicts` or `replays`)
        self.ranges: dict[str, list[str]] = {}  # prefix -> the longest `%r<N>`'s names made so far

    def range_names(self, prefix: str, count: int) -> list[str]:
        """The names `.reg .T prefix<count>;` declares: each made once per parse (nvcc declares
        `%r<N>` in every function, 390k names in CuPy's CUB module)."""
        names = self.ranges.setdefault(prefix, [])
        if len(names) < count:
            names.extend([f"{prefix}{n}" for n in range(len(names), count)])
        return names[:count]

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
        ops_of, forms, verdicts, replays = self.ops_of, self.forms, self.verdicts, self.replays
        split_registers, split_names, lone, kind_get = _REGISTER.split, _NAMES.split, _LONE.fullmatch, kind_of.get

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
                if guard is None or guard[0] == "%" and kind_get(guard) == "pred":
                    if operands:
                        parts = split_registers(operands)
                        key = None
                        if len(parts) > 1:
                            parts[1::2] = map(kind_get, parts[1::2])
                            parts.append(name)
                            key = tuple(parts)
                            if key in verdicts:
                                continue
                        if key is None and lone(operands):
                            toks, named = (operands,), ("", kind_get(operands), "", name)  # as below, sooner
                        else:
                            parts = split_names(operands)
                            toks = parts[1::2]
                            parts[1::2] = [kind_get(t, t) if t[0] == "%" else kind_get(t) for t in toks]
                            parts.append(name)
                            named = tuple(parts)
                    else:
                        key, toks, named = None, (), (name,)
                    replay = replays.get(named)
                    if replay is not None:
                        for t, r in zip(toks, replay):
                            if r is not False:
                                add_name(t)
                                if r is not True:
                                    pending.append((t, r))
                        continue
                    was_pending = len(pending)
                else:
                    key = named = None
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
                if key is not None and None not in key and _SIMPLE.fullmatch(operands):
                    verdicts.add(key)
                elif named is not None and _NAMELESS.fullmatch(" ".join(named[0:-1:2])):
                    replay = _replay(toks, named[1:-1:2], pending[was_pending:])
                    if replay is not None:
                        replays[named] = replay
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
                    declare((var.name,), _kind(var))
                    continue
                if var.count > EXPANDED_RANGE:
                    return None
                declared = self.range_names(var.name, var.count)
                if not local.keys().isdisjoint(declared):
                    return None
                local.update(dict.fromkeys(declared, var))
                declare(declared, _kind(var))  # the names' class is their prefix's
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
