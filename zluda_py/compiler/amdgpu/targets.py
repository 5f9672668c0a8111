"""The AMD GPUs we generate code for: wave size, ELF machine flags and per-kernel limits."""

from __future__ import annotations

from dataclasses import dataclass

from zluda_py.compiler.errors import UnsupportedError


@dataclass(frozen=True)
class GfxTarget:
    name: str
    wave: int  # hardware wave size: 64 on CDNA, 32 on RDNA
    mach: int  # EF_AMDGPU_MACH_* (the low byte of e_flags)
    features: str  # LLVM target features
    vgprs: int  # architectural VGPRs a wave can address
    lds: int  # bytes of LDS (group segment) a workgroup can have

    @property
    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"


# RDNA 3 runs in CU mode as ZLUDA does: WGP mode would need cache invalidates at barriers.
TARGETS: dict[str, GfxTarget] = {t.name: t for t in (
    GfxTarget("gfx90a", 64, 0x3F, "", 512, 65536),
    GfxTarget("gfx942", 64, 0x4C, "", 512, 65536),
    GfxTarget("gfx950", 64, 0x4F, "", 512, 163840),
    GfxTarget("gfx1030", 32, 0x36, "+cumode", 256, 65536),
    GfxTarget("gfx1100", 32, 0x41, "+cumode", 256, 65536),
    GfxTarget("gfx1200", 32, 0x48, "+cumode", 256, 65536),
    GfxTarget("gfx1201", 32, 0x4E, "+cumode", 256, 65536),
)}


def target(name: str) -> GfxTarget:
    """The target named `name` (e.g. "gfx942"); ":xnack+" style suffixes are not accepted."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UnsupportedError(f"AMDGPU target {name!r} (known: {', '.join(TARGETS)})") from None
