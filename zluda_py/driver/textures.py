"""Entry points: CUDA arrays, texture objects and surface objects.

A CUDA array is device memory holding its elements row after row, slice after slice, layer
after layer (no tiling: nothing but our kernels and copies reads it). Texture and surface
objects are registered with the backend's texture runtime (`backend.textures`, the CPU
target's cpu/texture.py), whose handles kernels receive; a backend without one answers
CUDA_ERROR_NOT_SUPPORTED."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import context as ctxs, memory, mipmaps
from .api import entry
from ..cdata import addr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CudaError
from .handles import HandleTable
from .init_device import require
from .. import backends

CUDA_ARRAY3D_LAYERED, CUDA_ARRAY3D_SURFACE_LDST, CUDA_ARRAY3D_CUBEMAP = 0x01, 0x02, 0x04
# flags that change nothing here: gather, depth comparison and colour-attachment hints
CUDA_ARRAY3D_HINTS = 0x08 | 0x10 | 0x20
CUDA_ARRAY3D_UNSUPPORTED = 0x40 | 0x80 | 0x100  # sparse, deferred mapping, video encode/decode
CU_RESOURCE_TYPE_ARRAY, CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, CU_RESOURCE_TYPE_LINEAR, CU_RESOURCE_TYPE_PITCH2D = 0, 1, 2, 3
CU_TRSF_READ_AS_INTEGER, CU_TRSF_NORMALIZED_COORDINATES, CU_TRSF_SRGB = 0x01, 0x02, 0x10
CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION, CU_TRSF_SEAMLESS_CUBEMAP = 0x20, 0x40
TEXTURE_ALIGNMENT, TEXTURE_PITCH_ALIGNMENT = 512, 32  # device attributes 14 and 51

# CUarray_format -> (element format the texels are stored in, bytes, channels fixed by the
# format or None, always read as normalized floats)
FORMATS = {0x01: (0x01, 1, None, False), 0x02: (0x02, 2, None, False), 0x03: (0x03, 4, None, False),
           0x08: (0x08, 1, None, False), 0x09: (0x09, 2, None, False), 0x0A: (0x0A, 4, None, False),
           0x10: (0x10, 2, None, False), 0x20: (0x20, 4, None, False)}
for _i, (_fmt, _size) in enumerate(((0x01, 1), (0x02, 2), (0x08, 1), (0x09, 2))):  # UNORM/SNORM_INT{8,16}X{1,2,4}
    for _j, _channels in enumerate((1, 2, 4)):
        FORMATS[(0xC0, 0xC3, 0xC6, 0xC9)[_i] + _j] = (_fmt, _size, _channels, True)


def _element(fmt: int, channels: int) -> tuple[int, int, bool]:
    """(storage format, element bytes, normalized-only) of a CUarray_format with channels."""
    if fmt not in FORMATS:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED if 0x50 <= fmt <= 0xB5 else CUDA_ERROR_INVALID_VALUE,
                        f"array format {fmt:#x} (block-compressed, YUV and packed formats are not supported)")
    storage, size, fixed, normalized = FORMATS[fmt]
    if channels != (fixed or channels) or channels not in (1, 2, 4):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{channels} channels of format {fmt:#x}")
    return storage, size * channels, normalized


@dataclass
class Array:
    width: int
    height: int
    depth: int
    format: int
    channels: int
    flags: int
    base: int = 0
    handle: int = 0
    mipmapped: int = 0  # the handle of the mipmapped array this is a level of

    @property
    def element(self) -> int:
        return _element(self.format, self.channels)[1]

    @property
    def rows(self) -> int:
        """Rows per slice (a 1-D array has one)."""
        return max(self.height, 1)

    @property
    def size(self) -> int:
        return self.width * self.element * self.rows * max(self.depth, 1)

    def image(self, textures):
        storage, _, _ = _element(self.format, self.channels)
        layered = self.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)
        return textures.Image(self.base, storage, self.channels, self.width, self.height,
                              0 if layered else self.depth, self.depth if layered else 0,
                              cubemap=bool(self.flags & CUDA_ARRAY3D_CUBEMAP))


arrays: HandleTable[Array] = HandleTable("CUDA array", CUDA_ERROR_INVALID_HANDLE)


def check_descriptor(width: int, height: int, depth: int, fmt: int, channels: int, flags: int) -> None:
    """Raise the CUresult cuArray3DCreate answers for a bad descriptor."""
    _element(fmt, channels)
    if flags & CUDA_ARRAY3D_UNSUPPORTED:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"array flags {flags:#x} (sparse, deferred mapping, video)")
    if flags & ~(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_HINTS):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array flags {flags:#x}")
    layered, cube = flags & CUDA_ARRAY3D_LAYERED, flags & CUDA_ARRAY3D_CUBEMAP
    bad = width == 0 or (height == 0 and depth and not layered) or (layered and depth == 0)
    if cube:  # square faces, six of them per cube
        bad = bad or width != height or (depth % 6 if layered else depth != 6)
    if bad:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"array of {width}x{height}x{depth}, flags {flags:#x}")


def new_array(width: int, height: int, depth: int, fmt: int, channels: int, flags: int, mipmapped: int = 0) -> Array:
    """A registered array with its memory, of a descriptor already checked."""
    array = Array(width, height, depth, fmt, channels, flags, mipmapped=mipmapped)
    array.base = memory._allocate(array.size, "device", 0).base
    arrays.add(array)
    return array


def free_array(a: Array) -> None:
    arrays.remove(a.handle)
    with memory._backend_errors():
        memory._memory().release(a.base)


def _create(handle_out, width: int, height: int, depth: int, fmt: int, channels: int, flags: int) -> None:
    require(handle_out)
    check_descriptor(width, height, depth, fmt, channels, flags)
    store_ptr(handle_out, new_array(width, height, depth, fmt, channels, flags).handle)


@entry("cuArrayCreate_v2")
def cuArrayCreate(handle_out, desc):
    require(desc)
    d = ffi.cast("CUDA_ARRAY_DESCRIPTOR *", desc)
    _create(handle_out, d.Width, d.Height, 0, d.Format, d.NumChannels, 0)


@entry("cuArray3DCreate_v2")
def cuArray3DCreate(handle_out, desc):
    require(desc)
    d = ffi.cast("CUDA_ARRAY3D_DESCRIPTOR *", desc)
    _create(handle_out, d.Width, d.Height, d.Depth, d.Format, d.NumChannels, d.Flags)


@entry("cuArrayGetDescriptor_v2")
def cuArrayGetDescriptor(desc, handle):
    require(desc)
    a = arrays.get(addr(handle))
    d = ffi.cast("CUDA_ARRAY_DESCRIPTOR *", desc)
    d.Width, d.Height, d.Format, d.NumChannels = a.width, a.height, a.format, a.channels


@entry("cuArray3DGetDescriptor_v2")
def cuArray3DGetDescriptor(desc, handle):
    require(desc)
    a = arrays.get(addr(handle))
    d = ffi.cast("CUDA_ARRAY3D_DESCRIPTOR *", desc)
    d.Width, d.Height, d.Depth, d.Format, d.NumChannels, d.Flags = a.width, a.height, a.depth, a.format, a.channels, a.flags


@entry("cuArrayDestroy")
def cuArrayDestroy(handle):
    a = arrays.get(addr(handle))
    if a.mipmapped:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a level of a mipmapped array goes with cuMipmappedArrayDestroy")
    ctxs.current().synchronize()  # kernels and copies still queued may use it
    free_array(a)


def array_layout(handle: int) -> tuple[int, int, int, int]:
    """(base, row bytes, rows per slice, bytes) of a CUDA array, for copies to and from it."""
    a = arrays.get(handle)
    return a.base, a.width * a.element, a.rows, a.size


# ---- texture and surface objects ----
@dataclass
class ResourceObject:
    """A texture or surface object: the descriptors it was made from, for the Get calls."""

    resource: bytes
    texture: bytes | None


_objects: dict[int, ResourceObject] = {}
_objects_lock = threading.Lock()


def _textures():
    textures = getattr(backends.select(), "textures", None)
    if textures is None:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "this backend has no texture or surface objects")
    return textures


def _image(textures, r, surface: bool):
    """(the Image a CUDA_RESOURCE_DESC describes, whether its format reads only as normalized
    floats), checked as cuTexObjectCreate/cuSurfObjectCreate document."""
    if r.flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "resource descriptor flags must be 0")
    kind = r.resType
    if kind == CU_RESOURCE_TYPE_ARRAY:
        a = arrays.get(addr(r.res.array.hArray))
        if surface and not a.flags & CUDA_ARRAY3D_SURFACE_LDST:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the array was not created with CUDA_ARRAY3D_SURFACE_LDST")
        return a.image(textures), _element(a.format, a.channels)[2]
    if surface:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"surfaces are made of CUDA arrays, not resource type {kind}")
    if kind == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        return mipmaps.image(textures, addr(r.res.mipmap.hMipmappedArray))
    if kind == CU_RESOURCE_TYPE_LINEAR:
        m = r.res.linear
        storage, element, normalized = _element(m.format, m.numChannels)
        if m.devPtr % TEXTURE_ALIGNMENT or m.sizeInBytes < element:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"linear texture at {m.devPtr:#x} of {m.sizeInBytes} bytes")
        memory.check_device_range(m.devPtr, m.sizeInBytes)
        return textures.Image(m.devPtr, storage, m.numChannels, m.sizeInBytes // element, linear_memory=True), normalized
    if kind == CU_RESOURCE_TYPE_PITCH2D:
        p = r.res.pitch2D
        storage, element, normalized = _element(p.format, p.numChannels)
        if (p.devPtr % TEXTURE_ALIGNMENT or p.pitchInBytes % TEXTURE_PITCH_ALIGNMENT or not p.width or not p.height
                or p.pitchInBytes < p.width * element):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"pitch-linear texture {p.width}x{p.height} pitch {p.pitchInBytes}")
        memory.check_device_range(p.devPtr, p.pitchInBytes * (p.height - 1) + p.width * element)
        return textures.Image(p.devPtr, storage, p.numChannels, p.width, p.height, pitch=p.pitchInBytes), normalized
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"resource type {kind}")


def _sampler(textures, image, t, normalized_only: bool):
    known = (CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB
             | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP)
    if t.flags & ~known or any(m not in (0, 1, 2, 3) for m in t.addressMode) or t.filterMode not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"texture descriptor: flags {t.flags:#x}, address modes "
                        f"{list(t.addressMode)}, filter mode {t.filterMode}")
    if t.flags & CU_TRSF_SEAMLESS_CUBEMAP:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "seamless cubemap filtering is not supported")
    sampler = textures.Sampler(tuple(t.addressMode), t.filterMode == 1, bool(t.flags & CU_TRSF_NORMALIZED_COORDINATES),
                               bool(t.flags & CU_TRSF_READ_AS_INTEGER) and not normalized_only,
                               bool(t.flags & CU_TRSF_SRGB), tuple(t.borderColor))
    if sampler.linear and not textures.float_result(image, sampler):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "linear filtering of a texture that returns integers")
    return sampler


def _register(out, image, sampler, resource, texture) -> None:
    handle = _textures().register(image, sampler)
    with _objects_lock:
        _objects[handle] = ResourceObject(bytes(ffi.buffer(resource)), texture and bytes(ffi.buffer(texture)))
    store(out, handle)


def _object(handle: int, texture: bool) -> ResourceObject:
    obj = _objects.get(handle)
    if obj is None or (obj.texture is not None) != texture:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{handle:#x} is not a live {'texture' if texture else 'surface'} object")
    return obj


@entry("cuTexObjectCreate")
def cuTexObjectCreate(out, res_desc, tex_desc, view_desc):
    require(out, res_desc, tex_desc)
    ctxs.current()
    if view_desc != ffi.NULL:
        raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "resource views are not supported")
    textures = _textures()
    r = ffi.cast("CUDA_RESOURCE_DESC *", res_desc)
    t = ffi.cast("CUDA_TEXTURE_DESC *", tex_desc)
    image, normalized_only = _image(textures, r, surface=False)
    sampler = _sampler(textures, image, t, normalized_only)
    if r.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        image = mipmaps.filtered(textures, image, sampler, t)
    _register(out, image, sampler, r, t)


@entry("cuSurfObjectCreate")
def cuSurfObjectCreate(out, res_desc):
    require(out, res_desc)
    ctxs.current()
    textures = _textures()
    r = ffi.cast("CUDA_RESOURCE_DESC *", res_desc)
    _register(out, _image(textures, r, surface=True)[0], None, r, None)


def _destroy(handle: int, texture: bool) -> None:
    _object(handle, texture)
    ctxs.current().synchronize()  # kernels still queued may read it
    with _objects_lock:
        del _objects[handle]
    _textures().release(handle)


@entry("cuTexObjectDestroy")
def cuTexObjectDestroy(handle):
    _destroy(handle, True)


@entry("cuSurfObjectDestroy")
def cuSurfObjectDestroy(handle):
    _destroy(handle, False)


def _copy_out(dst, data: bytes) -> None:
    require(dst)
    ffi.memmove(dst, data, len(data))


@entry("cuTexObjectGetResourceDesc")
def cuTexObjectGetResourceDesc(desc, handle):
    _copy_out(desc, _object(handle, True).resource)


@entry("cuTexObjectGetTextureDesc")
def cuTexObjectGetTextureDesc(desc, handle):
    _copy_out(desc, _object(handle, True).texture)


@entry("cuTexObjectGetResourceViewDesc")
def cuTexObjectGetResourceViewDesc(desc, handle):
    """cuda.h: CUDA_ERROR_INVALID_VALUE for an object made without a resource view, which every
    object here is (cuTexObjectCreate refuses views)."""
    require(desc)
    _object(handle, True)
    raise CudaError(CUDA_ERROR_INVALID_VALUE, f"texture object {handle:#x} has no resource view")


@entry("cuSurfObjectGetResourceDesc")
def cuSurfObjectGetResourceDesc(desc, handle):
    _copy_out(desc, _object(handle, False).resource)
