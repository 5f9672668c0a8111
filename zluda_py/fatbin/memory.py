"""Reading this process's memory at a raw address without trusting the address.

The driver hands us whatever pointer the program passed to cuModuleLoadData; reads go through
`zluda_py.hostmem`, which reports unreadable memory instead of faulting. Every read is bounded
by the caller: we never scan memory for a terminator without a cap.
"""

from __future__ import annotations

from .. import hostmem
from .errors import FatbinError

# strings are read in aligned chunks; a short read means the next byte is unmapped
_CHUNK = 1 << 16


def read(address: int, size: int, what: str) -> bytes:
    """Exactly `size` bytes at `address`, or FatbinError naming the first unreadable byte."""
    if address <= 0 or address + size > 1 << 64:
        raise FatbinError(f"{what}: invalid address", address)
    data = hostmem.read(address, size) if size else b""
    if len(data) != size:
        raise FatbinError(f"{what}: memory at {address + len(data):#x} is not readable "
                          f"({len(data)} of {size} bytes read)", address + len(data))
    return data


def read_cstring(address: int, limit: int, what: str) -> bytes:
    """The NUL-terminated string at `address` without its NUL, at most `limit` bytes long.

    Reads in aligned chunks that stop short at an unmapped page, so a string ending just
    before one is still read whole.
    """
    out = bytearray()
    pos = address
    while True:
        want = _CHUNK - pos % _CHUNK
        chunk = hostmem.read(pos, want) if pos > 0 else b""
        nul = chunk.find(b"\0")
        if nul >= 0:
            out += chunk[:nul]
            break
        out += chunk
        if len(chunk) < want:
            raise FatbinError(f"{what}: memory at {pos + len(chunk):#x} is not readable before the "
                              f"terminating NUL", pos + len(chunk))
        if len(out) > limit:
            raise FatbinError(f"{what}: no terminating NUL within {limit} bytes", address)
        pos += want
    if len(out) > limit:
        raise FatbinError(f"{what}: no terminating NUL within {limit} bytes", address)
    return bytes(out)
