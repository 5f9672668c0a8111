"""Fixtures for the compiled-code cache tests: a private cache directory and small PTX kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zluda_py.cache import events, store
from zluda_py.compiler.cpu import runtime

REPO = Path(__file__).resolve().parents[2]


def add_kernel_ptx(k: int, name: str = "add_k") -> str:
    """buf[i] += k for one thread per element: distinct k, distinct module (and cache key)."""
    return f""".version 8.0
.target sm_80
.address_size 64

.visible .entry {name}(.param .u64 buf)
{{
  .reg .b32 %i, %tx, %bx, %nx, %v;
  .reg .b64 %p, %off;
  mov.u32 %tx, %tid.x;
  mov.u32 %bx, %ctaid.x;
  mov.u32 %nx, %ntid.x;
  mad.lo.u32 %i, %bx, %nx, %tx;
  ld.param.u64 %p, [buf];
  cvta.to.global.u64 %p, %p;
  mul.wide.u32 %off, %i, 4;
  add.u64 %p, %p, %off;
  ld.global.u32 %v, [%p];
  add.u32 %v, %v, {k};
  st.global.u32 [%p], %v;
  ret;
}}
"""


def check_adds(module, k: int, name: str = "add_k") -> None:
    """Run the kernel and compare with numpy's answer."""
    a = np.arange(512, dtype=np.uint32) * 7
    expected = a + np.uint32(k)
    module.launch(name, 4, 128, [a])
    np.testing.assert_array_equal(a, expected)


@pytest.fixture(scope="session", autouse=True)
def helpers_linked() -> None:
    """The CPU's shared helpers are linked once per process, at its first load (cpu/runtime.py),
    storing their cache entry then: linked here, with no cache, so that the tests' counts of
    entries and events are of their own modules whatever test runs first."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("CUDA_CACHE_DISABLE", "1")
        runtime.helpers_library()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh cache directory in force through CUDA_CACHE_PATH, with per-process state reset."""
    d = tmp_path / "cache"
    monkeypatch.setenv("CUDA_CACHE_PATH", str(d))
    for var in ("CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(store, "_stores", {})
    monkeypatch.setattr(events, "counts", events.Counter())
    monkeypatch.setattr(events, "_warned", set())
    return d


def run_python(code: str, env: dict[str, str] | None = None, prefix: list[str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a Python snippet in a fresh process (cache state is per process)."""
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([*(prefix or []), sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
