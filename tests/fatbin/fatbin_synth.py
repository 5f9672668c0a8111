"""Hand-assembled fatbins for the robustness tests, written from the layout in docs/fatbin.md
(independently of zluda_py.fatbin's parser)."""

from __future__ import annotations

import struct

import lz4.block
import zstandard

PTX, ELF = 1, 2
LZ4, ZSTD = 0x2000, 0x8000
BASE_FLAGS = 0x11  # 64-bit, Linux

PTX_TEXT = b"//\n.version 9.0\n.target sm_75\n.address_size 64\n\n.visible .entry k()\n{\nret;\n}\n\0"


def entry(kind: int = PTX, sm: int = 75, content: bytes = PTX_TEXT, compression: int = 0,
          header_size: int = 64, uncompressed_size: int | None = None, payload: bytes | None = None,
          compressed_size: int | None = None, name: bytes = b"", pad: bool = True) -> bytes:
    """One entry; `payload`/`compressed_size`/`uncompressed_size` override the honest values."""
    if payload is None:
        if compression == LZ4:
            payload = lz4.block.compress(content, store_size=False)
        elif compression == ZSTD:
            payload = zstandard.ZstdCompressor().compress(content)
        else:
            payload = content
    if compressed_size is None:
        compressed_size = len(payload) if compression else 0
    if uncompressed_size is None:
        uncompressed_size = len(content) if compression else 0
    name_off = header_size if name else 0
    header_size += len(name)
    padded = payload + b"\0" * (-len(payload) % 8 if pad else 0)
    head = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, header_size, len(padded), compressed_size, 0,
                       0, 9, sm, name_off, len(name), BASE_FLAGS | compression, 0, uncompressed_size)
    return head + name + padded


def fatbin(*entries: bytes, size: int | None = None, magic: int = 0xBA55ED50) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", magic, 1, 16, len(body) if size is None else size) + body
