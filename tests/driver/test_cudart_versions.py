"""Every CUDA runtime 12.0-13.5 on our driver: NVIDIA's libcudart of each minor release (the
nvidia-cuda-runtime(-cu12) wheels, fetched with `pip download` into a cache outside the repo)
runs under `zluda run`, through the dlopen probe cudart_versions.c (memory, streams, events, a
registered kernel) and, for the 13.x releases, the nvcc-built vector add linked against that
cudart, shared and static. The trace says which export tables each release asks for (the table
in docs/driver.md) and that nothing it asks for is missing."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import zluda_run

CUDA_SOURCES = Path(__file__).resolve().parents[1] / "cuda"

# one wheel per minor release PyPI has (no 12.7)
RELEASES = {
    "12.0": "12.0.146", "12.1": "12.1.105", "12.2": "12.2.140", "12.3": "12.3.101", "12.4": "12.4.127",
    "12.5": "12.5.82", "12.6": "12.6.77", "12.8": "12.8.90", "12.9": "12.9.79",
    "13.0": "13.0.96", "13.1": "13.1.80", "13.2": "13.2.86", "13.3": "13.3.29", "13.4": "13.4.92", "13.5": "13.5.37",
}
# the export tables each release asks for, by the names shim.c gives them
BASE_TABLES = {"cudart_interface", "tools_hooks", "tools_tls", "cls", "integrity"}
UNSERVED_TABLE = "f8cff95121468b4eb9e2fb469e7c0dd9"  # 12.9+: asked for, answered NOT_FOUND


def expected_tables(release: str) -> set[str]:
    version = tuple(map(int, release.split(".")))
    tables = set(BASE_TABLES)
    if version >= (12, 3):
        tables.add("context_wrapper")
    if version >= (13, 4):
        tables.add("tools_context")  # 21318c60: without it every runtime call fails with 500
    return tables


def _cache_root() -> Path:
    return Path(os.environ.get("ZLUDA_CUDART_CACHE", Path.home() / ".cache" / "zluda-test-cudart"))


def fetch_cudart(release: str) -> Path:
    """The lib/ directory of the release's wheel (libcudart.so.1x, libcudart_static.a where
    shipped), downloaded and unpacked once per machine."""
    full = RELEASES[release]
    target = _cache_root() / full
    if not target.exists():
        package = "nvidia-cuda-runtime-cu12" if release.startswith("12.") else "nvidia-cuda-runtime"
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                "--disable-pip-version-check", "-q", "-d", tmp, f"{package}=={full}"],
                               capture_output=True, text=True, timeout=600)
            wheels = list(Path(tmp).glob("*.whl"))
            if r.returncode != 0 or not wheels:
                pytest.skip(f"cannot download {package}=={full}: {r.stderr.strip()[-300:]}")
            unpacked = Path(tmp) / "unpacked"
            with zipfile.ZipFile(wheels[0]) as wheel:
                wheel.extractall(unpacked)
            lib = next(unpacked.glob("nvidia/*/lib/libcudart.so.1*")).parent
            try:
                os.replace(lib, target)  # atomic: a concurrent test may have unpacked it too
            except OSError:
                if not target.exists():
                    raise
    return target


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    """cudart_versions.c, a plain C program: it dlopens the cudart it is given."""
    exe = tmp_path_factory.mktemp("probe") / "cudart_versions"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    r = subprocess.run([*cc, "-O2", "-o", str(exe), str(CUDA_SOURCES / "cudart_versions.c"), "-ldl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def trace_problems(stderr: str, release: str) -> list[str]:
    """What the trace reports missing, and the tables asked for when they differ from the table."""
    asked = set(re.findall(r"cuGetExportTable: table \w+ \((\w+)\)", stderr))
    unserved = set(re.findall(r"cuGetExportTable: no table (\w+)", stderr)) - {UNSERVED_TABLE}
    problems = [line for line in stderr.splitlines()
                if "not implemented" in line or re.search(r"cuGetProcAddress\(.*not found", line)]
    if asked != expected_tables(release):
        problems.append(f"tables asked for: {sorted(asked)}, expected {sorted(expected_tables(release))}")
    return problems + [f"unknown table {uuid}" for uuid in sorted(unserved)]


@pytest.mark.parametrize("release", RELEASES)
def test_runtime_probe(release, probe, nvcc, tmp_path):
    lib = fetch_cudart(release)
    fatbin = nvcc(["cudart_versions_kernel.cu"], ["-fatbin", "-gencode", "arch=compute_75,code=compute_75"], ".fatbin")
    libcudart = next(lib.glob("libcudart.so.1*"))
    r = zluda_run(probe, str(libcudart), str(fatbin), run_args=["--trace", str(tmp_path / "trace")])
    major, minor = map(int, release.split("."))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"cudart {major * 1000 + minor * 10}: PASSED" in r.stdout, r.stdout + r.stderr
    assert trace_problems(r.stderr, release) == []


CUDART_13 = [release for release in RELEASES if release.startswith("13.")]


@pytest.mark.parametrize("release", CUDART_13)
def test_vector_add_shared_cudart(release, nvcc, tmp_path):
    lib = fetch_cudart(release)
    exe = nvcc(["vector_add.cu"], ["-cudart", "shared"], "")
    env = {"LD_LIBRARY_PATH": str(lib), "LD_DEBUG": "libs"}  # the loader's log shows which cudart ran
    r = zluda_run(exe, env_extra=env, run_args=["--trace", str(tmp_path / "trace")])
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "vector_add of 1048576 elements: PASSED" in r.stdout
    assert f"calling init: {lib}/libcudart.so.13" in r.stderr
    assert trace_problems(r.stderr, release) == []


@pytest.mark.parametrize("release", ["12.9", *CUDART_13])
def test_vector_add_static_cudart(release, nvcc, tmp_path):
    """Linked into the program, as NVIDIA Warp links cudart 13.4."""
    lib = fetch_cudart(release)
    obj = nvcc(["vector_add.cu"], ["-c"], ".o")
    exe = tmp_path / "vector_add"
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler")
    link = subprocess.run([cxx, "-o", str(exe), str(obj), str(lib / "libcudart_static.a"), "-ldl", "-lpthread", "-lrt"],
                          capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    r = zluda_run(exe, run_args=["--trace", str(tmp_path / "trace")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vector_add of 1048576 elements: PASSED" in r.stdout
    assert trace_problems(r.stderr, release) == []
