"""Grid-stride loops (`for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x *
gridDim.x)`), as CuPy's elementwise kernels wrote them with int indices and write them now with
ptrdiff_t ones (CUPY_FOR): nvcc unrolls the 64-bit loop four times, twelve global accesses in
its body. Each access site keeps the range it last hit in one of the launch record's
BOUNDS_CACHE_ENTRIES entries; with fewer entries than the loop's sites, sites of x and of y
shared one and every access missed (zluda.bounds' search: 3x slower). Results against numpy at
sizes that are no multiple of the stride or of a warp, partial warps, and a fault in the middle
of the loop: 700 naming the first faulting lane, and nothing stored that no CUDA schedule
stores."""

from __future__ import annotations

import re

import numpy as np
import pytest

from zluda_py.compiler import LaunchError, compile
from zluda_py.compiler.cpu.abi import Ctx
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.linker import link
from zluda_py.ptx import parse

# nvcc 13 -arch=sm_80 -ptx of:
#   extern "C" __global__ void grid32(int n, float a, const float* x, float* y) {
#       for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
#   }
#   extern "C" __global__ void grid64(long long n, float a, const float* x, float* y) {
#       for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
#            i += (long long)blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
#   }
PTX = r"""
.version 9.0
.target sm_80
.address_size 64
.visible .entry grid32(
	.param .u32 grid32_param_0,
	.param .f32 grid32_param_1,
	.param .u64 grid32_param_2,
	.param .u64 grid32_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<11>;
	.reg .b64 	%rd<8>;
	ld.param.u32 	%r6, [grid32_param_0];
	ld.param.f32 	%f1, [grid32_param_1];
	ld.param.u64 	%rd3, [grid32_param_2];
	ld.param.u64 	%rd4, [grid32_param_3];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r7, %ctaid.x;
	mov.u32 	%r8, %tid.x;
	mad.lo.s32 	%r10, %r7, %r1, %r8;
	setp.ge.s32 	%p1, %r10, %r6;
	@%p1 bra 	$L__BB0_3;
	mov.u32 	%r9, %nctaid.x;
	mul.lo.s32 	%r3, %r1, %r9;
	cvta.to.global.u64 	%rd1, %rd3;
	cvta.to.global.u64 	%rd2, %rd4;
$L__BB0_2:
	mul.wide.s32 	%rd5, %r10, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.f32 	%f2, [%rd6];
	add.s64 	%rd7, %rd2, %rd5;
	ld.global.f32 	%f3, [%rd7];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd7], %f4;
	add.s32 	%r10, %r10, %r3;
	setp.lt.s32 	%p2, %r10, %r6;
	@%p2 bra 	$L__BB0_2;
$L__BB0_3:
	ret;
}
.visible .entry grid64(
	.param .u64 grid64_param_0,
	.param .f32 grid64_param_1,
	.param .u64 grid64_param_2,
	.param .u64 grid64_param_3
)
{
	.reg .pred 	%p<7>;
	.reg .f32 	%f<17>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<68>;
	ld.param.u64 	%rd35, [grid64_param_0];
	ld.param.f32 	%f1, [grid64_param_1];
	ld.param.u64 	%rd36, [grid64_param_2];
	ld.param.u64 	%rd37, [grid64_param_3];
	cvta.to.global.u64 	%rd1, %rd37;
	cvta.to.global.u64 	%rd2, %rd36;
	mov.u32 	%r1, %ctaid.x;
	cvt.u64.u32 	%rd3, %r1;
	mov.u32 	%r2, %ntid.x;
	cvt.u64.u32 	%rd4, %r2;
	mul.wide.u32 	%rd38, %r1, %r2;
	mov.u32 	%r3, %tid.x;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd64, %rd38, %rd5;
	setp.ge.s64 	%p1, %rd64, %rd35;
	@%p1 bra 	$L__BB1_10;
	mov.u32 	%r4, %nctaid.x;
	cvt.u64.u32 	%rd7, %r4;
	mul.lo.s64 	%rd8, %rd4, %rd7;
	add.s64 	%rd39, %rd8, %rd35;
	add.s64 	%rd40, %rd7, %rd3;
	mul.lo.s64 	%rd41, %rd40, %rd4;
	add.s64 	%rd42, %rd41, %rd5;
	not.b64 	%rd43, %rd42;
	add.s64 	%rd9, %rd39, %rd43;
	or.b64  	%rd44, %rd9, %rd8;
	and.b64  	%rd45, %rd44, -4294967296;
	setp.eq.s64 	%p2, %rd45, 0;
	@%p2 bra 	$L__BB1_3;
	div.u64 	%rd59, %rd9, %rd8;
	bra.uni 	$L__BB1_4;
$L__BB1_3:
	cvt.u32.u64 	%r5, %rd8;
	cvt.u32.u64 	%r6, %rd9;
	div.u32 	%r7, %r6, %r5;
	cvt.u64.u32 	%rd59, %r7;
$L__BB1_4:
	add.s64 	%rd46, %rd59, 1;
	and.b64  	%rd63, %rd46, 3;
	setp.eq.s64 	%p3, %rd63, 0;
	@%p3 bra 	$L__BB1_7;
	shl.b64 	%rd47, %rd64, 2;
	add.s64 	%rd61, %rd1, %rd47;
	shl.b64 	%rd15, %rd8, 2;
	add.s64 	%rd60, %rd2, %rd47;
$L__BB1_6:
	.pragma "nounroll";
	ld.global.f32 	%f2, [%rd60];
	ld.global.f32 	%f3, [%rd61];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd61], %f4;
	add.s64 	%rd64, %rd64, %rd8;
	add.s64 	%rd61, %rd61, %rd15;
	add.s64 	%rd60, %rd60, %rd15;
	add.s64 	%rd63, %rd63, -1;
	setp.ne.s64 	%p4, %rd63, 0;
	@%p4 bra 	$L__BB1_6;
$L__BB1_7:
	setp.lt.u64 	%p5, %rd59, 3;
	@%p5 bra 	$L__BB1_10;
	shl.b64 	%rd48, %rd64, 2;
	add.s64 	%rd66, %rd2, %rd48;
	shl.b64 	%rd27, %rd8, 2;
	add.s64 	%rd67, %rd1, %rd48;
$L__BB1_9:
	ld.global.f32 	%f5, [%rd66];
	ld.global.f32 	%f6, [%rd67];
	fma.rn.f32 	%f7, %f5, %f1, %f6;
	st.global.f32 	[%rd67], %f7;
	add.s64 	%rd50, %rd66, %rd27;
	ld.global.f32 	%f8, [%rd50];
	add.s64 	%rd51, %rd67, %rd27;
	ld.global.f32 	%f9, [%rd51];
	fma.rn.f32 	%f10, %f8, %f1, %f9;
	st.global.f32 	[%rd51], %f10;
	add.s64 	%rd52, %rd64, %rd8;
	add.s64 	%rd53, %rd52, %rd8;
	add.s64 	%rd54, %rd50, %rd27;
	ld.global.f32 	%f11, [%rd54];
	add.s64 	%rd55, %rd51, %rd27;
	ld.global.f32 	%f12, [%rd55];
	fma.rn.f32 	%f13, %f11, %f1, %f12;
	st.global.f32 	[%rd55], %f13;
	add.s64 	%rd56, %rd53, %rd8;
	add.s64 	%rd57, %rd54, %rd27;
	add.s64 	%rd66, %rd57, %rd27;
	ld.global.f32 	%f14, [%rd57];
	add.s64 	%rd58, %rd55, %rd27;
	add.s64 	%rd67, %rd58, %rd27;
	ld.global.f32 	%f15, [%rd58];
	fma.rn.f32 	%f16, %f14, %f1, %f15;
	st.global.f32 	[%rd58], %f16;
	add.s64 	%rd64, %rd56, %rd8;
	setp.lt.s64 	%p6, %rd64, %rd35;
	@%p6 bra 	$L__BB1_9;
$L__BB1_10:
	ret;
}
"""


