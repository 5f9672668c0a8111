"""The compile pipeline, top to bottom: parse -> link -> lower to LLVM IR -> optimise and generate
object code -> load. Every step that differs between machines is the target's (target.py)."""

from __future__ import annotations

from typing import Any

from zluda_py.compiler import limits
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.compiler.target import Target
from zluda_py.ptx import ast


def compile(ptx: "str | ast.Module | list[str | ast.Module]", target: Target = CPU) -> Any:
    """Translate PTX (one module, or several to link as with -rdc) to native code and load it
    (a CompiledModule on the CPU)."""
    _, object_code, metadata = compile_object(ptx, target)
    return load(object_code, metadata, target)


def compile_object(ptx: "str | ast.Module | list[str | ast.Module]", target: Target = CPU) -> tuple[str, bytes, dict]:
    """`compile` without the final `load`: (LLVM IR text, object code, metadata), for the
    compiled-code cache and `zluda-compile --dump`."""
    modules = ptx if isinstance(ptx, list) else [ptx]
    module = link([_parse(m) for m in modules])
    limits.check(module)
    lowered = target.lower(module)
    object_code, metadata = target.generate(lowered)
    return lowered.text, object_code, metadata


def compile_parts(module: ast.Module, names: list[str], target: Target = CPU) -> list[tuple[str, bytes, dict]]:
    """(LLVM IR text, object code, metadata) of parts of a linked module (`compiler/parts.py`),
    each pruned to what it reaches; their code is generated together."""
    limits.check(module, names)
    lowered = [target.lower_part(module, name) for name in names]
    objects = target.generate_parts(lowered)
    return [(part.text, obj, part.metadata) for part, obj in zip(lowered, objects)]


def _parse(m: "str | ast.Module") -> ast.Module:
    if isinstance(m, ast.Module):
        return m
    from zluda_py.ptx import parse  # the front end; imported here so the AST path works without it

    return parse(m)


def lower(module: ast.Module, target: Target = CPU) -> tuple[str, dict]:
    """LLVM IR text and the metadata `load` needs (kernels, parameters, globals)."""
    lowered = target.lower(module)
    return lowered.text, lowered.metadata


def emit_object(ir_text: str, level: int | None = None, target: Target = CPU) -> bytes:
    """One object from LLVM IR, in this process (on the CPU `level` defaults to the module size's)."""
    return target.emit(ir_text, level)


def load(object_code: bytes, metadata: dict, target: Target = CPU) -> Any:
    """Load what `compile_object` built (e.g. from a cache) without re-optimising."""
    return target.load(object_code, metadata)
