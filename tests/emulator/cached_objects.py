"""What a run under the emulator left in its compiled-code cache: the check that a test which
reuses a CPU-target test's body really built AMDGPU code objects, not x86 ones."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from zluda_py.cache.settings import DB_NAME

EM_AMDGPU = 224  # ELF e_machine of AMDGPU code objects (x86-64 is 62)


def elf_machines(cache_dir: Path) -> list[int]:
    """The ELF e_machine of every object in the cache under cache_dir."""
    with sqlite3.connect(cache_dir / DB_NAME) as conn:
        return [int.from_bytes(obj[18:20], "little") for (obj,) in conn.execute("SELECT object FROM entries")]


def assert_amdgpu_only(cache_dir: Path) -> None:
    machines = elf_machines(cache_dir)
    assert machines and set(machines) == {EM_AMDGPU}, f"cache objects' ELF machines: {machines}"
