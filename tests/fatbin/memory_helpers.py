"""Process memory for the pointer tests: loaded libraries and pages followed by a hole."""

from __future__ import annotations

import ctypes
import mmap
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from elftools.elf.elffile import ELFFile

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def load_wrappers(path: Path, symbol: str) -> tuple[ctypes.CDLL, list[tuple[int, int]]]:
    """dlopen `path` (running its fatbin registration) and return the library with the
    (process address, version) of each 24-byte wrapper in its `.nvFatBinSegment`."""
    lib = ctypes.CDLL(str(path))
    info = _DlInfo()
    assert _libc.dladdr(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p), ctypes.byref(info))
    base = info.dli_fbase
    with open(path, "rb") as f:
        seg = ELFFile(f).get_section_by_name(".nvFatBinSegment")
        start, size = seg["sh_addr"], seg["sh_size"]
    wrappers = []
    for addr in range(base + start, base + start + size, 24):
        magic, version = struct.unpack("<II", ctypes.string_at(addr, 8))
        assert magic == 0x466243B1
        wrappers.append((addr, version))
    return lib, wrappers


@contextmanager
def bytes_before_hole(data: bytes) -> Iterator[int]:
    """The address of `data` placed so that its last byte ends a page and the next page is
    unmapped: any read past the end would fault."""
    pages = (len(data) + PAGE - 1) // PAGE + 1
    base = _libc.mmap(None, pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    hole = base + (pages - 1) * PAGE
    assert _libc.munmap(hole, PAGE) == 0
    addr = hole - len(data)
    ctypes.memmove(addr, data, len(data))
    try:
        yield addr
    finally:
        _libc.munmap(base, (pages - 1) * PAGE)
