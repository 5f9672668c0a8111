"""Which modifiers a scalar `cvt.d.s` takes, as ptxas 13.0 (and so NVIDIA's driver) decides:
checked form by form against ptxas over 11,520 combinations of the twelve scalar types,
rounding, `.sat`, `.ftz` and `.relu` (tests/ptx/test_cvt_forms.py).

* integer <- integer: no rounding; `.sat` only where the source's range does not fit the
  destination's;
* integer <- float: an integer rounding (.rni .rzi .rmi .rpi) is required;
* float <- integer: a float rounding (.rn .rz .rm .rp) is required;
* float <- float: narrowing requires a float rounding, widening takes none, the same type takes
  an integer rounding or none;
* bf16 takes no `.sat`, converts with no 8-bit integer, to or from f16 and into f32/f64
  optionally rounded, and from f32/f64 with a required rounding;
* `.ftz` only where one side is f32; `.relu` only for f16/bf16 <- f32 with .rn or .rz, alone."""

from __future__ import annotations

INTEGERS = {"u8": (0, 8), "s8": (1, 8), "u16": (0, 16), "s16": (1, 16), "u32": (0, 32), "s32": (1, 32),
            "u64": (0, 64), "s64": (1, 64)}
FLOATS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
FLOAT_ROUNDING = frozenset(("rn", "rz", "rm", "rp"))
INTEGER_ROUNDING = frozenset(("rni", "rzi", "rmi", "rpi"))
ROUNDING = FLOAT_ROUNDING | INTEGER_ROUNDING | {"rna", "rs"}


def applies(types: tuple[str, ...], operands: int) -> bool:
    """Whether `cvt` with these type modifiers is a scalar conversion this module decides."""
    return operands == 2 and len(types) == 2 and all(t in INTEGERS or t in FLOATS for t in types)


def _fits(d: str, s: str) -> bool:
    """Every value of integer type s is one of integer type d."""
    (d_signed, d_bits), (s_signed, s_bits) = INTEGERS[d], INTEGERS[s]
    if d_signed == s_signed:
        return d_bits >= s_bits
    return d_signed and d_bits > s_bits


def problem(d: str, s: str, mods: tuple[str, ...]) -> str:
    """'' if ptxas takes `cvt{mods}.d.s`, else why it does not."""
    rounding = [m for m in mods if m in ROUNDING]
    rnd = rounding[0] if len(rounding) == 1 else None
    if len(rounding) > 1:
        return "more than one rounding modifier"
    sat, ftz, relu = "sat" in mods, "ftz" in mods, "relu" in mods
    if relu:
        if d not in ("f16", "bf16") or s != "f32" or rnd not in ("rn", "rz"):
            return ".relu only converts f32 to f16 or bf16, with .rn or .rz"
        return ".relu cannot be combined with .sat or .ftz" if sat or ftz else ""
    if ftz and "f32" not in (d, s):
        return ".ftz applies only to conversions from or to f32"
    if rounding and rnd is None or rnd in ("rna", "rs"):
        return f"rounding .{rounding[0]} is not a scalar conversion's"
    if d in INTEGERS and s in INTEGERS:
        if rnd is not None:
            return "an integer-to-integer conversion takes no rounding"
        return ".sat has nothing to clamp here" if sat and _fits(d, s) else ""
    if "bf16" in (d, s):
        other = s if d == "bf16" else d
        if other in ("u8", "s8"):
            return "bf16 does not convert to or from 8-bit integers"
        if sat:
            return "a bf16 conversion takes no .sat"
    if d in INTEGERS:
        return "" if rnd in INTEGER_ROUNDING else "a float-to-integer conversion requires .rni, .rzi, .rmi or .rpi"
    if s in INTEGERS:
        return "" if rnd in FLOAT_ROUNDING else "an integer-to-float conversion requires .rn, .rz, .rm or .rp"
    if d == s:
        return "" if rnd is None or rnd in INTEGER_ROUNDING else "a same-type conversion rounds only to an integer"
    if "bf16" in (d, s) and not (d == "bf16" and s in ("f32", "f64")):
        return "" if rnd is None or rnd in FLOAT_ROUNDING else "this conversion takes only .rn, .rz, .rm or .rp"
    if FLOATS[d] < FLOATS[s] or d == "bf16":
        return "" if rnd in FLOAT_ROUNDING else "a narrowing conversion requires .rn, .rz, .rm or .rp"
    return "a widening conversion takes no rounding" if rnd is not None else ""
