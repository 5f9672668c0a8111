"""Cache keys: what must match for stored native code to be reusable.

A key hashes the PTX text(s) in link order, the target (LLVM triple, CPU name and CPU features
for "cpu") and the compiler identity: the package and LLVM versions plus a fingerprint of the
translator's own source (zluda_py.compiler, zluda_py.ptx and the PTX grammar). The fingerprint
stands for "every option that changes the output": optimisation level, vectorizer switches,
code model and the lowering itself are all in that source, so editing any of it (a
development build, a patched install) can never serve code built by a different translator.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import zluda_py

FORMAT = 1  # layout of what an entry holds; bump when it changes
AMDGPU_TARGETS = ("gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1200", "gfx1201")
TARGETS = ("cpu", *AMDGPU_TARGETS)


class TargetUnavailable(Exception):
    """A target this build cannot compile for (named, with the reason)."""


@lru_cache(maxsize=None)
def target_description(target: str) -> str:
    """The target as the compiler will see it: 'x86_64-unknown-linux-gnu znver5 +avx2,...'."""
    if target == "cpu":
        import llvmlite.binding as llvm

        from zluda_py.compiler.cpu.runtime import target_machine

        return f"{target_machine().triple} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"
    if target in AMDGPU_TARGETS:
        from zluda_py.compiler.amdgpu.targets import target as gfx_target

        t = gfx_target(target)
        return f"{t.triple} {t.name} {t.features} code-object-v5"
    raise TargetUnavailable(f"{target}: unknown target (expected one of {', '.join(TARGETS)})")


def _source_files() -> list[Path]:
    import zluda_py.compiler
    import zluda_py.ptx
    from zluda_py.ptx.grammar import _grammar_dir

    files: list[Path] = []
    for pkg in (zluda_py.compiler, zluda_py.ptx):
        files += Path(pkg.__file__).parent.rglob("*.py")
    grammar = Path(str(_grammar_dir()))
    files += (p for p in grammar.rglob("*") if p.is_file())
    return sorted(files)


@lru_cache(maxsize=None)
def compiler_identity() -> str:
    """Package version, LLVM version and a hash of the translator's source, as one string."""
    import llvmlite
    import llvmlite.binding as llvm

    h = hashlib.sha256()
    for path in _source_files():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return f"zluda-py {zluda_py.__version__} llvm {llvm_version} llvmlite {llvmlite.__version__} src {h.hexdigest()[:16]}"


def build_id(target: str) -> str:
    """Everything but the PTX: entries with another build id were made by another compiler or
    for another machine and can never be hit here (`zluda cache info` calls them stale)."""
    blob = json.dumps([FORMAT, target, target_description(target), compiler_identity()])
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_key(ptx: list[str], target: str, part: str | None = None) -> str:
    """The key of a whole module, or of one part of it (a kernel, or the variables:
    compiler/parts.py): a part's entry depends on nothing but its module's PTX and its name."""
    h = hashlib.sha256(build_id(target).encode())
    for text in ptx:
        data = text.encode()
        h.update(len(data).to_bytes(8, "little") + data)  # length-prefixed: no ambiguity between splits
    if part is not None:
        h.update(b"\0part\0" + part.encode())
    return h.hexdigest()
