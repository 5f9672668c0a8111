"""This process's memory at raw addresses a program handed us, without trusting them.

Reads go through process_vm_readv (or /proc/self/mem where seccomp forbids it), which report
an unmapped address as an error instead of a segfault; only when neither is available do we
fall back to a plain ctypes copy. `valid` tells whether a host range can be copied from or to
(cuMemcpy*, cuMemHostRegister) before anything touches it: an unmapped, inaccessible (or, for
a destination, read-only) page anywhere in it makes it invalid.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_vm_readv = getattr(_libc, "process_vm_readv", None)
_vm_writev = getattr(_libc, "process_vm_writev", None)
for _fn in (_vm_readv, _vm_writev):
    if _fn is not None:
        _fn.restype = ctypes.c_ssize_t
        _fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                        ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]

# which reader works here; decided by the first read, since seccomp rules do not change
_method: str | None = None
_TOP = 1 << 64
# sys/mman.h (Linux 5.14): fault a range in as a read (write) would, failing instead of a signal
MADV_POPULATE_READ, MADV_POPULATE_WRITE = 22, 23
_madvise = _libc.madvise
_madvise.restype = ctypes.c_int
_madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_mincore = _libc.mincore
_mincore.restype = ctypes.c_int
_mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_populate: bool | None = None  # whether this kernel has MADV_POPULATE_*; decided by the first check
# past this many pages, reading /proc/self/maps (50-150 us) costs less than faulting in each
# page (about 0.13 us a page, when it is resident already)
_POPULATE_PAGES = 1024


def _read_vm(address: int, size: int) -> bytes:
    buf = ctypes.create_string_buffer(size)
    local = _IoVec(ctypes.cast(buf, ctypes.c_void_p), size)
    remote = _IoVec(address, size)
    n = _vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n < 0:
        err = ctypes.get_errno()
        if err == errno.EFAULT:
            return b""
        raise OSError(err, os.strerror(err))
    return buf.raw[:n]


def _read_proc_mem(address: int, size: int) -> bytes:
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        out = b""
        while len(out) < size:
            try:
                chunk = os.pread(fd, size - len(out), address + len(out))
            except OSError as e:
                if e.errno == errno.EIO:  # unmapped
                    break
                raise
            if not chunk:
                break
            out += chunk
        return out
    finally:
        os.close(fd)


_known = ctypes.create_string_buffer(1)  # readable: what the reader is chosen with


def _choose_reader() -> str:
    for name, fn in (("vm", _read_vm), ("proc", _read_proc_mem)):
        if name == "vm" and _vm_readv is None:
            continue
        try:
            fn(ctypes.addressof(_known), 1)
        except OSError:
            continue
        return name
    return "ctypes"


def _reader() -> str:
    global _method
    if _method is None:
        _method = _choose_reader()
    return _method


def read(address: int, size: int) -> bytes:
    """Up to `size` bytes at `address`: fewer when the range runs into unreadable memory."""
    if _reader() == "vm":
        return _read_vm(address, size)
    if _method == "proc":
        return _read_proc_mem(address, size)
    return ctypes.string_at(address, size)


class _Scratch(threading.local):
    """A thread's probe buffers, made once: building ctypes objects costs as much as the call."""

    def __init__(self) -> None:
        self.buf = ctypes.create_string_buffer(2)
        base = ctypes.addressof(self.buf)
        self.local = (_IoVec * 2)(_IoVec(base, 1), _IoVec(base + 1, 1))
        self.remote = (_IoVec * 2)(_IoVec(0, 1), _IoVec(0, 1))


_scratch = _Scratch()


def _probe(first: int, last: int, writable: bool) -> bool:
    """The bytes at both ends can be read (process_vm_readv) and, with `writable`, written back
    as they are (process_vm_writev refuses read-only pages instead of faulting). One system
    call for each, both ends together."""
    s = _scratch
    s.remote[0].base, s.remote[1].base = first, last
    pid = os.getpid()
    if _vm_readv(pid, s.local, 2, s.remote, 2, 0) != 2:
        return False
    return not writable or _vm_writev is None or _vm_writev(pid, s.local, 2, s.remote, 2, 0) == 2


def _populated(start: int, length: int, writable: bool) -> bool:
    """MADV_POPULATE_*: every page of the page-aligned range faulted in as a read (write) would,
    or an error instead of a signal (ENOMEM: a hole, EINVAL: protected, EFAULT: a file's page
    past its end, SIGBUS to touch)."""
    return _madvise(start, length, MADV_POPULATE_WRITE if writable else MADV_POPULATE_READ) == 0


