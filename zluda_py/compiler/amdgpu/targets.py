"""The AMD GPUs we generate code for: wave size, ELF machine flags and per-kernel limits, and
how the pipeline builds for them (HSA code objects, linked by ld.lld, loaded by the HIP backend)."""

from __future__ import annotations

from dataclasses import dataclass

from zluda_py.compiler.errors import UnsupportedError
from zluda_py.compiler.target import Lowered, Target, TargetUnavailable
from zluda_py.ptx import ast


@dataclass(frozen=True)
class GfxTarget(Target):
    name: str
    wave: int  # hardware wave size: 64 on CDNA, 32 on RDNA
    mach: int  # EF_AMDGPU_MACH_* (the low byte of e_flags)
    features: str  # LLVM target features
    vgprs: int  # architectural VGPRs a wave can address
    lds: int  # bytes of LDS (group segment) a workgroup can have

    object_suffix = "hsaco"

    @property
    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"

    def description(self) -> str:
        return f"{self.triple} {self.name} {self.features} code-object-v5"

    def lower(self, module: ast.Module) -> Lowered:
        from zluda_py.compiler.amdgpu import lower

        return Lowered(*lower(module, self.name))

    def generate(self, lowered: Lowered) -> tuple[bytes, dict]:
        """The linked code object (LLVM in a child process: an abort must not kill the host)."""
        from zluda_py.compiler.amdgpu.codegen import emit_objects
        from zluda_py.compiler.amdgpu_link import link

        return link(emit_objects([(lowered.text, self.name)])), lowered.metadata

    def emit(self, ir_text: str, level: int | None = None) -> bytes:
        """Always O3, as the HIP backend builds (the AMDGPU attributor prunes implicit arguments)."""
        from zluda_py.compiler.amdgpu.codegen import emit_object

        return emit_object(ir_text, self.name)

    def check(self) -> None:
        """Code objects are linked by ld.lld: without one the target is unavailable."""
        from zluda_py.compiler.amdgpu_link import LinkerError, find_lld

        try:
            find_lld()
        except LinkerError as e:
            raise TargetUnavailable(f"{self.name}: no ld.lld ({e})") from None


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
