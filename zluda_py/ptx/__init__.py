"""PTX front end: grammar-driven parser, AST, checks and printer.

    from zluda_py import ptx
    module = ptx.parse(text, "kernel.ptx")   # raises ptx.PtxError
    text = ptx.format(module)                # parse(format(m)) == m
"""

from . import ast, grammar
from .errors import PtxError, PtxErrors
from .parser import parse
from .printer import format

__all__ = ["ast", "grammar", "parse", "format", "PtxError", "PtxErrors"]
