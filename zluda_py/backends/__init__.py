"""Execution backends: where device memory lives and how modules are loaded and launched.
`cpu` runs kernels on the host (the default); `hip` targets AMD GPUs."""

from __future__ import annotations

import os


def backend_name() -> str:
    """ZLUDA_BACKEND (set by `zluda run --backend`): cpu, hip or auto (hip when present)."""
    name = os.environ.get("ZLUDA_BACKEND", "cpu")
    if name == "auto":
        try:
            from . import hip  # noqa: F401
            return "hip"
        except ImportError:
            return "cpu"
    return name
