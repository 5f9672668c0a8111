"""Start-up independent of how zluda-py was installed and of the host process (issue 12).

zluda-py is installed (not editable) from a copy of this tree into a real venv that is never
activated; programs run under its `zluda run` with a PATH whose `python3` is a script that
fails and no PYTHONPATH: a C host, a Python of another venv without cffi, a Python of another
minor version. Then: a start-up that fails, and driver calls made after shutdown at exit."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.driver.conftest import shim_path

ROOT = Path(__file__).resolve().parents[2]
PTX = ROOT / "tests" / "cuda" / "e2e_startup.ptx"
pytestmark = pytest.mark.xdist_group("install")


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """A venv holding zluda-py, installed from a copy of the tree as a wheel would install it
    (setup.py's build_py, which builds the shim with the venv's python, straight into its
    site-packages; pip would need the network for `wheel`), with the `zluda` script pip
    writes; returns the venv's bin/. The dependencies come from this interpreter's
    site-packages through a .pth line (a plain path: that directory's own .pth files, among
    them this checkout's editable install, do not run), so zluda_py is only the venv's own."""
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "_shim", "build", "*.egg-info")
    for tree in ("zluda_py", "libcuda_shim", "ptx_grammar"):
        shutil.copytree(ROOT / tree, src / tree, symlinks=True, ignore=skip)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    python = _venv(base / "venv")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zluda_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([str(python), "setup.py", "-q", "build_py", "--build-lib", purelib], cwd=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    script = python.parent / "zluda"
    script.write_text(f"#!{python}\nimport sys\nfrom zluda_py.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return python.parent


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> Path:
    """The python of a venv with no packages at all (no cffi)."""
    return _venv(tmp_path_factory.mktemp("bare") / "venv")


@pytest.fixture(scope="session")
def c_host(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("c_host") / "e2e_startup"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    r = subprocess.run([*cc, "-o", str(exe), str(ROOT / "tests" / "cuda" / "e2e_startup.c"), "-ldl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """No venv activated, a `python3`/`python` first on PATH that fails (then Debian's, without
    zluda_py), a fresh compiled-code cache, and every multi-kernel module generated in children."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    for name in ("python3", "python"):
        (fake / name).write_text("#!/bin/sh\necho 'the wrong python' >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    return {"PATH": f"{fake}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
            "CUDA_CACHE_PATH": str(tmp_path / "cache"), "ZLUDA_SPLIT_IR_LINES": "0", "ZLUDA_CPU_THREADS": "2"}


def broken_package(tmp_path: Path, name: str) -> Path:
    """A directory holding a package `name` whose import fails (an incompatible install)."""
    (tmp_path / "broken" / name).mkdir(parents=True)
    (tmp_path / "broken" / name / "__init__.py").write_text(f"raise ImportError('this {name} is broken')\n")
    return tmp_path / "broken"


# A Python host: the driver through ctypes, by bare name as `zluda run` provides it (or argv[1])
PROBE = textwrap.dedent("""
    import ctypes, sys
    from ctypes import byref, c_int, c_uint, c_void_p, c_ulonglong
    lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcuda.so.1")
    n, v = c_int(-1), c_int(-1)
    rc = lib.cuInit(0), lib.cuDeviceGetCount(byref(n)), lib.cuDriverGetVersion(byref(v))
    print("cuInit %d cuDeviceGetCount %d cuDriverGetVersion %d" % rc, flush=True)
    if rc[0] == 0:
        print("devices", n.value, "version", v.value // 1000, flush=True)
        ctx, mod, fns = c_void_p(), c_void_p(), [c_void_p(), c_void_p()]
        assert lib.cuDevicePrimaryCtxRetain(byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
        assert lib.cuModuleLoadData(byref(mod), sys.stdin.read().encode() + b"\\0") == 0
        for fn, name in zip(fns, (b"add_one", b"times_three")):
            assert lib.cuModuleGetFunction(byref(fn), mod, name) == 0
        data, d = (c_uint * 64)(*range(64)), c_ulonglong()
        assert lib.cuMemAlloc_v2(byref(d), 256) == 0 and lib.cuMemcpyHtoD_v2(d, data, 256) == 0
        params = (c_void_p * 1)(ctypes.addressof(d))
        for fn in fns:
            assert lib.cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, None, params, None) == 0
        assert lib.cuMemcpyDtoH_v2(data, d, 256) == 0
        print("kernels:", "ok" if list(data) == [(i + 1) * 3 for i in range(64)] else "WRONG", flush=True)
""")


WORKS = ["cuInit 0 cuDeviceGetCount 0 cuDriverGetVersion 0", "devices 1 version 13", "kernels: ok"]


def zluda_run(installed: Path, env: dict[str, str], *program: str, stdin: str | None = None):
    return subprocess.run([str(installed / "zluda"), "run", "--", *program], input=stdin, capture_output=True,
                          text=True, env=env, timeout=600)


def test_c_host_generates_code_in_children_without_an_activated_venv(installed, c_host, env):
    # before: the children ran PATH's python3 -> "LLVM aborted", cuModuleLoadData 218
    r = zluda_run(installed, env, str(c_host), str(PTX))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[:3] == ["cuInit 0 cuDriverGetVersion 0 cuDeviceGetCount 0", "devices 1 version 13",
                                         "kernels: ok"], r.stderr
    assert "Traceback" not in r.stderr


def test_c_host_calls_after_shutdown_get_deinitialized(installed, c_host, env):
    """An atexit handler registered after cuInit runs before the driver shuts down; one
    registered before it runs after, and gets CUDA_ERROR_DEINITIALIZED (4), as from NVIDIA's."""
    r = zluda_run(installed, env, str(c_host), str(PTX))
    assert r.stdout.splitlines()[-2:] == ["atexit after cuInit: cuCtxSynchronize 0",
                                          "atexit before cuInit: cuMemFree 4"], r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_c_host_ignores_pythonpath(installed, c_host, env, tmp_path):
    """PYTHONPATH belongs to whatever Python the user works with: here it holds a pycparser
    (which cffi needs at start-up) that cannot be imported."""
    pythonpath = f"PYTHONPATH={broken_package(tmp_path, 'pycparser')}"
    r = zluda_run(installed, env, "/usr/bin/env", pythonpath, str(c_host), str(PTX))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels: ok" in r.stdout.splitlines(), r.stderr


def test_python_host_of_another_venv_without_cffi(installed, bare_python, env):
    # before: _cffi_backend not found, then every call returned 0 with nothing written
    r = zluda_run(installed, env, str(bare_python), "-c", PROBE, stdin=PTX.read_text())
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == WORKS, r.stderr


def _other_minor_python() -> str | None:
    """An interpreter of another Python 3 minor version on this machine, if any."""
    ours = f"python3.{sys.version_info.minor}"
    found = [*Path(sys.base_prefix).parent.glob("*/bin/python3.*"),  # pyenv's versions/, say
             *Path("/usr/bin").glob("python3.*"), *Path("/usr/local/bin").glob("python3.*")]
    for candidate in sorted({p for p in found if p.name != ours}):
        if candidate.name.removeprefix("python3.").isdigit() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def test_python_host_of_another_minor_version_is_refused_in_one_line(installed, env):
    other = _other_minor_python()
    if other is None:
        pytest.skip("no Python of another minor version here")
    r = zluda_run(installed, env, other, "-c", PROBE, stdin=PTX.read_text())
    if r.stdout.splitlines() != WORKS:  # works, or says why it cannot
        assert r.stdout.splitlines() == ["cuInit 999 cuDeviceGetCount 3 cuDriverGetVersion 3"], r.stdout + r.stderr
        lines = [line for line in r.stderr.splitlines() if "zluda run: warning" not in line]
        assert len(lines) == 1 and lines[0].startswith("zluda: the CUDA driver cannot start: this process runs "
                                                       "Python 3."), r.stderr


def test_failed_start_fails_every_call_and_says_why_once(bare_python, tmp_path):
    """A Python host whose own packages include a broken pycparser: the driver cannot start.
    Before: a traceback, then every call returned CUDA_SUCCESS (0) with nothing written."""
    env = dict(os.environ, PYTHONPATH=str(broken_package(tmp_path, "pycparser")))
    env.pop("ZLUDA_TRACE", None)
    code = PROBE + "print('again', lib.cuInit(0), lib.cuCtxSynchronize())\n"
    r = subprocess.run([str(bare_python), "-c", code, str(shim_path())], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.stdout.splitlines() == ["cuInit 999 cuDeviceGetCount 3 cuDriverGetVersion 3", "again 999 3"], r.stderr
    assert r.stderr.splitlines() == ["zluda: the CUDA driver cannot start: ImportError: this pycparser is broken; "
                                     "every CUDA call will fail (cuInit: CUDA_ERROR_UNKNOWN)"]


def test_python_host_calls_after_shutdown_get_deinitialized(tmp_path):
    """Before: the call from finalisation printed `AttributeError: 'NoneType' object has no
    attribute 'ptds'`."""
    code = textwrap.dedent("""
        import atexit, ctypes, os, sys
        from ctypes import byref, c_ulonglong, c_void_p
        lib = ctypes.CDLL(sys.argv[1])
        d = c_ulonglong()
        def say(*words):  # os.write: print may be gone during finalisation
            os.write(1, (" ".join(map(str, words)) + "\\n").encode())
        atexit.register(lambda: say("atexit before cuInit:", lib.cuMemFree_v2(d)))
        ctx = c_void_p()
        assert lib.cuInit(0) == 0 and lib.cuDevicePrimaryCtxRetain(byref(ctx), 0) == 0
        assert lib.cuCtxSetCurrent(ctx) == 0 and lib.cuMemAlloc_v2(byref(d), 256) == 0
        atexit.register(lambda: say("atexit after cuInit:", lib.cuCtxSynchronize()))
        class Holder:  # a module global: destroyed while the interpreter finalises
            def __del__(self, say=say, lib=lib):
                say("finalisation:", lib.cuCtxSynchronize())
        holder = Holder()
    """)
    r = subprocess.run([sys.executable, "-c", code, str(shim_path())], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # every atexit handler still reaches the driver (Warp frees its arrays from one registered
    # at import, before cuInit); finalisation cannot run Python any more
    assert r.stdout.splitlines() == ["atexit after cuInit: 0", "atexit before cuInit: 0", "finalisation: 4"], r.stderr
    assert r.stderr == ""


def test_cudart_static_destructor_after_shutdown(nvcc, run):
    """A C++ static whose destructor calls cudaFree: cudart and the driver have shut down by
    then; an error code comes back, nothing is printed."""
    exe = nvcc(["e2e_static_free.cu"], [], "")
    r = run(exe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["kernel: 0", "static destructor: cudaFree 4"], r.stderr
    assert "Traceback" not in r.stderr
