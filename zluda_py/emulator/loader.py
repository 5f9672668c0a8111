"""Loading an HSA code object for the emulator: the kernel's descriptor, its code and what the
hardware puts into SGPRs and VGPRs when a wave starts (AMDGPU ABI, "Kernel Descriptor" and
"Initial Kernel Execution State" in LLVM's AMDGPUUsage)."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import numpy as np

from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from zluda_py.compiler.amdgpu import codeobject
from zluda_py.emulator.errors import EmulatorError
from zluda_py.emulator.memory import Memory

# kernel_code_properties bits: the user SGPRs the wave starts with, in this order, and their sizes
_USER_SGPRS = [("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2),
               ("kernarg_segment_ptr", 2), ("dispatch_id", 2), ("flat_scratch_init", 2),
               ("private_segment_size", 1)]
_WAVE32 = 1 << 10
DEFAULT_STACK = 16 << 10  # bytes per lane of call stack when no limit is given: CUDA's largest common setting


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
    entry: int  # address of the first instruction
    text: bytes  # the whole .text section
    text_base: int  # its address in emulator memory
    group_segment_size: int  # static LDS bytes
    private_segment_size: int  # scratch bytes per lane the code needs (the fixed size)
    kernarg_size: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    properties: int
    wave: int
    args: list[dict]  # metadata .args (offset, size, value_kind)
    dynamic_stack: bool = False  # recursion or indirect calls: the stack grows past the fixed size

    def scratch_per_lane(self, stack_size: int) -> int:
        """Scratch each lane gets: the fixed size, plus the stack size limit for a dynamic stack,
        as ROCm adds it (hipLimitStackSize; AMDGPU's code object metadata: "if
        IsDynamicCallstack is 1 then additional space must be added")."""
        return self.private_segment_size + (stack_size if self.dynamic_stack else 0)

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


R_AMDGPU_ABS64, R_AMDGPU_RELATIVE64 = 3, 13


class Image:
    """A code object loaded into emulator memory: its PT_LOAD segments at `base + vaddr` in one
    block (so PC-relative addressing finds the module variables, and the driver can copy to
    them), dynamic relocations applied, kernels and symbols by name."""

    def __init__(self, code_object: bytes, memory: Memory):
        self.code_object, self.memory = code_object, memory
        self.elf = ELFFile(io.BytesIO(code_object))
        loads = [s for s in self.elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        if not loads:
            raise EmulatorError("code object has no loadable segment")
        self.base = memory.alloc(max(s["p_vaddr"] + s["p_memsz"] for s in loads))
        block = memory.view(self.base)
        for s in loads:
            block[s["p_vaddr"]:s["p_vaddr"] + s["p_filesz"]] = np.frombuffer(s.data(), np.uint8)
        self.symbols = {s.name: (s["st_value"], s["st_size"]) for sec in self.elf.iter_sections()
                        if isinstance(sec, SymbolTableSection) for s in sec.iter_symbols()
                        if s["st_shndx"] != "SHN_UNDEF" and s.name}
        for sec in self.elf.iter_sections():
            if isinstance(sec, RelocationSection) and sec["sh_flags"] & 2:  # SHF_ALLOC: the loader's
                dynsym = self.elf.get_section(sec["sh_link"])
                for r in sec.iter_relocations():
                    kind, where = r["r_info_type"], r["r_offset"]
                    if kind == R_AMDGPU_ABS64:
                        value = self.base + dynsym.get_symbol(r["r_info_sym"])["st_value"] + r["r_addend"]
                    elif kind == R_AMDGPU_RELATIVE64:
                        value = self.base + r["r_addend"]
                    else:
                        raise EmulatorError(f"dynamic relocation type {kind} at {where:#x} is not supported")
                    block[where:where + 8] = np.frombuffer(struct.pack("<Q", value & (1 << 64) - 1), np.uint8)
        text = self.elf.get_section_by_name(".text")
        if text is None:
            raise EmulatorError("code object has no .text")
        self.text, self.text_base = text.data(), self.base + text["sh_addr"]
        self.metadata = codeobject.read(code_object).kernels
        self.programs: dict[str, object] = {}  # ISA family -> execute.Program, kept across launches

    def symbol(self, name: str) -> tuple[int, int] | None:
        """(address, size) of a defined symbol."""
        s = self.symbols.get(name)
        return None if s is None else (self.base + s[0], s[1])

    def kernel(self, kernel: str, arch: str) -> Kernel:
        kd = self.symbols.get(kernel + ".kd")
        if kd is None:
            raise EmulatorError(f"kernel {kernel!r} not in the code object (no {kernel}.kd symbol)")
        kd_raw = self.memory.view(self.base)[kd[0]:kd[0] + codeobject.KD_SIZE].tobytes()
        group, private, kernarg = struct.unpack_from("<III", kd_raw, 0)
        entry_offset = struct.unpack_from("<q", kd_raw, 16)[0]
        rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", kd_raw, 44)
        props = struct.unpack_from("<H", kd_raw, 56)[0]
        wave = 32 if props & _WAVE32 else 64
        if isa_family(arch) == "cdna" and wave != 64:
            raise EmulatorError(f"{arch} runs wave64 only; the descriptor of {kernel} asks for wave32")
        meta = self.metadata.get(kernel, {})
        return Kernel(kernel, self.base + kd[0] + entry_offset, self.text, self.text_base, group, private, kernarg,
                      rsrc1, rsrc2, rsrc3, props, wave, list(meta.get(".args", [])), bool(meta.get(".uses_dynamic_stack")))

    def unload(self) -> None:
        self.memory.remove(self.base)
