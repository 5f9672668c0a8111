"""ptx_from_pointer on real in-memory images: wrappers registered by loaded libraries, bare
fatbins, PTX text and cubins, and on pointers whose headers lead into unmapped memory."""

from __future__ import annotations

import ctypes
import struct

import pytest
from fatbin_compare import normalize_ptx
from fatbin_synth import ZSTD, entry, fatbin
from memory_helpers import PAGE, bytes_before_hole, load_wrappers

from zluda_py.fatbin import FatbinError, ptx_from_pointer
from zluda_py.fatbin.listing import rows


@pytest.fixture(scope="module")
def kernels_lib(build):
    return load_wrappers(build("shared_lib"), "fatbin_kernels_launch")


@pytest.mark.parametrize("device_sm, chosen", [(75, 75), (80, 75), (86, 86)])
def test_v1_wrapper_of_a_loaded_library(kernels_lib, reference_ptx, device_sm, chosen):
    _, wrappers = kernels_lib
    [v1] = [addr for addr, version in wrappers if version == 1]
    [module] = ptx_from_pointer(v1, device_sm)
    assert module.sm == chosen
    assert normalize_ptx(module.text) == normalize_ptx(reference_ptx("fatbin_kernels.cu", chosen))


def test_bare_fatbin_pointer_from_the_wrapper(kernels_lib, reference_ptx):
    _, wrappers = kernels_lib
    [v1] = [addr for addr, version in wrappers if version == 1]
    data_ptr = struct.unpack("<Q", ctypes.string_at(v1 + 8, 8))[0]
    [module] = ptx_from_pointer(data_ptr, 80)
    assert normalize_ptx(module.text) == normalize_ptx(reference_ptx("fatbin_kernels.cu", 75))


def test_v2_wrapper_of_an_rdc_library_gives_every_translation_unit(build, reference_ptx):
    _, wrappers = load_wrappers(build("rdc_lib"), "_Z17fatbin_rdc_helperf")
    [v2] = [addr for addr, version in wrappers if version == 2]
    modules = ptx_from_pointer(v2, 80)
    # NVIDIA's device runtime is a third member, with PTX only for compute_121: left out
    assert [normalize_ptx(m.text) for m in modules] == [
        normalize_ptx(reference_ptx(src, 75, rdc=True)) for src in ("fatbin_rdc_a.cu", "fatbin_rdc_b.cu")]
    assert len(ptx_from_pointer(v2, 121)) == 3


def test_ptx_text_pointer_is_returned_exactly(reference_ptx):
    text = reference_ptx("fatbin_kernels.cu", 86)
    buf = ctypes.create_string_buffer(text.encode())
    [module] = ptx_from_pointer(ctypes.addressof(buf), 75)
    assert module.text == text and module.sm == 86


def test_cubin_pointer_is_no_binary_for_gpu(build):
    cubin = next(r.entry.stored for r in rows(build("uncompressed")) if r.entry.kind_name == "elf")
    buf = ctypes.create_string_buffer(cubin)
    with pytest.raises(FatbinError) as info:
        ptx_from_pointer(ctypes.addressof(buf), 80)
    assert info.value.cu_result == 209
    assert "-gencode arch=compute_80,code=compute_80" in str(info.value)


def test_synthetic_v2_wrapper_with_prelinked_list():
    fb1, fb2 = fatbin(entry(compression=ZSTD)), fatbin(entry(sm=80))
    b1, b2 = ctypes.create_string_buffer(fb1), ctypes.create_string_buffer(fb2)
    plist = (ctypes.c_uint64 * 3)(ctypes.addressof(b1), ctypes.addressof(b2), 0)
    wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 2, ctypes.addressof(b1),
                                                      ctypes.addressof(plist)))
    assert [m.sm for m in ptx_from_pointer(ctypes.addressof(wrapper), 86)] == [75, 80]


def test_fatbin_size_past_mapped_memory():
    data = fatbin(entry(), size=PAGE * 4)
    with bytes_before_hole(data) as addr:
        with pytest.raises(FatbinError) as info:
            ptx_from_pointer(addr, 80)
    assert info.value.offset == addr + len(data)
    assert "not readable" in str(info.value)


def test_ptx_text_without_nul_before_a_hole():
    with bytes_before_hole(b".version 9.0\n.target sm_75\n" * 10) as addr:
        with pytest.raises(FatbinError, match="before the terminating NUL") as info:
            ptx_from_pointer(addr, 80)
    assert info.value.offset == addr + 270


def test_ptx_text_ending_right_before_a_hole():
    text = b".version 9.0\n.target sm_75\n.address_size 64\n"
    with bytes_before_hole(text + b"\0") as addr:
        assert ptx_from_pointer(addr, 80)[0].text == text.decode()


def test_wrapper_pointing_into_a_hole():
    with bytes_before_hole(b"\0" * 64) as addr:
        hole = addr + 64
        wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 1, hole, 0))
        with pytest.raises(FatbinError) as info:
            ptx_from_pointer(ctypes.addressof(wrapper), 80)
        assert info.value.offset == hole and info.value.cu_result == 200
        plist = (ctypes.c_uint64 * 2)(hole, 0)
        wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 2, hole, ctypes.addressof(plist)))
        with pytest.raises(FatbinError):
            ptx_from_pointer(ctypes.addressof(wrapper), 80)


def test_prelinked_list_without_null_before_a_hole():
    fb = ctypes.create_string_buffer(fatbin(entry()))
    with bytes_before_hole(struct.pack("<Q", ctypes.addressof(fb)) * 4) as plist:
        wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", 0x466243B1, 2, ctypes.addressof(fb), plist))
        with pytest.raises(FatbinError) as info:
            ptx_from_pointer(ctypes.addressof(wrapper), 80)
    assert info.value.offset == plist + 32


@pytest.mark.parametrize("address", [0, 8, 1 << 63])
def test_invalid_addresses(address):
    with pytest.raises(FatbinError) as info:
        ptx_from_pointer(address, 80)
    assert info.value.cu_result == 200
