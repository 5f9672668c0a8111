"""Containers: find, decompress and choose the PTX in fatbins, cubins and CUDA host binaries.

The driver calls `ptx_from_pointer` with the image pointer of cuModuleLoadData /
cuLibraryLoadData; `ptx_from_file` serves cuModuleLoad and zluda-compile. Format notes and
the environment variables are in docs/fatbin.md.
"""

from .errors import CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU, FatbinError
from .loader import (PtxModule, image_results_from_bytes, image_results_from_file, ptx_from_bytes, ptx_from_file,
                     ptx_from_pointer, ptx_images_from_bytes, ptx_images_from_file)

__all__ = [
    "CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_NO_BINARY_FOR_GPU", "FatbinError", "PtxModule",
    "image_results_from_bytes", "image_results_from_file", "ptx_from_bytes", "ptx_from_file", "ptx_from_pointer",
    "ptx_images_from_bytes", "ptx_images_from_file",
]
