"""JIT options of cuModuleLoadDataEx and the cuLink* linker, through libcuda.so.1: scalars live
in the void* slots, outputs (wall time, bytes of each log used) are written back into them."""

from __future__ import annotations

import ctypes
import struct

c_void_p, byref = ctypes.c_void_p, ctypes.byref

CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 2, 3, 4
CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE = 5, 6, 12
CU_JIT_INPUT_PTX = 1
CUDA_ERROR_INVALID_PTX = 218

GOOD = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry good_kernel(.param .u64 p)
{
  ret;
}
"""
BAD = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry bad_kernel()
{
  .reg .b32 %r<2>;
  mov.u32 %r1, no_such_symbol;
  ret;
}
"""


class Options:
    """The two arrays, with log buffers of the given sizes (0: no such option), each followed by
    two guard bytes the driver must not touch."""

    def __init__(self, info_size: int = 0, error_size: int = 0, verbose: bool = False) -> None:
        self.info = ctypes.create_string_buffer(b"\xff" * (info_size + 2))
        self.error = ctypes.create_string_buffer(b"\xff" * (error_size + 2))
        opts = [(CU_JIT_WALL_TIME, 0)]
        if info_size:
            opts += [(CU_JIT_INFO_LOG_BUFFER, ctypes.addressof(self.info)), (CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, info_size)]
        if error_size:
            opts += [(CU_JIT_ERROR_LOG_BUFFER, ctypes.addressof(self.error)), (CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, error_size)]
        if verbose:
            opts.append((CU_JIT_LOG_VERBOSE, 1))
        self.n = len(opts)
        self.options = (ctypes.c_int * self.n)(*[o for o, _ in opts])
        self.values = (c_void_p * self.n)(*[v for _, v in opts])

    def slot(self, option: int) -> int:
        return self.values[list(self.options).index(option)] or 0

    def wall_ms(self) -> float:
        return struct.unpack("<f", struct.pack("<Q", self.slot(CU_JIT_WALL_TIME))[:4])[0]

    def log(self, buffer_option: int) -> bytes:
        buf = self.info if buffer_option == CU_JIT_INFO_LOG_BUFFER else self.error
        return buf.raw.split(b"\0", 1)[0]


def test_module_load_fills_info_log_and_wall_time(cu):
    o = Options(info_size=4096, error_size=256, verbose=True)
    mod = c_void_p()
    cu.ok(cu.cuModuleLoadDataEx(byref(mod), GOOD, o.n, o.options, o.values))
    info = o.log(CU_JIT_INFO_LOG_BUFFER).decode()
    assert "good_kernel" in info  # verbose: a line per kernel
    assert o.slot(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) == len(info) + 1  # used, with the NUL
    assert o.log(CU_JIT_ERROR_LOG_BUFFER) == b"" and o.slot(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) == 0
    assert 0.0 < o.wall_ms() < 600_000.0
    cu.ok(cu.cuModuleUnload(mod))


def test_bad_ptx_puts_the_precise_error_in_the_error_log(cu):
    o = Options(error_size=4096)
    mod = c_void_p()
    assert cu.cuModuleLoadDataEx(byref(mod), BAD, o.n, o.options, o.values) == CUDA_ERROR_INVALID_PTX
    log = o.log(CU_JIT_ERROR_LOG_BUFFER).decode()
    assert ":7:16: error: undeclared symbol 'no_such_symbol'" in log, log
    assert o.slot(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) == len(log) + 1


def test_logs_are_cut_to_the_buffer_with_a_nul(cu):
    o = Options(info_size=16, error_size=10)
    mod = c_void_p()
    assert cu.cuModuleLoadDataEx(byref(mod), BAD, o.n, o.options, o.values) == CUDA_ERROR_INVALID_PTX
    assert len(o.log(CU_JIT_ERROR_LOG_BUFFER)) == 9 and o.error.raw[9:10] == b"\0"
    assert o.error.raw[10:12] == b"\xff\xff" and o.info.raw[16:18] == b"\xff\xff"  # nothing past the buffers
    assert o.slot(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) == 10
    assert len(o.log(CU_JIT_INFO_LOG_BUFFER)) == 15 and o.slot(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) == 16


def test_linker_reports_a_bad_input_at_cuLinkAddData(cu):
    o = Options(info_size=4096, error_size=4096)
    state = c_void_p()
    cu.ok(cu.cuLinkCreate_v2(o.n, o.options, o.values, byref(state)))
    cu.ok(cu.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, GOOD, ctypes.c_size_t(len(GOOD) + 1), b"good.ptx", 0, None, None))
    assert o.log(CU_JIT_ERROR_LOG_BUFFER) == b""
    rc = cu.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, BAD, ctypes.c_size_t(len(BAD) + 1), b"bad.ptx", 0, None, None)
    assert rc == CUDA_ERROR_INVALID_PTX
    assert "bad.ptx:7:16: error: undeclared symbol 'no_such_symbol'" in o.log(CU_JIT_ERROR_LOG_BUFFER).decode()
    first = o.wall_ms()
    image, size = c_void_p(), ctypes.c_size_t()
    cu.ok(cu.cuLinkComplete(state, byref(image), byref(size)))
    assert o.wall_ms() >= first > 0.0  # the linker's total
    assert "good.ptx" in o.log(CU_JIT_INFO_LOG_BUFFER).decode()
    cu.ok(cu.cuLinkDestroy(state))
