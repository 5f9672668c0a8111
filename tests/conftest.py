"""Shared test fixtures: building CUDA sources with nvcc at test time, cached per session."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
CUDA_SOURCES = Path(__file__).parent / "cuda"


def _cache_dir() -> Path:
    d = Path(os.environ.get("ZLUDA_TEST_BUILD_CACHE", Path.home() / ".cache" / "zluda-test-builds"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def nvcc_build(sources: list[str | Path], args: list[str], suffix: str) -> Path:
    """Run nvcc on repo sources (paths relative to tests/cuda or absolute) and return the output.

    Outputs are cached by the hash of nvcc's arguments and the sources' bytes, so each build
    runs once per machine; the cache is only an accelerator, never a source of truth.
    """
    if not os.path.exists(NVCC):
        pytest.skip("nvcc not found")
    paths = [Path(s) if Path(s).is_absolute() else CUDA_SOURCES / s for s in sources]
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update("\0".join(args).encode())
    out = _cache_dir() / f"{paths[0].stem}-{h.hexdigest()[:16]}{suffix}"
    if not out.exists():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        cmd = [NVCC, *args, *map(str, paths), "-o", str(tmp)]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=paths[0].parent)
        if res.returncode != 0:
            raise RuntimeError(f"nvcc failed: {' '.join(cmd)}\n{res.stderr}")
        os.replace(tmp, out)
    return out


def as_from_a_terminal() -> None:
    """A child's preexec_fn: the signal dispositions a program started from a shell prompt has.
    A test run started in the background (`cmd &` in a script) inherits SIGINT and SIGQUIT
    ignored, and an ignored signal rightly stays ignored in the child (a Python child then
    installs no KeyboardInterrupt handler)."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


@pytest.fixture(scope="session")
def nvcc():
    """The nvcc_build function, for tests that build CUDA programs."""
    return nvcc_build


@pytest.fixture(scope="session")
def lld():
    """ld.lld, which links AMDGPU code objects; tests that need it skip, saying why, without it."""
    from zluda_py.compiler.amdgpu_link import LinkerError, find_lld

    try:
        return find_lld()
    except LinkerError as exc:
        pytest.skip(f"AMDGPU code objects need ld.lld: {exc}")


# Tests that share a module- or session-scoped build (compiled conformance batches, the AMDGPU
# corpus, nvcc programs) must run in one worker under `pytest -n N --dist loadgroup`, or each
# worker builds it again. Modules whose tests are independent opt out by setting
# `XDIST_INDEPENDENT = True` and are spread over the workers test by test.
#
# xdist hands groups to workers in collection order, so the groups that take minutes go first:
# started last, one of them would keep a single worker busy after the others have finished.
LONG_GROUPS = ("thrust", "amdgpu", "numba-0", "numba-1", "cupy")  # numba-*, cupy: tests/thirdparty


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): run these tests in one xdist worker")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module
        if getattr(module, "XDIST_INDEPENDENT", False) or item.get_closest_marker("xdist_group"):
            continue
        # tests/amdgpu shares one corpus across its modules: one group for the directory
        group = "amdgpu" if "amdgpu" in module.__name__.split(".") else module.__name__
        item.add_marker(pytest.mark.xdist_group(group))

    def group_of(item: pytest.Item) -> str:
        marker = item.get_closest_marker("xdist_group")
        return marker.args[0] if marker and marker.args else ""

    items.sort(key=lambda item: group_of(item) not in LONG_GROUPS)  # stable: keeps order within
