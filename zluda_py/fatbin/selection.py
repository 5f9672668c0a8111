"""Which PTX entry of a fatbin the device JITs.

NVIDIA's driver JITs the highest PTX target not above the device's compute capability and
fails with CUDA_ERROR_NO_BINARY_FOR_GPU when there is none. We translate PTX rather than run
it on a GPU of that generation, so PTX for a newer target is usually fine: what it uses that
we cannot support is refused instruction by instruction by the compiler, with its position.
So by default, when no PTX fits, we take the closest one above (CuPy's CUB fatbin holds only
compute_120). `ZLUDA_PTX_SELECT` overrides:
  any (default)  highest PTX target <= device sm, else the lowest PTX target above it
  compatible     NVIDIA's rule: highest PTX target <= device sm, else error 209
  newest         the highest PTX target, whatever the device sm
"""

from __future__ import annotations

import os

from .container import KIND_ELF, KIND_PTX, Entry, Fatbin
from .errors import CUDA_ERROR_NO_BINARY_FOR_GPU, FatbinError

ENV_POLICY = "ZLUDA_PTX_SELECT"
POLICIES = ("any", "compatible", "newest")


def policy() -> str:
    value = os.environ.get(ENV_POLICY, "").strip().lower() or "any"
    if value not in POLICIES:
        raise ValueError(f"{ENV_POLICY}={value!r}: expected one of {', '.join(POLICIES)}")
    return value


def select_ptx(fatbin: Fatbin, sm: int, above: bool = True) -> Entry:
    """The PTX entry to JIT for a device of compute capability `sm` (e.g. 86); `above=False`
    applies NVIDIA's rule whatever the policy but "newest"."""
    ptx = [e for e in fatbin.entries if e.kind == KIND_PTX]
    fitting = [e for e in ptx if e.sm <= sm]
    mode = policy()
    if mode == "newest" and ptx:
        return max(ptx, key=lambda e: e.sm)  # max() keeps the first of equal targets
    if fitting:
        return max(fitting, key=lambda e: e.sm)
    if mode == "any" and above and ptx:
        return min(ptx, key=lambda e: e.sm)
    if fatbin.skipped and not ptx:  # the PTX may have been in the damage: that is the error
        raise fatbin.skipped[0]
    raise FatbinError(_no_ptx_message(fatbin, ptx, sm), fatbin.offset, CUDA_ERROR_NO_BINARY_FOR_GPU)


def _no_ptx_message(fatbin: Fatbin, ptx: list[Entry], sm: int) -> str:
    rebuild = f"rebuild with -gencode arch=compute_{sm},code=compute_{sm} (or a lower compute_XX)"
    if ptx:
        targets = ", ".join(f"compute_{t}" for t in sorted({e.sm for e in ptx}))
        relax = f", or unset {ENV_POLICY}=compatible to translate the closest one" if policy() == "compatible" else ""
        return f"no PTX for this device (sm_{sm}): the fatbin holds PTX only for {targets}; {rebuild}{relax}"
    sass = sorted({e.sm for e in fatbin.entries if e.kind == KIND_ELF})
    if sass:
        archs = ", ".join(f"sm_{t}" for t in sass)
        return (f"the fatbin holds only SASS ({archs}) and no PTX; zluda translates PTX, so the "
                f"program must be rebuilt with PTX: {rebuild}")
    return f"the fatbin holds no PTX ({len(fatbin.entries)} entries); {rebuild}"
