"""Entry points: legacy texture and surface references (cuModuleGetTexRef, cuTexRef*,
cuModuleGetSurfRef, cuSurfRef*), what binaries built before CUDA 12 use.

A `.texref`/`.surfref` of a module is a word of the module's memory (compiler/cpu/module.py,
amdgpu/module.py: a module global of the code object, found through hipModuleGetGlobal) that
tex/txq/suld/sust/suq naming the reference read as their object handle (on the HIP backend the
address of the object's descriptor, backends/hip_textures.py). A reference here keeps its
binding (an array, a mipmapped array, linear or pitch-linear memory) and its sampling state;
whenever the state changes and the reference is bound, the driver makes the texture object that
binding describes (through the same checks as cuTexObjectCreate: `textures._image`,
`_sampler`), waits for the context's queued work (kernels read the word when they run, as
NVIDIA's kernels read the binding made before their launch) and stores the new handle in the
word (through the backend's memory copy). Until bound (and, for linear memory, given a format)
the word holds 0, which a fetch reports as CUDA_ERROR_ILLEGAL_ADDRESS. cuTexRefCreate's references belong
to no module: they keep state that no kernel reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import context as ctxs, mipmaps, textures
from .. import backends
from .api import entry
from .init_device import require
from .module import modules
from ..cdata import addr, cstr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_INVALID_VALUE, CudaError
from .handles import HandleTable

CU_TRSA_OVERRIDE_FORMAT = 0x01
CU_RESOURCE_TYPE = {"array": textures.CU_RESOURCE_TYPE_ARRAY, "mipmap": textures.CU_RESOURCE_TYPE_MIPMAPPED_ARRAY,
                    "linear": textures.CU_RESOURCE_TYPE_LINEAR, "pitch2D": textures.CU_RESOURCE_TYPE_PITCH2D}
FLAGS = (textures.CU_TRSF_READ_AS_INTEGER | textures.CU_TRSF_NORMALIZED_COORDINATES | textures.CU_TRSF_SRGB
         | textures.CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | textures.CU_TRSF_SEAMLESS_CUBEMAP)


@dataclass
class Reference:
    surface: bool
    word: int = 0  # the module word kernels read (0: a cuTexRefCreate reference)
    binding: str = ""  # a key of CU_RESOURCE_TYPE, "" while unbound
    target: int = 0  # the array or mipmapped array handle, or the device address
    size: int = 0  # bytes of linear memory
    extent: tuple[int, int, int] = (0, 0, 0)  # pitch-linear width, height, pitch
    format: int = 0  # CUarray_format and channels: 0 until set (cuTexRefSetFormat, or by an array)
    channels: int = 0
    address: list[int] = field(default_factory=lambda: [0, 0, 0])  # CU_TR_ADDRESS_MODE_WRAP
    filter: int = 0
    mipmap_filter: int = 0
    bias: float = 0.0
    clamp: tuple[float, float] = (0.0, 0.0)
    anisotropy: int = 0
    border: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    flags: int = 0
    bound_handle: int = 0  # the texture or surface object the word holds
    handle: int = 0


texrefs: HandleTable[Reference] = HandleTable("texture reference", CUDA_ERROR_INVALID_VALUE)
surfrefs: HandleTable[Reference] = HandleTable("surface reference", CUDA_ERROR_INVALID_VALUE)
_by_name: dict[tuple[int, str], Reference] = {}  # (id of the live module, name): one reference, whoever asks


def _resource(ref: Reference):
    r = ffi.new("CUDA_RESOURCE_DESC *")
    r.resType = CU_RESOURCE_TYPE[ref.binding]
    if ref.binding == "array":
        r.res.array.hArray = ffi.cast("void *", ref.target)
    elif ref.binding == "mipmap":
        r.res.mipmap.hMipmappedArray = ffi.cast("void *", ref.target)
    elif ref.binding == "linear":
        m = r.res.linear
        m.devPtr, m.format, m.numChannels, m.sizeInBytes = ref.target, ref.format, ref.channels, ref.size
    else:
        p = r.res.pitch2D
        p.devPtr, p.format, p.numChannels = ref.target, ref.format, ref.channels
        p.width, p.height, p.pitchInBytes = ref.extent
    return r


def _texture_desc(ref: Reference):
    t = ffi.new("CUDA_TEXTURE_DESC *")
    t.addressMode = ref.address
    t.filterMode, t.flags, t.maxAnisotropy = ref.filter, ref.flags, ref.anisotropy
    t.mipmapFilterMode = ref.mipmap_filter
    t.mipmapLevelBias, (t.minMipmapLevelClamp, t.maxMipmapLevelClamp) = ref.bias, ref.clamp
    t.borderColor = list(ref.border)
    return t


def _publish(ref: Reference) -> None:
    """Make the object the reference's state describes and hand its handle to the kernels
    (see the module docstring); raises what cuTexObjectCreate would for that state."""
    if not ref.binding or (ref.binding in ("linear", "pitch2D") and not ref.format):
        return
    runtime = textures._textures()
    r = _resource(ref)
    image, normalized_only = textures._image(runtime, r, surface=ref.surface)
    sampler = None
    if not ref.surface:
        t = _texture_desc(ref)
        sampler = textures._sampler(runtime, image, t, normalized_only)
        if ref.binding == "mipmap":
            image = mipmaps.filtered(runtime, image, sampler, t)
    if not ref.word:
        return
    handle = runtime.register(image, sampler)
    ctxs.current().synchronize()  # queued kernels read the word when they run
    word = ffi.new("unsigned long long *", handle)
    backends.select().memory.copy(ref.word, addr(word), 8)  # device memory on the HIP backend
    old, ref.bound_handle = ref.bound_handle, handle
    if old:
        runtime.release(old)


def _update(table: HandleTable[Reference], handle, **state) -> None:
    """Apply a Set call to the reference, keeping the old state if the new one is refused."""
    ref = table.get(addr(handle))
    before = dict(ref.__dict__)
    ref.__dict__.update(state)
    try:
        _publish(ref)
    except BaseException:
        ref.__dict__.update(before)
        raise


def _module_reference(out, hmod, name, surface: bool) -> None:
    require(out, name)
    module = modules.get(addr(hmod))
    word, _ = module.global_(cstr(name), ("surfref",) if surface else ("texref",))
    key = (id(module), cstr(name))
    ref = _by_name.get(key)
    if ref is None:
        ref = _by_name[key] = Reference(surface, word)
        (surfrefs if surface else texrefs).add(ref)
        module.on_unload.append(lambda: _forget(key, surfrefs if surface else texrefs))
    store_ptr(out, ref.handle)


def _forget(key: tuple[int, str], table: HandleTable[Reference]) -> None:
    """The module is unloaded: its references and the objects they hold go."""
    ref = _by_name.pop(key)
    table.remove(ref.handle)
    if ref.bound_handle:
        textures._textures().release(ref.bound_handle)


@entry("cuModuleGetTexRef")
def cuModuleGetTexRef(out, hmod, name):
    _module_reference(out, hmod, name, surface=False)


@entry("cuModuleGetSurfRef")
def cuModuleGetSurfRef(out, hmod, name):
    _module_reference(out, hmod, name, surface=True)


@entry("cuTexRefCreate")
def cuTexRefCreate(out):
    require(out)
    ctxs.current()
    store_ptr(out, texrefs.add(Reference(surface=False)))


@entry("cuTexRefDestroy")
def cuTexRefDestroy(handle):
    ref = texrefs.get(addr(handle))
    if ref.word:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a module's texture reference lives as long as the module")
    texrefs.remove(ref.handle)


# ---- binding ----
def _array_flags(flags: int) -> None:
    if flags & ~CU_TRSA_OVERRIDE_FORMAT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} (only CU_TRSA_OVERRIDE_FORMAT)")


@entry("cuTexRefSetArray")
def cuTexRefSetArray(handle, harray, flags):
    _array_flags(flags)
    a = textures.arrays.get(addr(harray))
    _update(texrefs, handle, binding="array", target=a.handle, format=a.format, channels=a.channels)


@entry("cuTexRefSetMipmappedArray")
def cuTexRefSetMipmappedArray(handle, hmipmap, flags):
    _array_flags(flags)
    first = mipmaps.mipmapped_arrays.get(addr(hmipmap)).levels[0]
    _update(texrefs, handle, binding="mipmap", target=addr(hmipmap), format=first.format, channels=first.channels)


@entry("cuTexRefSetAddress_v2")
def cuTexRefSetAddress(byte_offset, handle, dptr, size):
    """cuda.h: the texture starts at dptr rounded down to the texture alignment, and the byte
    offset of dptr from there is handed back for the kernel to add to its indices."""
    base = dptr - dptr % textures.TEXTURE_ALIGNMENT
    _update(texrefs, handle, binding="linear", target=base, size=size + dptr - base)
    if byte_offset:
        store(byte_offset, dptr - base)


@entry("cuTexRefSetAddress2D_v3", "cuTexRefSetAddress2D_v2")
def cuTexRefSetAddress2D(handle, desc, dptr, pitch):
    require(desc)
    d = ffi.cast("CUDA_ARRAY_DESCRIPTOR *", desc)
    _update(texrefs, handle, binding="pitch2D", target=dptr, extent=(d.Width, d.Height, pitch), format=d.Format,
            channels=d.NumChannels)


@entry("cuSurfRefSetArray")
def cuSurfRefSetArray(handle, harray, flags):
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x} (must be 0)")
    a = textures.arrays.get(addr(harray))
    _update(surfrefs, handle, binding="array", target=a.handle, format=a.format, channels=a.channels)


def _bound(table: HandleTable[Reference], handle, binding: str) -> int:
    ref = table.get(addr(handle))
    if ref.binding != binding:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"the reference is not bound to {binding} "
                        f"({ref.binding or 'unbound'})")
    return ref.target


@entry("cuTexRefGetArray")
def cuTexRefGetArray(out, handle):
    require(out)
    store_ptr(out, _bound(texrefs, handle, "array"))


@entry("cuTexRefGetMipmappedArray")
def cuTexRefGetMipmappedArray(out, handle):
    require(out)
    store_ptr(out, _bound(texrefs, handle, "mipmap"))


@entry("cuTexRefGetAddress_v2")
def cuTexRefGetAddress(out, handle):
    require(out)
    ref = texrefs.get(addr(handle))
    if ref.binding not in ("linear", "pitch2D"):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the texture reference is not bound to device memory")
    store(out, ref.target)


@entry("cuSurfRefGetArray")
def cuSurfRefGetArray(out, handle):
    require(out)
    store_ptr(out, _bound(surfrefs, handle, "array"))


# ---- sampling state ----
@entry("cuTexRefSetFormat")
def cuTexRefSetFormat(handle, fmt, channels):
    textures._element(fmt, channels)
    _update(texrefs, handle, format=fmt, channels=channels)


@entry("cuTexRefSetAddressMode")
def cuTexRefSetAddressMode(handle, dim, mode):
    if dim not in (0, 1, 2) or mode not in (0, 1, 2, 3):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"address mode {mode} of dimension {dim}")
    address = list(texrefs.get(addr(handle)).address)
    address[dim] = mode
    _update(texrefs, handle, address=address)


def _filter(mode: int) -> int:
    if mode not in (0, 1):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"filter mode {mode}")
    return mode


@entry("cuTexRefSetFilterMode")
def cuTexRefSetFilterMode(handle, mode):
    _update(texrefs, handle, filter=_filter(mode))


@entry("cuTexRefSetMipmapFilterMode")
def cuTexRefSetMipmapFilterMode(handle, mode):
    _update(texrefs, handle, mipmap_filter=_filter(mode))


@entry("cuTexRefSetMipmapLevelBias")
def cuTexRefSetMipmapLevelBias(handle, bias):
    _update(texrefs, handle, bias=bias)


@entry("cuTexRefSetMipmapLevelClamp")
def cuTexRefSetMipmapLevelClamp(handle, low, high):
    _update(texrefs, handle, clamp=(low, high))


@entry("cuTexRefSetMaxAnisotropy")
def cuTexRefSetMaxAnisotropy(handle, value):
    _update(texrefs, handle, anisotropy=value)  # anisotropic filtering: sampled isotropically (docs)


@entry("cuTexRefSetBorderColor")
def cuTexRefSetBorderColor(handle, color):
    require(color)
    _update(texrefs, handle, border=tuple(ffi.cast("float *", color)[0:4]))


@entry("cuTexRefSetFlags")
def cuTexRefSetFlags(handle, flags):
    if flags & ~FLAGS:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"texture reference flags {flags:#x}")
    _update(texrefs, handle, flags=flags)


def _getter(attribute: str):
    def get(out, handle):
        require(out)
        store(out, getattr(texrefs.get(addr(handle)), attribute))
    return get


for _name, _attribute in (("cuTexRefGetFilterMode", "filter"), ("cuTexRefGetMipmapFilterMode", "mipmap_filter"),
                          ("cuTexRefGetMipmapLevelBias", "bias"), ("cuTexRefGetMaxAnisotropy", "anisotropy"),
                          ("cuTexRefGetFlags", "flags")):
    entry(_name)(_getter(_attribute))


@entry("cuTexRefGetAddressMode")
def cuTexRefGetAddressMode(out, handle, dim):
    require(out)
    if dim not in (0, 1, 2):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"dimension {dim}")
    store(out, texrefs.get(addr(handle)).address[dim])


@entry("cuTexRefGetFormat")
def cuTexRefGetFormat(fmt_out, channels_out, handle):
    require(fmt_out)
    ref = texrefs.get(addr(handle))
    store(fmt_out, ref.format)
    if channels_out:
        store(channels_out, ref.channels)


@entry("cuTexRefGetMipmapLevelClamp")
def cuTexRefGetMipmapLevelClamp(low_out, high_out, handle):
    require(low_out, high_out)
    low, high = texrefs.get(addr(handle)).clamp
    store(low_out, low)
    store(high_out, high)


@entry("cuTexRefGetBorderColor")
def cuTexRefGetBorderColor(out, handle):
    require(out)
    ffi.cast("float *", out)[0:4] = list(texrefs.get(addr(handle)).border)
