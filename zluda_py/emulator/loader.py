"""Loading an HSA code object for the emulator: the kernel's descriptor, its code and what the
hardware puts into SGPRs and VGPRs when a wave starts (AMDGPU ABI, "Kernel Descriptor" and
"Initial Kernel Execution State" in LLVM's AMDGPUUsage)."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from zluda_py.compiler.amdgpu import codeobject
from zluda_py.emulator.errors import EmulatorError

# kernel_code_properties bits: the user SGPRs the wave starts with, in this order, and their sizes
_USER_SGPRS = [("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2),
               ("kernarg_segment_ptr", 2), ("dispatch_id", 2), ("flat_scratch_init", 2),
               ("private_segment_size", 1)]
_WAVE32 = 1 << 10


def isa_family(arch: str) -> str:
    """tinygrad's instruction table for a gfx target."""
    if arch.startswith("gfx11"):
        return "rdna3"
    if arch.startswith("gfx12"):
        return "rdna4"
    if arch in ("gfx940", "gfx941", "gfx942", "gfx950", "gfx90a"):
        return "cdna"
    raise EmulatorError(f"the emulator has no instruction tables for {arch}")


def packed_workitem_ids(arch: str) -> bool:
    """gfx90a, gfx94x/gfx950 and gfx11+ pack the workitem ids into v0 (x | y << 10 | z << 20)."""
    return arch in ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950") or arch.startswith(("gfx11", "gfx12"))


@dataclass
class Kernel:
    name: str
    entry: int  # address of the first instruction in `text`
    text: bytes  # the whole .text section
    text_base: int
    group_segment_size: int  # static LDS bytes
    private_segment_size: int  # scratch bytes per lane
    kernarg_size: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    properties: int
    wave: int
    args: list[dict]  # metadata .args (offset, size, value_kind)

    @property
    def user_sgprs(self) -> list[tuple[str, int]]:
        """(name, first SGPR) of the enabled user SGPR inputs."""
        out, n = [], 0
        for bit, (name, size) in enumerate(_USER_SGPRS):
            if self.properties & (1 << bit):
                out.append((name, n))
                n += size
        return out

    @property
    def user_sgpr_count(self) -> int:
        return (self.rsrc2 >> 1) & 0x1F

    @property
    def workgroup_id_enabled(self) -> tuple[bool, bool, bool]:
        return tuple(bool(self.rsrc2 & (1 << b)) for b in (7, 8, 9))  # type: ignore[return-value]

    @property
    def private_segment_enabled(self) -> bool:
        return bool(self.rsrc2 & 1)

    @property
    def workitem_id_dims(self) -> int:
        """How many of x, y, z the hardware writes into VGPRs."""
        return ((self.rsrc2 >> 11) & 3) + 1


def load(code_object: bytes, kernel: str, arch: str) -> Kernel:
    elf = ELFFile(io.BytesIO(code_object))
    text = elf.get_section_by_name(".text")
    if text is None:
        raise EmulatorError("code object has no .text")
    symbols = {s.name: s for sec in elf.iter_sections() if isinstance(sec, SymbolTableSection)
               for s in sec.iter_symbols()}
    kd_sym = symbols.get(kernel + ".kd")
    if kd_sym is None:
        raise EmulatorError(f"kernel {kernel!r} not in the code object (no {kernel}.kd symbol)")
    kd_addr = kd_sym["st_value"]
    kd_raw = _bytes_at(elf, code_object, kd_addr, codeobject.KD_SIZE)
    group, private, kernarg = struct.unpack_from("<III", kd_raw, 0)
    entry_offset = struct.unpack_from("<q", kd_raw, 16)[0]
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", kd_raw, 44)
    props = struct.unpack_from("<H", kd_raw, 56)[0]
    wave = 32 if props & _WAVE32 else 64
    if isa_family(arch) == "cdna" and wave != 64:
        raise EmulatorError(f"{arch} runs wave64 only; the descriptor of {kernel} asks for wave32")
    meta = codeobject.read(code_object).kernels.get(kernel, {})
    return Kernel(kernel, kd_addr + entry_offset, text.data(), text["sh_addr"], group, private, kernarg,
                  rsrc1, rsrc2, rsrc3, props, wave, list(meta.get(".args", [])))


def _bytes_at(elf: ELFFile, data: bytes, address: int, size: int) -> bytes:
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= address < seg["p_vaddr"] + seg["p_filesz"]:
            off = seg["p_offset"] + address - seg["p_vaddr"]
            return data[off:off + size]
    raise EmulatorError(f"address {address:#x} is not in a loaded segment")
