"""The linker (cuLinkCreate/AddData/AddFile/Complete) and module/library globals
(cuModuleGetGlobal, cuLibraryGetGlobal), through libcuda.so.1 with ctypes. Inputs are PTX
text written here and nvcc -dc objects; expected values are computed in Python."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

c_void_p, byref, c_size_t, c_ulonglong, c_uint = ctypes.c_void_p, ctypes.byref, ctypes.c_size_t, ctypes.c_ulonglong, ctypes.c_uint
CUDA_ERROR_NOT_FOUND, CUDA_ERROR_FILE_NOT_FOUND = 500, 301
CU_JIT_INPUT_PTX, CU_JIT_INPUT_OBJECT = 1, 3

HEADER = ".version 7.0\n.target sm_52\n.address_size 64\n"
CALLER = HEADER + """
.extern .func (.param .b32 r) offset_of(.param .b32 v);
.extern .global .align 4 .u32 base;
.visible .entry fill(.param .u64 out)
{
  .reg .b32 %r<5>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  { .param .b32 a; .param .b32 r; st.param.b32 [a], %r1; call (r), offset_of, (a); ld.param.b32 %r2, [r]; }
  ld.global.u32 %r3, [base];
  add.s32 %r4, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r4;
  ret;
}
"""
CALLEE = HEADER + """
.visible .global .align 4 .u32 base = 1000;
.visible .global .align 8 .u64 table[4] = {1, 2, 3, 4};
.visible .func (.param .b32 r) offset_of(.param .b32 v)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [v];
  mul.lo.s32 %r2, %r1, 7;
  st.param.b32 [r], %r2;
  ret;
}
"""


def _launch_1d(cu, fn, threads: int, *args) -> None:
    holders = [c_ulonglong(a) for a in args]
    params = (c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())


def _link(cu, inputs, copy: bool = False) -> c_void_p:
    """Link (kind, bytes or path, name) inputs and load the result as a module; with `copy`, a
    copy of the image made before cuLinkDestroy frees it (what cuda.core does)."""
    state = c_void_p()
    cu.ok(cu.cuLinkCreate_v2(0, None, None, byref(state)))
    keep = []
    for kind, data, name in inputs:
        if isinstance(data, bytes):
            buf = ctypes.create_string_buffer(data)
            keep.append(buf)
            cu.ok(cu.cuLinkAddData_v2(state, kind, buf, c_size_t(len(data) + 1), name.encode(), 0, None, None))
        else:
            cu.ok(cu.cuLinkAddFile_v2(state, kind, str(data).encode(), 0, None, None))
    image, size = c_void_p(), c_size_t()
    cu.ok(cu.cuLinkComplete(state, byref(image), byref(size)))
    assert size.value > 0
    if copy:
        image = ctypes.create_string_buffer(ctypes.string_at(image, size.value), size.value)
        cu.ok(cu.cuLinkDestroy(state))
    mod = c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(mod), image))
    if not copy:
        cu.ok(cu.cuLinkDestroy(state))
    return mod


def _global(cu, getter, handle, name: str) -> tuple[int, int]:
    ptr, size = c_ulonglong(), c_size_t()
    cu.ok(getter(byref(ptr), byref(size), handle, name.encode()))
    return ptr.value, size.value


def _read(cu, ptr: int, dtype, count: int) -> np.ndarray:
    out = np.zeros(count, dtype=dtype)
    cu.ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(c_void_p), c_ulonglong(ptr), c_size_t(out.nbytes)))
    return out


@pytest.mark.parametrize("copy", [False, True], ids=["image", "copy-after-destroy"])
def test_link_two_ptx_modules_resolves_function_and_variable(cu, copy):
    mod = _link(cu, [(CU_JIT_INPUT_PTX, CALLER.encode(), "caller.ptx"), (CU_JIT_INPUT_PTX, CALLEE.encode(), "callee.ptx")],
                copy)
    fn = c_void_p()
    cu.ok(cu.cuModuleGetFunction(byref(fn), mod, b"fill"))
    out = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(out), c_size_t(64 * 4)))
    base, base_size = _global(cu, cu.cuModuleGetGlobal_v2, mod, "base")
    assert base_size == 4 and _read(cu, base, np.uint32, 1)[0] == 1000
    new_base = np.array([5], dtype=np.uint32)
    cu.ok(cu.cuMemcpyHtoD_v2(c_ulonglong(base), new_base.ctypes.data_as(c_void_p), c_size_t(4)))
    _launch_1d(cu, fn, 64, out.value)
    assert np.array_equal(_read(cu, out.value, np.uint32, 64), np.arange(64, dtype=np.uint32) * 7 + 5)
    table, table_size = _global(cu, cu.cuModuleGetGlobal_v2, mod, "table")
    assert table_size == 32 and list(_read(cu, table, np.uint64, 4)) == [1, 2, 3, 4]
    ptr = c_ulonglong()
    assert cu.cuModuleGetGlobal_v2(byref(ptr), None, mod, b"no_such_symbol") == CUDA_ERROR_NOT_FOUND
    cu.ok(cu.cuMemFree_v2(out))
    cu.ok(cu.cuModuleUnload(mod))


def test_link_nvcc_relocatable_objects(cu, nvcc):
    """nvcc -dc objects (fatbins holding each file's PTX) through cuLinkAddFile: the kernel in
    one calls a function and reads a variable defined in the other."""
    objects = [nvcc([name], ["-dc", "-gencode", "arch=compute_75,code=compute_75"], ".o")
               for name in ("e2e_rdc_main.cu", "e2e_rdc_lib.cu")]
    mod = _link(cu, [(CU_JIT_INPUT_OBJECT, path, path.name) for path in objects])
    fn = c_void_p()
    cu.ok(cu.cuModuleGetFunction(byref(fn), mod, b"_Z5applyPKiPii"))
    n = 300
    data = np.arange(n, dtype=np.int32) - 100
    din, dout = c_ulonglong(), c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(din), c_size_t(data.nbytes)))
    cu.ok(cu.cuMemAlloc_v2(byref(dout), c_size_t(data.nbytes)))
    cu.ok(cu.cuMemcpyHtoD_v2(din, data.ctypes.data_as(c_void_p), c_size_t(data.nbytes)))
    holders = [din, dout, ctypes.c_int(n)]
    params = (c_void_p * 3)(*[ctypes.addressof(h) for h in holders])
    cu.ok(cu.cuLaunchKernel(fn, 2, 1, 1, 256, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())
    assert np.array_equal(_read(cu, dout.value, np.int32, n), data * 3 + 1 + 3)
    calls, size = _global(cu, cu.cuModuleGetGlobal_v2, mod, "rdc_calls")
    assert size == 8 and _read(cu, calls, np.uint64, 1)[0] == n
    for p in (din, dout):
        cu.ok(cu.cuMemFree_v2(p))
    cu.ok(cu.cuModuleUnload(mod))


def test_link_add_file_missing_is_file_not_found(cu, tmp_path):
    state = c_void_p()
    cu.ok(cu.cuLinkCreate_v2(0, None, None, byref(state)))
    missing = str(tmp_path / "missing.ptx").encode()
    assert cu.cuLinkAddFile_v2(state, CU_JIT_INPUT_PTX, missing, 0, None, None) == CUDA_ERROR_FILE_NOT_FOUND
    cu.ok(cu.cuLinkDestroy(state))


def test_library_globals_and_kernels(cu):
    text = ctypes.create_string_buffer(CALLEE.encode() + b"""
.visible .entry bump(.param .u32 by)
{
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [by];
  ld.global.u32 %r2, [base];
  add.s32 %r3, %r2, %r1;
  st.global.u32 [base], %r3;
  ret;
}
""")
    lib = c_void_p()
    cu.ok(cu.cuLibraryLoadData(byref(lib), text, None, None, 0, None, None, 0))
    base, size = _global(cu, cu.cuLibraryGetGlobal, lib, "base")
    assert size == 4 and _read(cu, base, np.uint32, 1)[0] == 1000
    kernel, fn = c_void_p(), c_void_p()
    cu.ok(cu.cuLibraryGetKernel(byref(kernel), lib, b"bump"))
    cu.ok(cu.cuKernelGetFunction(byref(fn), kernel))
    by = c_uint(23)
    params = (c_void_p * 1)(ctypes.addressof(by))
    cu.ok(cu.cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    cu.ok(cu.cuCtxSynchronize())
    assert _read(cu, base, np.uint32, 1)[0] == 1000 + 2 * 23
    ptr = c_ulonglong()
    assert cu.cuLibraryGetGlobal(byref(ptr), None, lib, b"absent") == CUDA_ERROR_NOT_FOUND
    cu.ok(cu.cuLibraryUnload(lib))


def test_function_versions_are_the_ptx_arch_and_the_device(cu):
    """PTX_VERSION is the PTX's virtual architecture (CUB matches it against the
    architectures it was built for), BINARY_VERSION the device's compute capability."""
    text = ctypes.create_string_buffer(CALLEE.encode() + b".visible .entry nothing()\n{\n  ret;\n}\n")
    mod, fn, value = c_void_p(), c_void_p(), ctypes.c_int()
    cu.ok(cu.cuModuleLoadData(byref(mod), text))
    cu.ok(cu.cuModuleGetFunction(byref(fn), mod, b"nothing"))
    cu.ok(cu.cuFuncGetAttribute(byref(value), 5, fn))  # CU_FUNC_ATTRIBUTE_PTX_VERSION
    assert value.value == 52  # .target sm_52
    cu.ok(cu.cuFuncGetAttribute(byref(value), 6, fn))  # CU_FUNC_ATTRIBUTE_BINARY_VERSION
    assert value.value == 86  # the reported compute capability, 8.6 by default
    cu.ok(cu.cuModuleUnload(mod))


