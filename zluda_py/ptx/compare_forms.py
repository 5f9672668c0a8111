"""Which comparisons and types `setp` and `set` take, as ptxas 13.0 (and so NVIDIA's driver)
decides: checked against ptxas over every comparison, `.ftz`, destination and source type, at
.version/.target pairs from 4.2/sm_53 to 9.0/sm_120 (tests/ptx/test_ptxas_forms.py).

* the comparison fits the source type: bit types compare `.eq`/`.ne` only, signed integers add
  the ordered `.lt .le .gt .ge`, unsigned integers also `.lo .ls .hi .hs`, and floats the
  ordered ones and the unordered `.equ ... .geu .num .nan`;
* `.ftz` only for f32, f16 and f16x2 sources;
* `set`'s destination: u32, s32, f32, f16 or bf16 for integer, f32 and f64 sources (f32 with
  `.ftz` not into bf16); u32, s32, u16, s16, f16 or bf16 for an f16 source (bf16 not with `.ftz`);
  u32, s32, u16, s16 or bf16 for bf16; u32, s32 or the same packed type for f16x2 and bf16x2;
* a scalar f16 or bf16 `setp` writes one predicate, never `p|q`;
* f16 operands need PTX 4.2 and sm_53, an integer result of an f16 compare PTX 6.5, and bf16 on
  either side PTX 7.8 and sm_90."""

from __future__ import annotations

_EQUALITY = frozenset(("eq", "ne"))
_ORDERED = _EQUALITY | {"lt", "le", "gt", "ge"}
_UNSIGNED = _ORDERED | {"lo", "ls", "hi", "hs"}
_FLOAT = _ORDERED | {"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}
_COMPARISONS = _UNSIGNED | _FLOAT
_FLOATS = frozenset(("f16", "f16x2", "bf16", "bf16x2", "f32", "f64"))
_FTZ = frozenset(("f32", "f16", "f16x2"))
_WIDE_RESULTS = frozenset(("u32", "s32", "f32", "f16", "bf16"))
_RESULTS = {"f16": frozenset(("u32", "s32", "u16", "s16", "f16", "bf16")),
            "bf16": frozenset(("u32", "s32", "u16", "s16", "bf16")),
            "f16x2": frozenset(("u32", "s32", "f16x2")), "bf16x2": frozenset(("u32", "s32", "bf16x2"))}
_INTEGER_RESULTS = frozenset(("u32", "s32", "u16", "s16"))
TYPES = frozenset(("b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64")) | _FLOATS

Gate = tuple[str, tuple[int, int], int]


def applies(opcode: str, types: tuple[str, ...]) -> bool:
    """Whether this module decides `opcode` with these type modifiers."""
    want = 1 if opcode == "setp" else 2
    return opcode in ("setp", "set") and len(types) == want and types[-1] in TYPES


def _comparisons(source: str) -> frozenset[str]:
    if source in _FLOATS:
        return _FLOAT
    return {"b": _EQUALITY, "s": _ORDERED, "u": _UNSIGNED}[source[0]]


def verdict(mods: tuple[str, ...], types: tuple[str, ...]) -> Gate:
    """('', ptx, sm) with the PTX ISA version and sm the form needs, or (why not, (0, 0), 0)."""
    source = types[-1]
    cmp = next((m for m in mods if m in _COMPARISONS), "")
    if cmp not in _comparisons(source):
        return f"comparison .{cmp} does not apply to .{source}", (0, 0), 0
    ftz = "ftz" in mods
    if ftz and source not in _FTZ:
        return f".ftz applies only to f32, f16 and f16x2 comparisons", (0, 0), 0
    halves = {t for t in types if t in ("f16", "f16x2", "bf16", "bf16x2")}
    if len(types) == 2:
        dest = types[0]
        allowed = _RESULTS.get(source, _WIDE_RESULTS)
        if dest not in allowed or (ftz and dest == "bf16"):
            return f"set does not write .{dest} from a .{source} comparison" + (" with .ftz" if ftz else ""), (0, 0), 0
        if source in ("f16", "f16x2") and dest in _INTEGER_RESULTS:
            return "", (6, 5), 53
    if any(t.startswith("bf16") for t in halves):
        return "", (7, 8), 90
    if halves:
        return "", (4, 2), 53
    return "", (1, 0), 0


def one_predicate(opcode: str, types: tuple[str, ...]) -> bool:
    """Whether the form's destination must be a single predicate (no `p|q`)."""
    return opcode == "setp" and types[-1:] in (("f16",), ("bf16",))
