"""Virtual memory management is the device's, not a context's: NVIDIA's cuMemUnmap and
cuMemAddressFree need no current context, and destroying the context that mapped memory
leaves the mapping usable from other contexts (cuda-samples' memMapIPCDrv unmaps after
cuCtxDestroy; it failed with 201 INVALID_CONTEXT)."""

from __future__ import annotations

from tests.driver.test_bad_arguments import run_case

SIZE = 2 << 20  # the granularity the driver reports


def test_mappings_outlive_the_context_and_unmap_without_one():
    r = run_case(f"""
        import struct
        for name in ("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
                     "cuMemAddressFree", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2"):
            getattr(cu, name).argtypes = None
        size = ctypes.c_size_t({SIZE})
        prop = ctypes.create_string_buffer(struct.pack("iiiiQQ", 1, 0, 1, 0, 0, 0))  # pinned, device 0
        access = ctypes.create_string_buffer(struct.pack("iii", 1, 0, 3))  # device 0, read-write
        mine = c()
        assert cu.cuCtxCreate_v2(ctypes.byref(mine), 0, 0) == 0
        va, handle = ctypes.c_uint64(), ctypes.c_uint64()
        print(cu.cuMemAddressReserve(ctypes.byref(va), size, ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)))
        print(cu.cuMemCreate(ctypes.byref(handle), size, prop, ctypes.c_uint64(0)))
        print(cu.cuMemMap(va, size, ctypes.c_size_t(0), handle, ctypes.c_uint64(0)))
        print(cu.cuMemSetAccess(va, size, access, ctypes.c_size_t(1)))
        print(cu.cuMemsetD8_v2(va, ctypes.c_ubyte(0x5A), size))
        print(cu.cuCtxDestroy_v2(mine))  # the earlier context is current again
        out = ctypes.create_string_buffer(64)
        print(cu.cuMemcpyDtoH_v2(out, va, ctypes.c_size_t(64)), out.raw == b"\\x5a" * 64)
        top = c()
        print(cu.cuCtxPopCurrent_v2(ctypes.byref(top)), top.value == ctx.value)
        print(cu.cuMemUnmap(va, size))  # no context is current
        print(cu.cuMemAddressFree(va, size))
        """)
    assert r.stdout.split() == ["0"] * 6 + ["0", "True", "0", "True", "0", "0"], r.stdout + r.stderr
