"""Which vector widths and cache hints `ld`/`st` take, as ptxas 13.0 decides
(tests/ptx/test_ptxas_forms.py):

* a vector of up to 128 bits in any ISA (`ld.v8.b16` too); of 256 bits (`.v8.b32`, `.v4.b64`)
  from PTX 8.8 on sm_100, to global or generic addresses only; never wider;
* from PTX 7.8, an eviction priority or prefetch size (`.L1::evict_last`, `.L2::64B`) only on a
  global or generic access (before, ptxas also takes them on .shared, .local, .const, .param)."""

from __future__ import annotations

from .compare_forms import Gate

_SIZES = {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "b32": 32, "u32": 32,
          "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128}
_VECTORS = {"v2": 2, "v4": 4, "v8": 8}
_LOCAL_SPACES = frozenset(("shared", "local", "param", "const"))


def applies(opcode: str, types: tuple[str, ...]) -> bool:
    """Whether this is a load or store this module decides."""
    return opcode in ("ld", "st") and bool(types) and types[-1] in _SIZES


def verdict(mods: tuple[str, ...], types: tuple[str, ...], version: tuple[int, int]) -> Gate:
    """('', ptx, sm) with what the access needs, or (why not, (0, 0), 0)."""
    local = any(m.split("::")[0] in _LOCAL_SPACES for m in mods)
    hint = next((m for m in mods if m[:4] in ("L1::", "L2::") and m != "L2::cache_hint"), None)
    if hint and local and version >= (7, 8):
        return f".{hint} applies to global or generic addresses only", (0, 0), 0
    count = next((_VECTORS[m] for m in mods if m in _VECTORS), 1)
    bits = count * _SIZES[types[-1]]
    if bits <= 128:
        return "", (1, 0), 0
    if bits > 256:
        return f"a vector access of {bits} bits is wider than 256", (0, 0), 0
    if local:
        return "a 256-bit vector access is to global or generic addresses only", (0, 0), 0
    return "", (8, 8), 100
