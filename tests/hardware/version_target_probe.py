"""Which `.version` / `.target` pairs an NVIDIA driver's JIT loads: one trivial module per pair,
each CUresult printed as `version target code NAME` (golden/version_target_probe.txt):

    python3 -m tests.hardware.version_target_probe
"""

from __future__ import annotations

import sys

from tests.hardware.cudadrv import CudaError, Driver

VERSIONS = [(6, m) for m in range(6)] + [(7, m) for m in range(9)] + [(8, m) for m in range(9)] + [(9, 0), (9, 1)]
TARGETS = ["sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86",
           "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_101", "sm_101a",
           "sm_103", "sm_103a", "sm_110", "sm_110a", "sm_120", "sm_120a", "sm_121", "sm_121a"]


def main() -> int:
    d = Driver()
    for major, minor in VERSIONS:
        for target in TARGETS:
            ptx = f".version {major}.{minor}\n.target {target}\n.address_size 64\n.visible .entry k()\n{{\n  ret;\n}}\n"
            try:
                m = d.load(ptx)
                d.lib.cuModuleUnload(m.handle)
                code = 0
            except CudaError as e:
                code = e.code
            print(f"{major}.{minor} {target} {code} {d.error_name(code)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
