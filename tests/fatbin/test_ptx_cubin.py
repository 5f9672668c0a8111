"""The PTX cubin (zluda_py/fatbin/ptx_cubin.py, written by libcuda_shim/ptx_cubin.c): an ELF
shaped like a cubin that holds PTX, recognised by content from bytes, a pointer, a file and a
fatbin's ELF entry; NVIDIA's cubins stay error 209."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import pytest

from zluda_py.fatbin import CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU, FatbinError, ptx_cubin
from zluda_py.fatbin.loader import ptx_from_bytes, ptx_from_file, ptx_from_pointer

XDIST_INDEPENDENT = True

A = ".version 7.5\n.target sm_75\n.address_size 64\n.visible .entry a() { ret; }\n"
B = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry b() { ret; }\n"


def test_two_modules_round_trip_and_the_header_is_a_cubins():
    data = ptx_cubin.pack([A, B], 86)
    assert data[:4] == b"\x7fELF" and data[7] == 0x41  # ELFOSABI_CUDA
    assert int.from_bytes(data[18:20], "little") == 190  # EM_CUDA
    assert int.from_bytes(data[48:52], "little") == 86 << 8  # e_flags: sm_86, as cubin_sm reads it
    assert ptx_cubin.extent(data) == len(data)
    mods = ptx_from_bytes(data, 86)
    assert [(m.text, m.sm) for m in mods] == [(A, 75), (B, 80)]


def test_a_copy_loads_through_a_pointer():
    copy = ctypes.create_string_buffer(ptx_cubin.pack([A], 86))
    assert [m.text for m in ptx_from_pointer(ctypes.addressof(copy), 86)] == [A]


def test_the_c_reader_agrees():
    lib = ctypes.CDLL(str(ptx_cubin._LIBRARY))
    lib.zl_is_ptx_cubin.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    data = ptx_cubin.pack([A, B], 86)
    assert lib.zl_is_ptx_cubin(data, len(data)) == 1
    assert lib.zl_is_ptx_cubin(data[:-1], len(data) - 1) == 0
    assert lib.zl_is_ptx_cubin(A.encode(), len(A)) == 0


def test_truncated_is_invalid_image():
    with pytest.raises(FatbinError) as e:
        ptx_from_bytes(ptx_cubin.pack([A], 86)[:-8], 86)
    assert e.value.cu_result == CUDA_ERROR_INVALID_IMAGE and "truncated" in str(e.value)


def test_without_ptx_is_no_binary():
    with pytest.raises(FatbinError) as e:
        ptx_from_bytes(ptx_cubin.pack([], 86), 86)
    assert e.value.cu_result == CUDA_ERROR_NO_BINARY_FOR_GPU


def test_nvidia_cubin_is_still_no_binary(nvcc):
    cubin = nvcc(["vector_add.cu"], ["-cubin", "-arch=sm_86"], ".cubin")
    for load in (lambda: ptx_from_file(cubin, 86),
                 lambda: ptx_from_pointer(ctypes.addressof(buf := ctypes.create_string_buffer(cubin.read_bytes())), 86)):
        with pytest.raises(FatbinError) as e:
            load()
        assert e.value.cu_result == CUDA_ERROR_NO_BINARY_FOR_GPU and "SASS for sm_86" in str(e.value)


def test_inside_a_fatbin_as_its_elf_entry(tmp_path):
    fatbinary = shutil.which("fatbinary") or "/usr/local/cuda/bin/fatbinary"
    if not os.path.exists(fatbinary):
        pytest.skip("fatbinary not found")
    cubin, fatbin = tmp_path / "a.cubin", tmp_path / "a.fatbin"
    cubin.write_bytes(ptx_cubin.pack([A], 86))
    subprocess.run([fatbinary, "-64", f"--create={fatbin}", f"--image3=kind=elf,sm=86,file={cubin}"], check=True)
    assert [m.text for m in ptx_from_file(fatbin, 86)] == [A]
