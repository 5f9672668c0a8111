"""The symbols NVIDIA's libcuda.so.1 exports, derived from the toolkit's headers.

cuda.h declares each entry point under its API name and maps it to the versioned ABI symbol
with `#define cuMemAlloc cuMemAlloc_v2` (or `__CUDA_API_PTDS(...)`/`__CUDA_API_PTSZ(...)`
for the per-thread-default-stream `_ptds`/`_ptsz` variants). Compiled with
`__CUDA_API_VERSION_INTERNAL`, as NVIDIA builds its driver, the header also declares the
older unversioned symbols it keeps for old binaries. Running the C preprocessor applies those
#defines exactly as a program's compiler does, so the names it leaves in the declarations are
the symbols a program links against: the union of an ordinary pass and an internal pass.

`python libcuda_shim/nvidia_exports.py [CUDA_INCLUDE_DIR]` rewrites nvidia_exports.txt, the
list build_shim.py exports (a stub answering CUDA_ERROR_NOT_SUPPORTED for each name we do not
implement); the build itself needs no toolkit.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIST = HERE / "nvidia_exports.txt"
DEFAULT_INCLUDE = Path("/usr/local/cuda/include")
# cuda.h and cudaProfiler.h always; the interop headers need GL/EGL headers, present or not.
REQUIRED_HEADERS = ("cuda.h", "cudaProfiler.h")
INTEROP_HEADERS = ("cudaGL.h", "cudaEGL.h", "cudaVDPAU.h")
# A declaration `CUresult name(`, unless it is a `static inline` helper the header defines
# itself (cuGetProcAddress_v2_ptsz): those are no symbols of the library.
_DECL = re.compile(r"(\bstatic\s+inline\s+)?\bCUresult\s+(cu\w+)\s*\(")


def _preprocess(include_dir: Path, headers: list[str], defines: list[str]) -> str | None:
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    source = "".join(f"#include <{h}>\n" for h in headers)
    res = subprocess.run([*cc, "-E", "-P", *defines, f"-I{include_dir}", "-"], input=source,
                         capture_output=True, text=True)
    return res.stdout if res.returncode == 0 else None


def header_exports(include_dir: Path = DEFAULT_INCLUDE) -> set[str]:
    """Every symbol the headers under include_dir make programs link against."""
    names: set[str] = set()
    header_sets = [list(REQUIRED_HEADERS)] + [[h] for h in INTEROP_HEADERS if (include_dir / h).exists()]
    for i, headers in enumerate(header_sets):
        for defines in ([], ["-D__CUDA_API_VERSION_INTERNAL"]):
            text = _preprocess(include_dir, headers, defines)
            if text is None:
                if i == 0:
                    raise RuntimeError(f"cannot preprocess {', '.join(headers)} under {include_dir}")
                break  # an interop header whose GL/EGL headers are not installed
            names.update(m.group(2) for m in _DECL.finditer(text) if not m.group(1))
    return names


def listed_exports() -> list[str]:
    """The checked-in list (one name a line)."""
    return [line for line in LIST.read_text().split() if line]


if __name__ == "__main__":
    include = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_INCLUDE
    LIST.write_text("\n".join(sorted(header_exports(include))) + "\n")
    print(f"{LIST}: {len(listed_exports())} symbols")
