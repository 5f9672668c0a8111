"""Where the compiled-code cache lives and how big it may grow: NVIDIA's ComputeCache variables.

CUDA_CACHE_DISABLE=1   no cache at all
CUDA_CACHE_PATH=DIR    the cache directory (else $XDG_CACHE_HOME/zluda, else ~/.cache/zluda)
CUDA_CACHE_MAXSIZE=N   the size limit in bytes (default 256 MiB); least recently used entries go first
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAXSIZE = 256 << 20
DB_NAME = "zluda-cache.sqlite3"


@dataclass(frozen=True)
class Settings:
    directory: Path
    max_size: int
    enabled: bool
    problems: tuple[str, ...] = ()  # unusable variable values, reported once with the cache's warnings

    @property
    def db_path(self) -> Path:
        return self.directory / DB_NAME


def default_directory() -> Path:
    if os.environ.get("CUDA_CACHE_PATH"):
        return Path(os.environ["CUDA_CACHE_PATH"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "zluda" if xdg else Path.home() / ".cache" / "zluda"


def from_environment(directory: str | os.PathLike | None = None) -> Settings:
    """The settings in force now; `directory` (zluda-compile --cache) overrides CUDA_CACHE_PATH."""
    problems = []
    max_size = DEFAULT_MAXSIZE
    text = os.environ.get("CUDA_CACHE_MAXSIZE", "").strip()
    if text:
        try:
            max_size = int(text, 0)
            if max_size < 0:
                raise ValueError
        except ValueError:
            problems.append(f"CUDA_CACHE_MAXSIZE={text!r} is not a size in bytes; using {DEFAULT_MAXSIZE}")
            max_size = DEFAULT_MAXSIZE
    enabled = os.environ.get("CUDA_CACHE_DISABLE", "").strip() != "1"
    path = Path(directory) if directory is not None else default_directory()
    return Settings(path.expanduser(), max_size, enabled, tuple(problems))
