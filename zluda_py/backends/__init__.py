"""Execution backends: where device memory lives and how modules are loaded and launched.
`cpu` runs kernels on the host (the default); `hip` targets AMD GPUs through ROCm.

The driver reaches its backend only through `select()`. A backend module provides:
  * `available() -> bool`: whether it can run here (a ROCm device for hip);
  * `memory`: the allocation tracker (`cpu.Memory`'s interface);
  * `load(ptx_texts: list[str])` -> a compiled module (`CompiledModule`'s interface);
  * `launch(module, kernel, grid, block, params: bytes, shared_mem: int) -> None`.
"""

from __future__ import annotations

import importlib
import os
import threading
from types import ModuleType

CHOICES = ("cpu", "hip", "auto")
DRIVER_INTERFACE = ("available", "memory", "load", "launch")
CUDA_ERROR_NO_DEVICE = 100


class BackendUnavailable(Exception):
    """The requested backend cannot run here; the driver answers CUDA_ERROR_NO_DEVICE."""

    cu_result = CUDA_ERROR_NO_DEVICE


_selected: ModuleType | None = None
_lock = threading.Lock()


def _usable(name: str) -> ModuleType:
    """The backend module `name`, or BackendUnavailable saying why it cannot be used."""
    try:
        mod = importlib.import_module(f"{__name__}.{name}")
    except ImportError as e:
        raise BackendUnavailable(f"the {name} backend cannot be imported: {e}") from e
    missing = [attr for attr in DRIVER_INTERFACE if not hasattr(mod, attr)]
    if missing:
        raise BackendUnavailable(f"the {name} backend does not provide the driver interface yet "
                                 f"(missing {', '.join(missing)})")
    try:
        ok = mod.available()
    except Exception as e:  # noqa: BLE001 - a broken ROCm install is "unavailable", not a crash
        raise BackendUnavailable(f"the {name} backend failed to start: {e}") from e
    if not ok:
        raise BackendUnavailable(f"the {name} backend found no device (ROCm and an AMD GPU are needed)")
    return mod


def choose(name: str) -> ModuleType:
    """The backend for a ZLUDA_BACKEND value: `cpu`, `hip` (BackendUnavailable when it cannot
    run here) or `auto` (hip when it can run, else cpu)."""
    if name not in CHOICES:
        raise BackendUnavailable(f"ZLUDA_BACKEND={name!r}: expected one of {', '.join(CHOICES)}")
    if name == "auto":
        try:
            return _usable("hip")
        except BackendUnavailable:
            name = "cpu"
    return _usable(name)


def select() -> ModuleType:
    """The process's backend, chosen once from ZLUDA_BACKEND (default cpu)."""
    global _selected
    with _lock:
        if _selected is None:
            _selected = choose(os.environ.get("ZLUDA_BACKEND", "cpu"))
        return _selected
