"""Cache keys: what must match for stored native code to be reusable.

A key hashes the PTX text(s) in link order, the target (its name and `description()`: LLVM
triple, CPU name and CPU features for the CPU) and the compiler identity: the package and LLVM versions plus a fingerprint of the
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
from zluda_py.compiler.target import Target

FORMAT = 1  # layout of what an entry holds; bump when it changes


@lru_cache(maxsize=None)
def target_description(target: Target) -> str:
    """The target as the compiler will see it: 'x86_64-unknown-linux-gnu znver5 +avx2,...'."""
    return target.description()


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


def build_id(target: Target) -> str:
    """Everything but the PTX: entries with another build id were made by another compiler or
    for another machine and can never be hit here (`zluda cache info` calls them stale)."""
    blob = json.dumps([FORMAT, target.name, target_description(target), compiler_identity()])
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_key(ptx: list[str], target: Target, part: str | None = None) -> str:
    """The key of a whole module, or of one part of it (a kernel, or the variables:
    compiler/parts.py): a part's entry depends on nothing but its module's PTX and its name."""
    h = _module_hash(build_id(target), tuple(ptx)).copy()
    if part is not None:
        h.update(b"\0part\0" + part.encode())
    return h.hexdigest()


@lru_cache(maxsize=64)
def _module_hash(build: str, ptx: tuple[str, ...]):
    """The hash of the build id and the texts, before the part's name: a module's every part, and
    every `known` test, would otherwise hash its whole text again (21 MB for CuPy's CUB module,
    20-30 ms each, a dozen times in a run that finds everything cached)."""
    h = hashlib.sha256(build.encode())
    for text in ptx:
        data = text.encode()
        h.update(len(data).to_bytes(8, "little") + data)  # length-prefixed: no ambiguity between splits
    return h
