"""Execution backends: where device memory lives and how modules are loaded and launched.
`cpu` runs kernels on the host (the default); `hip` targets AMD GPUs through ROCm.

The driver reaches its backend only through `select()`. A backend module provides:
  * `available() -> bool`: whether it can run here (a ROCm device for hip); optionally
    `unavailable_reason() -> str`, which says why not;
  * `devices() -> list`: the devices CUDA sees (`devinfo.Device`'s interface: name,
    uuid, total_mem, sm, attribute(number), pci_bus_id);
  * `memory`: the allocation tracker (`tracking.Memory`'s interface: allocate/register/
    release/find/overlapping/owned_by), which also moves the bytes:
    `memory.copy(dst, src, size)` copies between any two addresses the program may name (host
    or device), `memory.fill(dst, value, element_size, count)` stores `count` elements of 1, 2
    or 4 bytes; the driver never dereferences a device pointer itself;
  * `load(ptx_texts: list[str])` -> a new instance of the module, with its own variables
    (`CompiledModule`'s interface: `.kernels` of `KernelInfo`, `.globals` of `GlobalInfo`);
  * `unload(module) -> None`: gives back what `load` took, after the driver has dropped the
    module's variables from `memory`;
  * `launch(module, kernel, grid, block, params: bytes, shared_mem: int, grid_workspace: int = 0)
    -> None`, returning when the grid has finished; a nonzero `grid_workspace` (device memory,
    zeroed) makes it a cooperative launch.
"""

from __future__ import annotations

import importlib
import os
import threading
from types import ModuleType

CHOICES = ("cpu", "hip", "auto")
DRIVER_INTERFACE = ("available", "devices", "memory", "load", "unload", "launch")
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
        reason = mod.unavailable_reason() if hasattr(mod, "unavailable_reason") else "ROCm and an AMD GPU are needed"
        raise BackendUnavailable(f"the {name} backend found no device ({reason})")
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
