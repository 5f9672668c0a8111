"""The native launch path (libcuda_shim/native_launch.c, zluda_py/driver/native.py): launches of a
kernel launched before are queued in C. Each case runs a program through the real shim twice, with
the path (the default) and without it (ZLUDA_NATIVE_LAUNCH=0), and the two must print the same:
results, CUresults, device printf, the fault message; the count of native launches
(zluda_native_launch_count) shows which path was taken. Each run is a process of its own: some
cases leave their context with a sticky error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.driver.conftest import CHILD_SETUP, shim_path

PTX = r"""
.version 7.0
.target sm_80
.address_size 64
.extern .func (.param .s32 status) vprintf (.param .b64 format, .param .b64 args);
.global .align 1 .b8 fmt[6] = {118, 61, 37, 100, 10, 0};

.visible .entry add(.param .u64 out, .param .u32 v)
{
  .reg .b32 %r<6>; .reg .b64 %rd<4>; .reg .pred %p;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [v];
  setp.eq.u32 %p, %r1, 0;
  @%p trap;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, %ntid.x;
  mov.u32 %r2, %tid.x;
  mad.lo.u32 %r2, %r4, %r5, %r2;
  mul.wide.u32 %rd2, %r2, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  add.u32 %r3, %r3, %r1;
  st.global.u32 [%rd3], %r3;
  ret;
}

.visible .entry wide() .maxntid 1073741824, 1073741824, 1073741824
{
  ret;
}

.shared .align 1024 .b8 s_big[8];
// out[tid] = the low bits of .shared .align 1024 and .local .align 256 addresses: 0 when aligned
.visible .entry aligned(.param .u64 out)
{
  .local .align 4 .b8 l_small[4];
  .local .align 256 .b8 l_big[8];
  .reg .b32 %r<3>; .reg .b64 %rd<5>;
  st.local.u32 [l_small], 1;
  st.local.u8 [l_big], 1;
  st.shared.u8 [s_big], 1;
  mov.u64 %rd1, s_big;
  cvta.shared.u64 %rd1, %rd1;
  and.b64 %rd1, %rd1, 1023;
  mov.u64 %rd2, l_big;
  cvta.local.u64 %rd2, %rd2;
  and.b64 %rd2, %rd2, 255;
  or.b64 %rd1, %rd1, %rd2;
  cvt.u32.u64 %r1, %rd1;
  ld.param.u64 %rd3, [out];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd4, %r2, 4;
  add.u64 %rd3, %rd3, %rd4;
  st.global.u32 [%rd3], %r1;
  ret;
}

.visible .entry say(.param .u32 v)
{
  .reg .u32 %r<2>; .reg .u64 %rd<4>;
  .local .align 8 .b8 buf[8];
  ld.param.u32 %r1, [v];
  mov.u64 %rd1, buf;
  cvta.local.u64 %rd2, %rd1;
  st.local.u32 [%rd1], %r1;
  mov.u64 %rd3, fmt;
  cvta.global.u64 %rd3, %rd3;
  {
  .param .b64 p0; .param .b64 p1; .param .b32 rv;
  st.param.b64 [p0], %rd3;
  st.param.b64 [p1], %rd2;
  call.uni (rv), vprintf, (p0, p1);
  }
  ret;
}
"""

CHILD = r"""
import ctypes, sys
from ctypes import byref, c_uint, c_ulonglong, c_void_p
cu = ctypes.CDLL(sys.argv[1])
cu.zluda_native_launch_count.restype = ctypes.c_uint64
case = sys.argv[2]
""" + CHILD_SETUP + r"""add, say = c_void_p(), c_void_p()
ok(cu.cuModuleGetFunction(byref(add), mod, b"add"))
ok(cu.cuModuleGetFunction(byref(say), mod, b"say"))
out = c_ulonglong()  # pinned host memory: a host function reads it
ok(cu.cuMemAllocHost_v2(byref(out), 128))
ok(cu.cuMemsetD8_v2(out, 0, 128))
value = c_uint(1)
params = (c_void_p * 2)(ctypes.cast(byref(out), c_void_p), ctypes.cast(byref(value), c_void_p))
def launch(fn=add, grid=(1, 1, 1), block=(32, 1, 1), shared=0, stream=None, kernel_params=params, extra=None):
    return cu.cuLaunchKernel(fn, *grid, *block, shared, stream, kernel_params, extra)
def values():
    host = (c_uint * 32)()
    ok(cu.cuMemcpyDtoH_v2(host, out, 128))
    return sorted(set(host))
ok(launch())  # the first launch of add goes through Python: later ones may go native
ok(cu.cuCtxSynchronize())
stream = c_void_p()
ok(cu.cuStreamCreate(byref(stream), 0))

