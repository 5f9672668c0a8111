"""Vector constants made once per type and value, and shared by all their uses.

llvmlite keeps a constant's printed text in the constant object and prints a vector element by
element ("<32 x i32> <i32 0, i32 0, ...>", a format per element), so a fresh vector constant at
each use was wrapped, element by element, when built and formatted again when printed (about a
tenth of a part's lowering time). These are plain `ir.Constant`s: their text is llvmlite's own,
made once."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from llvmlite import ir

# distinct constants kept (a few hundred in a large module); past it the cache starts over
_LIMIT = 4096
_cache: dict[tuple[str, object], ir.Constant] = {}


def _shared(key: tuple[str, object], make: Callable[[], ir.Constant]) -> ir.Constant:
    c = _cache.get(key)
    if c is None:
        if len(_cache) >= _LIMIT:
            _cache.clear()
        c = _cache[key] = make()
    return c


def splat_vector(ty: ir.VectorType, value: int | float) -> ir.Constant:
    """`ir.Constant(ty, [value] * ty.count)`, shared. Keyed by the element's own text (exact for
    floats: -0.0 and 0.0 differ), which with the type's fixes the vector's."""
    element = ir.Constant(ty.element, value)
    return _shared((str(ty), element.get_reference()), lambda: ir.Constant(ty, [element] * ty.count))


def int_vector(ty: ir.VectorType, values: Iterable[int]) -> ir.Constant:
    """`ir.Constant(ty, values)` for an integer vector type, shared (bools print as 0/1)."""
    ints = tuple(int(v) for v in values)
    return _shared((str(ty), ints), lambda: ir.Constant(ty, list(ints)))
