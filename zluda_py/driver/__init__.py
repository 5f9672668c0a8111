"""CUDA driver API semantics in Python: one function per exported cu* entry point (see
api.py for the registry), CUresult codes as NVIDIA documents them. libcuda_shim/ exports
them from libcuda.so.1; this package knows nothing about LLVM."""

from __future__ import annotations

# importing the entry-point modules registers them
from . import (array_copies, batch_copies, capture_api, context_api, ctx_usage, driver_logs, external,  # noqa: F401
               graphs, init_device, integrity, ipc, launch, legacy_launch, managed, memory, memops, mempool,
               mipmaps, module, module_queries, pointer_attrs, stream_api, stream_attrs, texrefs, textures, vmm)
from .api import implemented, wrapped  # noqa: F401