@pytest.fixture(scope="module")
def module():
    return compile(PTX)


def cache_entries(kernel: str) -> set[int]:
    """The launch-record entries the kernel's access sites keep their ranges in."""
    text = CPU.lower_part(link([parse(PTX)]), kernel).text
    body = re.search(rf'define [^\n]*"{kernel}\.warp"\(.*?\n}}', text, re.S).group(0)
    offsets = {int(m) for m in re.findall(r"getelementptr i8, ptr %\"?\.1\"?, i64 (\d+)", body)}
    return {o for o in offsets if 8 * Ctx.BOUNDS_CACHE <= o < 8 * Ctx.GRID_WORKSPACE}


def test_each_global_access_of_the_unrolled_loop_keeps_its_own_range():
    # 15 ld/st instructions: the remainder loop's 3 and the unrolled loop's 12
    assert len(cache_entries("grid64")) >= 15


def saxpy(x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """y[:n] = 2 * x[:n] + y[:n] (exact in float32, so the fma rounds as the add does)."""
    want = y.copy()
    want[:n] = np.float32(2) * x[:n] + y[:n]
    return want


@pytest.mark.parametrize("kernel", ["grid32", "grid64"])
@pytest.mark.parametrize("n, grid, block", [
    (1, 1, 32),
    (1000, 3, 80),  # partial warps (80 threads), 4 trips and a partial one
    (262144 * 3 + 4093, 1024, 256),  # the suite's shape, a tail no multiple of 32
    (5 * 96 * 7 + 13, 7, 96),  # trip counts of 5 and 6: both the remainder and the unrolled loop
    (777, 64, 256),  # more threads than elements: most threads skip the loop
])
def test_results_match_numpy(module, kernel, n, grid, block):
    rng = np.random.default_rng(n + grid + block)
    x = rng.standard_normal(n + 40).astype(np.float32)
    y = rng.standard_normal(n + 40).astype(np.float32)
    want = saxpy(x, y, n)
    size = np.int64(n) if kernel == "grid64" else np.int32(n)
    module.launch(kernel, grid, block, [size, np.float32(2), x, y])
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("kernel", ["grid32", "grid64"])
def test_a_fault_in_the_middle_of_the_loop(module, kernel):
    grid, block = 1, 128  # one block: no other worker's fault to race with
    stride, n = grid * block, grid * block * 9
    m = 3 * stride + 100  # x ends inside the fourth trip, at a lane of warp 3: warp 0, which runs
    # its loop first, stays below m there and faults at its fifth, lane 0 first
    base = np.arange(n, dtype=np.float32)
    x = base[:m]  # a view: x[m] lies in memory the launch does not know
    y0 = np.full(n, 7.0, np.float32)
    y = y0.copy()
    size = np.int64(n) if kernel == "grid64" else np.int32(n)
    with pytest.raises(LaunchError) as e:
        module.launch(kernel, grid, block, [size, np.float32(2), x, y])
    assert e.value.cu_result == 700, str(e.value)
    address = x.ctypes.data + 4 * 4 * stride
    assert "block (0,0,0), warp 0, lane 0 " in str(e.value) and f"0x{address:x}" in str(e.value), str(e.value)
    # y[i] is stored only after x[i] is read: never at or past m in any schedule; below m
    # each element holds its old value or the new one
    np.testing.assert_array_equal(y[m:], y0[m:])
    new = saxpy(base, y0, m)
    assert np.all((y[:m] == y0[:m]) | (y[:m] == new[:m]))
