"""`zluda api coverage [--json] [--refused]`: every driver entry point cudart looks up and every
symbol cuda.h makes programs link against (the build's `_shim/api_names.txt`), each
implemented, refused with the reason, or not applicable (graphics interop)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent.parent / "_shim"
IMPLEMENTED, REFUSED, NOT_APPLICABLE = "implemented", "refused", "n/a"

# graphics interop: no display stack stands behind a CPU or a headless AMD device here
_INTEROP = re.compile(r"^cu(GL|EGL|VDPAU|Graphics|EventCreateFromEGLSync)")
# the first matching pattern gives a refused entry point's reason
_REASONS = [
    (r"ExternalSemaphore|NvSciSync", "external semaphores (Vulkan/D3D/NvSci sync objects)"),
    (r"^cuExternalMemory", "external memory as mipmapped arrays (opaque fds map as buffers)"),
    (r"^cuGreenCtx|^cuCtxFromGreenCtx|DevResource|^cuDevSmResource|^cuStreamGetGreenCtx",
     "green contexts (SM partitions)"),
    (r"^cuMulticast", "multicast objects (NVLink multi-GPU)"),
    (r"^cuTensorMap", "tensor maps (the TMA unit; cp.async.bulk.tensor is refused too)"),
    (r"^cuCheckpoint", "process checkpointing"),
    (r"^cuCoredump", "GPU core dumps"),
    (r"^cuSubgrid", "subgrids"),
    (r"^cuTexRef(Set|Get)Address(2D)?$", "the 32-bit device pointer forms of CUDA < 3.2 (the _v2/_v3 forms are implemented)"),
    (r"Sparse|^cuArrayGetPlane", "CUDA array forms not built yet (sparse, planar)"),
    (r"Cluster", "thread block clusters"),
    (r"Decompress|Discard", "batched decompression and discards"),
    (r"^cuCtxCreate_v3|ExecAffinity", "execution affinity (MPS SM limits)"),
    (r"^cuProfilerInitialize", "cuProfilerInitialize (NOT_SUPPORTED on NVIDIA's driver too since CUDA 12)"),
    (r"MultiDevice", "multi-device cooperative launches (one device)"),
    (r"Luid|AsyncNotification|GPUDirectRDMA|HostAtomic|P2PAtomic", "device queries and notifications of other hardware"),
]


def classify(name: str, implemented: bool) -> tuple[str, str]:
    """(status, reason) of one entry point."""
    if implemented:
        return IMPLEMENTED, ""
    if _INTEROP.match(name):
        return NOT_APPLICABLE, "graphics interop (OpenGL, EGL, VDPAU)"
    for pattern, reason in _REASONS:
        if re.search(pattern, name):
            return REFUSED, reason
    return REFUSED, "not implemented yet"


def rows(path: Path = SHIM_DIR / "api_names.txt") -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        name, state = line.split()
        out.append((name, *classify(name, state == "implemented")))
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser("api", help="the driver API")
    sub = p.add_subparsers(dest="api_command", metavar="ACTION")
    cov = sub.add_parser("coverage", help="which driver entry points are implemented")
    cov.add_argument("--json", action="store_true", help="one JSON object: entry points and totals")
    cov.add_argument("--refused", action="store_true", help="list only the entry points not implemented")
    cov.set_defaults(func=_coverage)


def _coverage(args: argparse.Namespace) -> int:
    table = rows()
    totals = {s: sum(1 for _, status, _ in table if status == s) for s in (IMPLEMENTED, REFUSED, NOT_APPLICABLE)}
    shown = [r for r in table if r[1] != IMPLEMENTED] if args.refused else table
    if args.json:
        print(json.dumps({"entry_points": [{"name": n, "status": s, "reason": r} for n, s, r in shown],
                          "totals": totals}, indent=1))
        return 0
    width = max(len(n) for n, _, _ in shown) if shown else 0
    for name, status, reason in shown:
        print(f"{name:<{width}}  {status:<11}  {reason}".rstrip())
    print(f"total {len(table)}: {totals[IMPLEMENTED]} implemented, {totals[REFUSED]} refused, "
          f"{totals[NOT_APPLICABLE]} not applicable (graphics interop)")
    return 0
