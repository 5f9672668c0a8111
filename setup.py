"""Builds libcuda.so.1 (libcuda_shim/) into the package during `pip install .` and
`pip install -e .`; everything else is declared in pyproject.toml."""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithShim(build_py):
    """build_py, then the shim: into the build tree for a wheel, into the source tree for an
    editable install (where the package is imported from)."""

    def run(self) -> None:
        super().run()
        sys.path.insert(0, str(ROOT / "libcuda_shim"))
        try:
            import build_shim
        finally:
            sys.path.pop(0)
        base = ROOT if getattr(self, "editable_mode", False) else Path(self.build_lib)
        build_shim.build(base / "zluda_py" / "_shim")


class BinaryDistribution(Distribution):
    """The wheel holds a native library: it is platform-specific."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildWithShim}, distclass=BinaryDistribution)
