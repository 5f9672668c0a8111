"""zluda-compile: finding modules, compiling them into the cache, reporting; and a warmed binary
then running without a single compile (checked in the driver's trace log)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, add_kernel_ptx

BAD_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry broken()
{
  frobnicate.u32 %r1;
  ret;
}
"""


def env_for(cache: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDA_CACHE_PATH=str(cache))
    for var in ("CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "ZLUDA_TRACE", "ZLUDA_COMPUTE_CAPABILITY"):
        env.pop(var, None)
    return env


def zluda_compile(args: list[str], cache: Path, **kw) -> subprocess.CompletedProcess:
    code = "import sys; from zluda_py.cli.compile_cmd import main; sys.exit(main())"
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                          env=env_for(cache), timeout=600, **kw)


@pytest.fixture(scope="module")
def vector_add(nvcc) -> Path:
    return nvcc(["vector_add.cu"], ["-arch=sm_80"], "")


def test_warmed_binary_runs_without_compiling(tmp_path, vector_add):
    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    shutil.copy(vector_add, tree / "bin" / "vector_add")
    shutil.copy("/bin/true", tree / "bin" / "not_cuda")  # an ELF without CUDA code
    (tree / "README").write_text("not a binary\n")
    cache = tmp_path / "cache"
    res = zluda_compile([str(tree), "-j", "2"], cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "files: 1 with CUDA code (2 other files skipped), modules: 1, kernels: 1" in res.stdout, res.stdout
    assert "newly compiled: 1, already cached: 0, failed: 0" in res.stdout, res.stdout

    trace = tmp_path / "trace"
    run = subprocess.run(["zluda", "run", "--trace", str(trace), "--", str(tree / "bin" / "vector_add")],
                         capture_output=True, text=True, env=env_for(cache), timeout=600)
    assert run.returncode == 0 and "PASSED" in run.stdout, run.stdout + run.stderr
    log = "".join(p.read_text() for p in trace.glob("calls-*.log"))
    cache_lines = [line for line in log.splitlines() if " cache: " in line]
    assert any(" cache: hit " in line for line in cache_lines), log
    assert not any(" cache: compiled " in line for line in cache_lines), cache_lines

    again = zluda_compile([str(tree / "bin" / "vector_add")], cache)
    assert again.returncode == 0 and "newly compiled: 0, already cached: 1" in again.stdout, again.stdout


def test_failures_are_reported_with_reasons(tmp_path):
    (tmp_path / "good.ptx").write_text(add_kernel_ptx(51))
    (tmp_path / "bad.ptx").write_text(BAD_PTX)
    (tmp_path / "junk.fatbin").write_bytes(b"\x50\xed\x55\xba" + b"\xff" * 12)  # fatbin magic, nonsense header
    res = zluda_compile([str(tmp_path / "good.ptx"), str(tmp_path / "bad.ptx"), str(tmp_path / "junk.fatbin"),
                         "-j", "2"], tmp_path / "cache")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "modules: 2, kernels: 1" in res.stdout, res.stdout
    assert "newly compiled: 1, already cached: 0, failed: 2" in res.stdout, res.stdout
    failures = [line for line in res.stdout.splitlines() if line.startswith("  failed: ")]
    assert len(failures) == 2, res.stdout
    assert any("bad.ptx" in f and "frobnicate" in f and ":6" in f for f in failures), failures
    assert any("junk.fatbin" in f for f in failures), failures
    assert "Traceback" not in res.stdout + res.stderr


def test_dump_writes_ir_object_and_metadata(tmp_path):
    (tmp_path / "k.ptx").write_text(add_kernel_ptx(52))
    for expected in ("newly compiled: 1", "already cached: 1"):  # a cache hit dumps as well
        dump = tmp_path / f"dump-{expected[:3]}"
        res = zluda_compile([str(tmp_path / "k.ptx"), "--dump", str(dump), "--cache", str(tmp_path / "c")],
                            tmp_path / "unused")
        assert res.returncode == 0 and expected in res.stdout, res.stdout + res.stderr
        files = sorted(p.suffix for p in dump.iterdir())  # one set per part: the variables, the kernel
        assert files == [".json", ".json", ".ll", ".ll", ".o", ".o"], files
        stem = str(next(dump.glob("k.ptx.image0.cpu.add_k.*.ll")))[:-3]
        assert "define" in Path(stem + ".ll").read_text()
        assert Path(stem + ".o").read_bytes()[:4] == b"\x7fELF"
        assert '"add_k"' in Path(stem + ".json").read_text()
        assert next(dump.glob("k.ptx.image0.cpu.variables.*.o")).read_bytes()[:4] == b"\x7fELF"
    assert not (tmp_path / "unused").exists()  # --cache took precedence over CUDA_CACHE_PATH


def test_missing_linker_makes_gfx_targets_unavailable_not_crashed(tmp_path, monkeypatch):
    (tmp_path / "k.ptx").write_text(add_kernel_ptx(53))
    monkeypatch.setenv("ZLUDA_LLD", str(tmp_path / "no-such-ld.lld"))
    res = zluda_compile([str(tmp_path / "k.ptx"), "--target", "gfx942"], tmp_path / "cache")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "target gfx942: not available in this build: no ld.lld" in res.stdout
    assert "Traceback" not in res.stderr
    res = zluda_compile([str(tmp_path / "k.ptx"), "--target", "all"], tmp_path / "cache")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "newly compiled: 1" in res.stdout and res.stdout.count("not available in this build") == 7


def test_gfx_dump_writes_code_objects(tmp_path, lld):
    (tmp_path / "k.ptx").write_text(add_kernel_ptx(54))
    dump = tmp_path / "dump"
    res = zluda_compile([str(tmp_path / "k.ptx"), "--target", "gfx942", "--dump", str(dump)], tmp_path / "cache")
    assert res.returncode == 0, res.stdout + res.stderr
    (obj,) = dump.glob("*.gfx942.*.hsaco")
    data = obj.read_bytes()
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 224  # EM_AMDGPU


def test_progress_bar_on_a_terminal(tmp_path):
    import pty

    (tmp_path / "a.ptx").write_text(add_kernel_ptx(54))
    master, slave = pty.openpty()
    try:
        res = zluda_compile([str(tmp_path / "a.ptx")], tmp_path / "cache", stdin=slave, stderr=slave)
        os.close(slave)
        bar = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            bar += chunk
    finally:
        os.close(master)
    assert res.returncode == 0
    assert b"\r[" + b"#" * 30 + b"] 1/1 modules" in bar, bar
    assert "[1/1]" not in res.stdout  # no per-module lines when the bar is shown
