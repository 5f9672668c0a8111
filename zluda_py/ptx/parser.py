"""Recursive-descent parser from PTX text to the AST of ast.py.

Speed matters (modules of tens of MB come from fatbins), so the lexer is pulled by the
parser one token at a time with precompiled regexes, and the common one-line instruction
goes through a fast path (`_FAST_INSN`) that builds the same AST as the general path
without tokenizing. The general path handles everything else and produces the errors.
"""

from __future__ import annotations

import gc
import re

from . import grammar
from .ast import (
    Addr, ArgList, Block, Directive, Function, Guard, Imm, Initializer, Instruction, Label,
    Module, Not, Operand, PredOut, PtrAttr, Reg, Sink, Statement, Sym, Variable, Vec,
)
from .checks import check
from .errors import PtxError, raise_all
from .literals import DEC_FLOAT_RE, HEX_FLOAT_RE, INT_RE, hex_float_value, int_value
from .source import Source

_SKIP = re.compile(r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*")
_TOKEN = re.compile(
    r'(?P<str>"(?:[^"\\\n]|\\.)*")'
    rf"|(?P<fhex>{HEX_FLOAT_RE})"
    rf"|(?P<float>{DEC_FLOAT_RE})"
    rf"|(?P<int>{INT_RE})"
    r"|(?P<dot>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)"
    r"|(?P<id>[A-Za-z_$%][\w$]*(?:(?:\.|::)[\w$]+)*)"
    r"|(?P<p>[{}()\[\],;:+\-!@|<>=*~&^.])"
)
_LINE_REST = re.compile(r"[^\n]*")

# State spaces a variable declaration can start with.
SPACES = frozenset("reg sreg const global local param shared tex".split())
LINKAGES = frozenset("visible extern weak common".split())
# Opaque types of texture/sampler/surface handles.
OPAQUE_TYPES = frozenset("texref samplerref surfref".split())
# Directives allowed between a function header and its body.
FUNC_DIRECTIVES = frozenset(
    "maxntid reqntid minnctapersm maxnctapersm maxnreg noreturn pragma explicitcluster "
    "reqnctapercluster maxclusterrank blocksareclusters abi_preserve abi_preserve_control".split()
)
# Directives whose arguments run to the end of the line (no ';').
LINE_DIRECTIVES = frozenset(("file", "loc"))

# Fast paths for the line shapes that make up most of nvcc's output. Each builds the same AST
# as the general path; anything they do not match exactly goes through the general path,
# which also produces the errors.
# `[@[!]%p] opcode op, op, ...;` alone on its line (operands without braces or parentheses).
# Each ends with _EOL: the end of the line, and the blanks of the lines after it, so that the
# next statement starts where the match ends.
_EOL = r"[ \t\r]*(?:(?=//)|(?:\n[ \t\r]*)+|\Z)"
_FAST_INSN = re.compile(
    r"(?:@(!?)(%[\w$]+)[ \t]+)?([a-z][\w$]*(?:(?:\.|::)[\w$]+)*)"
    r"(?:[ \t]+([^;\n]*))?;" + _EOL  # operands the fast path cannot build go the general way
)
# One operand of _FAST_INSN's list (the text between commas).
_FAST_OPERAND = re.compile(
    r"[ \t]*(?:(%[\w$]+(?:\.[\w$]+)?)|(-?(?:0[xX][0-9a-fA-F]+|[1-9]\d*|0)U?)"
    r"|(0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16})"
    r"|(\[[ \t]*)(%?[A-Za-z_$][\w$]*)[ \t]*(?:([+-])[ \t]*(-?(?:[1-9]\d*|0)))?[ \t]*\]"
    r"|([A-Za-z$][\w$]*|_[\w$]*))[ \t]*"
)
# `name:` alone on its line.
_FAST_LABEL = re.compile(r"([A-Za-z_$][\w$]*):" + _EOL)
# `.loc file line col[, function_name label, inlined_at file line col]` alone on its line.
_DEC = r"(0|[1-9]\d*)"
_FAST_LOC = re.compile(
    rf"\.loc[ \t]+{_DEC}[ \t]+{_DEC}[ \t]+{_DEC}"
    rf"(?:[ \t]*,[ \t]*(function_name)[ \t]+([A-Za-z_$][\w$]*)[ \t]*,"
    rf"[ \t]*(inlined_at)[ \t]+{_DEC}[ \t]+{_DEC}[ \t]+{_DEC})?" + _EOL
)
# `.reg .type name;`, `.reg .type %r<N>;`, `.param .type name;` alone on its line.
_FAST_DECL = re.compile(
    r"\.(reg|param)[ \t]+\.([a-z]\w*)[ \t]+([A-Za-z_$%][\w$]*)(?:<([1-9]\d*|0)>)?"
    r"[ \t]*;" + _EOL
)
_WS = " \t\r\n\f\v"
_new = object.__new__
_SKIP_START = _WS + "/"

# Operand kinds of the fast path's per-parse cache: operand text -> how to build it.
_K_NAME, _K_IMM, _K_ADDR, _K_SINK, _K_GENERAL = range(5)
_GENERAL = (None, _K_GENERAL)  # the spec of an operand only the general path can parse


def _fast_operand_spec(piece: str, share: bool) -> tuple:
    """How to build the operand written as `piece` (with its surrounding blanks):
    (shared node or None, kind, recipe...), or _GENERAL when the general path must parse it.
    Offsets in the recipe are relative to the start of `piece`.

    With `share`, registers, immediates, the sink and `[%reg+imm]` come as one node for every
    occurrence in the module, without a position (NOPOS): nothing mutates them, and building
    one node per operand was most of the parse. Names (`Sym`) stay one node per occurrence:
    the checks may replace them, and the compiler names their position in its errors."""
    recipe = _fast_operand_recipe(piece)
    if not share or recipe is _GENERAL:
        return recipe
    kind = recipe[1]
    if kind == _K_NAME and recipe[3] is Reg:
        return (Reg(recipe[4]), *recipe[1:])
    if kind == _K_IMM:
        return (Imm(recipe[3], recipe[4]), *recipe[1:])
    if kind == _K_ADDR and recipe[3] is Reg:
        return (Addr(Reg(recipe[4]), recipe[6]), *recipe[1:])
    if kind == _K_SINK:
        return (Sink(), *recipe[1:])
    return recipe


def _fast_operand_recipe(piece: str) -> tuple:
    # Most operands are plain registers (`%r12`, ` %rd3`): no regex needed for them.
    lead = 1 if piece[:1] == " " else 0
    if piece[lead:lead + 1] == "%" and piece[lead + 1:].isalnum() and piece.isascii():
        return (None, _K_NAME, lead, Reg, piece[lead:])
    om = _FAST_OPERAND.fullmatch(piece)
    if om is None:
        return _GENERAL
    reg, num, fhex, bracket, abase, sign, off, sym = om.groups()
    if reg is not None:
        return (None, _K_NAME, om.start(1), Reg, reg)
    if num is not None:
        value = int_value(num.lstrip("-"))  # no octal: the pattern leaves it to the general path
        return (None, _K_IMM, om.start(2), -value if num[0] == "-" else value, "int")
    if fhex is not None:
        raw, kind = hex_float_value(fhex)
        return (None, _K_IMM, om.start(3), raw, kind)
    if abase is not None:
        offset = 0 if off is None else (int(off) if sign == "+" else -int(off))
        return (None, _K_ADDR, om.start(4), Reg if abase[0] == "%" else Sym, abase, om.start(5), offset)
    if sym == "_":
        return (None, _K_SINK, om.start(8))
    return (None, _K_NAME, om.start(8), Sym, sym)


def _end_before_blanks(text: str, end: int) -> int:
    """The offset just past the last non-blank character before `end`."""
    while end > 0 and text[end - 1] in _WS:
        end -= 1
    return end


class Parser:
    def __init__(self, text: str, filename: str, share: bool = True) -> None:
        self.share = share  # see _fast_operand_spec
        self.src = Source(text, filename)
        self.text = text
        self.i = 0
        self.errors: list[PtxError] = []
        self._pos = self.src.pos
        self.limit = len(text)  # lexing stops here (the end of a line for .loc/.file)
        self._peek_at = -1
        self._peek_tok: tuple[str, str, int] = ("eof", "", 0)
        # Per-parse caches of the fast path: opcode text -> (opcode, mods), operand text -> spec.
        self._opcodes: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        self._operand_specs: dict[str, tuple] = {}
        self._guards: dict[tuple[str, str], Guard] = {}

    # ------------------------------------------------------------------ tokens

    def skip(self) -> int:
        self.i = _SKIP.match(self.text, self.i).end()
        return self.i

    def peek(self) -> tuple[str, str, int]:
        i = self.i
        if i == self._peek_at:
            return self._peek_tok
        text = self.text
        limit = self.limit
        j = _SKIP.match(text, i, limit).end()
        if j >= limit:
            # Errors at the end of the input point just past its last character.
            tok = ("eof", "", _end_before_blanks(text, limit))
        else:
            m = _TOKEN.match(text, j, limit)
            if m is None:
                if text.startswith("/*", j):
                    raise self.src.error(j, "unterminated comment")
                raise self.src.error(j, f"unexpected character {text[j]!r}")
            tok = (m.lastgroup, m.group(), j)
        self._peek_at = i
        self._peek_tok = tok
        return tok

    def next(self) -> tuple[str, str, int]:
        tok = self.peek()
        self.i = tok[2] + len(tok[1])
        return tok

    def at(self, text: str) -> bool:
        return self.peek()[1] == text

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok[1] == text and tok[0] != "str":
            self.i = tok[2] + len(text)
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> int:
        tok = self.peek()
        if tok[1] != text or tok[0] == "str":
            raise self.err(tok, f"expected {what or repr(text)}")
        self.i = tok[2] + len(text)
        return tok[2]

    def err(self, tok: tuple[str, str, int], message: str) -> PtxError:
        shown = "end of file" if tok[0] == "eof" else repr(tok[1])
        return self.src.error(tok[2], f"{message}, found {shown}")

    def ident(self, what: str) -> tuple[str, int]:
        tok = self.peek()
        if tok[0] != "id":
            raise self.err(tok, f"expected {what}")
        self.i = tok[2] + len(tok[1])
        return tok[1], tok[2]

    def integer(self, what: str = "an integer") -> int:
        tok = self.peek()
        neg = tok[1] == "-"
        if neg:
            self.i = tok[2] + 1
            tok = self.peek()
        if tok[0] != "int":
            raise self.err(tok, f"expected {what}")
        value = int_value(tok[1])
        if value is None:
            raise self.src.error(tok[2], f"invalid octal literal {tok[1]!r}")
        self.i = tok[2] + len(tok[1])
        return -value if neg else value

    def dot(self) -> str | None:
        """The name of a `.directive` token (without the dot) if one is next."""
        tok = self.peek()
        return tok[1][1:] if tok[0] == "dot" else None

    # ------------------------------------------------------------------ module

    def module(self) -> Module:
        version = self.version()
        target = self.target()
        mod = Module(version=version, target=target, filename=self.src.filename)
        if self.dot() == "address_size":
            self.next()
            size = self.integer("32 or 64")
            if size not in (32, 64):
                raise self.src.error(self.i - len(str(size)), "address size must be 32 or 64")
            mod.address_size = size
        items = mod.items
        while True:
            tok = self.peek()
            if tok[0] == "eof":
                break
            try:
                items.extend(self.top_level(tok))
            except PtxError as e:
                self.errors.append(e)
                break
        if not self.errors:
            problems = check(mod, self.src)
            if problems and self.share:
                # Shared operand nodes have no position: parse again with one node per
                # operand, so that every error points at its own operand.
                return Parser(self.text, self.src.filename, share=False).module()
            self.errors.extend(problems)
        raise_all(self.errors)
        return mod

    def version(self) -> tuple[int, int]:
        tok = self.peek()
        if tok[1] != ".version":
            raise self.err(tok, "expected '.version' at the start of the module")
        self.next()
        tok = self.next()
        m = re.fullmatch(r"(\d+)\.(\d+)", tok[1]) if tok[0] == "float" else None
        if m is None:
            raise self.err(tok, "expected a version number such as 9.0")
        return int(m.group(1)), int(m.group(2))

    def target(self) -> tuple[str, ...]:
        tok = self.peek()
        if tok[1] != ".target":
            raise self.err(tok, "expected '.target'")
        self.next()
        names = [self.ident("a target name such as sm_80")[0]]
        while self.accept(","):
            names.append(self.ident("a target name")[0])
        return tuple(names)

    def top_level(self, tok: tuple[str, str, int]) -> list:
        if tok[0] != "dot":
            raise self.err(tok, "expected a directive (.entry, .func, .global, ...)")
        start = tok[2]
        name = tok[1][1:]
        if name in LINE_DIRECTIVES:
            return [self.line_directive()]
        if name == "section":
            return [self.section()]
        if name in ("alias", "pragma"):
            self.next()
            d = Directive(name, self.directive_args(), pos=self._pos(start))
            self.expect(";")
            return [d]
        linkage = None
        if name in LINKAGES:
            self.next()
            linkage = name
            name = self.dot()
        if name in ("entry", "func"):
            return [self.function(linkage, start)]
        if name in SPACES or name == "align":
            return self.declaration(linkage, start)
        raise self.err(self.peek(), "expected .entry, .func or a variable declaration")

    def line_directive(self) -> Directive:
        """`.file N "name"[, time, size]` and `.loc F L C[, function_name X, inlined_at F L C]`."""
        tok = self.next()
        end = _LINE_REST.match(self.text, self.i).end()
        args = []
        # Arguments end at the end of the line: lex only that far.
        self.limit = end
        self._peek_at = -1
        try:
            while self.peek()[0] != "eof":
                if self.accept(","):
                    continue
                args.append(self.directive_value())
        finally:
            self.limit = len(self.text)
            self._peek_at = -1
        return Directive(tok[1][1:], args, pos=self._pos(tok[2]))

    def section(self) -> Directive:
        tok = self.next()
        name_tok = self.next()
        if name_tok[0] not in ("dot", "id"):
            raise self.err(name_tok, "expected a section name")
        open_at = self.expect("{")
        close = self.text.find("}", open_at)
        if close < 0:
            raise self.src.error(open_at, "unterminated .section: expected '}'")
        raw = self.text[open_at + 1:close]
        self.i = close + 1
        return Directive("section", [Sym(name_tok[1], pos=self._pos(name_tok[2])), raw],
                         pos=self._pos(tok[2]))

    def directive_value(self):
        tok = self.peek()
        kind = tok[0]
        if kind == "str":
            self.next()
            return tok[1][1:-1]
        if kind == "int" or tok[1] == "-":
            return self.integer()
        if kind in ("id", "dot"):
            self.next()
            return Sym(tok[1], pos=self._pos(tok[2]))
        raise self.err(tok, "expected a directive argument")

    def directive_args(self) -> list:
        args = [self.directive_value()]
        while self.accept(","):
            args.append(self.directive_value())
        return args

    # ------------------------------------------------------------------ declarations

    def declaration(self, linkage: str | None, start: int, param: bool = False) -> list[Variable]:
        """`.space [.align N] [.vN] .type name[dims] [= init] (, name ...)* ;`

        With param=True, one parameter of a parameter list: a single name and no ';'.
        """
        space = None
        align = None
        vector = None
        vtype = None
        ptr = None
        while True:
            tok = self.peek()
            if tok[0] != "dot":
                break
            d = tok[1][1:]
            base = d.split("::", 1)[0]
            if base in SPACES and space is None:
                space = d
            elif d == "align":
                self.next()
                align = self.integer("an alignment")
                continue
            elif d in ("v2", "v4", "v8"):
                vector = int(d[1])
            elif d in grammar.TYPES or d in OPAQUE_TYPES:
                if vtype is not None:
                    raise self.err(tok, "duplicate type in declaration")
                vtype = d
            elif d == "ptr":
                self.next()
                ptr = self.ptr_attr()
                continue
            elif d in LINKAGES and linkage is None:
                linkage = d
            else:
                raise self.err(tok, "expected a state space, .align, vector or type")
            self.next()
        if space is None:
            raise self.err(self.peek(), "expected a state space (.reg, .global, .shared, ...)")
        if vtype is None:
            raise self.err(self.peek(), "expected a type (.b32, .f32, .u64, ...)")
        out = []
        while True:
            out.append(self.declarator(linkage, space, vtype, align, vector, ptr, start))
            if param:
                return out
            if not self.accept(","):
                break
        self.expect(";", "';' after the declaration")
        return out

    def ptr_attr(self) -> PtrAttr:
        attr = PtrAttr()
        while True:
            d = self.dot()
            if d in ("global", "shared", "const", "local") and attr.space is None:
                attr.space = d
            elif d == "align" and attr.align is None:
                self.next()
                attr.align = self.integer("an alignment")
                continue
            else:
                return attr
            self.next()

    def declarator(self, linkage, space, vtype, align, vector, ptr, start) -> Variable:
        name, at = self.ident("a variable name")
        var = Variable(name, space, vtype, align=align, vector=vector, linkage=linkage, ptr=ptr,
                       pos=self._pos(at))
        if self.accept("<"):
            var.count = self.integer("a register count")
            self.expect(">")
            return var
        dims = []
        while self.accept("["):
            if self.accept("]"):
                dims.append(None)
                continue
            dims.append(self.integer("an array size"))
            self.expect("]")
        var.array = tuple(dims)
        if self.accept("="):
            var.init = self.initializer()
        return var

    def initializer(self) -> Initializer:
        tok = self.peek()
        at = self._pos(tok[2])
        if tok[1] == "{" and tok[0] == "p":
            self.next()
            items = []
            if not self.at("}"):
                items.append(self.initializer())
                while self.accept(","):
                    items.append(self.initializer())
            self.expect("}", "',' or '}' in the initializer")
            return Initializer(items=items, pos=at)
        if tok[0] == "id" and tok[1] in ("generic", "mask"):
            self.next()
            if self.accept("("):
                sym, off = self.sym_offset()
                self.expect(")")
                return Initializer(value=sym, wrapper=tok[1], offset=off, pos=at)
            return Initializer(value=Sym(tok[1], pos=at), pos=at)
        if tok[0] == "int" and self._peek_after(tok) == "(":
            # mask form `0xFF00(sym)`: the mask selects bytes of the symbol's address
            self.next()
            self.expect("(")
            sym, off = self.sym_offset()
            self.expect(")")
            return Initializer(value=sym, wrapper=tok[1], offset=off, pos=at)
        if tok[0] == "id":
            sym, off = self.sym_offset()
            return Initializer(value=sym, offset=off, pos=at)
        return Initializer(value=self.immediate(), pos=at)

    def _peek_after(self, tok) -> str:
        saved = self.i
        self.i = tok[2] + len(tok[1])
        try:
            return self.peek()[1]
        finally:
            self.i = saved

    def sym_offset(self) -> tuple[Sym, int]:
        name, at = self.ident("a symbol")
        off = 0
        if self.at("+") or self.at("-"):
            sign = -1 if self.next()[1] == "-" else 1
            off = sign * self.integer("an offset")
        return Sym(name, pos=self._pos(at)), off

    def immediate(self) -> Imm:
        tok = self.peek()
        at = self._pos(tok[2])
        neg = tok[1] == "-" and tok[0] == "p"
        if neg:
            self.next()
            tok = self.peek()
        kind = tok[0]
        if kind == "int":
            return Imm(self.integer() * (-1 if neg else 1), "int", pos=at)
        if kind == "fhex":
            self.next()
            raw, k = hex_float_value(tok[1])
            if neg:
                raw ^= 1 << (31 if k == "f32" else 63)
            return Imm(raw, k, pos=at)
        if kind == "float":
            self.next()
            value = float(tok[1])
            return Imm(-value if neg else value, "float", pos=at)
        raise self.err(tok, "expected a constant")

    # ------------------------------------------------------------------ functions

    def function(self, linkage: str | None, start: int) -> Function:
        kind = self.next()[1][1:]
        returns: list[Variable] = []
        if kind == "func" and self.at("("):
            returns = self.param_list()
        name, at = self.ident("a function name")
        fn = Function(name, kind, linkage=linkage, returns=returns, pos=self._pos(start))
        if self.at("("):
            fn.params = self.param_list()
        while True:
            d = self.dot()
            if d is None or d not in FUNC_DIRECTIVES:
                break
            tok = self.next()
            args = []
            t = self.peek()
            if t[0] in ("int", "str"):
                args = self.directive_args()
            fn.directives.append(Directive(d, args, pos=self._pos(tok[2])))
            if d == "pragma":
                self.expect(";")
        if self.accept(";"):
            return fn
        tok = self.peek()
        if tok[1] != "{":
            raise self.err(tok, "expected '{' to start the function body or ';'")
        self.next()
        fn.body = self.body()
        return fn

    def param_list(self) -> list[Variable]:
        self.expect("(")
        params: list[Variable] = []
        if self.accept(")"):
            return params
        while True:
            tok = self.peek()
            params.extend(self.declaration(None, tok[2], param=True))
            if self.accept(")"):
                return params
            self.expect(",", "',' or ')' in the parameter list")

    # ------------------------------------------------------------------ bodies

    def body(self) -> list[Statement]:
        """Statements up to and including the closing '}'."""
        out: list[Statement] = []
        append = out.append
        text = self.text
        pos = self._pos
        skip = _SKIP.match
        insn_match = _FAST_INSN.match
        label_match = _FAST_LABEL.match
        loc_match = _FAST_LOC.match
        decl_match = _FAST_DECL.match
        fast_instruction = self.fast_instruction
        i = self.i  # kept in a local; self.i is synchronised around the general path
        while True:
            c = text[i:i + 1]
            if c in _SKIP_START:  # also at the end ("" is in every string)
                i = skip(text, i).end()
                c = text[i:i + 1]
            if c == ".":
                m = loc_match(text, i)
                if m is not None:
                    args: list = [int(m[1]), int(m[2]), int(m[3])]
                    if m[4] is not None:
                        args += [Sym(m[4], pos(m.start(4))), Sym(m[5], pos(m.start(5))),
                                 Sym(m[6], pos(m.start(6))), int(m[7]), int(m[8]), int(m[9])]
                    d = _new(Directive)  # Directive("loc", args, pos) without a Python call
                    d.name = "loc"
                    d.args = args
                    d.pos = pos(i)
                    append(d)
                    i = m.end()
                    continue
                m = decl_match(text, i)
                if m is not None and m[2] in grammar.TYPES:
                    count = m[4]
                    append(Variable(m[3], m[1], m[2], count=None if count is None else int(count),
                                    pos=pos(m.start(3))))
                    i = m.end()
                    continue
            elif c == "$":
                m = label_match(text, i)
                if m is not None:
                    append(Label(m[1], pos(i)))
                    i = m.end()
                    continue
            elif c != "}" and c != "{":
                m = insn_match(text, i)
                if m is not None:
                    insn = fast_instruction(m, i)
                    if insn is not None:
                        append(insn)
                        i = m.end()
                        continue
                elif c != "/":
                    m = label_match(text, i)
                    if m is not None:
                        append(Label(m[1], pos(i)))
                        i = m.end()
                        continue
            self.i = i
            tok = self.peek()
            if tok[1] == "}" and tok[0] == "p":
                self.next()
                return out
            if tok[0] == "eof":
                raise self.err(tok, "expected '}' to close the block")
            try:
                out.extend(self.statement(tok))
            except PtxError as e:
                self.errors.append(e)
                self.recover(tok[2])
            i = self.i

    def recover(self, start: int) -> None:
        """Skip past the statement that failed, so later errors are reported too."""
        text = self.text
        semi = text.find(";", start)
        brace = text.find("}", start)
        if semi < 0 and brace < 0:
            self.i = len(text)
        elif semi >= 0 and (brace < 0 or semi < brace):
            self.i = semi + 1
        else:
            self.i = brace
        if self.i <= start:
            self.i = start + 1

    def statement(self, tok: tuple[str, str, int]) -> list[Statement]:
        kind, text, start = tok
        if kind == "p":
            if text == "{":
                self.next()
                return [Block(self.body(), pos=self._pos(start))]
            if text == "@":
                return [self.instruction()]
            raise self.err(tok, "expected an instruction, label or declaration")
        if kind == "dot":
            name = text[1:]
            if name in LINE_DIRECTIVES:
                return [self.line_directive()]
            if name == "pragma":
                self.next()
                d = Directive("pragma", self.directive_args(), pos=self._pos(start))
                self.expect(";")
                return [d]
            return list(self.declaration(None, start))
        if kind == "id":
            self.next()
            if self.accept(":"):
                return self.after_label(text, start)
            self.i = start
            return [self.instruction()]
        raise self.err(tok, "expected an instruction, label or declaration")

    def after_label(self, name: str, start: int) -> list[Statement]:
        d = self.dot()
        if d == "callprototype":
            self.next()
            rets = self.param_list() if self.at("(") else []
            sink = self.next()
            if sink[1] != "_":
                raise self.err(sink, "expected '_' in the call prototype")
            params = self.param_list() if self.at("(") else []
            args: list = [name, rets, params]
            if self.dot() == "noreturn":
                self.next()
                args.append(Sym(".noreturn"))
            self.expect(";")
            return [Directive("callprototype", args, pos=self._pos(start))]
        if d in ("branchtargets", "calltargets"):
            self.next()
            targets = [Sym(n, pos=self._pos(a)) for n, a in [self.ident("a label")]]
            while self.accept(","):
                n, a = self.ident("a label")
                targets.append(Sym(n, pos=self._pos(a)))
            self.expect(";")
            return [Directive(d, [name, *targets], pos=self._pos(start))]
        return [Label(name, pos=self._pos(start))]

    def instruction(self) -> Instruction:
        tok = self.next()
        start = tok[2]
        guard = None
        if tok[1] == "@":
            neg = self.accept("!")
            reg, _ = self.ident("a predicate register after '@'")
            guard = Guard(reg, neg)
            tok = self.next()
        if tok[0] != "id":
            raise self.err(tok, "expected an instruction")
        opcode, mods = grammar.split_opcode(tok[1])
        if opcode is None:
            raise self.src.error(tok[2], f"unknown instruction {tok[1].split('.', 1)[0]!r}")
        ops: list[Operand] = []
        if not self.accept(";"):
            ops.append(self.operand())
            while self.accept(","):
                ops.append(self.operand())
            self.expect(";", "',' or ';' after the operand")
        return Instruction(opcode, mods, ops, guard, pos=self._pos(start))

    def operand(self) -> Operand:
        tok = self.peek()
        kind, text, start = tok
        if kind == "id":
            self.next()
            first = self.simple_name(text, start)
            if self.accept("|"):
                t2 = self.peek()
                if t2[0] != "id":
                    raise self.err(t2, "expected a predicate register after '|'")
                self.next()
                return PredOut(first, self.simple_name(t2[1], t2[2]), pos=self._pos(start))
            return first
        if kind == "p":
            if text == "[":
                return self.address()
            if text == "{":
                return self.vector()
            if text == "(":
                self.next()
                args: list[Operand] = []
                if not self.accept(")"):
                    args.append(self.operand())
                    while self.accept(","):
                        args.append(self.operand())
                    self.expect(")", "',' or ')' in the argument list")
                return ArgList(args, pos=self._pos(start))
            if text == "!":
                self.next()
                name, at = self.ident("a predicate register after '!'")
                return Not(Reg(name, pos=self._pos(at)), pos=self._pos(start))
        return self.immediate()

    def simple_name(self, text: str, start: int) -> Reg | Sym | Sink:
        if text[0] == "%":
            return Reg(text, pos=self._pos(start))
        if text == "_":
            return Sink(pos=self._pos(start))
        return Sym(text, pos=self._pos(start))

    def address(self) -> Addr:
        start = self.next()[2]
        tok = self.peek()
        base: Reg | Sym | None = None
        offset = 0
        if tok[0] == "id":
            self.next()
            base = Reg(tok[1], pos=self._pos(tok[2])) if tok[1][0] == "%" else Sym(tok[1], pos=self._pos(tok[2]))
            if self.at("+") or self.at("-"):
                sign = -1 if self.next()[1] == "-" else 1
                offset = sign * self.integer("an offset")
        else:
            offset = self.integer("an address")
        addr = Addr(base, offset, pos=self._pos(start))
        while self.accept(","):
            addr.extra.append(self.operand())
        self.expect("]", "']' to close the address")
        return addr

    def vector(self) -> Vec:
        start = self.next()[2]
        elems = [self.operand()]
        while self.accept(","):
            elems.append(self.operand())
        self.expect("}", "',' or '}' in the vector")
        return Vec(elems, pos=self._pos(start))

    # ------------------------------------------------------------------ fast path

    def fast_instruction(self, m: re.Match, start: int) -> Instruction | None:
        """Build the instruction matched by _FAST_INSN, or None to use the general path."""
        name = m[3]
        split = self._opcodes.get(name)
        if split is None:
            split = self._opcodes[name] = grammar.split_opcode(name)
        opcode, mods = split
        if opcode is None:
            return None
        pos = self._pos
        guard = None
        if m[2] is not None:
            guard_text = m.group(1, 2)
            guard = self._guards.get(guard_text)
            if guard is None:  # guards are shared like registers (see _fast_operand_spec)
                guard = self._guards[guard_text] = Guard(m[2], m[1] == "!")
        ops: list[Operand] = []
        body = m[4]
        if body:
            append = ops.append
            specs = self._operand_specs
            at = m.start(4)
            share = self.share
            for piece in body.split(","):
                spec = specs.get(piece)
                if spec is None:
                    spec = specs[piece] = _fast_operand_spec(piece, share)
                node = spec[0]
                if node is None:
                    kind = spec[1]
                    if kind == _K_NAME:
                        node = spec[3](spec[4], pos(at + spec[2]))
                    elif kind == _K_IMM:
                        node = Imm(spec[3], spec[4], pos(at + spec[2]))
                    elif kind == _K_ADDR:
                        node = Addr(spec[3](spec[4], pos(at + spec[5])), spec[6], pos(at + spec[2]))
                    elif kind == _K_SINK:
                        node = Sink(pos(at + spec[2]))
                    else:
                        return None
                append(node)
                at += len(piece) + 1
        # Instruction(...) without the dataclass __init__ (a Python-level call): same object.
        insn = _new(Instruction)
        insn.opcode = opcode
        insn.mods = mods
        insn.operands = ops
        insn.guard = guard
        insn.pos = pos(start)
        return insn


def parse(text: str, filename: str = "<ptx>") -> Module:
    """Parse PTX text into a Module; raises PtxError (PtxErrors for several)."""
    # The AST is millions of small acyclic objects: the cyclic collector would rescan them
    # again and again while they are built, so it is paused for the parse.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return Parser(text, filename).module()
    finally:
        if enabled:
            gc.enable()
