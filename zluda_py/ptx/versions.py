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
