"""The device runtime functions the driver provides (what libcudadevrt.a gives NVIDIA's linker).

NVIDIA's libcudadevrt.a holds SASS, and PTX whose functions end in the driver's private
`__cuda_syscall_*` calls, so neither can be linked here. A program calling these functions
(numba-cuda's `cg.this_grid().sync()`, or -rdc code calling them directly) gets them from this
PTX instead, linked in when a module declares one `.extern` and nothing defines it.

Grid synchronisation uses what a cooperative launch already provides for nvcc's inline
`grid.sync()`: the grid workspace at %envreg1:%envreg2 (driver/launch.py; 0 outside
cooperative launches), and the same arrival counter in its second word, so both kinds of
barrier can be mixed in one launch. The master block adds 0x80000000 - (blocks - 1), every
other block 1: the counter's top bit flips when the last block arrives.

cudaGraphSetConditional(handle, value) stores the value where the handle points: a conditional
handle is the address of its 32-bit condition in device memory (driver/graphs.py).
"""

from __future__ import annotations

from zluda_py.ptx import ast

# cudaCGGetIntrinsicHandle(scope): the grid workspace's address for cudaCGScopeGrid (1), else 0.
# cudaCGSynchronize(handle, flags): a grid barrier; 999 (cudaErrorUnknown, as libcudadevrt
# answers) for the 0 handle of a launch that is not cooperative. No flags are defined.
PTX = """.version 7.0
.target sm_70
.address_size 64

.visible .func (.param .b64 handle) cudaCGGetIntrinsicHandle(.param .b32 scope)
{
  .reg .b32 %r<4>; .reg .b64 %rd<5>; .reg .pred %p1;
  ld.param.b32 %r1, [scope];
  mov.u32 %r2, %envreg1;
  mov.u32 %r3, %envreg2;
  cvt.u64.u32 %rd1, %r2;
  cvt.u64.u32 %rd2, %r3;
  shl.b64 %rd1, %rd1, 32;
  or.b64 %rd3, %rd1, %rd2;
  setp.eq.u32 %p1, %r1, 1;
  selp.b64 %rd4, %rd3, 0, %p1;
  st.param.b64 [handle], %rd4;
  ret;
}

.visible .func (.param .b32 status) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)
{
  .reg .b32 %r<16>; .reg .b64 %rd<3>; .reg .pred %p<4>;
  ld.param.b64 %rd1, [handle];
  setp.eq.u64 %p1, %rd1, 0;
  @%p1 bra not_cooperative;
  bar.sync 0;
  mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;
  or.b32 %r4, %r1, %r2;
  or.b32 %r4, %r4, %r3;
  setp.ne.u32 %p2, %r4, 0;
  @%p2 bra block_done;
  mov.u32 %r5, %ctaid.x; mov.u32 %r6, %ctaid.y; mov.u32 %r7, %ctaid.z;
  or.b32 %r8, %r5, %r6;
  or.b32 %r8, %r8, %r7;
  setp.eq.u32 %p3, %r8, 0;
  mov.u32 %r9, %nctaid.x; mov.u32 %r10, %nctaid.y; mov.u32 %r11, %nctaid.z;
  mul.lo.u32 %r12, %r9, %r10;
  mul.lo.u32 %r12, %r12, %r11;
  sub.u32 %r12, 0x80000001, %r12;
  selp.b32 %r12, %r12, 1, %p3;
  add.s64 %rd2, %rd1, 4;
  atom.add.release.gpu.u32 %r13, [%rd2], %r12;
wait:
  ld.acquire.gpu.u32 %r14, [%rd2];
  xor.b32 %r15, %r14, %r13;
  setp.ge.s32 %p2, %r15, 0;
  @%p2 bra wait;
block_done:
  bar.sync 0;
  st.param.b32 [status], 0;
  ret;
not_cooperative:
  st.param.b32 [status], 999;
  ret;
}

.visible .func cudaGraphSetConditional(.param .b64 handle, .param .b32 value)
{
  .reg .b32 %r1; .reg .b64 %rd1;
  ld.param.b64 %rd1, [handle];
  ld.param.b32 %r1, [value];
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
FUNCTIONS = frozenset({"cudaCGGetIntrinsicHandle", "cudaCGSynchronize", "cudaGraphSetConditional"})
# CUDA Dynamic Parallelism's calls (CUDA 12's CDP2), which the host serves: on the CPU target
# they are system calls (cpu/device_launch.py, in this order), elsewhere refused by name
LAUNCH_FUNCTIONS = ("__cudaCDP2GetParameterBufferV2", "__cudaCDP2LaunchDeviceV2", "__cudaCDP2StreamCreateWithFlags",
                    "__cudaCDP2StreamDestroy", "__cudaCDP2GetLastError", "__cudaCDP2PeekAtLastError",
                    "__cudaCDP2GetErrorString", "__cudaCDP2MemcpyAsync", "__cudaCDP2Malloc", "__cudaCDP2Free")


def needed_by(modules: list[ast.Module]) -> list[ast.Module]:
    """[a module of the device runtime functions the modules declare `.extern` and none defines]
    (none calls another), else []."""
    declared, defined = set(), set()
    for m in modules:
        for f in m.functions():
            if f.name in FUNCTIONS:
                (declared if f.body is None else defined).add(f.name)
    wanted = declared - defined
    if not wanted:
        return []
    from zluda_py.ptx import parse  # the front end, only when linking needs it (as pipeline._parse)

    whole = parse(PTX, "<zluda device runtime>")
    items = [i for i in whole.items if not isinstance(i, ast.Function) or i.name in wanted]
    return [ast.Module(whole.version, whole.target, whole.address_size, items, whole.filename)]
