"""Sizes, alignments and immediate encodings of PTX types and variables (target-neutral)."""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np

from zluda_py.compiler.lanes import ptx_bits
from zluda_py.ptx import ast
from zluda_py.ptx.parser import OPAQUE_TYPES


def align_up(x: int, a: int) -> int:
    """`x` rounded up to a multiple of `a`."""
    return (x + a - 1) // a * a


def type_size(t: str) -> int:
    """Bytes of one element of PTX type `t` (a predicate takes one byte; a texture, sampler or
    surface reference, as a kernel parameter, holds the 64-bit handle of its object)."""
    if t in OPAQUE_TYPES:
        return 8
    return max(1, ptx_bits(t) // 8)


def var_size(v: ast.Variable) -> int:
    """Bytes of a variable or parameter: element size times vector width times array dims
    (an unsized dimension counts as 0)."""
    n = type_size(v.type) * (v.vector or 1)
    for d in v.array:
        n *= d or 0
    return n


def var_align(v: ast.Variable) -> int:
    """The alignment of a variable or parameter: as declared, at least its element size (as
    in CUDA's parameter buffer, shared memory and stack frames)."""
    return max(v.align or 1, type_size(v.type))


def is_dynamic_shared(v: ast.Variable) -> bool:
    """Dynamic shared memory: `.extern .shared`, or a `.shared` array of unspecified size."""
    return v.space == "shared" and (v.linkage == "extern" or bool(v.array and v.array[-1] is None))


def dynamic_shared_align(variables: Iterable[ast.Variable]) -> int:
    """Where dynamic shared memory starts, past a kernel's static .shared variables: aligned to
    16 or the largest `.align` among the module's dynamic ones, as ptxas lays it out (its static
    size is rounded up to that when the module declares any; checked with ptxas -v and on an
    H100, tests/hardware/launch_probe.cu)."""
    return max([16, *(var_align(v) for v in variables if is_dynamic_shared(v))])


def global_align(v: ast.Variable) -> int:
    """The alignment a module variable gets: declared, natural, and 16 for 16 bytes or more
    (so vector accesses to arrays are aligned as on NVIDIA GPUs)."""
    return max(var_align(v), 16 if var_size(v) >= 16 else 1)


def immediate_bits(imm: ast.Imm, ptype: str) -> int:
    """The bit pattern of an immediate converted to PTX type `ptype`."""
    bits = ptx_bits(ptype)
    is_float = ptype in ("f16", "bf16", "f32", "f64")
    value: float | int = imm.value
    if imm.kind == "f32":
        if ptype == "f32" or not is_float:
            return int(imm.value) & ((1 << bits) - 1)
        value = struct.unpack("<f", struct.pack("<I", int(imm.value)))[0]
    elif imm.kind == "f64":
        if ptype == "f64" or not is_float:
            return int(imm.value) & ((1 << bits) - 1)
        value = struct.unpack("<d", struct.pack("<Q", int(imm.value)))[0]
    elif imm.kind == "float" and not is_float:
        value = int(imm.value)
    if not is_float:
        return int(value) & ((1 << bits) - 1)
    if ptype == "f64":
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    with np.errstate(over="ignore"):  # a constant past the type's range rounds to infinity
        if ptype == "f32":
            return int(np.array(value, dtype=np.float64).astype(np.float32).view(np.uint32))
        if ptype == "f16":
            return int(np.array(value, dtype=np.float64).astype(np.float16).view(np.uint16))
        f32 = int(np.array(value, dtype=np.float64).astype(np.float32).view(np.uint32))
    return (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16  # bf16: round to nearest even
