"""CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES against ptxas -v's "bytes smem" for the same PTX: a kernel's
static shared size is its variables' end, rounded up to where dynamic shared memory starts (16,
or the largest .align of the module's dynamic .shared) only when the module declares any. An H100
(driver 580.159.04) answered cudaFuncGetAttributes the same as ptxas -v for launch_probe.cu's
kernels (golden/launch_probe.txt: 48, 32, 48); numba-cuda's test_get_shared_mem_per_block
expects the exact end (40) for a module without dynamic shared memory."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
HEADER = ".version 8.0\n.target sm_86\n.address_size 64\n"


def kernel(name: str, shared: list[tuple[int, int]], dynamic: str | None = None) -> str:
    """A kernel storing its thread index into each of its .shared (align, bytes) arrays, and
    writing the address of `dynamic` (a dynamic .shared name) or 0 to out."""
    decls = "".join(f"  .shared .align {a} .b8 {name}_s{i}[{n}];\n" for i, (a, n) in enumerate(shared))
    stores = "".join(f"  mov.u32 %r2, {name}_s{i};\n  st.shared.u8 [%r2], %r1;\n" for i in range(len(shared)))
    address = f"  mov.u32 %r3, {dynamic};\n" if dynamic else "  mov.u32 %r3, 0;\n"
    return (f".visible .entry {name}(.param .u64 out)\n{{\n  .reg .b32 %r<4>;\n  .reg .b64 %rd<2>;\n{decls}"
            f"  mov.u32 %r1, %tid.x;\n{stores}{address}  ld.param.u64 %rd1, [out];\n  st.global.u32 [%rd1], %r3;\n"
            "  ret;\n}\n")


MODULES = {
    "exact end": HEADER + kernel("a", [(4, 40)]) + kernel("b", [(4, 36)]),
    "mixed alignments": HEADER + kernel("a", [(1, 3), (8, 16)]),
    "dynamic align 4": HEADER + ".extern .shared .align 4 .b8 dyn[];\n" + kernel("a", [(4, 36)], "dyn") + kernel("b", [(4, 40)]),
    "dynamic align 32": HEADER + ".extern .shared .align 32 .b8 dyn[];\n" + kernel("a", [(4, 36)], "dyn") + kernel("b", []),
    "two dynamic": HEADER + ".extern .shared .align 16 .b8 dyn[];\n.extern .shared .align 64 .b8 dyn2[];\n"
                   + kernel("a", [(1, 3), (8, 16)], "dyn2") + kernel("b", [(4, 70)], "dyn"),
}


def ptxas_smem(text: str, tmp_path: Path) -> dict[str, int]:
    """{kernel: bytes smem} as ptxas -v reports them."""
    src = tmp_path / "m.ptx"
    src.write_text(text)
    r = subprocess.run([PTXAS, "-arch=sm_86", "-v", str(src), "-o", str(tmp_path / "m.cubin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out, current = {}, None
    for line in r.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            current = m.group(1)
        elif (m := re.search(r"(\d+) bytes smem", line)) and current:
            out[current] = int(m.group(1))
    return out


@pytest.mark.skipif(not Path(PTXAS).exists(), reason="needs ptxas (CUDA toolkit) as the reference")
@pytest.mark.parametrize("case", MODULES)
def test_shared_size_bytes_as_ptxas_reports(cu, case, tmp_path):
    text = MODULES[case]
    expected = ptxas_smem(text, tmp_path)
    assert expected, "ptxas -v reported no kernels"
    image = ctypes.create_string_buffer(text.encode())
    mod, value = ctypes.c_void_p(), ctypes.c_int()
    cu.ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
    ours = {}
    for name in expected:
        fn = ctypes.c_void_p()
        cu.ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()))
        cu.ok(cu.cuFuncGetAttribute(ctypes.byref(value), 1, fn))  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        ours[name] = value.value
        if "dyn" in text and name == "a":  # the dynamic array starts past the static ones, aligned as declared
            out = ctypes.c_uint64()
            cu.ok(cu.cuMemAlloc_v2(ctypes.byref(out), 4))
            params = (ctypes.c_void_p * 1)(ctypes.addressof(out))
            cu.ok(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 16, None, params, None))
            cu.ok(cu.cuCtxSynchronize())
            got = np.zeros(1, np.uint32)
            cu.ok(cu.cuMemcpyDtoH_v2(ctypes.c_void_p(got.ctypes.data), out, ctypes.c_size_t(4)))
            align = max(int(a) for a in re.findall(r"\.extern \.shared \.align (\d+)", text))
            assert got[0] % max(align, 16) == 0 and got[0] % 4096 >= expected[name], (case, hex(got[0]))
            cu.ok(cu.cuMemFree_v2(out))
    cu.ok(cu.cuModuleUnload(mod))
    assert ours == expected
