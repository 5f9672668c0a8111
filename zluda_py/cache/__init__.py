"""The persistent compiled-code cache (NVIDIA's ComputeCache variables; see docs/cache.md).

`compile_cached(ptx, target)` is `zluda_py.compiler.compile` consulting the cache first;
`build` gives the object code and metadata without loading them (zluda-compile)."""

from .compile import Built, build, compile_cached
from .key import cache_key
from .settings import Settings, from_environment
from .store import Store, store_for

__all__ = ["Built", "build", "compile_cached", "cache_key", "Settings", "from_environment", "Store", "store_for"]
