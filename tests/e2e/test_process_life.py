"""Process life of a CUDA program on our driver (issue 16): Ctrl-C stops it mid-kernel, the
program's own signal handlers and dispositions stay its own, a forked child gets
CUDA_ERROR_NOT_INITIALIZED instead of hanging, and code-generation children die with their
host however it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import as_from_a_terminal
from tests.driver.conftest import shim_path


@pytest.fixture(scope="module")
def program(nvcc) -> Path:
    return nvcc(["e2e_process_life.c"], ["-cudart", "none", "-ldl"], "")


def _zluda_run(program: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`env`: another environment (ZLUDA_BACKEND picks the backend; tests/emulator runs these)."""
    cmd = [sys.executable, "-c", "import sys; from zluda_py.cli import main; sys.exit(main())", "run", "--",
           str(program), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal, env=env)


def _interrupt_while_spinning(program: Path, mode: str,
                              env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """Start the spinning kernel, SIGINT the program once it runs; (return code, stdout,
    stderr, seconds from the signal to the end)."""
    p = _zluda_run(program, mode, env=env)  # zluda run execs the program: p.pid is the program
    try:
        line = p.stdout.readline()
        assert line == "spinning\n", line + p.stderr.read()
        time.sleep(0.5)  # inside the kernel
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("the program still runs 10 s after SIGINT")
        return p.returncode, out, err, time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_ctrl_c_stops_a_program_mid_kernel(program):
    rc, out, err, took = _interrupt_while_spinning(program, "spin")
    assert rc == -signal.SIGINT, (rc, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert took < 2, took


def test_the_programs_own_sigint_handler_runs(program):
    rc, out, err, took = _interrupt_while_spinning(program, "spin-handler")
    assert (rc, out) == (42, "handler\n"), (rc, out, err)
    assert "Traceback" not in err, err


def test_signal_dispositions_stay_the_programs(program):
    p = _zluda_run(program, "dispositions")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out + err
    assert out.splitlines() == ["SIGINT default", "SIGTERM default", "SIGPIPE default"], out + err


def test_forked_child_gets_not_initialized_and_parent_goes_on(program):
    p = _zluda_run(program, "fork")
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out + err
    assert out.splitlines() == [f"child {call} 3" for call in ("cuInit", "cuDeviceGet", "cuCtxGetCurrent", "cuMemAlloc",
                                                                "cuMemcpyDtoH", "cuCtxSynchronize")] + ["parent: ok"], out + err


# ---- code-generation children die with their host ----
def _big_module(salt: int) -> str:
    """Two kernels of long fma chains: code generation takes seconds, in two children when
    ZLUDA_SPLIT_IR_LINES=0. `salt` makes the module new to every cache."""
    lines = [".version 7.0", ".target sm_52", ".address_size 64"]
    for k in range(2):
        lines += [f".visible .entry k{k}(.param .u64 p)", "{", "  .reg .f32 %f<4>; .reg .b64 %rd<2>;",
                  "  ld.param.u64 %rd1, [p];", "  ld.global.f32 %f1, [%rd1];", f"  mov.f32 %f2, {salt + k}.0;"]
        for i in range(3000):
            lines.append(f"  fma.rn.f32 %f1, %f1, %f2, 0f3F8{i % 10}0000;")
            if i % 7 == 0:
                lines.append(f"  st.global.f32 [%rd1+{4 * (i % 64)}], %f1;")
        lines += ["  ret;", "}"]
    return "\n".join(lines) + "\n"


def _codegen_children(pid: int) -> list[int]:
    found = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split():
                if b"zluda_py.compiler.codegen" in Path(f"/proc/{c}/cmdline").read_bytes():
                    found.append(int(c))
    except OSError:  # a thread or child that just ended
        pass
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_codegen_children_die_with_a_killed_host(tmp_path):
    ptx = tmp_path / "big.ptx"
    ptx.write_text(_big_module(time.time_ns() % 1000))
    host = ("import ctypes, sys\n"
            f"cu = ctypes.CDLL({str(shim_path())!r})\n"
            "ctx, mod = ctypes.c_void_p(), ctypes.c_void_p()\n"
            "assert cu.cuInit(0) == 0 and cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0\n"
            f"cu.cuModuleLoadData(ctypes.byref(mod), open({str(ptx)!r}, 'rb').read() + b'\\0')\n")
    env = dict(os.environ, ZLUDA_SPLIT_IR_LINES="0", CUDA_MODULE_LOADING="EAGER", CUDA_CACHE_DISABLE="1")
    p = subprocess.Popen([sys.executable, "-c", host], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(children := _codegen_children(p.pid)) < 2 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(children) == 2, f"no code-generation children started: {p.stderr.read().decode() if p.poll() is not None else ''}"
        time.sleep(3)  # the children have read their jobs and generate code (for about 30 s)
        p.kill()
        p.wait()
        gone_by = time.monotonic() + 5
        while any(map(_alive, children)) and time.monotonic() < gone_by:
            time.sleep(0.05)
        survivors = [c for c in children if _alive(c)]
        for c in survivors:
            os.kill(c, signal.SIGKILL)
        assert not survivors, f"code-generation children {survivors} outlived their host"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