def _mapped(address: int, last: int, writable: bool) -> bool:
    """/proc/self/maps must cover [address, last] without a gap, with pages readable (and
    writable). A file mapping's pages past the end of its file are its last ones, so with
    MADV_POPULATE_* the last page of each in the range is faulted in too. (/proc/self/mem reads
    protected pages, so it cannot tell.)"""
    need = "rw" if writable else "r"
    end = address  # covered up to here
    page = mmap.PAGESIZE
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms, _, _, inode = line.split(None, 5)[:5]
                low, high = (int(x, 16) for x in span.split("-"))
                if high <= end:
                    continue
                if low > end or any(p not in perms for p in need):
                    return False
                mine = min(high, last + 1) - 1
                if inode != "0" and _can_populate() and not _populated(mine - mine % page, page, writable):
                    return False
                end = high
                if end > last:
                    return True
    except OSError:  # no /proc: nothing more can be known without touching the range
        return True
    return False


def _can_populate() -> bool:
    global _populate
    if _populate is None:
        page = ctypes.addressof(_known) - ctypes.addressof(_known) % mmap.PAGESIZE
        _populate = _madvise(page, mmap.PAGESIZE, MADV_POPULATE_WRITE) == 0  # else EINVAL: unknown advice
    return _populate


def valid(address: int, size: int, writable: bool = False) -> bool:
    """Whether the program's host range [address, address+size) is mapped throughout and
    readable (writable too, with `writable`). An empty range is valid anywhere."""
    if size == 0:
        return True
    if address <= 0 or address + size > _TOP:
        return False
    last = address + size - 1
    start = address - address % mmap.PAGESIZE
    if _can_populate() and last - start < _POPULATE_PAGES * mmap.PAGESIZE:
        return _populated(start, last + 1 - start, writable)  # faults in what the copy would
    if _reader() == "vm" and last - start < 2 * mmap.PAGESIZE:  # both ends are every page
        return _probe(address, last, writable)
    return _mapped(address, last, writable)


def writable(address: int, size: int) -> bool:
    """Whether [address, address+size) is mapped readable and writable throughout, without
    writing a byte (valid()'s process_vm_writev probe writes back what it read, which could undo
    a concurrent store): MADV_POPULATE_WRITE, else /proc/self/maps."""
    if size <= 0 or address <= 0 or address + size > _TOP:
        return False
    start = address - address % mmap.PAGESIZE
    if _can_populate():
        return _populated(start, address + size - start, True)
    return _mapped(address, address + size - 1, True)


def residency(address: int, size: int) -> bytes | None:
    """For each page of [address, address+size), from the one holding `address`: whether it is
    resident in memory (bit 0 of its byte), without touching any; None when a page is not
    mapped (mincore fails with ENOMEM on a hole), whatever the protection."""
    start = address - address % mmap.PAGESIZE
    length = address + size - start
    pages = ctypes.create_string_buffer(-(-length // mmap.PAGESIZE))
    return pages.raw if _mincore(start, length, pages) == 0 else None


def mapped(address: int, size: int) -> bool:
    """Whether every page of [address, address+size) is mapped, whatever its protection."""
    return residency(address, size) is not None


def all_valid(pieces: list[tuple[int, int]]) -> bool:
    """Whether each small (address, size) piece is valid() to read. With MADV_POPULATE_READ, one
    call for each run of adjacent pages they touch: kernel parameters, for one, mostly lie in
    one or two pages of a stack."""
    if not _can_populate():
        return all(valid(a, n) for a, n in pieces)
    page = mmap.PAGESIZE
    low = min(a for a, _ in pieces)
    high = max(a + n for a, n in pieces)
    if 0 < low and high <= _TOP and high - (low - low % page) <= 2 * page:
        return _populated(low - low % page, high - (low - low % page), False)  # each page holds an end
    pages: set[int] = set()
    for address, size in pieces:
        if address <= 0 or address + size > _TOP:
            return False
        pages.update(range(address - address % page, address + size, page))
    runs: list[list[int]] = []
    for p in sorted(pages):
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + page
        else:
            runs.append([p, p + page])
    return all(_populated(low, high - low, False) for low, high in runs)
