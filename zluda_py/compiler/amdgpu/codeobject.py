"""Reading an AMDGPU code object: ELF header, msgpack metadata note, kernel descriptors.

Used to check what we produce (tests, `zluda-compile --dump`) and by the HIP backend to read
the kernel list. Field offsets follow the HSA kernel descriptor and the AMDGPU ELF note format.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

import msgpack
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION_V5 = 3
NT_AMDGPU_METADATA = 32
KD_SIZE = 64
KD_WAVE32 = 1 << 10  # kernel_code_properties: ENABLE_WAVEFRONT_SIZE32


@dataclass
class KernelDescriptor:
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int
    rsrc3: int
    rsrc1: int
    rsrc2: int
    properties: int

    @classmethod
    def parse(cls, raw: bytes) -> "KernelDescriptor":
        group, private, kernarg = struct.unpack_from("<III", raw, 0)
        entry = struct.unpack_from("<q", raw, 16)[0]
        rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
        props = struct.unpack_from("<H", raw, 56)[0]
        return cls(group, private, kernarg, entry, rsrc3, rsrc1, rsrc2, props)

    @property
    def wave(self) -> int:
        return 32 if self.properties & KD_WAVE32 else 64


@dataclass
class CodeObject:
    e_type: str
    e_machine: int
    osabi: int
    abi_version: int
    e_flags: int
    metadata: dict
    symbols: dict[str, dict]  # name -> {type, value, size, section, bind, defined}
    descriptors: dict[str, KernelDescriptor] = field(default_factory=dict)  # kernel name -> kd
    entries: dict[str, int] = field(default_factory=dict)  # kernel name -> entry address
    text_range: tuple[int, int] = (0, 0)
    needed: list[str] = field(default_factory=list)

    @property
    def kernels(self) -> dict[str, dict]:
        return {k[".name"]: k for k in self.metadata.get("amdhsa.kernels", [])}

    @property
    def undefined(self) -> list[str]:
        return [n for n, s in self.symbols.items() if not s["defined"] and n]


def read(data: bytes) -> CodeObject:
    elf = ELFFile(io.BytesIO(data))
    h = elf.header
    metadata: dict = {}
    for seg in elf.iter_segments():
        if seg["p_type"] != "PT_NOTE":
            continue
        for note in seg.iter_notes():
            if note["n_name"] == "AMDGPU" and note["n_type"] == NT_AMDGPU_METADATA:
                desc = note["n_desc"]
                metadata = msgpack.unpackb(desc if isinstance(desc, bytes) else desc.encode("latin-1"), raw=False)
    symbols: dict[str, dict] = {}
    needed: list[str] = []
    for sec in elf.iter_sections():
        if isinstance(sec, SymbolTableSection):
            for s in sec.iter_symbols():
                symbols.setdefault(s.name, {
                    "type": s["st_info"]["type"], "bind": s["st_info"]["bind"], "value": s["st_value"],
                    "size": s["st_size"], "section": s["st_shndx"], "defined": s["st_shndx"] != "SHN_UNDEF"})
        if isinstance(sec, DynamicSection):
            needed += [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    text = elf.get_section_by_name(".text")
    text_range = (text["sh_addr"], text["sh_addr"] + text["sh_size"]) if text else (0, 0)
    # raw bytes for machine and OS ABI: pyelftools names only the values it knows
    co = CodeObject(h["e_type"], struct.unpack_from("<H", data, 18)[0], data[7], data[8], h["e_flags"],
                    metadata, symbols, text_range=text_range, needed=needed)
    for name, sym in symbols.items():
        if name.endswith(".kd") and sym["defined"]:
            offset = _file_offset(elf, sym["value"])
            kd = KernelDescriptor.parse(data[offset:offset + KD_SIZE])
            co.descriptors[name[:-3]] = kd
            co.entries[name[:-3]] = sym["value"] + kd.entry_offset
    return co


def _file_offset(elf: ELFFile, address: int) -> int:
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= address < seg["p_vaddr"] + seg["p_filesz"]:
            return address - seg["p_vaddr"] + seg["p_offset"]
    raise ValueError(f"address {address:#x} is not in a loaded segment")
