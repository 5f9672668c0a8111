"""Run a Python script under `zluda run` in a subprocess: the third-party clients' checks
(CuPy, cuda.core, Warp, Triton, numba-cuda's suite) load our libcuda.so.1 as they would NVIDIA's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def client_env(tmp_path: Path, numba_cache: bool = True) -> dict[str, str]:
    """The environment of a client run: the clients' own kernel caches in tmp_path (each run
    compiles, as on a fresh machine), no pytest variables of the outer run (xdist's worker id).
    numba_cache=False leaves numba's cache where numba puts it by default (its own caching tests
    look for it in the __pycache__ beside their modules)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "NUMBA_CACHE_DIR"}
    env.update(CUPY_CACHE_DIR=str(tmp_path / "cupy-cache"), WARP_CACHE_PATH=str(tmp_path / "warp-cache"),
               TRITON_CACHE_DIR=str(tmp_path / "triton-cache"))
    if numba_cache:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    return env


def zluda_run(args: list[str], tmp_path: Path, timeout: float, extra_path: Path | None = None,
              stdout=subprocess.PIPE, numba_cache: bool = True) -> subprocess.CompletedProcess:
    """`zluda run -- python ARGS` in tmp_path (extra_path first on PYTHONPATH); output as text."""
    env = client_env(tmp_path, numba_cache)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "zluda_py.cli", "run", "--", sys.executable, *args],
                          cwd=tmp_path, env=env, stdout=stdout, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def run_script(script: str, tmp_path: Path, timeout: float = 600) -> str:
    """Run the script under `zluda run`; it must exit 0 and print `ok`. Returns its output."""
    path = tmp_path / "client.py"
    path.write_text(script)
    r = zluda_run([str(path)], tmp_path, timeout)
    assert r.returncode == 0 and "ok" in r.stdout.splitlines(), f"exit {r.returncode}\n{r.stdout}"
    return r.stdout
