"""CUDA driver API semantics in Python: one function per exported cu* entry point (see
api.py for the registry), CUresult codes as NVIDIA documents them. libcuda_shim/ exports
them from libcuda.so.1; this package knows nothing about LLVM."""

from __future__ import annotations

# importing the entry-point modules registers them
from . import (context_api, init_device, integrity, launch, memory, module, stream_api, textures)  # noqa: F401
from .api import implemented, wrapped  # noqa: F401
