"""Listing and extracting every entry of a binary, for `zluda fatbin list|extract`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .compression import payload, ptx_text
from .container import FATBIN_MAGIC, KIND_ELF, KIND_LTOIR, KIND_PTX, Entry, iter_fatbins
from .elf import EM_CUDA, ELF_MAGIC, FATBIN_SECTIONS, elf_machine, fatbin_sections, section_fatbins
from .errors import FatbinError
from .limits import check_size, max_size

_EXTENSIONS = {KIND_PTX: "ptx", KIND_ELF: "cubin", KIND_LTOIR: "ltoir"}
_ARCH_PREFIX = {KIND_PTX: "compute", KIND_ELF: "sm", KIND_LTOIR: "lto"}


@dataclass(frozen=True)
class Row:
    """One entry, located: the `fatbin`-th fatbin of the binary (counting across sections)."""

    fatbin: int
    section: str
    entry: Entry

    @property
    def arch(self) -> str:
        return f"{_ARCH_PREFIX.get(self.entry.kind, 'arch')}_{self.entry.sm}"

    @property
    def ptx_version(self) -> str:
        major, minor = self.entry.version
        return f"{major}.{minor}" if self.entry.kind == KIND_PTX else "-"

    @property
    def file_name(self) -> str:
        """The predictable name `extract` writes: fatbin<F>-entry<I>-<arch>.<ptx|cubin|ltoir>."""
        ext = _EXTENSIONS.get(self.entry.kind, "bin")
        return f"fatbin{self.fatbin}-entry{self.entry.index}-{self.arch}.{ext}"


def _read(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        data = f.read(max_size() + 1)
    check_size(len(data), "the file", 0)
    return data


def rows(path: str | os.PathLike) -> list[Row]:
    """Every entry of every fatbin in a host ELF (`.nv_fatbin`, `__nv_relfatbin`) or fatbin file;
    damage that left entries out fails only a file with no entry left (`scan` reports it all)."""
    found, damage = scan(path)
    if damage and not found:
        raise damage[0]
    return found


def scan(path: str | os.PathLike) -> tuple[list[Row], list[FatbinError]]:
    """`rows`, and why entries were left out (each error names the file and the offset)."""
    try:
        data = _read(path)
        if data[:4] == FATBIN_MAGIC.to_bytes(4, "little"):
            groups = [("-", list(iter_fatbins(data)))]
        elif data[:4] == ELF_MAGIC:
            if elf_machine(data) == EM_CUDA:
                raise FatbinError("an ELF cubin (one SASS image), not a fatbin container", 0)
            groups = [(s.name, section_fatbins(s)) for s in fatbin_sections(data) if s.name in FATBIN_SECTIONS]
        else:
            raise FatbinError(f"neither an ELF file nor a fatbin (first bytes {data[:8].hex(' ')})", 0)
    except FatbinError as e:
        raise e.with_origin(os.fspath(path)) from None
    fatbins = [(section, fb) for section, fbs in groups for fb in fbs]
    damage = [e.with_origin(os.fspath(path)) for _, fb in fatbins for e in fb.skipped]
    return [Row(index, section, e) for index, (section, fb) in enumerate(fatbins) for e in fb.entries], damage


def uncompressed_size(entry: Entry) -> int:
    return entry.uncompressed_size if entry.compression != "none" else len(entry.stored)


def extract(path: str | os.PathLike, out_dir: str | os.PathLike) -> tuple[list[Path], list[FatbinError]]:
    """Write every readable entry of `path` into `out_dir`, decompressed; PTX without its trailing
    NUL. Returns the files and the damage that left entries out."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    found, damage = scan(path)
    for row in found:
        try:
            data = ptx_text(row.entry).encode() if row.entry.kind == KIND_PTX else payload(row.entry)
        except FatbinError as e:
            raise e.with_origin(os.fspath(path)) from None
        target = out / row.file_name
        target.write_bytes(data)
        written.append(target)
    return written, damage