if case == "ordering":
    for v in (2, 3):
        value.value = v
        ok(launch())
    print("legacy then copy", values())
    value.value = 10
    for _ in range(3):
        ok(launch(stream=stream))
    event = c_void_p()
    ok(cu.cuEventCreate(byref(event), 0))
    ok(cu.cuEventRecord(event, stream))
    ok(cu.cuEventSynchronize(event))
    print("stream, event", values(), cu.cuStreamQuery(stream))
    seen = []
    HOSTFN = ctypes.CFUNCTYPE(None, c_void_p)
    host_fn = HOSTFN(lambda _: seen.append(sorted(set((c_uint * 32).from_address(out.value)))))
    ok(launch(stream=stream))
    ok(cu.cuLaunchHostFunc(stream, host_fn, None))
    ok(cu.cuStreamSynchronize(stream))
    print("host function saw", seen)
    # a Python op pending on the stream (a wait on a word the host writes): the launch behind it waits
    word = c_ulonglong()
    ok(cu.cuMemAllocHost_v2(byref(word), 4))
    ctypes.c_uint.from_address(word.value).value = 0
    ok(cu.cuStreamWaitValue32_v2(stream, c_ulonglong(word.value), 1, 0))
    value.value = 100
    ok(launch(stream=stream))
    print("behind a wait", cu.cuStreamQuery(stream))
    ctypes.c_uint.from_address(word.value).value = 1
    ok(cu.cuStreamSynchronize(stream))
    print("after the wait", values())
    # a blocking stream's launch, then the legacy stream waits for it
    value.value = 1000
    ok(launch(stream=stream))
    ok(cu.cuMemsetD8Async(c_ulonglong(out.value + 124), 7, 4, None))
    ok(cu.cuCtxSynchronize())
    print("legacy after stream", values())
elif case == "errors":
    ok(launch())
    ok(cu.cuCtxSynchronize())
    before = cu.zluda_native_launch_count()
    bad_param = (c_void_p * 2)(ctypes.cast(byref(out), c_void_p), c_void_p(4096))  # page 1 is never mapped
    dead = c_void_p()
    ok(cu.cuStreamCreate(byref(dead), 0))
    ok(cu.cuStreamDestroy_v2(dead))
    extra = (c_void_p * 1)(None)
    print("grid 0", launch(grid=(0, 1, 1)))
    print("grid y 70000", launch(grid=(1, 70000, 1)))
    print("block 2048", launch(block=(2048, 1, 1)))
    print("block z 128", launch(block=(8, 8, 128)))
    print("shared 1 MiB", launch(shared=1 << 20))
    print("no kernelParams", launch(kernel_params=None))
    print("NULL parameter", launch(kernel_params=(c_void_p * 2)(None, None)))
    print("unreadable parameter", launch(kernel_params=bad_param))
    print("unreadable kernelParams", launch(kernel_params=c_void_p(4096)))
    print("extra too", launch(extra=extra))
    print("destroyed stream", launch(stream=dead))
    print("native launches among them", cu.zluda_native_launch_count() - before)
    other = c_void_p()
    ok(cu.cuCtxCreate_v2(byref(other), 0, 0))  # now current
    print("another context", launch(), cu.cuCtxSynchronize())
    ok(cu.cuCtxDestroy_v2(other))  # ctx is current again (the stack's top)
    ok(cu.cuModuleUnload(mod))
    print("unloaded module", launch())
elif case == "capture":
    ok(launch(stream=stream))
    ok(cu.cuStreamSynchronize(stream))
    ok(cu.cuStreamBeginCapture_v2(stream, 0))
    value.value = 5
    ok(launch(stream=stream))
    graph = c_void_p()
    ok(cu.cuStreamEndCapture(stream, byref(graph)))
    nodes = ctypes.c_size_t()
    ok(cu.cuGraphGetNodes(graph, None, byref(nodes)))
    print("captured", nodes.value, "nodes; memory", values())
    exe = c_void_p()
    ok(cu.cuGraphInstantiateWithFlags(byref(exe), graph, 0))
    ok(cu.cuGraphLaunch(exe, stream))
    ok(launch(stream=stream))
    ok(cu.cuStreamSynchronize(stream))
    print("graph and launch", values())
elif case == "sticky":
    ok(launch())
    value.value = 0  # traps
    ok(launch())
    print("synchronize", cu.cuCtxSynchronize())
    print("launch after", launch(), "synchronize", cu.cuCtxSynchronize())
