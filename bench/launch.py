"""CPU time (every thread of the process) and wall time per empty kernel launch through the real
libcuda.so.1 (ctypes; cuLaunchKernel of `empty<<<1, 32>>>` N times, then one synchronize).

    python bench/launch.py [N]                          # the native launch path
    ZLUDA_NATIVE_LAUNCH=0 python bench/launch.py [N]    # every launch through Python

ZLUDA_CPU_THREADS sets the CPU target's workers as usual. The ctypes call itself is part of the
time (about a microsecond); bench/kernels.py measures launches from a CUDA program."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from ctypes import byref, c_void_p
from pathlib import Path

PTX = b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry empty() { ret; }\n\0"


def main(launches: int) -> None:
    cu = ctypes.CDLL(str(Path(__file__).resolve().parents[1] / "zluda_py" / "_shim" / "libcuda.so.1"))

    def ok(rc: int) -> None:
        if rc:
            sys.exit(f"CUresult {rc}")

    ctx, mod, empty = c_void_p(), c_void_p(), c_void_p()
    ok(cu.cuInit(0))
    ok(cu.cuDevicePrimaryCtxRetain(byref(ctx), 0))
    ok(cu.cuCtxSetCurrent(ctx))
    ok(cu.cuModuleLoadData(byref(mod), PTX))
    ok(cu.cuModuleGetFunction(byref(empty), mod, b"empty"))
    launch = cu.cuLaunchKernel
    ok(launch(empty, 1, 1, 1, 32, 1, 1, 0, None, None, None))  # builds the kernel; later launches may go native
    ok(cu.cuCtxSynchronize())
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(launches):
        launch(empty, 1, 1, 1, 32, 1, 1, 0, None, None, None)
    ok(cu.cuCtxSynchronize())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    path = "python" if os.environ.get("ZLUDA_NATIVE_LAUNCH") == "0" else "native"
    print(f"{path}: {launches} launches, {1e6 * cpu / launches:.2f} us CPU and {1e6 * wall / launches:.2f} us "
          f"wall each (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100000)
