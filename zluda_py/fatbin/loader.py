"""From whatever the program handed us (pointer, bytes or file) to the PTX the device JITs."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

from . import memory, ptx_cubin
from .compression import payload, ptx_text
from .container import FATBIN_HEADER, FATBIN_MAGIC, KIND_ELF, Fatbin, fatbin_extent, parse_fatbin
from .elf import EM_CUDA, ELF_MAGIC, WRAPPER, WRAPPER_MAGIC, cubin_sm, elf_machine, host_images
from .errors import CUDA_ERROR_NO_BINARY_FOR_GPU, FatbinError
from .limits import MAX_PRELINKED_FATBINS, check_size, max_size
from .selection import select_ptx

_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)
_VERSION = re.compile(r"^\s*\.version\s+\d+\.\d+", re.M)


@dataclass(frozen=True)
class PtxModule:
    """PTX text to JIT (no trailing NUL), its target (75 for compute_75) and a name for messages."""

    text: str
    sm: int
    name: str


def _magic(data: bytes) -> int:
    return struct.unpack_from("<I", data)[0] if len(data) >= 4 else -1


def _modules(fb: Fatbin, sm: int, origin: str, above: bool = True) -> list[PtxModule]:
    """The fatbin's PTX for this device; a fatbin without PTX may still hold a PTX cubin
    (an ELF entry, e.g. ptxas stand-in output packed by `fatbinary`)."""
    try:
        entry = select_ptx(fb, sm, above)
    except FatbinError as e:
        for elf in (x for x in fb.entries if x.kind == KIND_ELF):
            data = payload(elf)
            if ptx_cubin.parts(data) is not None:
                return _ptx_cubin(data, elf.offset, sm, f"{origin}[{elf.offset:#x}]")
        raise e
    return [PtxModule(ptx_text(entry), entry.sm, f"{origin}[{entry.offset:#x}].compute_{entry.sm}.ptx")]


def _select(fatbins: list[Fatbin], sm: int, origin: str, linked: bool = False) -> list[PtxModule]:
    """The PTX modules of the fatbins. For the members of an `-rdc` link (`linked`), a member with no
    PTX up to this device is left out rather than failing the image or being translated from a
    newer target: nvcc links NVIDIA's device runtime into -rdc shared libraries, and it carries
    PTX only for the newest architecture. Were its code needed, linking the rest fails naming
    the undefined symbol."""
    if not linked:
        return [m for fb in fatbins for m in _modules(fb, sm, origin)]
    out, first_error = [], None
    for fb in fatbins:
        try:
            out += _modules(fb, sm, origin, above=False)
        except FatbinError as e:
            if e.cu_result != CUDA_ERROR_NO_BINARY_FOR_GPU:
                raise
            first_error = first_error or e
    if not out and first_error:
        raise first_error
    return out


def _cubin_error(header: bytes, offset: int, sm: int) -> FatbinError:
    arch = cubin_sm(header)
    what = f"an ELF cubin (SASS for sm_{arch})" if arch else "an ELF cubin (SASS)"
    return FatbinError(f"the image is {what}, not PTX; zluda translates PTX, so the program must be "
                       f"rebuilt with PTX: -gencode arch=compute_{sm},code=compute_{sm}",
                       offset, CUDA_ERROR_NO_BINARY_FOR_GPU)


def _ptx_cubin(data: bytes, offset: int, sm: int, origin: str) -> list[PtxModule]:
    """The PTX modules (to be linked) of a PTX cubin; NVIDIA's cubin (SASS) is error 209."""
    found = ptx_cubin.parts(data)
    if found is None:
        raise _cubin_error(data, offset, sm)
    out = []
    for i, (section, contents) in enumerate(found):
        name = f"{origin}.part{i}"
        if section == ptx_cubin.PTX_SECTION:
            out.append(_ptx_module(contents, offset, f"{name}.ptx"))
        else:  # an image handed to nvJitLink: every image in it is a member of this link
            out += [m for image in ptx_images_from_bytes(contents, sm, name) for m in image]
    if not out:
        raise FatbinError("a PTX cubin without PTX", offset, CUDA_ERROR_NO_BINARY_FOR_GPU)
    return out


