"""The PTX ISA versions the front end accepts, and the CUDA release each came with.

The driver reports the CUDA release of the newest accepted ISA as its version
(cuDriverGetVersion): NVRTC, cudart and CuPy compare it with their own and warn, or refuse,
when the driver is older than the toolkit whose PTX it is given. PTX of a newer ISA is refused
as NVIDIA's driver refuses it, with CUDA_ERROR_UNSUPPORTED_PTX_VERSION. Instructions newer than
the grammar (PTX ISA 9.0, ptx_grammar/) are refused one form at a time by the checker, so an
ISA is accepted here once its programs are otherwise those of the grammar.
"""

from __future__ import annotations

# PTX ISA -> the CUDA release that introduced it (the PTX ISA manual's "PTX Release History"):
# from 9.0 on, ISA 9.x came with CUDA 13.x.
_CUDA_RELEASE: dict[tuple[int, int], tuple[int, int]] = {
    (9, 0): (13, 0), (9, 1): (13, 1), (9, 2): (13, 2), (9, 3): (13, 3), (9, 4): (13, 4), (9, 5): (13, 5),
}
NEWEST_ISA: tuple[int, int] = max(_CUDA_RELEASE)


def cuda_version(isa: tuple[int, int]) -> int:
    """The CUDA release of a PTX ISA as CUDA encodes versions: 1000 * major + 10 * minor."""
    major, minor = _CUDA_RELEASE[isa]
    return 1000 * major + 10 * minor


# .target -> the first PTX ISA that accepts it. sm_50 to sm_90a: what NVIDIA's driver 580 (CUDA
# 13.0) loads on an H100 (tests/hardware/golden/version_target_probe.txt; sm_88 from 7.3 there);
# older targets and those newer than that GPU: the PTX ISA manual's target table.
_TARGET_ISA: dict[str, tuple[int, int]] = {
    "sm_20": (2, 0), "sm_30": (3, 0), "sm_32": (4, 0), "sm_35": (3, 1), "sm_37": (4, 1), "sm_50": (4, 0),
    "sm_52": (4, 1), "sm_53": (4, 2), "sm_60": (5, 0), "sm_61": (5, 0), "sm_62": (5, 0), "sm_70": (6, 0),
    "sm_72": (6, 1), "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4), "sm_88": (7, 3),
    "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0),
    "sm_100": (8, 6), "sm_100a": (8, 6), "sm_101": (8, 6), "sm_101a": (8, 6), "sm_120": (8, 7), "sm_120a": (8, 7),
    "sm_100f": (8, 8), "sm_101f": (8, 8), "sm_103": (8, 8), "sm_103a": (8, 8), "sm_103f": (8, 8), "sm_121": (8, 8),
    "sm_121a": (8, 8), "sm_120f": (8, 8), "sm_121f": (8, 8), "sm_110": (9, 0), "sm_110a": (9, 0), "sm_110f": (9, 0),
}


def target_isa(target: str) -> tuple[int, int] | None:
    """The first PTX ISA whose modules may name `target` (None: not a target we know the ISA of)."""
    return _TARGET_ISA.get(target)

