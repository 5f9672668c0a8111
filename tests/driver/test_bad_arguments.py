"""Bad arguments get CUresults, never a signal or a traceback (issue 16). Each case runs in its
own process: a driver that crashes must fail the test, not the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.driver.conftest import shim_path

PRELUDE = """
import ctypes, mmap
cu = ctypes.CDLL({shim!r})
c = ctypes.c_void_p
for name in ("cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemHostRegister_v2", "cuMemcpy", "cuLaunchKernel"):
    getattr(cu, name).argtypes = None
ctx = c()
assert cu.cuInit(0) == 0 and cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
d = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(4096)) == 0
libc = ctypes.CDLL(None)
libc.mmap.restype = c
libc.mmap.argtypes = [c, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [c, ctypes.c_size_t]
libc.mprotect.argtypes = [c, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
big = ctypes.c_uint64()  # device memory of 3 pages
assert cu.cuMemAlloc_v2(ctypes.byref(big), ctypes.c_size_t(3 * page)) == 0

def unmapped(size):
    p = libc.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    libc.munmap(p, size)
    return p
"""


def run_case(body: str, env: dict | None = None) -> subprocess.CompletedProcess:
    code = PRELUDE.format(shim=str(shim_path())) + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_copies_from_and_to_null_or_unmapped_host_memory_are_invalid_value():
    r = run_case("""
        gone = unmapped(1 << 20)
        print(cu.cuMemcpyHtoD_v2(d, None, ctypes.c_size_t(16)), cu.cuMemcpyDtoH_v2(None, d, ctypes.c_size_t(16)))
        print(cu.cuMemcpyHtoD_v2(d, c(gone), ctypes.c_size_t(16)), cu.cuMemcpyDtoH_v2(c(gone), d, ctypes.c_size_t(16)))
        print(cu.cuMemcpy(c(d.value), None, ctypes.c_size_t(16)), cu.cuMemcpy(c(gone), c(d.value), ctypes.c_size_t(16)))
        ro = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ
        print(cu.cuMemcpyDtoH_v2(c(ro), d, ctypes.c_size_t(16)))
        buf = ctypes.create_string_buffer(16)
        print(cu.cuMemcpyHtoD_v2(d, buf, ctypes.c_size_t(16)), cu.cuMemcpyDtoH_v2(buf, d, ctypes.c_size_t(16)))
        """)
    assert r.stdout.split() == ["1"] * 7 + ["0", "0"], r.stdout + r.stderr


def test_registering_unmapped_memory_is_invalid_value():
    r = run_case("""
        gone = unmapped(1 << 20)
        print(cu.cuMemHostRegister_v2(c(gone), ctypes.c_size_t(1 << 20), 0))
        print(cu.cuMemHostRegister_v2(c(gone), ctypes.c_size_t(1 << 40), 0))
        buf = ctypes.create_string_buffer(1 << 16)
        print(cu.cuMemHostRegister_v2(buf, ctypes.c_size_t(1 << 16), 0))
        """)
    assert r.stdout.split() == ["1", "1", "0"], r.stdout + r.stderr


def test_registered_memory_the_program_unmapped_gives_errors_not_a_signal():
    # NVIDIA's driver answers errors for a range munmapped while registered; the process lives
    # the ranges lie far below where mmap places new mappings (top-down from near the stack), so
    # that the holes the munmaps leave are not mapped again by whatever runs meanwhile
    r = run_case(f"""
        stream, mod, fn = c(), c(), c()
        assert cu.cuStreamCreate(ctypes.byref(stream), 1) == 0
        assert cu.cuModuleLoadData(ctypes.byref(mod), b"{TOUCH_PTX}") == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"touch") == 0
        n = ctypes.c_size_t(4 * page)
        low = 0x100000000000  # 16 TiB
        # MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE
        first, second = (libc.mmap(c(low + i * (1 << 20)), 4 * page, 3, 0x100022, -1, 0) for i in range(2))
        assert (first, second) == (low, low + (1 << 20)), (first, second)
        out = ctypes.c_uint64(second)
        params = (c * 1)(ctypes.cast(ctypes.pointer(out), c))
        size = ctypes.c_size_t(16)
        print(cu.cuMemHostRegister_v2(c(first), n, 0), cu.cuMemHostRegister_v2(c(second), n, 0))
        libc.munmap(c(first), 4 * page)
        libc.munmap(c(second), 4 * page)
        print(cu.cuMemcpyHtoD_v2(big, c(first), size), cu.cuMemcpyDtoH_v2(c(first), big, size),
              cu.cuMemcpyHtoDAsync_v2(big, c(first), size, stream), cu.cuMemcpy(c(big.value), c(first), size),
              cu.cuMemcpyDtoD_v2(big, ctypes.c_uint64(first), size), cu.cuMemsetD8_v2(ctypes.c_uint64(first), 1, size),
              cu.cuStreamSynchronize(stream))
        print(cu.cuMemHostUnregister(c(first)))
        # a kernel storing into the other range: an illegal address, as any access outside memory
        print(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), cu.cuCtxSynchronize())
        """)
    assert r.stdout.split() == ["0", "0"] + ["1"] * 6 + ["0", "0", "0", "700"], r.stdout + r.stderr


def test_huge_pitched_allocation_is_out_of_memory():
    r = run_case("""
        p, pitch = ctypes.c_uint64(), ctypes.c_size_t()
        print(cu.cuMemAllocPitch_v2(ctypes.byref(p), ctypes.byref(pitch), ctypes.c_size_t(1 << 40), ctypes.c_size_t(1 << 40), 4))
        print(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t((1 << 64) - 1)))
        """)
    assert r.stdout.split() == ["2", "2"], r.stdout + r.stderr
    assert "internal error" not in r.stderr, r.stderr


TOUCH_PTX = (".version 7.0\\n.target sm_52\\n.address_size 64\\n"
             ".visible .entry touch(.param .u64 out)\\n{\\n  .reg .b64 %rd<2>;\\n"
             "  ld.param.u64 %rd1, [out];\\n  st.global.u32 [%rd1], 7;\\n  ret;\\n}\\n")


def test_function_of_a_destroyed_context_is_invalid_and_harms_no_other():
    r = run_case(f"""
        other, mod, fn, primary = c(), c(), c(), c()
        assert cu.cuCtxCreate_v2(ctypes.byref(other), 0, 0) == 0
        assert cu.cuModuleLoadData(ctypes.byref(mod), b"{TOUCH_PTX}") == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"touch") == 0
        out = ctypes.c_uint64()
        assert cu.cuMemAlloc_v2(ctypes.byref(out), ctypes.c_size_t(4)) == 0
        assert cu.cuCtxDestroy_v2(other) == 0
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(primary), 0) == 0
        assert cu.cuCtxSetCurrent(primary) == 0
        params = (c * 1)(ctypes.cast(ctypes.pointer(out), c))
        print(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None))
        print(cu.cuCtxSynchronize())
        # the primary context still works
        mine = ctypes.c_uint64()
        print(cu.cuMemAlloc_v2(ctypes.byref(mine), ctypes.c_size_t(4)), cu.cuCtxSynchronize())
        """)
    assert r.stdout.split() == ["400", "0", "0", "0"], r.stdout + r.stderr


def test_internal_errors_are_one_line_without_zluda_debug(monkeypatch, capsys):
    from zluda_py.driver import api

    def fail() -> None:
        raise ZeroDivisionError("boom")

    for debug in ("", "1"):
        monkeypatch.setenv("ZLUDA_DEBUG", debug)
        api._ENTRIES["zluda_test_fail"] = (fail, False)
        api._reported.discard("zluda_test_fail")
        try:
            assert api.wrapped("zluda_test_fail")() == 999
        finally:
            del api._ENTRIES["zluda_test_fail"]
        err = capsys.readouterr().err
        assert "zluda: zluda_test_fail: internal error (ZeroDivisionError: boom); returning CUDA_ERROR_UNKNOWN" in err
        assert ("Traceback" in err) == (debug == "1"), err


def test_a_protected_or_unmapped_page_strictly_inside_a_host_range_is_invalid_value():
    # 3 pages whose first and last are read-write: the middle one is made PROT_NONE, read-only
    # or unmapped; a copy or registration over all 3 must not touch it
    r = run_case("""
        n = ctypes.c_size_t(3 * page)
        stream = c()
        assert cu.cuStreamCreate(ctypes.byref(stream), 0) == 0

        def three_pages(middle_prot):
            p = libc.mmap(None, 3 * page, 3, 0x22, -1, 0)
            ctypes.memset(p, 1, 3 * page)
            if middle_prot is None:
                assert libc.munmap(c(p + page), page) == 0
            else:
                assert libc.mprotect(c(p + page), page, middle_prot) == 0
            return p

        for prot in (0, None, 1):  # PROT_NONE, unmapped, PROT_READ
            p = three_pages(prot)
            print(cu.cuMemcpyHtoD_v2(big, c(p), n), cu.cuMemcpyHtoDAsync_v2(big, c(p), n, stream),
                  cu.cuMemcpyDtoH_v2(c(p), big, n), cu.cuMemcpyDtoHAsync_v2(c(p), big, n, stream),
                  cu.cuMemcpy(c(p), c(big.value), n), cu.cuMemHostRegister_v2(c(p), n, 0),
                  cu.cuStreamSynchronize(stream))
        """)
    lines = [line.split() for line in r.stdout.splitlines()]
    # PROT_NONE and unmapped: every call is refused; read-only: only copies into it are
    assert lines == [["1"] * 6 + ["0"], ["1"] * 6 + ["0"], ["0", "0", "1", "1", "1", "0", "0"]], r.stdout + r.stderr


def test_a_2d_copy_whose_host_rows_span_a_protected_page_is_invalid_value():
    r = run_case("""
        p = libc.mmap(None, 3 * page, 3, 0x22, -1, 0)
        assert libc.mprotect(c(p + page), page, 0) == 0

        class Copy2D(ctypes.Structure):  # CUDA_MEMCPY2D, cuda.h
            _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t),
                        ("srcMemoryType", ctypes.c_int), ("srcHost", c), ("srcDevice", ctypes.c_uint64),
                        ("srcArray", c), ("srcPitch", ctypes.c_size_t),
                        ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t),
                        ("dstMemoryType", ctypes.c_int), ("dstHost", c), ("dstDevice", ctypes.c_uint64),
                        ("dstArray", c), ("dstPitch", ctypes.c_size_t),
                        ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]

        # 3 rows of 64 bytes, one per page: the middle row lies in the PROT_NONE page
        host, device = 1, 2  # CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE
        up = Copy2D(srcMemoryType=host, srcHost=p, srcPitch=page, dstMemoryType=device,
                    dstDevice=big.value, dstPitch=page, WidthInBytes=64, Height=3)
        down = Copy2D(srcMemoryType=device, srcDevice=big.value, srcPitch=page, dstMemoryType=host,
                      dstHost=p, dstPitch=page, WidthInBytes=64, Height=3)
        print(cu.cuMemcpy2D_v2(ctypes.byref(up)), cu.cuMemcpy2D_v2(ctypes.byref(down)))
        """)
    assert r.stdout.split() == ["1", "1"], r.stdout + r.stderr


PUT_PTX = (".version 7.0\\n.target sm_52\\n.address_size 64\\n"
           ".visible .entry put(.param .u64 out, .param .u32 v)\\n{\\n  .reg .b64 %rd<2>;\\n  .reg .b32 %r<2>;\\n"
           "  ld.param.u64 %rd1, [out];\\n  ld.param.u32 %r1, [v];\\n  st.global.u32 [%rd1], %r1;\\n  ret;\\n}\\n")
# put(out, v): parameters at offsets 0 (8 bytes) and 8 (4 bytes), 12 bytes in all
LAUNCH_PRELUDE = f"""
mod, fn = c(), c()
assert cu.cuModuleLoadData(ctypes.byref(mod), b"{PUT_PTX}") == 0
assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"put") == 0
out = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(out), ctypes.c_size_t(4)) == 0
v = ctypes.c_uint32(0x5EED)
P = ctypes.POINTER(c)

