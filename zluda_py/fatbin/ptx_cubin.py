"""The PTX cubin: an ELF image shaped like a cubin (e_machine EM_CUDA) that holds PTX instead of
SASS. zluda-py's toolchain stand-ins hand it out where NVIDIA's hand out a cubin: NVRTC's
nvrtcGetCUBIN and nvJitLink's nvJitLinkGetLinkedCubin under `zluda run`, the ptxas stand-in
Triton runs, and cuLinkComplete. It is recognised by content, so it survives copies, files and
other processes (the kernel caches of numba, CuPy and Triton).

Sections (after .shstrtab): `.zluda.ptx`, PTX text with its NUL, and `.zluda.image`, an image
whose PTX the loader reads (a fatbin or an nvcc object handed to nvJitLink). The section
headers end the image, so its size follows from the ELF header. The one writer is C
(libcuda_shim/ptx_cubin.c), reached here through the preload library.
"""

from __future__ import annotations

import ctypes
import struct
from functools import cache
from pathlib import Path

from .errors import FatbinError

PTX_SECTION = ".zluda.ptx"
IMAGE_SECTION = ".zluda.image"
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_PART_PTX = 0  # zl_part.kind of PTX text
_LIBRARY = Path(__file__).resolve().parent.parent / "_shim" / "libzluda_preload.so"


def extent(header: bytes) -> int:
    """The size of the ELF image whose header this is, if it ends with its section headers."""
    fields = _EHDR.unpack_from(header)
    shoff, shentsize, shnum = fields[6], fields[11], fields[12]
    return shoff + shentsize * shnum


def parts(data: bytes) -> list[tuple[str, bytes]] | None:
    """The (section name, contents) parts of a PTX cubin, in order; None for any other ELF."""
    if len(data) < _EHDR.size:
        return None
    fields = _EHDR.unpack_from(data)
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    if shentsize != _SHDR.size or shnum < 2 or shstrndx != 1:
        return None
    if shoff + shentsize * shnum > len(data):
        raise FatbinError(f"ELF cubin: its {shnum} section headers at {shoff:#x} run past the end of the image "
                          f"({len(data)} bytes); truncated?", 0x28)

    def section(i: int) -> tuple[int, bytes] | None:
        name, _, _, _, offset, size, *_ = _SHDR.unpack_from(data, shoff + i * shentsize)
        return (name, data[offset:offset + size]) if offset + size <= len(data) else None

    strtab = section(1)
    if strtab is None or PTX_SECTION.encode() not in strtab[1].split(b"\0"):
        return None  # NVIDIA's cubin: its string table is not ours
    names, out = strtab[1], []
    for i in range(2, shnum):
        found = section(i)
        if found is None:
            raise FatbinError(f"PTX cubin: section {i} runs past the end of the image ({len(data)} bytes)",
                              shoff + i * shentsize)
        offset, contents = found
        name = names[offset:names.find(b"\0", offset)].decode(errors="replace")
        if name in (PTX_SECTION, IMAGE_SECTION):
            out.append((name, contents))
    return out


@cache
def _writer():
    lib = ctypes.CDLL(str(_LIBRARY))
    fn = lib.zl_ptx_cubin
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_void_p]
    return fn


class _Part(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]


def pack(texts: list[str], sm: int) -> bytes:
    """The PTX cubin of PTX texts (linked when it is loaded)."""
    blobs = [t.encode() for t in texts]
    array = (_Part * len(blobs))(*(_Part(_PART_PTX, b, len(b)) for b in blobs))
    write = _writer()
    size = write(array, len(blobs), sm, None)
    out = ctypes.create_string_buffer(size)
    write(array, len(blobs), sm, out)
    return out.raw