elif case == "context-wait":  # cuCtxWaitEvent: every later launch of the context waits for the event
    ok(launch())
    word = c_ulonglong()
    ok(cu.cuMemAllocHost_v2(byref(word), 4))
    ctypes.c_uint.from_address(word.value).value = 0
    ok(cu.cuStreamWaitValue32_v2(stream, c_ulonglong(word.value), 1, 0))
    event = c_void_p()
    ok(cu.cuEventCreate(byref(event), 0))
    ok(cu.cuEventRecord(event, stream))
    ok(cu.cuCtxWaitEvent(ctx, event))
    other = c_void_p()
    ok(cu.cuStreamCreate(byref(other), 1))  # non-blocking: only the context's wait orders it
    before = cu.zluda_native_launch_count()
    value.value = 5
    ok(launch(stream=other))
    print("before the event", cu.cuStreamQuery(other), cu.zluda_native_launch_count() - before)
    ctypes.c_uint.from_address(word.value).value = 1
    ok(cu.cuCtxSynchronize())
elif case == "per-thread":  # the per-thread default stream and streams of another context: Python's
    before = cu.zluda_native_launch_count()
    ok(cu.cuLaunchKernel_ptsz(add, 1, 1, 1, 32, 1, 1, 0, None, params, None))
    ok(launch(stream=c_void_p(2)))
    other = c_void_p()
    ok(cu.cuCtxCreate_v2(byref(other), 0, 0))
    ok(cu.cuCtxSetCurrent(ctx))
    ok(cu.cuCtxSetCurrent(other))
    print("stream of another context", launch(stream=stream))
    ok(cu.cuCtxSetCurrent(ctx))
    ok(cu.cuCtxSynchronize())
    print("native", cu.zluda_native_launch_count() - before)
    ok(launch())  # the legacy stream still goes native
elif case == "launch-ex":  # cuLaunchKernelEx without attributes goes native as cuLaunchKernel does
    class Attribute(ctypes.Structure):
        _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]
    class Config(ctypes.Structure):
        _fields_ = [("dims", c_uint * 7), ("stream", c_void_p), ("attrs", ctypes.POINTER(Attribute)), ("count", c_uint)]
    config = Config((c_uint * 7)(1, 1, 1, 32, 1, 1, 0), stream, None, 0)
    ex = lambda cfg: cu.cuLaunchKernelEx(byref(cfg), add, params, None)
    for _ in range(3):  # the only launches that may go native in this case
        ok(ex(config))
    print("block 2048", ex(Config((c_uint * 7)(1, 1, 1, 2048, 1, 1, 0), stream, None, 0)))
    print("unreadable config", cu.cuLaunchKernelEx(c_void_p(4096), add, params, None))
    attribute = Attribute(7)  # CU_LAUNCH_ATTRIBUTE_PRIORITY: Python's
    print("with an attribute", ex(Config((c_uint * 7)(1, 1, 1, 32, 1, 1, 0), stream, ctypes.pointer(attribute), 1)))
    ok(cu.cuStreamSynchronize(stream))
elif case == "maxntid":  # a .maxntid beyond what a descriptor holds (or a block ever has)
    wide = c_void_p()
    ok(cu.cuModuleGetFunction(byref(wide), mod, b"wide"))
    rcs = [launch(fn=wide, block=(1024, 1, 1), kernel_params=None)]
    ok(cu.cuCtxSynchronize())  # the first goes through Python; the next go native once nothing is pending
    rcs += [launch(fn=wide, block=(1024, 1, 1), kernel_params=None) for _ in range(2)]
    print("launches", rcs)
    ok(cu.cuCtxSynchronize())
elif case == "align":  # the launch aligns the shared arena and the stack windows (BASE_ALIGN)
    aligned = c_void_p()
    ok(cu.cuModuleGetFunction(byref(aligned), mod, b"aligned"))
    for _ in range(3):
        ok(cu.cuMemsetD8_v2(out, 0xff, 128))
        ok(launch(fn=aligned))
        print("low bits", values())
elif case == "grid":  # several blocks: chunks for the worker pool
    for v in (2, 3):
        value.value = v
        ok(launch(grid=(4, 1, 1), block=(8, 1, 1)))
    ok(launch(grid=(32, 1, 1), block=(1, 1, 1)))
    ok(cu.cuCtxSynchronize())
elif case == "illegal":
    ok(launch())
    nowhere = c_ulonglong(8)
    ok(launch(kernel_params=(c_void_p * 2)(ctypes.cast(byref(nowhere), c_void_p), ctypes.cast(byref(value), c_void_p))))
    print("synchronize", cu.cuCtxSynchronize())
elif case == "printf":
    v = c_uint(1)
    say_params = (c_void_p * 1)(ctypes.cast(byref(v), c_void_p))
    for i in range(1, 5):
        v.value = i
        ok(launch(fn=say, block=(2, 1, 1), kernel_params=say_params))
        if i == 1:  # through Python; the next ones go native once nothing is pending
            ok(cu.cuCtxSynchronize())
    ok(cu.cuCtxSynchronize())
