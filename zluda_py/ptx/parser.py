"""Recursive-descent parser from PTX text to the AST of ast.py.

Speed matters (modules of tens of MB come from fatbins). Function bodies are read one
statement per match of one compiled regex (`_BODY`): instructions, labels, `.loc` and `.reg`
lines are built straight from the match, their operands from per-module shared nodes and
module-independent recipes (`_RECIPES`). Everything else goes through the general path: a
lexer pulled by the parser one token at a time, which builds the same AST and produces the
errors.
"""

from __future__ import annotations

import gc
import re

from . import grammar, versions
from .ast import (
    Addr, ArgList, Block, Directive, Function, Guard, Imm, Initializer, Instruction, Label,
    Module, Not, Operand, PredOut, PtrAttr, Reg, Sink, Statement, Sym, Variable, Vec,
)
from . import constexpr
from .checks import Checker, check
from .errors import CUDA_ERROR_UNSUPPORTED_PTX_VERSION, PtxError, raise_all
from .literals import DEC_FLOAT_RE, HEX_FLOAT_RE, INT_RE, MAX_INT, hex_float_value, int_value
from .source import Source

_SKIP = re.compile(r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*")
_TOKEN = re.compile(
    r'(?P<str>"(?:[^"\\\n]|\\.)*")'
    rf"|(?P<fhex>{HEX_FLOAT_RE})"
    rf"|(?P<float>{DEC_FLOAT_RE})"
    rf"|(?P<int>{INT_RE})"
    r"|(?P<dot>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)"
    r"|(?P<id>[A-Za-z_$%][\w$]*(?:(?:\.|::)[\w$]+)*)"
    r"|(?P<p>[{}()\[\],;:+\-!@|<>=*~&^.?]|/(?![*/]))"  # `/*` left: an unterminated comment
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
# Deeper `{ }` nesting is refused: each level costs Python stack in the parser and the passes
# after it, and no compiler emits more than a few levels. Initializer braces (a level per
# array dimension) are held to the same depth.
MAX_NESTING = 256
# what ptxas takes in .target: an architecture (it ignores letters after the number) or a flag
_TARGET_NAME = re.compile(r"(?:sm|compute)_\d+\w*|texmode_unified|texmode_independent|debug|map_f64_to_f32")
# Operands (vectors, argument lists, addresses) nest one level in valid PTX; deeper is refused
# long before the recursion that reads them nears Python's limit.
MAX_OPERAND_NESTING = 16


class _Abandon(Exception):
    """An error after which the rest of the module cannot be parsed meaningfully."""

    def __init__(self, error: PtxError) -> None:
        self.error = error

# Fast paths for the statement shapes that make up most of nvcc's output. Each builds the same
# AST as the general path; anything they do not match exactly goes through the general path,
# which also produces the errors.
_DEC = r"(0|[1-9]\d*)"
_EOL = r"(?=[ \t\r]*(?://|\n|\Z))"  # a label or `.loc` must end its line
# One match per statement of a body, after the blanks and `//` comments before it; which
# group matched (lastindex) says what the statement is, _B_OTHER: one for the general path.
_BODY = re.compile(
    r"(?:[ \t\r\n]+|//[^\n]*)*(?:"
    # 1: `[@[!]p] opcode op, op, ...;`: 2 '!', 3 guard, 4 opcode with modifiers, 5 operands
    # (over several lines for a call; a piece the fast path cannot read goes the general way;
    # bounded, so that text without ';' is not rescanned to its end for every statement)
    r"((?:@(!?)([A-Za-z_$%][\w$]*)[ \t]+)?([a-z][\w$]*(?:(?:\.|::)[\w$]+)*)"
    r"(?:[ \t\r\n]+([^;]{0,4096}))?;)"
    # 6: `name:` (7) alone on its line (`name: .callprototype ...` is no label)
    r"|(([A-Za-z_$][\w$]*):" + _EOL + ")"
    # 8: `.loc file line col[, function_name name, inlined_at file line col]` (9-17)
    rf"|(\.loc[ \t]+{_DEC}[ \t]+{_DEC}[ \t]+{_DEC}"
    rf"(?:[ \t]*,[ \t]*(function_name)[ \t]+([A-Za-z_$][\w$]*)[ \t]*,"
    rf"[ \t]*(inlined_at)[ \t]+{_DEC}[ \t]+{_DEC}[ \t]+{_DEC})?" + _EOL + ")"
    # 18: `.reg .type name;`, `.reg .type %r<N>;`, `.param .type name;`: 19 space, 20 type,
    # 21 name, 22 count
    r"|(\.(reg|param)[ \t]+\.([a-z]\w*)[ \t]+([A-Za-z_$%][\w$]*)(?:<([1-9]\d*|0)>)?[ \t]*;)"
    r"|())"
)
_B_INSN, _B_LABEL, _B_LOC, _B_DECL, _B_OTHER = 1, 6, 8, 18, 23
# One operand of an instruction's list (the text between commas).
_BL = r"[ \t\r\n\f\v]*"  # blanks, as _SKIP has them
_FAST_OPERAND = re.compile(
    _BL + r"(?:(%[\w$]+(?:\.[\w$]+)?)|(-?(?:0[xX][0-9a-fA-F]+|[1-9]\d*|0)U?)"
    r"|(0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16})"
    r"|(\[[ \t]*)(%?[A-Za-z_$][\w$]*)[ \t]*(?:([+-])[ \t]*(-?(?:[1-9]\d*|0)))?[ \t]*\]"
    r"|([A-Za-z$][\w$]*|_[\w$]*))" + _BL
)
# Vectors `{a, b}`, call argument lists `(a, b)` and `d|p`, of simple operands.
_FAST_VEC = re.compile(f"({_BL}){{([^{{}}]*)}}{_BL}")
_FAST_ARGS = re.compile(rf"({_BL})\(([^()]*)\){_BL}")
_FAST_PRED_OUT = re.compile(r"([^|]*)\|([^|]*)")
_WS = " \t\r\n\f\v"
_new = object.__new__

# How the fast path builds one operand of an instruction, from its text (`piece`, with the
# blanks around it): a recipe (kind, offset of the operand in piece, args...). Recipes do not
# depend on the module, so they are kept across parses (bounded); the nodes built from them
# are kept per parse (Parser._nodes). Kinds up to _K_SINK build nodes that are shared.
# Predefined identifiers that are compile-time constants (the sreg-like ones, %tid ..., are
# special registers): nvcc writes WARP_SZ for warpSize. A CUDA warp is 32 lanes on every
# target, wave64 AMDGPU included (two warps per wave), so it becomes an immediate here.
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}
_K_REG, _K_IMM, _K_ADDR_REG, _K_SINK, _K_SYM, _K_ADDR_SYM, _K_VEC, _K_ARGS, _K_PRED_OUT = range(9)
_GENERAL = (None,)  # the recipe of an operand only the general path can parse
_RECIPES: dict[str, tuple] = {}
_RECIPES_MAX = 200_000


def _operand_recipe(piece: str) -> tuple:
    """The recipe for `piece` (see _RECIPES), or _GENERAL."""
    # Most operands are plain registers (`%r12`, ` %rd3`): no regex needed for them.
    lead = 1 if piece[:1] == " " else 0
    if piece[lead:lead + 1] == "%" and piece[lead + 1:].isalnum() and piece.isascii():
        return (_K_REG, lead, piece[lead:])
    om = _FAST_OPERAND.fullmatch(piece)
    if om is None:
        return _composite_recipe(piece)
    reg, num, fhex, bracket, abase, sign, off, sym = om.groups()
    if reg is not None:
        return (_K_REG, om.start(1), reg)
    if num is not None:
        value = int_value(num.lstrip("-"))  # no octal: the pattern leaves it to the general path
        if value > MAX_INT:
            return _GENERAL  # whose error names it
        return (_K_IMM, om.start(2), -value if num[0] == "-" else value, "int")
    if fhex is not None:
        return (_K_IMM, om.start(3), *hex_float_value(fhex))
    if abase is not None:
        if off is not None and len(off) > 20:  # perhaps past 64 bits: the general path decides
            return _GENERAL
        offset = 0 if off is None else (int(off) if sign == "+" else -int(off))
        kind = _K_ADDR_REG if abase[0] == "%" else _K_ADDR_SYM
        return (kind, om.start(4), abase, offset, om.start(5))
    if sym == "_":
        return (_K_SINK, om.start(8))
    if sym in PREDEFINED_CONSTANTS:
        return (_K_IMM, om.start(8), PREDEFINED_CONSTANTS[sym], "int")
    return (_K_SYM, om.start(8), sym)


def _recipe(piece: str) -> tuple:
    """The recipe for `piece` from _RECIPES, made and kept there on a miss."""
    recipe = _RECIPES.get(piece)
    if recipe is None:
        recipe = _operand_recipe(piece)
        if len(_RECIPES) < _RECIPES_MAX:
            _RECIPES[piece] = recipe
    return recipe


def _composite_recipe(piece: str) -> tuple:
    """The recipe of a vector `{a, b}`, an argument list `(a, b)` or `d|p` (with the recipes of
    their parts and where those start in `piece`), or _GENERAL."""
    allowed = (_K_REG, _K_IMM, _K_SINK, _K_SYM)
    kind = _K_VEC
    m = _FAST_VEC.fullmatch(piece)
    if m is None:
        kind = _K_ARGS
        m = _FAST_ARGS.fullmatch(piece)
    if m is not None:
        at, parts = m.end(1) + 1, m[2].split(",")
        if kind == _K_ARGS and not m[2].strip(_WS):
            parts = []  # `()`
    else:
        m = _FAST_PRED_OUT.fullmatch(piece)
        if m is None:
            return _GENERAL
        allowed, kind, at, parts = (_K_REG, _K_SINK, _K_SYM), _K_PRED_OUT, 0, m.group(1, 2)
    elems = []
    for part in parts:
        recipe = _operand_recipe(part)
        if recipe[0] not in allowed:
            return _GENERAL
        elems.append((recipe, at))
        at += len(part) + 1
    if kind == _K_PRED_OUT:
        return (kind, elems[0][0][1], tuple(elems))
    return (kind, m.end(1), tuple(elems))


def _shared_node(recipe: tuple) -> Operand:
    """The node, without a position, of a recipe whose kind is at most _K_SINK."""
    kind = recipe[0]
    if kind == _K_REG:
        return Reg(recipe[2])
    if kind == _K_IMM:
        return Imm(recipe[2], recipe[3])
    if kind == _K_ADDR_REG:
        return Addr(Reg(recipe[2]), recipe[3])
    return Sink()


def _placed_node(recipe: tuple, at: int, pos) -> Operand:
    """The node of `recipe` with its position (the piece starts at offset `at`)."""
    kind = recipe[0]
    if kind == _K_SYM:
        return Sym(recipe[2], pos(at + recipe[1]))
    if kind == _K_REG:
        return Reg(recipe[2], pos(at + recipe[1]))
    if kind == _K_IMM:
        return Imm(recipe[2], recipe[3], pos(at + recipe[1]))
    if kind == _K_SINK:
        return Sink(pos(at + recipe[1]))
    if kind == _K_VEC or kind == _K_ARGS:
        elems = [_placed_node(r, at + off, pos) for r, off in recipe[2]]
        return (Vec if kind == _K_VEC else ArgList)(elems, pos(at + recipe[1]))
    if kind == _K_PRED_OUT:
        (dest, d_at), (pred, p_at) = recipe[2]
        return PredOut(_placed_node(dest, at + d_at, pos), _placed_node(pred, at + p_at, pos),
                       pos(at + recipe[1]))
    base = (Reg if kind == _K_ADDR_REG else Sym)(recipe[2], pos(at + recipe[4]))
    return Addr(base, recipe[3], pos(at + recipe[1]))


def _bracket_pieces(pieces: list[str]) -> list[str]:
    """Comma-split operand text with the pieces of each `{a, b}` and `(a, b)` joined again."""
    out: list[str] = []
    for piece in pieces:
        if out and (out[-1].count("{") > out[-1].count("}")
                    or out[-1].count("(") > out[-1].count(")")):
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def _end_before_blanks(text: str, end: int) -> int:
    """The offset just past the last non-blank character before `end`."""
    while end > 0 and text[end - 1] in _WS:
        end -= 1
    return end


# PTX ISA, mad: ptxas takes mad.f32 without a rounding modifier as mad.rn.f32 before ISA 3.2
# (the manual's errata; sm_1x's truncating mad is not what a later GPU runs) and mad.f64 as
# mad.rn.f64 before 1.4. CUDA 4 era PTX has them (cuda-samples' matrixMulDynlinkJIT, nvopencc).
_LEGACY_MAD_BEFORE: dict[str, tuple[int, int]] = {"f32": (3, 2), "f64": (1, 4)}
_ROUNDING = frozenset(("rn", "rz", "rm", "rp"))


class Parser:
    def __init__(self, text: str, filename: str, share: bool = True, unbuilt: bool = False) -> None:
        self.share = share  # share operand nodes (see _RECIPES)
        self.unbuilt = unbuilt  # check bodies without building them where fastcheck.py can
        self.bodies = None  # fastcheck.BodyChecker, when `unbuilt`
        self.src = Source(text, filename)
        self.text = text
        self.i = 0
        self.errors: list[PtxError] = []
        self.depth = 0  # nested { } blocks open inside the current function body
        self.operand_depth = 0  # vectors, argument lists and addresses open around the operand
        self._pos = self.src.pos
        self.limit = len(text)  # lexing stops here (the end of a line for .loc/.file)
        self._peek_at = -1
        self._peek_tok: tuple[str, str, int] = ("eof", "", 0)
        # Per-parse caches of the fast path: opcode text -> (opcode, mods), guard text -> Guard.
        self._opcodes: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        self._nodes: dict[str, Operand] = {}  # operand text -> its shared node (see _RECIPES)
        self._guards: dict[str, Guard] = {}
        self.ptx_version = versions.NEWEST_ISA  # the module's .version, once read
        self.in_call = False  # operands of a `call`, where `( )` is an argument list

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

    def error(self, at: int, message: str) -> PtxError:
        return self.src.error(at, message)

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
        if value > MAX_INT:
            raise self.src.error(tok[2], f"integer literal {tok[1][:24]}{'...' if len(tok[1]) > 24 else ''} "
                                         f"is out of range: more than 64 bits")
        self.i = tok[2] + len(tok[1])
        return -value if neg else value

    def dot(self) -> str | None:
        """The name of a `.directive` token (without the dot) if one is next."""
        tok = self.peek()
        return tok[1][1:] if tok[0] == "dot" else None

    # ------------------------------------------------------------------ module

    def module(self) -> Module:
        version = self.ptx_version = self.version()
        target = self.target()
        mod = Module(version=version, target=target, filename=self.src.filename)
        if self.dot() == "address_size":
            self.next()
            size = self.integer("32 or 64")
            if size not in (32, 64):
                raise self.src.error(self.i - len(str(size)), "address size must be 32 or 64")
            mod.address_size = size
        items = mod.items
        if self.unbuilt:
            from .fastcheck import BodyChecker  # which imports this module

            self.bodies = BodyChecker(self, Checker(Module(version=version, target=target), self.src))
        while True:
            tok = self.peek()
            if tok[0] == "eof":
                break
            try:
                items.extend(self.top_level(tok))
            except (PtxError, _Abandon) as e:
                self.errors.append(e.error if isinstance(e, _Abandon) else e)
                break
        if self.bodies is not None:
            self.bodies = None  # and its caches, at once (it refers to this parser)
            # a module the quick checks do not settle is parsed and checked in full, which
            # reports its errors exactly as without them
            if self.errors:
                return Parser(self.text, self.src.filename).module()
            checker = Checker(mod, self.src)
            if checker.run() or checker.unsure:
                return Parser(self.text, self.src.filename).module()
            return mod
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
        version = int(m.group(1)), int(m.group(2))
        if version > versions.NEWEST_ISA:
            (major, minor), cuda = versions.NEWEST_ISA, versions.cuda_version(versions.NEWEST_ISA)
            e = self.src.error(tok[2], f"PTX ISA {tok[1]} is newer than this driver accepts "
                                       f"({major}.{minor}, CUDA {cuda // 1000}.{cuda % 1000 // 10})")
            e.cu_result = CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            raise e
        return version

    def target(self) -> tuple[str, ...]:
        tok = self.peek()
        if tok[1] != ".target":
            raise self.err(tok, "expected '.target'")
        self.next()
        names = [self._target_name("a target name such as sm_80")]
        while self.accept(","):
            names.append(self._target_name("a target name"))
        return tuple(names)

    def _target_name(self, what: str) -> str:
        """A `.target` entry; NVIDIA's driver refuses an sm_NN that the module's .version predates."""
        name, pos = self.ident(what)
        if not _TARGET_NAME.fullmatch(name):
            raise self.src.error(pos, f"unsupported .target '{name}'")
        isa = versions.target_isa(name)
        if isa is not None and self.ptx_version < isa:
            (v0, v1), (i0, i1) = self.ptx_version, isa
            raise self.src.error(pos, f".target {name} requires PTX ISA {i0}.{i1} or later (module has .version {v0}.{v1})")
        return name

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
        managed = False
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
            elif d == "attribute" and not managed:
                self.next()
                self.variable_attribute()
                managed = True
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
        if managed and space != "global":  # PTX ISA 5.4.8: .managed is for .global variables only
            raise self.src.error(start, f".attribute(.managed) on a .{space} variable (only .global may be managed)")
        out = []
        while True:
            var = self.declarator(linkage, space, vtype, align, vector, ptr, start)
            var.managed = managed
            out.append(var)
            if param:
                return out
            if not self.accept(","):
                break
        self.expect(";", "';' after the declaration")
        return out

    def variable_attribute(self) -> None:
        """`( .managed )` after `.attribute`: the one variable attribute supported (`.unified(uuid,
        uuid)` names a variable shared across devices by its UUID, which nothing here resolves)."""
        self.expect("(", "'(' after .attribute")
        tok = self.peek()
        if tok[0] != "dot" or tok[1] != ".managed":
            raise self.err(tok, "expected .managed (the one supported variable attribute)")
        self.next()
        self.expect(")", "')' after the variable attribute")

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
            self.check_init_kinds(var, var.init)
        return var

    def initializer(self, depth: int = 0) -> Initializer:
        tok = self.peek()
        at = self._pos(tok[2])
        if tok[1] == "{" and tok[0] == "p":
            if depth == MAX_NESTING:
                raise self.err(tok, f"initializer braces nested more than {MAX_NESTING} deep")
            self.next()
            items = []
            if not self.at("}"):
                items.append(self.initializer(depth + 1))
                while self.accept(","):
                    items.append(self.initializer(depth + 1))
            self.expect("}", "',' or '}' in the initializer")
            return Initializer(items=items, pos=at)
        if tok[0] == "id" and tok[1] in ("generic", "mask"):
            self.next()
            if self.accept("("):
                sym, off = self.sym_offset()
                self.expect(")")
                return Initializer(value=sym, wrapper=tok[1], offset=off + self.offset(), pos=at)
            return Initializer(value=Sym(tok[1], pos=at), pos=at)
        if tok[0] == "int" and self._peek_after(tok) == "(":
            # mask form `0xFF00(sym)`: the mask selects bytes of the symbol's address
            self.next()
            self.expect("(")
            sym, off = self.sym_offset()
            self.expect(")")
            return Initializer(value=sym, wrapper=tok[1], offset=off, pos=at)
        if tok[0] == "id" and tok[1] not in PREDEFINED_CONSTANTS:
            sym, off = self.sym_offset()
            return Initializer(value=sym, offset=off, pos=at)
        return Initializer(value=self.immediate(), pos=at)

    def check_init_kinds(self, var: Variable, init: Initializer) -> None:
        """ptxas refuses an integer initial value for a floating-point variable and a
        floating-point one for an integer variable (.b types take either)."""
        if var.type in ("f32", "f64"):
            wrong = ("int",)
        elif var.type[0] in "us" and var.type[1:].isdigit():
            wrong = ("float", "f32", "f64")
        else:
            return
        todo = [init]
        while todo:
            item = todo.pop()
            if item.items is not None:
                todo.extend(item.items)
            elif type(item.value) is Imm and item.value.kind in wrong:
                raise self.src.error_at(item.pos, f"initial value type mismatch: {'a floating-point' if wrong[0] == 'float' else 'an integer'}"
                                                  f" constant for the .{var.type} variable {var.name}")

    def _peek_after(self, tok) -> str:
        saved = self.i
        self.i = tok[2] + len(tok[1])
        try:
            return self.peek()[1]
        finally:
            self.i = saved

    def sym_offset(self) -> tuple[Sym, int]:
        name, at = self.ident("a symbol")
        return Sym(name, pos=self._pos(at)), self.offset()

    def offset(self) -> int:
        """The `+ expr` or `- expr` after a symbol or base register (an integer constant
        expression, its sign read as a unary operator), 0 if none follows."""
        tok = self.peek()
        if tok[1] not in ("+", "-") or tok[0] != "p":
            return 0
        imm = self.immediate()
        if imm.kind != "int":
            raise self.src.error(tok[2], "expected an integer offset")
        return imm.value

    def immediate(self) -> Imm:
        """A constant: one literal or a constant expression (constexpr.py)."""
        return constexpr.evaluate(self, self._pos(self.peek()[2]), PREDEFINED_CONSTANTS)

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
        if self.bodies is not None:
            fn.body = self.bodies.check_body(fn)
            if fn.body is not None:
                return fn
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
        """Statements up to and including the closing '}'.

        The common statements (instruction, label, `.loc`, `.reg`) are built here straight
        from one _BODY match each; everything else, and every error, goes through
        `statement` (the general path), which builds the same AST token by token."""
        out: list[Statement] = []
        append = out.append
        text = self.text
        pos = self._pos
        types = grammar.TYPES
        opcodes = self._opcodes
        split_opcode = self.split_opcode
        nodes_get = self._nodes.get
        scan = _BODY.scanner(text, self.i).match
        while True:
            m = scan()  # never None: _B_OTHER matches the empty string
            k = m.lastindex
            if k == _B_INSN:
                name, operands = m.group(4, 5)
                split = opcodes.get(name)
                if split is None:
                    split = opcodes[name] = split_opcode(name)
                if split[0] is not None and (split[0] == "call" or not operands or "(" not in operands):
                    if not operands:
                        ops: list[Operand] | None = []
                    else:
                        # Operands met before in this module are shared nodes, one dict lookup
                        # each (nvcc separates them with ", "). Nodes are always true, so
                        # all() finds a miss, which fill_operands builds.
                        pieces = operands.split(", ")
                        ops = [*map(nodes_get, pieces)]
                        if not all(ops):
                            ops = self.fill_operands(ops, pieces, operands, m.start(5))
                    if ops is not None:
                        # Instruction(...) without the dataclass __init__: same object.
                        insn = _new(Instruction)
                        insn.opcode, insn.mods = split
                        insn.operands = ops
                        insn.guard = None if m[3] is None else self.guard(m[2], m[3])
                        insn.pos = pos(m.start(1))
                        append(insn)
                        continue
                self.i = m.start(1)
            elif k == _B_LABEL:
                label = _new(Label)  # Label(name, pos) without a Python call
                label.name = m[7]
                label.pos = pos(m.start(7))
                append(label)
                continue
            elif k == _B_LOC:
                args: list = [int(m[9]), int(m[10]), int(m[11])]
                if m[12] is not None:
                    args += [Sym(m[12], pos(m.start(12))), Sym(m[13], pos(m.start(13))),
                             Sym(m[14], pos(m.start(14))), int(m[15]), int(m[16]), int(m[17])]
                d = _new(Directive)  # Directive("loc", args, pos) without a Python call
                d.name = "loc"
                d.args = args
                d.pos = pos(m.start(8))
                append(d)
                continue
            elif k == _B_DECL and m[20] in types:
                count = m[22]
                append(Variable(m[21], m[19], m[20], count=None if count is None else int(count),
                                pos=pos(m.start(21))))
                continue
            else:
                self.i = m.start(k)
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
            scan = _BODY.scanner(text, self.i).match

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
                if self.depth == MAX_NESTING:
                    raise _Abandon(self.err(tok, f"blocks nested more than {MAX_NESTING} deep"))
                self.next()
                self.depth += 1
                block = Block(self.body(), pos=self._pos(start))
                self.depth -= 1
                return [block]
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

    def split_opcode(self, name: str) -> tuple[str | None, tuple[str, ...]]:
        """grammar.split_opcode, with mad's legacy default rounding made explicit."""
        opcode, mods = grammar.split_opcode(name)
        if (opcode == "mad" and mods and self.ptx_version < _LEGACY_MAD_BEFORE.get(mods[-1], (0, 0))
                and _ROUNDING.isdisjoint(mods)):
            mods = ("rn", *mods)
        return opcode, mods

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
        opcode, mods = self.split_opcode(tok[1])
        if opcode is None:
            raise self.src.error(tok[2], f"unknown instruction {tok[1].split('.', 1)[0]!r}")
        self.in_call = opcode == "call"
        ops: list[Operand] = []
        if not self.accept(";"):
            ops.append(self.operand())
            while self.accept(","):
                ops.append(self.operand())
            self.expect(";", "',' or ';' after the operand")
        return Instruction(opcode, mods, ops, guard, pos=self._pos(start))

    def operand(self) -> Operand:
        tok = self.peek()
        if tok[0] != "p" or tok[1] not in ("[", "{", "("):
            return self._operand(tok)
        if self.operand_depth == MAX_OPERAND_NESTING:
            raise self.err(tok, f"operands nested more than {MAX_OPERAND_NESTING} deep")
        self.operand_depth += 1
        try:
            return self._operand(tok)
        finally:
            self.operand_depth -= 1

    def _operand(self, tok: tuple[str, str, int]) -> Operand:
        kind, text, start = tok
        if kind == "id" and text not in PREDEFINED_CONSTANTS:
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
            if text == "(" and self.in_call:
                self.next()
                args: list[Operand] = []
                if not self.accept(")"):
                    args.append(self.operand())
                    while self.accept(","):
                        args.append(self.operand())
                    self.expect(")", "',' or ')' in the argument list")
                return ArgList(args, pos=self._pos(start))
            if text == "!" and self._peek_after(tok)[:1] == "%":
                self.next()
                name, at = self.ident("a predicate register after '!'")
                return Not(Reg(name, pos=self._pos(at)), pos=self._pos(start))
        return self.immediate()

    def simple_name(self, text: str, start: int) -> Reg | Sym | Sink | Imm:
        if text[0] == "%":
            return Reg(text, pos=self._pos(start))
        if text == "_":
            return Sink(pos=self._pos(start))
        if text in PREDEFINED_CONSTANTS:
            return Imm(PREDEFINED_CONSTANTS[text], "int", pos=self._pos(start))
        return Sym(text, pos=self._pos(start))

    def address(self) -> Addr:
        start = self.next()[2]
        tok = self.peek()
        base: Reg | Sym | None = None
        offset = 0
        if tok[0] == "id" and tok[1] not in PREDEFINED_CONSTANTS:
            self.next()
            base = Reg(tok[1], pos=self._pos(tok[2])) if tok[1][0] == "%" else Sym(tok[1], pos=self._pos(tok[2]))
            offset = self.offset()
        else:
            imm = self.immediate()
            if imm.kind != "int":
                raise self.src.error(tok[2], "expected an integer address")
            offset = imm.value
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

    def fill_operands(self, ops: list, pieces: list[str], text: str,
                      at: int) -> list[Operand] | None:
        """`ops` (the nodes of `pieces`, the ", "-split operand list `text` at offset `at`)
        with each missing node (None) built; fast_operands(text) when a piece is not one
        whole operand (a piece of a vector, or operands split otherwise)."""
        start = at
        for k, piece in enumerate(pieces):
            if ops[k] is None:
                recipe = _recipe(piece)
                if recipe is _GENERAL:
                    return self.fast_operands(text, start)
                ops[k] = self.node(recipe, piece, at)
            at += len(piece) + 2
        return ops

    def node(self, recipe: tuple, piece: str, at: int) -> Operand:
        """The node of `recipe` for the operand text `piece` at offset `at`: shared (and
        kept under its text without blanks) where its kind allows."""
        if self.share and recipe[0] <= _K_SINK:
            key = piece.strip(_WS)
            node = self._nodes.get(key)  # an operand written twice in one instruction
            if node is None:
                self._nodes[key] = node = _shared_node(recipe)
            return node
        return _placed_node(recipe, at, self._pos)

    def fast_operands(self, text: str, at: int) -> list[Operand] | None:
        """The operands of the operand list `text` (at offset `at`), or None when one of them
        needs the general path. Shared nodes are kept under their text without blanks."""
        nodes = self._nodes
        ops: list[Operand] = []
        pieces = text.split(",")
        if "{" in text or "(" in text:
            pieces = _bracket_pieces(pieces)
        for piece in pieces:
            node = nodes.get(piece.strip(_WS))
            if node is None:
                recipe = _recipe(piece)
                if recipe is _GENERAL:
                    return None
                node = self.node(recipe, piece, at)
            ops.append(node)
            at += len(piece) + 1
        return ops

    def guard(self, negated: str, reg: str) -> Guard:
        """The guard `@reg` or `@!reg`; shared like registers (see _RECIPES)."""
        key = negated + reg
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = Guard(reg, negated == "!")
        return guard


def parse(text: str, filename: str = "<ptx>", unbuilt: bool = False) -> Module:
    """Parse PTX text into a Module; raises PtxError (PtxErrors for several). With `unbuilt`,
    bodies that fastcheck.py checks are not built (`UnbuiltBody`): the same errors, facts and
    everything outside the bodies, for a load that parses its kernels again later."""
    # The AST is millions of small acyclic objects: the cyclic collector would rescan them
    # again and again while they are built, so it is paused for the parse.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return Parser(text, filename, unbuilt=unbuilt).module()
    finally:
        if enabled:
            _age_young_objects()
            gc.enable()


# objects left in the youngest generation from which a parse moves them to the oldest at once
AGE_AFTER = 200_000


def _age_young_objects() -> None:
    """Move a large parse's objects to the oldest generation without scanning them: otherwise
    the next young and middle collections each walk all of them (about 0.7 s for CuPy's 21 MB
    CUB module), only to find them alive. freeze + unfreeze does the move; nothing becomes
    uncollectable (unfreeze puts them back in the oldest generation). Skipped when the host
    keeps frozen objects of its own, which unfreeze would release."""
    if gc.get_count()[0] >= AGE_AFTER and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