def _ptx_module(raw: bytes, offset: int, origin: str) -> PtxModule:
    """NUL-terminated (or whole) PTX text; no selection: the program chose this PTX itself."""
    head = raw[:8].hex(" ") or "none, it is empty"
    text_bytes = raw.split(b"\0", 1)[0]
    # PTX with a stray byte is still PTX: the front end says where (218), as NVIDIA's JIT does;
    # in a comment or a file name it is harmless. Without a .version it is no image at all.
    text = text_bytes.decode("utf-8", errors="replace")
    if not _VERSION.search(text):
        bad = next((f"byte {e.start} is not UTF-8 text" for e in _decode_error(text_bytes)), "no PTX .version directive")
        raise FatbinError(f"not a fatbin, ELF or PTX image: no known magic (first bytes {head}) and {bad}", offset)
    target = _TARGET.search(text)  # none: the front end refuses the module at its header (218)
    return PtxModule(text, int(target.group(1)) if target else 0, origin)


def _decode_error(data: bytes) -> list[UnicodeDecodeError]:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return [e]
    return []


def ptx_images_from_bytes(data: bytes, sm: int, origin: str = "<bytes>") -> list[list[PtxModule]]:
    """Every separately loadable image in `data`, each as the PTX modules to link for it.

    A host ELF may hold several (one per non-`-rdc` translation unit, plus one for all the
    `-rdc` ones); a fatbin, cubin or PTX text is one image.
    """
    images = image_results_from_bytes(data, sm, origin)
    for image in images:
        if isinstance(image, FatbinError):
            raise image
    return images  # type: ignore[return-value]


def image_results_from_bytes(data: bytes, sm: int, origin: str = "<bytes>") -> list[list[PtxModule] | FatbinError]:
    """`ptx_images_from_bytes`, with an image that cannot be loaded given as its error rather than
    failing the file: zluda-compile skips images of SASS only (the static cudart links one into
    every `nvcc -arch=sm_XX` program) and warms the others."""
    try:
        magic = _magic(data)
        if magic == WRAPPER_MAGIC:
            raise FatbinError("a fatbin wrapper holds process addresses: pass it to ptx_from_pointer", 0)
        if magic == FATBIN_MAGIC:
            return [_select([parse_fatbin(data)], sm, origin)]
        if data[:4] == ELF_MAGIC:
            if elf_machine(data) == EM_CUDA:
                return [_ptx_cubin(data, 0, sm, origin)]
            images = host_images(data)
            if not images:
                raise FatbinError("the ELF file holds no CUDA fatbin with code to load", 0,
                                  CUDA_ERROR_NO_BINARY_FOR_GPU)
            out: list[list[PtxModule] | FatbinError] = []
            for linked, img in images:
                try:
                    out.append(_select(img, sm, origin, linked))
                except FatbinError as e:
                    out.append(e.with_origin(origin))
            return out
        return [[_ptx_module(data, 0, origin)]]
    except FatbinError as e:
        raise e.with_origin(origin) from None


def ptx_from_bytes(data: bytes, sm: int, origin: str = "<bytes>") -> list[PtxModule]:
    """The PTX modules (several: link them) of one image: fatbin, ELF cubin, PTX text, or a
    host ELF holding one image."""
    images = ptx_images_from_bytes(data, sm, origin)
    if len(images) > 1:
        raise FatbinError(f"the ELF file holds {len(images)} separately loaded images (one per "
                          f"translation unit); ptx_images_from_file gives each", 0, origin=origin)
    return images[0]


