"""Entry payloads: LZ4 raw blocks and zstd frames, decompressed to exactly the declared size."""

from __future__ import annotations

import io
import re

import lz4.block
import zstandard

from .container import FLAG_LZ4, FLAG_ZSTD, KIND_PTX, Entry
from .errors import FatbinError
from .limits import check_ratio, check_size

_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.strip() removes


def payload(entry: Entry) -> bytes:
    """The entry's content, decompressed; never more than the header's uncompressed size."""
    compressed = entry.flags & (FLAG_LZ4 | FLAG_ZSTD)
    if not compressed:
        return entry.stored
    where = entry.offset + 56
    size = entry.uncompressed_size
    if size == 0:
        raise FatbinError(f"entry {entry.index}: compressed payload declares an uncompressed size of 0", where)
    check_size(size, f"entry {entry.index}: uncompressed payload", where)
    check_ratio(size, len(entry.stored), f"entry {entry.index}: compressed payload", where)
    if compressed == FLAG_LZ4:
        data = _lz4(entry, size)
    else:
        data = _zstd(entry, size)
    if len(data) != size:
        raise FatbinError(f"entry {entry.index}: {entry.compression} payload decompressed to {len(data)} "
                          f"bytes, the header says {size}", entry.payload_offset)
    return data


def _lz4(entry: Entry, size: int) -> bytes:
    try:
        # a raw block carries no size of its own: the header's is the output buffer's size
        return lz4.block.decompress(entry.stored, uncompressed_size=size)
    except lz4.block.LZ4BlockError as e:
        raise FatbinError(f"entry {entry.index}: corrupt LZ4 block: {e}", entry.payload_offset) from None


def _zstd(entry: Entry, size: int) -> bytes:
    try:
        params = zstandard.get_frame_parameters(entry.stored)
    except zstandard.ZstdError as e:
        raise FatbinError(f"entry {entry.index}: corrupt zstd frame header: {e}", entry.payload_offset) from None
    if params.content_size not in (zstandard.CONTENTSIZE_UNKNOWN, size):
        raise FatbinError(f"entry {entry.index}: zstd frame declares {params.content_size} bytes, "
                          f"the entry header says {size}", entry.payload_offset)
    # read through a stream so a frame that lies about its size still stops one byte past it
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(entry.stored))
    chunks, got = [], 0
    try:
        while got <= size:
            chunk = reader.read(size + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except zstandard.ZstdError as e:
        raise FatbinError(f"entry {entry.index}: corrupt zstd data: {e}", entry.payload_offset) from None
    return b"".join(chunks)


def ptx_text(entry: Entry) -> str:
    """The PTX of a PTX entry: decompressed, cut at the terminating NUL (and its padding)."""
    assert entry.kind == KIND_PTX
    data = payload(entry)
    end = data.find(b"\0")
    text = data if end < 0 else data[:end]  # one copy: split and strip would copy 21 MB each
    if _NOT_BLANK.search(text) is None:
        raise FatbinError(f"entry {entry.index}: empty PTX payload", entry.offset + 8)
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FatbinError(f"entry {entry.index}: PTX is not UTF-8 text (byte {e.start} of the "
                          f"decompressed payload)", entry.payload_offset) from None
