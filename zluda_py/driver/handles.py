"""Opaque handles (CUcontext, CUstream, CUmodule, ...) for Python objects.

Each handle is the address of a small block of real memory owned by the object, so handles
are unique, non-NULL and safe if a client dereferences one; lookups check the kind, so a
stream passed as an event is rejected with the documented error instead of crashing."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from ..cdata import addr, ffi
from ..curesult import CudaError

T = TypeVar("T")


class HandleTable(Generic[T]):
    def __init__(self, kind: str, error: int) -> None:
        self.kind = kind
        self.error = error
        self._objects: dict[int, T] = {}
        self._blocks: dict[int, object] = {}
        self._lock = threading.Lock()

    def add(self, obj: T) -> int:
        block = ffi.new("char[16]")
        handle = addr(block)
        with self._lock:
            self._objects[handle] = obj
            self._blocks[handle] = block
        obj.handle = handle  # type: ignore[attr-defined]
        return handle

    def get(self, handle: int) -> T:
        obj = self._objects.get(handle)
        if obj is None:
            raise CudaError(self.error, f"{handle:#x} is not a live {self.kind}")
        return obj

    def find(self, handle: int) -> T | None:
        return self._objects.get(handle)

    def remove(self, handle: int) -> T:
        with self._lock:
            obj = self._objects.pop(handle, None)
            if obj is None:
                raise CudaError(self.error, f"{handle:#x} is not a live {self.kind}")
            del self._blocks[handle]
        return obj

    def values(self) -> list[T]:
        with self._lock:
            return list(self._objects.values())
