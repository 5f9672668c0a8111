"""A module built per kernel keeps its PTX text after its load, not its AST: the parts built
later are parsed again from the text of what they reach.

The load parses and checks the whole module (a bad module fails its load, as with NVIDIA's
JIT), builds the variables' part and lets the AST go. Kept, CuPy's 21 MB CUB module is 2M
objects that every full collection of the cyclic collector walks (1.2 s), for a program that
launches 3 of its 383 kernels. A kernel's part then costs a parse of its own functions only.

The text a part is parsed from is the module's with every function it does not reach blanked
out, newlines kept: positions, hence error messages and line info, read as in the whole module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zluda_py.ptx import ast, parse

_NAME = re.compile(r"[A-Za-z_$%][\w$]*")  # identifiers as PTX spells them (a superset of the names)


@dataclass(frozen=True)
class PartSource:
    text: str
    filename: str
    header_end: int  # .version, .target, .address_size: text[:header_end]
    # each top-level item: start, end (the next item's position), the function's name or None,
    # and where a function's own text ends (its body's brace or its declaration's semicolon)
    items: tuple[tuple[int, int, str | None, int], ...]

    @classmethod
    def of(cls, module: ast.Module, text: str) -> PartSource | None:
        """For a module built per kernel (`parts.whole_reason` is None) linked from `text`; None
        where an item did not come from `text` (linked from another module: the device runtime's)
        or an `.alias` names functions."""
        starts = []
        for item in module.items:
            pos = item.pos
            source = getattr(pos, "source", None)
            if source is None or source.text is not text or (isinstance(item, ast.Directive) and item.name == "alias"):
                return None
            starts.append(int(pos))
        if not starts or starts != sorted(starts):
            return None
        ends = starts[1:] + [len(text)]
        items = tuple((start, end, item.name, _definition_end(text, start, end)) if isinstance(item, ast.Function)
                      else (start, end, None, end) for item, start, end in zip(module.items, starts, ends))
        return cls(text, module.filename, starts[0], items)

    def _reached(self, kernels: list[str]) -> set[str]:
        """The kernels and the functions they may call: every function named in a reached body's
        text (comments included: more is harmless, `parts.part_module` prunes the AST exactly)."""
        bodies: dict[str, list[tuple[int, int]]] = {}
        for start, end, name, _ in self.items:
            if name is not None:
                bodies.setdefault(name, []).append((start, end))
        seen, todo = set(), list(kernels)
        while todo:
            name = todo.pop()
            if name in seen or name not in bodies:
                continue
            seen.add(name)
            for start, end in bodies[name]:
                todo += [n for n in set(_NAME.findall(self.text, start, end)) if n in bodies]
        return seen

    def text_of(self, kernels: list[str]) -> str:
        """The module's text with only the functions that these kernels reach."""
        keep = self._reached(kernels)
        text = self.text
        pieces = [text[:self.header_end]]
        for start, end, name, own_end in self.items:
            if name is None or name in keep:
                pieces.append(text[start:end])
                continue
            # only the function's own text: a variable's position is its name, so the text
            # before the next item's position also holds that variable's directives
            lines = text.count("\n", start, own_end)
            column = own_end - start if lines == 0 else own_end - text.rfind("\n", start, own_end) - 1
            pieces.append("\n" * lines + " " * column + text[own_end:end])
        return "".join(pieces)

    def module(self, kernels: list[str]) -> ast.Module:
        """The AST that these kernels' parts are lowered from (not the variables' part, which
        records every kernel's declaration)."""
        return parse(self.text_of(kernels), self.filename)


def _definition_end(text: str, start: int, end: int) -> int:
    """Just past the last `}` or `;` in text[start:end] outside a `//` comment: the end of the
    function declared or defined at `start` (what follows up to `end` belongs to the next item)."""
    i = end
    while True:
        i = max(text.rfind("}", start, i), text.rfind(";", start, i))
        if i < 0:
            return end
        if "//" not in text[max(text.rfind("\n", start, i) + 1, start):i]:
            return i + 1
