"""PTX source text: positions (offset -> line:col) and the errors that point into it."""

from __future__ import annotations

from bisect import bisect_right

from .ast import Pos
from .errors import PtxError


class SourcePos(int, Pos):
    """A position kept as the character offset into its Source (the int value).

    Building one costs an int: the parser makes one per AST node. file, line and col are
    computed from the Source when read, which is rare (errors, debug info). Each Source
    has its own subclass (`Source.pos`) whose class attribute `source` is that Source.
    """

    __init__ = object.__init__  # int.__new__ takes the offset; Pos.__init__ must not run
    source: Source

    @property
    def file(self) -> str:
        return self.source.filename

    @property
    def line(self) -> int:
        return bisect_right(self.source.line_starts, self)

    @property
    def col(self) -> int:
        starts = self.source.line_starts
        return self - starts[bisect_right(starts, self) - 1] + 1

    # int's methods come first in the MRO: restore Pos's meaning.
    __eq__ = Pos.__eq__
    __hash__ = Pos.__hash__
    __bool__ = Pos.__bool__
    __repr__ = Pos.__repr__
    __str__ = Pos.__str__
    __reduce__ = Pos.__reduce__


class Source:
    """The text of one PTX module, its lazy positions, and a lazy offset -> line map."""

    __slots__ = ("text", "filename", "_line_starts", "pos")

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self._line_starts: list[int] | None = None
        # pos(offset) -> SourcePos: a subclass bound to this Source, built at C speed.
        self.pos = type("SourcePos", (SourcePos,), {"source": self})

    @property
    def line_starts(self) -> list[int]:
        starts = self._line_starts
        if starts is None:
            starts = [0]
            offset = 0
            for line in self.text.split("\n")[:-1]:
                offset += len(line) + 1
                starts.append(offset)
            self._line_starts = starts
        return starts

    def line_of(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset)

    def line_text(self, line: int) -> str:
        starts = self.line_starts
        if not 1 <= line <= len(starts):
            return ""
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[starts[line - 1]:end].rstrip("\r")

    def error(self, offset: int, message: str) -> PtxError:
        return self.error_at(self.pos(offset), message)

    def error_at(self, pos: Pos, message: str) -> PtxError:
        line = pos.line
        return PtxError(message, pos.file, line, pos.col, self.line_text(line))
