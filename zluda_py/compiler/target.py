"""What the compile pipeline (pipeline.py) asks of the machine it builds for.

A `Target` owns every choice that differs between machines: how PTX is lowered to LLVM IR, how
that IR becomes object code (optimisation, code generation, linking), what the cache key says
of it, and how the object code is loaded. `get(name)` gives the target of a name ("cpu",
"gfx1100", ...): names are for users (command lines, environment variables, cache entries);
code passes the objects. A new target subclasses `Target` and is listed in `_targets`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.ptx import ast


class TargetUnavailable(UnsupportedError):
    """A target this build cannot compile for (named, with the reason)."""

    def __str__(self) -> str:
        return self.message.removeprefix("unsupported: ")


@dataclass
class Lowered:
    """A module lowered for a target: LLVM IR text, the metadata its loader needs, and the IR
    module itself where the target's code generation takes it apart (the CPU's split)."""

    text: str
    metadata: dict
    module: Any = None


class Target(ABC):
    """One machine code is built for. Subclasses set `name` and implement the abstract steps."""

    name: str
    per_kernel = False  # modules can be built one kernel at a time (compiler/parts.py, lazy loading)
    object_suffix = "o"  # file name suffix of one object, for `zluda-compile --dump`

    @abstractmethod
    def description(self) -> str:
        """The target as its code generator sees it (triple, processor, features): the cache
        key's part that keeps code built for another machine from being served here."""

    @abstractmethod
    def lower(self, module: ast.Module) -> Lowered:
        """LLVM IR for a linked module, and the metadata of its kernels and variables."""

    @abstractmethod
    def generate(self, lowered: Lowered) -> tuple[bytes, dict]:
        """Object code ready to store and load, and its final metadata (optimised, generated
        and linked; LLVM runs in child processes where an abort must not kill the host)."""

    @abstractmethod
    def emit(self, ir_text: str, level: int | None = None) -> bytes:
        """One relocatable object from LLVM IR at optimisation `level` (None: the target's
        choice), in this process: the job a code generation child runs (codegen.py)."""

    def lower_part(self, module: ast.Module, name: str) -> Lowered:
        """A part of a module (a kernel, or the variables: compiler/parts.py), for `per_kernel` targets."""
        raise UnsupportedError(f"target {self.name!r} per kernel")

    def generate_parts(self, parts: list[Lowered]) -> list[bytes]:
        """The object code of each part, together (code generation in parallel)."""
        raise UnsupportedError(f"target {self.name!r} per kernel")

    def helpers_object(self) -> bytes | None:
        """Object code that every module of this target is linked to when loaded, built once
        (the cache stores it: `cache.compile.helpers`); None: there is none."""
        return None

    def load(self, object_code: bytes, metadata: dict) -> Any:
        """A module loaded into this process from what `generate` built (CompiledModule's interface)."""
        raise UnsupportedError(f"target {self.name!r}: its code runs on a device, through its backend")

    def objects(self, object_code: bytes, metadata: dict) -> list[bytes]:
        """The object files `generate` put together, for `zluda-compile --dump`."""
        return [object_code]

    def check(self) -> None:
        """Raises TargetUnavailable when a tool the target needs is missing from this machine."""

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple:
        """Pickled by name (zluda-compile's worker processes): unpickling gives the one registered object."""
        return get, (self.name,)


def _targets() -> dict[str, Target]:
    from zluda_py.compiler.amdgpu.targets import TARGETS
    from zluda_py.compiler.cpu.target import CPU

    return {CPU.name: CPU, **TARGETS}


def names() -> tuple[str, ...]:
    """Every target's name, the CPU first."""
    return tuple(_targets())


def get(name: str) -> Target:
    """The target called `name`; TargetUnavailable for a name we do not build for."""
    try:
        return _targets()[name]
    except KeyError:
        raise TargetUnavailable(f"{name}: unknown target (expected one of {', '.join(names())})") from None
