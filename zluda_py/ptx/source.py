"""PTX source text: positions (offset -> line:col) and the errors that point into it."""

from __future__ import annotations

from bisect import bisect_right

from .ast import Pos
from .errors import PtxError


class Source:
    """The text of one PTX module and a fast offset -> (line, col) map."""

    __slots__ = ("text", "filename", "line_starts")

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self.line_starts = starts

    def line_of(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset)

    def pos(self, offset: int) -> Pos:
        line = bisect_right(self.line_starts, offset)
        return Pos(self.filename, line, offset - self.line_starts[line - 1] + 1)

    def line_text(self, line: int) -> str:
        starts = self.line_starts
        if not 1 <= line <= len(starts):
            return ""
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[starts[line - 1]:end].rstrip("\r")

    def error(self, offset: int, message: str) -> PtxError:
        p = self.pos(offset)
        return PtxError(message, p.file, p.line, p.col, self.line_text(p.line))

    def error_at(self, pos: Pos, message: str) -> PtxError:
        return PtxError(message, pos.file, pos.line, pos.col, self.line_text(pos.line))
