"""Fatbins inside ELF files: host executables, shared libraries and objects built by nvcc.

A host ELF keeps its fatbins in two sections: `.nv_fatbin` (the fatbins of ordinary
translation units and the one from the device-link step) and `__nv_relfatbin` (the
relocatable fatbins of `-rdc` translation units, which must be linked together).
`.nvFatBinSegment` holds the 24-byte wrappers cudart registers; the version-2 wrapper's data
pointer names the device-link fatbin, which holds only the SASS nvlink produced.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile

from .container import Fatbin, iter_fatbins
from .errors import FatbinError

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
RDC_SECTION = "__nv_relfatbin"
WRAPPER_SECTION = ".nvFatBinSegment"
WRAPPER_MAGIC = 0x466243B1
WRAPPER = struct.Struct("<IIQQ")


@dataclass(frozen=True)
class FatbinSection:
    name: str
    offset: int  # in the file
    address: int  # virtual address once loaded (0 in objects)
    data: bytes


def elf_machine(data: bytes) -> int:
    """e_machine of an ELF image (EM_CUDA = 190 for a cubin)."""
    if len(data) < 20 or data[:4] != ELF_MAGIC:
        raise FatbinError("not an ELF image (no \\x7fELF magic)", 0)
    order = "<" if data[5] == 1 else ">"
    return struct.unpack_from(order + "H", data, 18)[0]


def _open(data: bytes) -> ELFFile:
    try:
        return ELFFile(io.BytesIO(data))
    except Exception as e:  # pyelftools raises many types on malformed input
        raise FatbinError(f"malformed ELF header: {e}", 0) from None


def fatbin_sections(data: bytes) -> list[FatbinSection]:
    """The sections of a host ELF that hold fatbins (and the wrapper section), in file order."""
    elf = _open(data)
    out = []
    try:
        for index, sec in enumerate(elf.iter_sections()):
            if sec.name not in (*FATBIN_SECTIONS, WRAPPER_SECTION) or sec["sh_type"] == "SHT_NOBITS":
                continue
            off, size = sec["sh_offset"], sec["sh_size"]
            if off > len(data) or size > len(data) - off:
                # name the sh_offset field of the section header: that is where the lie is
                field = elf["e_shoff"] + index * elf["e_shentsize"] + (0x18 if elf.elfclass == 64 else 0x10)
                raise FatbinError(f"section {sec.name} ({size} bytes at {off:#x}) runs past the end "
                                  f"of the file ({len(data)} bytes)", field)
            out.append(FatbinSection(sec.name, off, sec["sh_addr"], data[off:off + size]))
    except FatbinError:
        raise
    except Exception as e:
        raise FatbinError(f"malformed ELF section table: {e}", 0) from None
    return out


def section_fatbins(sec: FatbinSection) -> list[Fatbin]:
    """The fatbins concatenated in a section; offsets are file offsets."""
    return list(iter_fatbins(sec.data, base=sec.offset))


def _dlink_addresses(sections: list[FatbinSection]) -> set[int]:
    addrs = set()
    for sec in sections:
        if sec.name != WRAPPER_SECTION:
            continue
        for pos in range(0, len(sec.data) - WRAPPER.size + 1, WRAPPER.size):
            magic, version, data_ptr, _ = WRAPPER.unpack_from(sec.data, pos)
            if magic == WRAPPER_MAGIC and version == 2:
                addrs.add(data_ptr)
    return addrs


def host_images(data: bytes) -> list[tuple[bool, list[Fatbin]]]:
    """What cudart would load from this host ELF, one (linked, fatbins) pair per image: every
    `-rdc` fatbin as one image (linked=True: its PTX modules are linked together), then each
    other fatbin on its own. The device-link fatbin (nvlink's SASS) is left out when the
    wrappers identify it."""
    sections = fatbin_sections(data)
    dlink = _dlink_addresses(sections)
    rdc: list[Fatbin] = []
    images: list[list[Fatbin]] = []
    for sec in sections:
        if sec.name == RDC_SECTION:
            rdc += section_fatbins(sec)
        elif sec.name != WRAPPER_SECTION:
            for fb in section_fatbins(sec):
                if not (sec.address and sec.address + fb.offset - sec.offset in dlink):
                    images.append([fb])
    return ([(True, rdc)] if rdc else []) + [(False, img) for img in images]


def cubin_sm(data: bytes) -> int | None:
    """The SASS architecture of a cubin (86 for sm_86), from e_flags; None if not recorded there."""
    if len(data) < 52 or data[7] != 0x41:  # ELFOSABI_CUDA; older ABIs encode e_flags differently
        return None
    return (struct.unpack_from("<I", data, 48)[0] >> 8) & 0xFF
