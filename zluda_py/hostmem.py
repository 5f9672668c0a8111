"""This process's memory at raw addresses a program handed us, without trusting them.

Reads go through process_vm_readv (or /proc/self/mem where seccomp forbids it), which report
an unmapped address as an error instead of a segfault; only when neither is available do we
fall back to a plain ctypes copy. `valid` tells whether a host range can be copied from or to
(cuMemcpy*, cuMemHostRegister) before anything touches it: probes of its first and last byte
find unmapped, inaccessible (or, for a destination, read-only) pages at its ends, msync a hole
in between, in a range of any size, in one call.
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
_msync = _libc.msync
_msync.restype = ctypes.c_int
_msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

# which reader works here; decided by the first read, since seccomp rules do not change
_method: str | None = None
_TOP = 1 << 64
MS_ASYNC = 1  # sys/mman.h: msync only checks the range


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


def valid(address: int, size: int, writable: bool = False) -> bool:
    """Whether the program's host range [address, address+size) is mapped throughout and its
    ends accessible (writable too, with `writable`). An empty range is valid anywhere."""
    if size == 0:
        return True
    if address <= 0 or address + size > _TOP:
        return False
    last = address + size - 1
    start = address - address % mmap.PAGESIZE
    # a range over more than two pages may have a hole the probes of its ends do not see
    if last - start >= 2 * mmap.PAGESIZE and _msync(start, last + 1 - start, MS_ASYNC) != 0:  # ENOMEM
        return False
    if _reader() == "vm":
        return _probe(address, last, writable)
    # no process_vm_readv here: the range must be mapped, its ends readable through /proc/self/mem
    if _msync(start, last + 1 - start, MS_ASYNC) != 0:
        return False
    return _method == "ctypes" or (len(read(address, 1)) == 1 and len(read(last, 1)) == 1)
