"""Lazy module loading (CUDA_MODULE_LOADING): kernels built at first use, one cache entry per
kernel plus one for the module's variables; EAGER builds them all at load; zluda-compile warms
exactly the entries a run looks up, for every kind of nvcc build."""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from zluda_py.cache import events
from zluda_py.cache.lazy import LazyModule, load
from zluda_py.compiler.parts import whole_reason
from zluda_py.ptx import parse

from .conftest import add_kernel_ptx
from .test_compile_cmd import env_for, zluda_compile

KERNELS = 12  # add<0> .. add<11> in e2e_lazy_kernels.cu
BUILDS = {
    "static-cudart": ["-arch=sm_80"],
    "shared-cudart": ["-arch=sm_80", "-cudart", "shared"],
    "ptx-only": ["-gencode", "arch=compute_80,code=compute_80"],
    "multi-arch": ["-gencode", "arch=compute_75,code=[sm_75,compute_75]",
                   "-gencode", "arch=compute_86,code=[sm_86,compute_86]"],
}
_EVENT = re.compile(r" cache: (hit|compiled) \S+ (.*?)(?: in [\d.]+ s)?$")


def kernel(k: int) -> str:
    return f"_Z3addILi{k}EEvPii"  # add<k>(int*, int)


def run(binary: Path, cache: Path, trace: Path, *args: str, **env: str) -> dict[str, list[str]]:
    """Run the program under zluda; what its trace says the cache did: {"hit"|"compiled": labels}."""
    res = subprocess.run(["zluda", "run", "--trace", str(trace), "--", str(binary), *args], capture_output=True,
                         text=True, env={**env_for(cache), **env}, timeout=600)
    assert res.returncode == 0 and "PASSED" in res.stdout, res.stdout + res.stderr
    found: dict[str, list[str]] = {"hit": [], "compiled": []}
    for line in "".join(p.read_text() for p in trace.glob("calls-*.log")).splitlines():
        m = _EVENT.search(line)
        if m:
            found[m.group(1)].append(m.group(2))
    return found


@pytest.fixture(scope="module")
def static_build(nvcc) -> Path:
    return nvcc(["e2e_lazy_kernels.cu"], BUILDS["static-cudart"], "")


def test_a_program_launching_one_kernel_compiles_one(tmp_path, static_build):
    found = run(static_build, tmp_path / "cache", tmp_path / "trace", "5")
    assert sorted(found["compiled"]) == ["(variables)", kernel(5)], found


def test_eager_loading_compiles_every_kernel(tmp_path, static_build):
    found = run(static_build, tmp_path / "cache", tmp_path / "trace", "5", CUDA_MODULE_LOADING="EAGER")
    assert sorted(found["compiled"]) == sorted(["(variables)", *map(kernel, range(KERNELS))]), found


@pytest.mark.parametrize("build", BUILDS)
def test_warmed_program_runs_without_compiling(tmp_path, nvcc, build):
    binary = nvcc(["e2e_lazy_kernels.cu"], BUILDS[build], "")
    cache = tmp_path / "cache"
    res = zluda_compile([str(binary), "-j", "2"], cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"modules: 1, kernels: {KERNELS}" in res.stdout and "failed: 0" in res.stdout, res.stdout
    found = run(binary, cache, tmp_path / "trace", "7")
    assert found["compiled"] == [], found
    assert sorted(found["hit"]) == ["(variables)", kernel(7)], found
    again = zluda_compile([str(binary)], cache)
    assert again.returncode == 0 and "newly compiled: 0, already cached: 1" in again.stdout, again.stdout
    assert f"skipped, all {KERNELS + 1} cache entries present" in again.stdout, again.stdout


MODULE = """.version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 counter = 5;
.const .align 4 .u32 bias = 7;
.func (.reg .u32 r) plus_bias(.reg .u32 a)
{
  .reg .u32 b;
  ld.const.u32 b, [bias];
  add.u32 r, a, b;
  ret;
}
.visible .entry bump(.param .u64 buf)
{
  .reg .b64 %p; .reg .u32 %v, %w;
  ld.param.u64 %p, [buf];
  ld.global.u32 %v, [%p];
  call (%w), plus_bias, (%v);
  st.global.u32 [%p], %w;
  atom.global.add.u32 %v, [counter], 1;
  ret;
}
.visible .entry read_counter(.param .u64 buf)
{
  .reg .b64 %p; .reg .u32 %v;
  ld.param.u64 %p, [buf];
  ld.global.u32 %v, [counter];
  st.global.u32 [%p], %v;
  ret;
}
"""


def test_variables_exist_before_kernels_and_are_shared_by_them(cache_dir):
    m = load([MODULE])
    assert isinstance(m, LazyModule) and sorted(m.kernels) == ["bump", "read_counter"]
    assert events.counts["compiled"] == 1  # the variables only
    assert ctypes.c_uint32.from_address(m.globals["counter"].address).value == 5
    a = np.zeros(1, np.uint32)
    m.launch("bump", 1, 1, [a])
    assert a[0] == 7 and events.counts["compiled"] == 2
    m.launch("read_counter", 1, 1, [a])
    assert a[0] == 6 and events.counts["compiled"] == 3  # bump's increment, through the one variable
    other = load([MODULE])  # another instance: its own variables, the same code (no compile)
    other.launch("read_counter", 1, 1, [a])
    assert a[0] == 5 and events.counts["compiled"] == 3


def test_modules_that_cannot_be_split_stay_whole(cache_dir):
    taken = MODULE.replace("ld.global.u32 %v, [counter];", "mov.u64 %p, plus_bias;")
    assert "address of plus_bias" in whole_reason(parse(taken))
    assert whole_reason(parse(MODULE)) is None
    assert whole_reason(parse(add_kernel_ptx(3))) is None
    m = load([taken])
    assert not isinstance(m, LazyModule) and sorted(m.kernels) == ["bump", "read_counter"]


def test_a_slow_compile_says_what_it_compiles(cache_dir, monkeypatch, capfd):
    from zluda_py.cache import progress

    monkeypatch.setattr(progress, "AFTER_S", 0.0)  # every compile counts as slow
    monkeypatch.setenv("ZLUDA_PROGRESS", "1")
    m = load([MODULE.replace("= 5;", "= 9;")], "lazy.ptx")
    m.launch("bump", 1, 1, [np.zeros(1, np.uint32)])
    err = capfd.readouterr().err
    assert "zluda: compiling kernel bump of module lazy.ptx for cpu ..." in err, err
    assert "zluda: compiled kernel bump of module lazy.ptx for cpu in " in err and "cached for later runs" in err, err
    monkeypatch.setenv("ZLUDA_PROGRESS", "0")
    m.launch("read_counter", 1, 1, [np.zeros(1, np.uint32)])
    assert capfd.readouterr().err == ""


def test_a_cached_module_loads_without_parsing_its_ptx(cache_dir, monkeypatch):
    from zluda_py.cache import compile as cache_compile

    ptx = MODULE.replace("= 5;", "= 11;")
    load([ptx]).launch("bump", 1, 1, [np.zeros(1, np.uint32)])
    monkeypatch.setattr(cache_compile, "_built_once", {})  # a new process, as far as the cache knows
    monkeypatch.setattr(cache_compile, "_linked", {})

    def no_parsing(*args, **kwargs):
        raise AssertionError("the PTX was parsed")

    monkeypatch.setattr("zluda_py.ptx.parse", no_parsing)
    a = np.zeros(1, np.uint32)
    load([ptx]).launch("bump", 1, 1, [a])
    assert a[0] == 7 and events.counts["hit"] == 2
