"""Host-to-device copies through the driver API (libcuda.so.1 loaded with ctypes) against a plain
numpy copy of the same size in the same run. On the CPU target device memory is host memory, so
the copy should run at memory bandwidth: the ratio says how close we get.

    python bench/memcpy.py [MiB]
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SHIM = Path(__file__).resolve().parents[1] / "zluda_py" / "_shim" / "libcuda.so.1"


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    size = int(sys.argv[1] if len(sys.argv) > 1 else 4) << 20
    cu = ctypes.CDLL(str(SHIM))
    ctx = ctypes.c_void_p()
    for rc in (cu.cuInit(0), cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), cu.cuCtxSetCurrent(ctx)):
        assert rc == 0, f"CUresult {rc}"
    host = np.arange(size // 4, dtype=np.uint32)
    src = host.ctypes.data_as(ctypes.c_void_p)
    fresh, warm, base_fresh, base_warm = [], [], [], []
    for _ in range(5):
        d = ctypes.c_ulonglong()
        assert cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(size)) == 0
        copy = lambda: cu.cuMemcpyHtoD_v2(d, src, ctypes.c_size_t(size))  # noqa: E731
        fresh.append(_ms(copy))
        warm.extend(_ms(copy) for _ in range(5))
        cu.cuMemFree_v2(d)
        dst = np.empty_like(host)  # the baseline: numpy into fresh, then warm, memory
        base_fresh.append(_ms(lambda: np.copyto(dst, host)))
        base_warm.extend(_ms(lambda: np.copyto(dst, host)) for _ in range(5))
    f, w = statistics.median(fresh), statistics.median(warm)
    bf, bw = statistics.median(base_fresh), statistics.median(base_warm)
    print(f"{size >> 20} MiB host->device: fresh allocation {f:.3f} ms, warm {w:.3f} ms")
    print(f"numpy copy baseline:    fresh allocation {bf:.3f} ms, warm {bw:.3f} ms")
    print(f"ratio (baseline time / ours): fresh {bf / f:.2f}, warm {bw / w:.2f}")


if __name__ == "__main__":
    main()
