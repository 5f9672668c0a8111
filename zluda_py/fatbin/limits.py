"""Size caps that keep hostile or corrupt images from allocating without bound.

One number bounds everything we allocate for an image: a decompressed payload, a fatbin or
PTX text read through a pointer, and a file read from disk. It is `ZLUDA_FATBIN_MAX_DECOMPRESSED`
(bytes, with an optional K/M/G suffix, powers of 1024), 1 GiB by default: far above the
largest real PTX entries, small enough that a bad header cannot exhaust memory.

A compressed payload is also held to a ratio: nvcc's PTX compresses 12-20 to 1 (zstd, LZ4
less), so a payload declaring more than `MAX_RATIO` times its compressed size (and more than
`RATIO_FLOOR`) is a decompression bomb, refused before a byte is decompressed.
"""

from __future__ import annotations

import os
import re

from .errors import FatbinError

ENV_MAX_SIZE = "ZLUDA_FATBIN_MAX_DECOMPRESSED"
DEFAULT_MAX_SIZE = 1 << 30
MAX_RATIO = 1000
RATIO_FLOOR = 16 << 20
# a NULL-terminated list of prelinked fatbins (-rdc) longer than this is corrupt
MAX_PRELINKED_FATBINS = 1 << 16

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def max_size() -> int:
    """The cap in bytes, read from the environment on every call so tests and users can change it."""
    raw = os.environ.get(ENV_MAX_SIZE, "").strip()
    if not raw:
        return DEFAULT_MAX_SIZE
    m = re.fullmatch(r"(\d+)\s*([kKmMgG]?)i?[bB]?", raw)
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"{ENV_MAX_SIZE}={raw!r}: expected a positive byte count such as 268435456 or 256M")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def check_size(size: int, what: str, offset: int) -> None:
    """Raise FatbinError when `size` exceeds the cap."""
    cap = max_size()
    if size > cap:
        raise FatbinError(f"{what} is {size} bytes, above the {cap}-byte limit "
                          f"(raise it with {ENV_MAX_SIZE})", offset)


def check_ratio(size: int, compressed: int, what: str, offset: int) -> None:
    """Raise FatbinError when `size` bytes from `compressed` is a ratio no PTX reaches."""
    allowed = max(RATIO_FLOOR, MAX_RATIO * compressed)
    if size > allowed:
        raise FatbinError(f"{what} declares {size} bytes from {compressed} compressed bytes, more than "
                          f"{MAX_RATIO} to 1 (nvcc's PTX compresses about 15 to 1): a decompression bomb", offset)
