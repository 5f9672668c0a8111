"""Binaries for the fatbin tests, built once per session through the cached `nvcc` fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

PTX_75 = ["-gencode", "arch=compute_75,code=compute_75"]
SASS_80 = ["-gencode", "arch=compute_80,code=sm_80"]
PTX_86 = ["-gencode", "arch=compute_86,code=compute_86"]
PTX_90 = ["-gencode", "arch=compute_90,code=compute_90"]
PTX_120 = ["-gencode", "arch=compute_120,code=compute_120"]
SHARED_LIB = ["-shared", "-Xcompiler", "-fPIC"]
KERNELS = ["fatbin_kernels.cu"]
RDC = ["fatbin_rdc_a.cu", "fatbin_rdc_b.cu"]

# name -> (sources, nvcc arguments, output suffix)
BUILDS = {
    "zstd_multi": (KERNELS, ["-DFATBIN_MAIN", *PTX_75, *PTX_86, *SASS_80], ""),
    "lz4": (KERNELS, ["-DFATBIN_MAIN", "-compress-mode=speed", *PTX_75], ""),
    "uncompressed": (KERNELS, ["-DFATBIN_MAIN", "--no-compress", *PTX_75, *SASS_80], ""),
    "compress_all": (KERNELS, ["-DFATBIN_MAIN", "-Xfatbin", "-compress-all", *PTX_75, *SASS_80], ""),
    "cudart_shared": (KERNELS, ["-DFATBIN_MAIN", "-cudart", "shared", *PTX_75], ""),
    "shared_lib": (KERNELS, [*SHARED_LIB, *PTX_75, *PTX_86, *SASS_80], ".so"),
    "sass_only": (KERNELS, ["-DFATBIN_MAIN", *SASS_80], ""),
    "ptx_120": (KERNELS, ["-DFATBIN_MAIN", *PTX_120, *SASS_80], ""),  # CuPy's CUB: PTX only for 12.0
    "ptx_90_120": (KERNELS, ["-DFATBIN_MAIN", *PTX_120, *PTX_90], ""),
    "rdc": (RDC, ["-DFATBIN_MAIN", "-rdc=true", *PTX_75, *SASS_80], ""),
    "two_images": ([*KERNELS, "fatbin_rdc_b.cu"], ["-DFATBIN_MAIN", *PTX_75], ""),
    "rdc_lib": (RDC, [*SHARED_LIB, "-rdc=true", *PTX_75], ".so"),
}


@pytest.fixture(scope="session")
def build(nvcc):
    """build(name) -> path of the binary BUILDS[name], built on first use."""
    def get(name: str) -> Path:
        sources, args, suffix = BUILDS[name]
        return nvcc(sources, args, suffix)
    return get


@pytest.fixture(scope="session")
def reference_ptx(nvcc):
    """reference_ptx(source, sm, rdc=False) -> `nvcc -ptx` output for one translation unit."""
    def get(source: str, sm: int, rdc: bool = False) -> str:
        args = ["-ptx", f"-arch=compute_{sm}", *(["-rdc=true"] if rdc else [])]
        return nvcc([source], args, ".ptx").read_text()
    return get