def test_each_load_of_a_module_has_its_own_globals(cu):
    """Two cuModuleLoadData of one image are two modules: each has its own variables, and
    unloading one leaves the other's intact (NVIDIA's driver instantiates each load)."""
    image = ctypes.create_string_buffer(CALLEE.encode())
    first, second = c_void_p(), c_void_p()
    cu.ok(cu.cuModuleLoadData(byref(first), image))
    cu.ok(cu.cuModuleLoadData(byref(second), image))
    base1, _ = _global(cu, cu.cuModuleGetGlobal_v2, first, "base")
    base2, _ = _global(cu, cu.cuModuleGetGlobal_v2, second, "base")
    assert base1 != base2
    seven = np.array([7], dtype=np.uint32)
    cu.ok(cu.cuMemcpyHtoD_v2(c_ulonglong(base1), seven.ctypes.data_as(c_void_p), c_size_t(4)))
    assert _read(cu, base2, np.uint32, 1)[0] == 1000
    cu.ok(cu.cuModuleUnload(first))
    nine = np.array([9], dtype=np.uint32)
    cu.ok(cu.cuMemcpyHtoD_v2(c_ulonglong(base2), nine.ctypes.data_as(c_void_p), c_size_t(4)))
    assert _read(cu, base2, np.uint32, 1)[0] == 9
    cu.ok(cu.cuModuleUnload(second))