def _read_file(path: str | os.PathLike) -> bytes:
    try:
        cap, chunks, total = max_size(), [], 0
        with open(path, "rb", buffering=0) as f:
            # in 1 MiB pieces: one read(cap + 1) would reserve the whole cap up front, whatever
            # the file's size, and stop bounds reading /dev/zero
            while total <= cap:
                chunk = f.read(min(1 << 20, cap + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        check_size(total, "the file", 0)
        return b"".join(chunks)
    except OSError as e:
        raise FatbinError(f"cannot read: {e.strerror}", 0, origin=os.fspath(path)) from None
    except FatbinError as e:
        raise e.with_origin(os.fspath(path)) from None


def ptx_images_from_file(path: str | os.PathLike, sm: int) -> list[list[PtxModule]]:
    return ptx_images_from_bytes(_read_file(path), sm, os.fspath(path))


def image_results_from_file(path: str | os.PathLike, sm: int) -> list[list[PtxModule] | FatbinError]:
    return image_results_from_bytes(_read_file(path), sm, os.fspath(path))


def ptx_from_file(path: str | os.PathLike, sm: int) -> list[PtxModule]:
    """cuModuleLoad: a fatbin, cubin or PTX file (or a host ELF holding one image)."""
    return ptx_from_bytes(_read_file(path), sm, os.fspath(path))


def _fatbin_at(address: int) -> Fatbin:
    header = memory.read(address, FATBIN_HEADER.size, "fatbin header")
    extent = fatbin_extent(header, address)
    check_size(extent, "the fatbin", address + 8)
    return parse_fatbin(memory.read(address, extent, "fatbin"), 0, base=address)


def _prelinked(list_address: int) -> list[int]:
    """The NULL-terminated list of prelinked fatbin pointers of a version-2 wrapper."""
    out = []
    while True:
        pos = list_address + 8 * len(out)
        ptr = struct.unpack("<Q", memory.read(pos, 8, "prelinked fatbin list"))[0]
        if ptr == 0:
            return out
        if len(out) == MAX_PRELINKED_FATBINS:
            raise FatbinError(f"prelinked fatbin list has no NULL within {MAX_PRELINKED_FATBINS} entries",
                              list_address)
        out.append(ptr)


def _wrapper_fatbins(address: int) -> tuple[bool, list[Fatbin]]:
    """The wrapper's fatbins, and whether they are the members of an -rdc link."""
    _, version, data_ptr, extra = WRAPPER.unpack(memory.read(address, WRAPPER.size, "fatbin wrapper"))
    if version == 1:
        return False, [_fatbin_at(data_ptr)]
    if version == 2:
        # -rdc: the translation units' relocatable fatbins, whose PTX is linked; the wrapper's
        # own fatbin holds only nvlink's SASS. Entries may be wrappers or bare fatbins.
        linked = _prelinked(extra) if extra else []
        if not linked:
            return False, [_fatbin_at(data_ptr)]
        return True, [_wrapper_fatbins(p)[1][0] if _magic(memory.read(p, 4, "prelinked fatbin")) == WRAPPER_MAGIC
                      else _fatbin_at(p) for p in linked]
    raise FatbinError(f"unsupported fatbin wrapper version {version} (expected 1 or 2)", address + 4)


def ptx_from_pointer(address: int, sm: int) -> list[PtxModule]:
    """cuModuleLoadData / cuLibraryLoadData: the image at a raw process address."""
    origin = f"image@{address:#x}"
    try:
        magic = _magic(memory.read(address, 4, "image"))
        linked = False
        if magic == WRAPPER_MAGIC:
            linked, fatbins = _wrapper_fatbins(address)
        elif magic == FATBIN_MAGIC:
            fatbins = [_fatbin_at(address)]
        elif struct.pack("<I", magic) == ELF_MAGIC:
            header = memory.read(address, 64, "ELF header")
            if elf_machine(header) == EM_CUDA:
                size = ptx_cubin.extent(header)
                check_size(size, "the cubin", address)
                return _ptx_cubin(memory.read(address, size, "cubin"), address, sm, origin)
            raise FatbinError(f"an ELF image for machine {elf_machine(header)}, not a CUDA cubin", address + 18)
        else:
            raw = memory.read_cstring(address, max_size(), "PTX text")
            return [_ptx_module(raw, address, origin)]
        return _select(fatbins, sm, origin, linked)
    except FatbinError as e:
        raise e.with_origin(origin) from None
