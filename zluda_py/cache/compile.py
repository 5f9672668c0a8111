"""Compiling through the cache: look the module up, else compile it and store the result."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

from . import events
from .key import TargetUnavailable, build_id, cache_key
from .settings import Settings, from_environment
from .store import store_for


@dataclass
class Built:
    """Ready-to-load code for one module and where it came from."""

    key: str
    object_code: bytes
    metadata: dict
    cached: bool  # True: taken from the cache; False: compiled now
    ir_text: str | None = None  # only when compiled now


def _label(metadata: dict) -> str:
    names = sorted(metadata.get("kernels", ()))
    return names[0] + (f" (+{len(names) - 1})" if len(names) > 1 else "") if names else "(no kernels)"


def build(ptx: list[str], target: str = "cpu", settings: Settings | None = None) -> Built:
    """The object code and metadata for PTX text(s) (linked in order), from the cache or
    compiled now and stored. Raises the compiler's errors, and TargetUnavailable."""
    settings = settings or from_environment()
    for problem in settings.problems:
        events.warn_once(problem)
    key = cache_key(ptx, target)
    store = store_for(settings) if settings.enabled else None
    if store is None:
        return _compile(ptx, target, key)
    found = store.get(key)
    if found is None:
        with store.compiling(key):  # another process may be compiling it: wait, then take its entry
            found = store.get(key)
            if found is None:
                built = _compile(ptx, target, key)
                store.put(key, build_id(target), _label(built.metadata), built.object_code, built.metadata,
                          settings.max_size)
                return built
    events.record(events.HIT, f"{key[:16]} {_label(found[1])}")
    return Built(key, found[0], found[1], True)


def _compile(ptx: list[str], target: str, key: str) -> Built:
    from zluda_py.compiler.pipeline import compile_object

    start = time.perf_counter()
    ir_text, object_code, metadata = compile_object(ptx, target)
    events.record(events.COMPILED, f"{key[:16]} {_label(metadata)} in {time.perf_counter() - start:.3f} s")
    return Built(key, object_code, metadata, False, ir_text)


_built_once: dict[tuple[str, ...], Built] = {}
_built_once_lock = threading.Lock()


def build_once(ptx: list[str], target: str = "cpu") -> Built:
    """`build`, remembered for the life of the process. The driver instantiates a module anew
    for every cuModuleLoad* (each load has its own variables, as on NVIDIA's driver); this
    keeps repeated loads of one image from consulting the cache each time."""
    key = (target, *ptx)
    with _built_once_lock:
        built = _built_once.get(key)
        if built is None:
            built = _built_once[key] = dataclasses.replace(build(ptx, target), ir_text=None)
    return built


def compile_cached(ptx: "str | list[str]", target: str = "cpu", once: bool = False):
    """zluda_py.compiler.compile, through the persistent cache: a hit is loaded without
    running LLVM at all. Each call loads a new instance of the module; `once` looks the
    code up only the first time in this process (`build_once`)."""
    from zluda_py.compiler import compile, load

    texts = ptx if isinstance(ptx, list) else [ptx]
    if not all(isinstance(t, str) for t in texts):
        return compile(ptx, target)  # ASTs have no stable text to key on
    start = time.perf_counter()
    try:
        built = (build_once if once else build)(texts, target)
    except TargetUnavailable:
        return compile(ptx, target)  # the compiler reports the target in its own words
    module = load(built.object_code, built.metadata)
    events.record(events.LOADED, f"{built.key[:16]} {'from the cache' if built.cached else 'compiled'} "
                                 f"in {time.perf_counter() - start:.4f} s")
    return module
