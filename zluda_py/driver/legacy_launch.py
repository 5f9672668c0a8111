"""Entry points: the launch API of CUDA < 4.0 (cuFuncSetBlockShape, cuFuncSetSharedSize,
cuParamSetSize/Seti/Setf/Setv, cuParamSetTexRef, cuLaunch, cuLaunchGrid, cuLaunchGridAsync).

A function keeps the block shape, dynamic shared memory size and parameter bytes these calls
set; a launch hands the bytes to `launch.launch` as an `extra` buffer (CU_LAUNCH_PARAM_BUFFER_*),
so it is checked and queued as cuLaunchKernel's launches are (a buffer smaller than the kernel's
parameters is CUDA_ERROR_INVALID_VALUE). Parameter writes outside the size cuParamSetSize gave,
and a launch before cuFuncSetBlockShape, are CUDA_ERROR_INVALID_VALUE. Texture references are
bound module-wide here (texrefs.py), so cuParamSetTexRef only checks that the reference is one of
the function's module, with CU_PARAM_TR_DEFAULT."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .api import entry
from ..cdata import addr, ffi, read_bytes
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .. import hostmem
from .launch import CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END, launch
from .module import Function, function_of
from .texrefs import texrefs

CU_PARAM_TR_DEFAULT = -1
MAX_PARAM_BYTES = 32764  # what a kernel's parameters may take (cuLaunchKernel's limit since CUDA 12.1)


@dataclass
class LegacyState:
    """What cuFuncSetBlockShape/SetSharedSize and cuParamSet* have set for a function."""

    block: tuple[int, int, int] | None = None
    shared: int = 0
    params: bytearray = field(default_factory=bytearray)


def _state(handle) -> tuple[Function, LegacyState]:
    fn = function_of(addr(handle))
    state = getattr(fn, "legacy_launch", None)
    if state is None:
        state = fn.legacy_launch = LegacyState()
    return fn, state


@entry("cuFuncSetBlockShape")
def cuFuncSetBlockShape(hfunc, x, y, z):
    _, state = _state(hfunc)
    if min(x, y, z) <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"block shape ({x}, {y}, {z})")
    state.block = (x, y, z)


@entry("cuFuncSetSharedSize")
def cuFuncSetSharedSize(hfunc, nbytes):
    _state(hfunc)[1].shared = nbytes


@entry("cuParamSetSize")
def cuParamSetSize(hfunc, nbytes):
    _, state = _state(hfunc)
    if nbytes > MAX_PARAM_BYTES:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{nbytes} bytes of parameters (at most {MAX_PARAM_BYTES})")
    state.params = state.params[:nbytes].ljust(nbytes, b"\0")


def _put(hfunc, offset: int, data: bytes) -> None:
    _, state = _state(hfunc)
    if offset < 0 or offset + len(data) > len(state.params):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{len(data)} parameter bytes at offset {offset} of the "
                                                  f"{len(state.params)} cuParamSetSize set")
    state.params[offset:offset + len(data)] = data


@entry("cuParamSeti")
def cuParamSeti(hfunc, offset, value):
    _put(hfunc, offset, struct.pack("<I", value))


@entry("cuParamSetf")
def cuParamSetf(hfunc, offset, value):
    _put(hfunc, offset, struct.pack("<f", value))


@entry("cuParamSetv")
def cuParamSetv(hfunc, offset, ptr, nbytes):
    if nbytes and not hostmem.valid(addr(ptr), nbytes):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{nbytes} bytes at {addr(ptr):#x} are not readable memory")
    _put(hfunc, offset, read_bytes(addr(ptr), nbytes) if nbytes else b"")


@entry("cuParamSetTexRef")
def cuParamSetTexRef(hfunc, texunit, htexref):
    fn, _ = _state(hfunc)
    if texunit != CU_PARAM_TR_DEFAULT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"texunit {texunit} (must be CU_PARAM_TR_DEFAULT)")
    ref = texrefs.get(addr(htexref))
    if not any(g.address == ref.word for g in fn.module.compiled.globals.values()):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the texture reference is not one of the function's module "
                                                  "(cuModuleGetTexRef)")


def _launch(hfunc, width: int, height: int, stream: int) -> None:
    _, state = _state(hfunc)
    if state.block is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no block shape: call cuFuncSetBlockShape first")
    if width <= 0 or height <= 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"grid {width} x {height}")
    buffer = ffi.from_buffer(bytes(state.params) or b"\0")
    size = ffi.new("size_t *", len(state.params))
    extra = ffi.new("void *[]", [ffi.cast("void *", CU_LAUNCH_PARAM_BUFFER_POINTER), ffi.cast("void *", buffer),
                                 ffi.cast("void *", CU_LAUNCH_PARAM_BUFFER_SIZE), ffi.cast("void *", size),
                                 ffi.cast("void *", CU_LAUNCH_PARAM_END)])
    launch(addr(hfunc), (width, height, 1), state.block, state.shared, stream, ffi.NULL, extra)


@entry("cuLaunch")
def cuLaunch(hfunc):
    _launch(hfunc, 1, 1, 0)


@entry("cuLaunchGrid")
def cuLaunchGrid(hfunc, width, height):
    _launch(hfunc, width, height, 0)


@entry("cuLaunchGridAsync")
def cuLaunchGridAsync(hfunc, width, height, stream):
    _launch(hfunc, width, height, addr(stream))
