"""Reading this process's memory at a raw address without trusting the address.

The driver hands us whatever pointer the program passed to cuModuleLoadData. Reads go through
process_vm_readv (or /proc/self/mem where seccomp forbids it), which report an unmapped address
as an error instead of a segfault; only when neither is available do we fall back to a plain
ctypes copy. Every read is bounded by the caller: we never scan memory for a terminator
without a cap.
"""

from __future__ import annotations

import ctypes
import errno
import os

from .errors import FatbinError

# strings are read in aligned chunks; a short read means the next byte is unmapped
_CHUNK = 1 << 16


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_vm_readv = getattr(_libc, "process_vm_readv", None)
if _vm_readv is not None:
    _vm_readv.restype = ctypes.c_ssize_t
    _vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                          ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]

# which reader works here; decided by the first read, since seccomp rules do not change
_method: str | None = None


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


def _read_any(address: int, size: int) -> bytes:
    global _method
    if _method is None:
        for name, fn in (("vm", _read_vm), ("proc", _read_proc_mem)):
            if name == "vm" and _vm_readv is None:
                continue
            try:
                data = fn(address, size)
            except OSError:
                continue
            _method = name
            return data
        _method = "ctypes"
    if _method == "vm":
        return _read_vm(address, size)
    if _method == "proc":
        return _read_proc_mem(address, size)
    return ctypes.string_at(address, size)


def read(address: int, size: int, what: str) -> bytes:
    """Exactly `size` bytes at `address`, or FatbinError naming the first unreadable byte."""
    if address <= 0 or address + size > 1 << 64:
        raise FatbinError(f"{what}: invalid address", address)
    data = _read_any(address, size) if size else b""
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
        chunk = _read_any(pos, want) if pos > 0 else b""
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