# PROT_NONE pages stand for memory that is not there: unlike an unmapped page, the driver's
# own mappings cannot take their place
gone = libc.mmap(None, page, 0, 0x22, -1, 0)

def at_edge(data: bytes) -> int:
    # a copy of data ending where a PROT_NONE page begins
    p = libc.mmap(None, 2 * page, 3, 0x22, -1, 0)
    assert libc.mprotect(c(p + page), page, 0) == 0
    ctypes.memmove(p + page - len(data), data, len(data))
    return p + page - len(data)

def params(*pointers) -> P:
    return ctypes.cast((c * len(pointers))(*pointers), P)

def launch(kernel_params, extra) -> int:
    return cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, kernel_params, extra)

def result() -> str:
    got = ctypes.c_uint32()
    assert cu.cuCtxSynchronize() == 0
    assert cu.cuMemcpyDtoH_v2(ctypes.byref(got), out, ctypes.c_size_t(4)) == 0
    return hex(got.value)

good = params(ctypes.addressof(out), ctypes.addressof(v))
size = ctypes.c_size_t(12)
buffer = ctypes.create_string_buffer(out.value.to_bytes(8, "little") + bytes(v) + bytes(4))
"""


def run_launch_case(body: str) -> subprocess.CompletedProcess:
    return run_case(LAUNCH_PRELUDE + textwrap.dedent(body))


def test_bad_kernel_params_are_invalid_value():
    r = run_launch_case("""
        print(launch(None, None))  # no parameters for a kernel that takes 2
        print(launch(params(ctypes.addressof(out), None), None))  # a NULL entry
        print(launch(params(ctypes.addressof(out), gone), None))  # an entry pointing nowhere
        print(launch(ctypes.cast(c(gone), P), None))  # the array itself nowhere
        # an array of one pointer where the kernel takes 2, at the end of the accessible memory
        print(launch(ctypes.cast(c(at_edge(bytes(c(ctypes.addressof(out))))), P), None))
        # the u32 v straddling into a PROT_NONE page
        print(launch(params(ctypes.addressof(out), at_edge(b"\\x01\\x02")), None))
        print(cu.cuLaunchCooperativeKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params(ctypes.addressof(out), gone)))
        print(result())  # none of the above ran
        print(launch(good, None), result())
        """)
    assert r.stdout.split() == ["1"] * 7 + ["0x0", "0", "0x5eed"], r.stdout + r.stderr


def test_bad_extra_is_invalid_value():
    r = run_launch_case("""
        def extra(*words) -> P:
            return params(*words)
        good_extra = [1, ctypes.addressof(buffer), 2, ctypes.addressof(size), 0]
        print(launch(good, extra(*good_extra)))  # both kernelParams and extra (cuda.h: INVALID_VALUE)
        small = ctypes.c_size_t(8)
        print(launch(None, extra(1, ctypes.addressof(buffer), 2, ctypes.addressof(small), 0)))  # 8 < 12 bytes
        print(launch(None, extra(1, gone, 2, ctypes.addressof(size), 0)))  # the buffer nowhere
        print(launch(None, extra(1, ctypes.addressof(buffer), 2, gone, 0)))  # the size nowhere
        print(launch(None, ctypes.cast(c(gone), P)))  # the list itself nowhere
        print(launch(None, extra(7, 0, 0)))  # an unknown key
        print(launch(None, extra(1, ctypes.addressof(buffer), 0)))  # a buffer without its size
        # unterminated: the list runs into a PROT_NONE page
        words = good_extra[:4]
        print(launch(None, ctypes.cast(c(at_edge(bytes((c * 4)(*words)))), P)))
        # a key whose value would lie in the PROT_NONE page
        print(launch(None, ctypes.cast(c(at_edge(bytes((c * 1)(1)))), P)))
        # the buffer's last parameter byte in the PROT_NONE page
        edge = at_edge(buffer.raw[:11])
        print(launch(None, extra(1, edge, 2, ctypes.addressof(size), 0)))
        print(result())  # none of the above ran
        print(launch(None, extra(*good_extra)), result())
        # the list may end right after its END
        print(launch(None, ctypes.cast(c(at_edge(bytes((c * 5)(*good_extra)))), P)))
        """)
    assert r.stdout.split() == ["1"] * 10 + ["0x0", "0", "0x5eed", "0"], r.stdout + r.stderr


def test_bad_launch_config_is_invalid_value():
    r = run_launch_case("""

        class Config(ctypes.Structure):  # CUlaunchConfig, cuda.h
            _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                        ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                        ("sharedMemBytes", ctypes.c_uint), ("hStream", c), ("attrs", c), ("numAttrs", ctypes.c_uint)]

        one = dict(gridDimX=1, gridDimY=1, gridDimZ=1, blockDimX=1, blockDimY=1, blockDimZ=1)
        ex = lambda config, kernel_params: cu.cuLaunchKernelEx(config, fn, kernel_params, None)
        print(ex(ctypes.byref(Config(**one)), params(ctypes.addressof(out), gone)))
        print(ex(c(gone), good))  # the configuration nowhere
        print(ex(ctypes.byref(Config(**one, attrs=gone, numAttrs=3)), good))  # its attributes nowhere
        print(ex(ctypes.byref(Config(**one, attrs=ctypes.addressof(out), numAttrs=2**32 - 1)), good))  # too many
        print(result())
        print(ex(ctypes.byref(Config(**one)), good), result())
        """)
    assert r.stdout.split() == ["1", "1", "1", "1", "0x0", "0", "0x5eed"], r.stdout + r.stderr
