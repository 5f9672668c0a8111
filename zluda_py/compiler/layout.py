"""Layout of kernel parameters and module variables, and initial contents (target-neutral).

Both targets lay out the kernel parameter buffer exactly as CUDA does and build a variable's
initial bytes the same way; they differ only in how the address of a symbol becomes a
constant, which the caller supplies.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.ptxtypes import align_up, immediate_bits, type_size, var_align, var_size
from zluda_py.ptx import ast

I8, I64 = ir.IntType(8), ir.IntType(64)
DEFAULT_MAX_THREADS = 1024
# Shared memory the system reserves per block (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK
# on sm_80+), read through %reserved_smem_offset_*: nvcc's cooperative groups keep state there.
RESERVED_SMEM = 1024


def reserved_smem_offset(name: str) -> int | None:
    """Where `%reserved_smem_offset_<x>` points from the region's start (_begin/_end bound it, _0
    and _1 start its halves); None for `_cap`, its size."""
    which = name.split(".")[0][len("%reserved_smem_offset_"):]
    if which == "cap":
        return None
    offsets = {"begin": 0, "end": RESERVED_SMEM, "0": 0, "1": RESERVED_SMEM // 2}
    if which not in offsets:
        raise UnsupportedError(f"special register {name} (PTX defines _0 and _1)")
    return offsets[which]


def kernel_params(f: ast.Function) -> tuple[list[dict], int]:
    """([{name, offset, size, align}], total bytes): CUDA's parameter buffer for a kernel."""
    params = []
    offset = 0
    for p in f.params:
        size, align = var_size(p), var_align(p)
        offset = align_up(offset, align)
        params.append({"name": p.name, "offset": offset, "size": size, "align": align})
        offset += size
    return params, offset


def directive_dims(f: ast.Function, name: str) -> tuple[int, int, int] | None:
    """The (x, y, z) of a `.reqntid`/`.maxntid`-style directive, missing dimensions 1."""
    for d in f.directives:
        if d.name.lstrip(".") == name:
            dims = [int(a) for a in d.args] + [1, 1]
            return (dims[0], dims[1], dims[2])
    return None


def max_threads(f: ast.Function) -> int:
    """The block size limit a kernel declares (.reqntid, else .maxntid), else 1024."""
    limit = directive_dims(f, "reqntid") or directive_dims(f, "maxntid")
    return limit[0] * limit[1] * limit[2] if limit else DEFAULT_MAX_THREADS


def flatten_init(init: ast.Initializer) -> list[ast.Initializer]:
    """The scalar items of a (possibly nested) initializer, in memory order."""
    if init.items is None:
        return [init]
    out: list[ast.Initializer] = []
    for item in init.items:
        out.extend(flatten_init(item))
    return out


def address_offsets(v: ast.Variable) -> list[int]:
    """Byte offsets of the items of `v`'s initializer that hold a symbol's address (8 bytes)."""
    if v.init is None:
        return []
    elem = type_size(v.type)
    offsets = [i * elem for i, item in enumerate(flatten_init(v.init)) if isinstance(item.value, ast.Sym)]
    if offsets and elem != 8:
        raise UnsupportedError(f"address in the initializer of {elem}-byte elements of {v.name}", v.pos)
    return offsets


def init_type(size: int, offsets: list[int]) -> ir.Type:
    """The LLVM type of a variable's contents: bytes, or a packed struct of byte runs and i64
    address fields at `offsets` (address_offsets)."""
    if not offsets:
        return ir.ArrayType(I8, max(size, 1))
    fields: list[ir.Type] = []
    pos = 0
    for off in offsets:
        if off > pos:
            fields.append(ir.ArrayType(I8, off - pos))
        fields.append(I64)
        pos = off + 8
    if pos < size:
        fields.append(ir.ArrayType(I8, size - pos))
    return ir.LiteralStructType(fields, packed=True)


def initial_bits(imm: ast.Imm, vtype: str) -> int:
    """The bits ptxas writes for one initializer item (tests/ptx/test_constant_expressions.py
    checks them against its cubins): a 0f literal in a 64-bit variable is its 32 bits
    zero-extended, not its value converted; a floating-point constant in a .b32/.b64 variable
    is converted to f32/f64, in a .b8/.b16 one it is 0."""
    if imm.kind != "int" and vtype in ("b8", "b16"):
        return 0
    if imm.kind == "f32" and vtype in ("f64", "b64"):
        return imm.value
    if imm.kind != "int" and vtype in ("b32", "b64"):
        return immediate_bits(imm, "f32" if vtype == "b32" else "f64")
    return immediate_bits(imm, vtype if vtype != "pred" else "u8")


def initial_value(v: ast.Variable, address: Callable[[ast.Initializer], ir.Constant]) -> ir.Constant:
    """`v`'s initial contents as a constant of `init_type`: immediates encoded little-endian,
    address items (`fn`, `var`, `generic(var)+4`) as the i64 constants `address(item)` makes."""
    size = var_size(v)
    if v.init is None:  # zeroinitializer: an uninitialized array costs nothing here, whatever its size
        return ir.Constant(init_type(size, []), None)
    data = bytearray(size)
    elem = type_size(v.type)
    addresses: dict[int, ir.Constant] = {}
    for i, item in enumerate(flatten_init(v.init) if v.init is not None else []):
        if isinstance(item.value, ast.Sym):
            addresses[i * elem] = address(item)
        elif isinstance(item.value, ast.Imm):
            bits = initial_bits(item.value, v.type)
            data[i * elem:(i + 1) * elem] = (bits & ((1 << (8 * elem)) - 1)).to_bytes(elem, "little")
    offsets = address_offsets(v)
    layout = init_type(size, offsets)
    if not offsets:
        return ir.Constant(layout, bytearray(data or bytes(1)))
    fields: list[ir.Constant] = []
    pos = 0
    for off in offsets:
        if off > pos:
            fields.append(ir.Constant(ir.ArrayType(I8, off - pos), bytearray(data[pos:off])))
        fields.append(addresses[off])
        pos = off + 8
    if pos < size:
        fields.append(ir.Constant(ir.ArrayType(I8, size - pos), bytearray(data[pos:])))
    return ir.Constant(layout, fields)
