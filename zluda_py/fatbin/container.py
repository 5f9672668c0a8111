"""The fatbin container: a 16-byte header followed by PTX and ELF entries.

Layout (nvcc 13.0, see docs/fatbin.md): header `{u32 magic 0xba55ed50, u16 version 1,
u16 header_size, u64 entries_size}`; each entry has a header of at least 64 bytes
`{u16 kind, u16 0x0101, u32 header_size, u64 payload_size, u32 compressed_size,
u32 -, u16 minor, u16 major, u32 sm, u32 name_offset, u32 name_length, u64 flags,
u64 -, u64 uncompressed_size}` and its payload right after the header.
Every size is checked against the buffer before it is used. An entry that fails a check is
left out (`Fatbin.skipped` says why), as NVIDIA's driver ignores damage in entries it does not
use: only when no usable entry remains does the damage fail the load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from .errors import FatbinError

FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")  # the 64 bytes every entry header starts with

KIND_PTX = 1
KIND_ELF = 2
KIND_LTOIR = 8  # NVVM IR for link-time optimisation (code=lto_XX); listed, never selected
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_LTOIR: "ltoir"}

FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000


@dataclass(frozen=True)
class Entry:
    """One entry of a fatbin. `offset` is where its header starts, in the reader's address space."""

    index: int
    offset: int
    kind: int
    header_size: int
    sm: int
    version: tuple[int, int]
    flags: int
    name: str
    stored: bytes  # the payload as stored: compressed bytes only, when compressed
    uncompressed_size: int  # from the header; 0 when not compressed

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, f"kind{self.kind}")

    @property
    def compression(self) -> str:
        if self.flags & FLAG_LZ4:
            return "lz4"
        if self.flags & FLAG_ZSTD:
            return "zstd"
        return "none"

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size


@dataclass(frozen=True)
class Fatbin:
    offset: int
    size: int  # header plus entries, as the header declares
    entries: tuple[Entry, ...]
    skipped: tuple[FatbinError, ...] = ()  # why entries (or a cut-off tail) were left out


def _fail(message: str, offset: int) -> FatbinError:
    return FatbinError(message, offset)


def fatbin_extent(header: bytes, base: int) -> int:
    """Total size (header + entries) declared by the first 16 bytes of a fatbin at `base`."""
    if len(header) < FATBIN_HEADER.size:
        raise _fail(f"truncated fatbin header: {len(header)} of {FATBIN_HEADER.size} bytes", base)
    magic, version, header_size, size = FATBIN_HEADER.unpack_from(header)
    if magic != FATBIN_MAGIC:
        raise _fail(f"bad fatbin magic {magic:#010x} (expected {FATBIN_MAGIC:#010x})", base)
    if version != 1:
        raise _fail(f"unsupported fatbin version {version} (expected 1)", base + 4)
    if header_size < FATBIN_HEADER.size:
        raise _fail(f"fatbin header size {header_size} is below {FATBIN_HEADER.size}", base + 6)
    return header_size + size


def parse_fatbin(data: bytes | memoryview, start: int = 0, base: int = 0) -> Fatbin:
    """Parse the fatbin at `data[start:]`; offsets in the result and errors are `base + index`."""
    view = memoryview(data)
    extent = fatbin_extent(bytes(view[start:start + FATBIN_HEADER.size]), base + start)
    header_size = FATBIN_HEADER.unpack_from(view, start)[2]
    end = start + extent
    skipped = []
    if end > len(view):  # the entries that are whole are read; the cut one is damage
        skipped.append(_fail(f"fatbin declares {extent} bytes but only {len(view) - start} remain", base + start + 8))
        end = len(view)
    entries = []
    pos, index = start + header_size, 0
    while pos < end:
        step = _entry_extent(view, pos, end)
        try:
            entries.append(_parse_entry(view, pos, end, index, base))
        except FatbinError as e:
            skipped.append(e)
        if step is None:  # no way to find the next entry
            break
        pos, index = pos + step, index + 1
    return Fatbin(base + start, extent, tuple(entries), tuple(skipped))


def _entry_extent(view: memoryview, pos: int, end: int) -> int | None:
    """Header plus payload of the entry at `pos`, when its header says so consistently."""
    if end - pos < ENTRY_HEADER.size:
        return None
    header_size, payload_size = struct.unpack_from("<IQ", view, pos + 4)
    if header_size < ENTRY_HEADER.size or header_size + payload_size > end - pos:
        return None
    return header_size + payload_size


def _parse_entry(view: memoryview, pos: int, end: int, index: int, base: int) -> Entry:
    at = base + pos
    if end - pos < ENTRY_HEADER.size:
        raise _fail(f"entry {index}: truncated header: {end - pos} of {ENTRY_HEADER.size} bytes", at)
    (kind, _, header_size, payload_size, compressed_size, _, minor, major, sm, name_off, name_len,
     flags, _, uncompressed_size) = ENTRY_HEADER.unpack_from(view, pos)
    if header_size < ENTRY_HEADER.size or header_size > end - pos:
        raise _fail(f"entry {index}: header size {header_size} outside {ENTRY_HEADER.size}..{end - pos}", at + 4)
    if payload_size > end - pos - header_size:
        raise _fail(f"entry {index}: payload of {payload_size} bytes runs past the end of the fatbin "
                    f"({end - pos - header_size} bytes left)", at + 8)
    payload = view[pos + header_size:pos + header_size + payload_size]
    compressed = flags & (FLAG_LZ4 | FLAG_ZSTD)
    if compressed == FLAG_LZ4 | FLAG_ZSTD:
        raise _fail(f"entry {index}: flags {flags:#x} ask for both LZ4 and zstd", at + 40)
    if compressed:
        if compressed_size == 0 or compressed_size > payload_size:
            raise _fail(f"entry {index}: compressed size {compressed_size} outside 1..{payload_size} "
                        f"(the payload size)", at + 16)
        payload = payload[:compressed_size]
    elif compressed_size:
        raise _fail(f"entry {index}: compressed size {compressed_size} without a compression flag "
                    f"(flags {flags:#x})", at + 16)
    name = ""
    if name_len:
        if name_off > header_size + payload_size or name_len > header_size + payload_size - name_off:
            raise _fail(f"entry {index}: name at +{name_off} ({name_len} bytes) lies outside the entry", at + 32)
        name = bytes(view[pos + name_off:pos + name_off + name_len]).split(b"\0", 1)[0]
        name = name.decode("utf-8", "replace").strip()
    return Entry(index, at, kind, header_size, sm, (major, minor), flags, name, bytes(payload),
                 uncompressed_size if compressed else 0)


def iter_fatbins(data: bytes | memoryview, base: int = 0) -> Iterator[Fatbin]:
    """The fatbins concatenated in a section such as `.nv_fatbin`, skipping the zero padding
    the linker puts between them to keep each one 8-byte aligned."""
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if not any(view[pos:pos + 8]):
            pos += 8
            continue
        fb = parse_fatbin(view, pos, base)
        yield fb
        pos += fb.size
        pad = -pos % 8  # entries need not end 8-byte aligned; the next fatbin starts aligned
        if not any(view[pos:pos + pad]):
            pos += pad