elif case == "registered":
    buf = (c_uint * 1024)()
    ok(cu.cuMemHostRegister_v2(buf, 4096, 0))
    before = cu.zluda_native_launch_count()
    ok(launch())
    ok(cu.cuCtxSynchronize())
    print("native with registered memory", cu.zluda_native_launch_count() - before)
    ok(cu.cuMemHostUnregister(buf))
    ok(launch())
    ok(cu.cuCtxSynchronize())
if case not in ("sticky", "illegal"):  # a sticky error fails the copy too
    print("final", values())
sys.stdout.flush()
print("native", cu.zluda_native_launch_count())
"""


def run(case: str, native: bool) -> tuple[list[str], int, str]:
    """(printed lines but the last, native launches, stderr) of the case's program."""
    env = {**os.environ, "ZLUDA_NATIVE_LAUNCH": "1" if native else "0"}
    p = subprocess.run([sys.executable, "-c", CHILD, str(shim_path()), case], input=PTX.encode(), env=env,
                       capture_output=True, timeout=300)
    lines = p.stdout.decode().splitlines()
    assert p.returncode == 0, (p.stdout.decode(), p.stderr.decode())
    assert lines[-1].startswith("native ")
    return lines[:-1], int(lines[-1].split()[1]), p.stderr.decode()


CASES = ["ordering", "errors", "capture", "sticky", "illegal", "printf", "grid", "context-wait", "per-thread",
         "launch-ex", "maxntid", "align"]


@pytest.mark.parametrize("case", CASES)
def test_native_launches_behave_as_the_python_path(case):
    lines, taken, err = run(case, native=True)
    python_lines, python_taken, python_err = run(case, native=False)
    assert python_taken == 0
    assert taken > 0, "no launch took the native path"
    assert lines == python_lines
    assert err == python_err


def test_what_each_case_shows():
    """The cases' results themselves, beyond being equal with and without the native path."""
    lines = {case: run(case, native=True)[0] for case in CASES}
    assert lines["ordering"] == ["legacy then copy [6]", "stream, event [36] 0", "host function saw [[46]]",
                                 "behind a wait 600", "after the wait [146]", "legacy after stream [1146, 117901063]",
                                 "final [1146, 117901063]"]
    assert lines["errors"] == [*(f"{what} 1" for what in (
        "grid 0", "grid y 70000", "block 2048", "block z 128", "shared 1 MiB", "no kernelParams", "NULL parameter",
        "unreadable parameter", "unreadable kernelParams", "extra too")), "destroyed stream 400",
        "native launches among them 0", "another context 0 0", "unloaded module 400", "final [3]"]
    assert lines["capture"] == ["captured 1 nodes; memory [2]", "graph and launch [12]", "final [12]"]
    assert lines["sticky"] == ["synchronize 719", "launch after 719 synchronize 719"]
    assert lines["illegal"] == ["synchronize 700"]
    assert lines["grid"] == ["final [9]"]
    assert lines["context-wait"] == ["before the event 600 0", "final [7]"]
    assert lines["per-thread"] == ["stream of another context 0", "native 0", "final [5]"]
    assert lines["maxntid"] == ["launches [0, 0, 0]", "final [1]"]
    assert lines["align"] == ["low bits [0]"] * 3 + ["final [0]"]
    assert lines["launch-ex"] == ["block 2048 1", "unreadable config 1", "with an attribute 0", "final [5]"]
    assert lines["printf"] == ["v=1", "v=1", "v=2", "v=2", "v=3", "v=3", "v=4", "v=4", "final [1]"]


def test_registered_host_memory_sends_launches_through_python():
    """Launches check that registered host memory is still mapped (backends/cpu.py), in Python."""
    lines, _, _ = run("registered", native=True)
    assert lines[0] == "native with registered memory 0"


def test_a_fault_message_is_written_whole_before_its_error_is_visible(monkeypatch):
    """A program that sees a launch's error may exit at once, killing the worker thread that
    reported it: the message must already be out, in one write with its newline."""
    import types

    from zluda_py.compiler import LaunchError
    from zluda_py.driver.stream import Stream

    stream = types.SimpleNamespace(ctx=types.SimpleNamespace(sticky_error=0), error=0)
    writes = []

    class Err:
        def write(self, text):
            writes.append((text, stream.ctx.sticky_error, stream.error))

        def flush(self):
            writes.append(("<flush>", stream.ctx.sticky_error, stream.error))

    monkeypatch.setattr("sys.stderr", Err())
    Stream.fail(stream, LaunchError(700, "add: an illegal memory access was encountered at lane 0"))
    Stream.fail(stream, LaunchError(1, "add: other"))  # not sticky: the stream's error
    assert writes == [("zluda: add: an illegal memory access was encountered at lane 0\n", 0, 0), ("<flush>", 0, 0),
                      ("zluda: add: other\n", 700, 0), ("<flush>", 700, 0)]
    assert (stream.ctx.sticky_error, stream.error) == (700, 1)
