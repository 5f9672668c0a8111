"""Compiling through the cache: look the module up, else compile it and store the result."""

from __future__ import annotations

import dataclasses
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

from zluda_py.compiler.cpu.runtime import use_helpers
from zluda_py.compiler.cpu.target import CPU
from zluda_py.compiler.target import Target

from . import events, progress
from .key import build_id, cache_key
from .part_source import PartSource
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
    if not names:
        return "(variables)" if "part" in metadata else "(no kernels)"
    return names[0] + (f" (+{len(names) - 1})" if len(names) > 1 else "")


def _what(name: str, part: str | None, target: Target) -> str:
    """What a compile is building, for progress lines: "kernel K of module M for cpu"."""
    from zluda_py.compiler.parts import VARIABLES

    module = f"module {name}" if name else "a module"
    if part is None:
        return f"{module} for {target}"
    return f"{'the variables' if part == VARIABLES else f'kernel {part}'} of {module} for {target}"


def build(ptx: list[str], target: Target = CPU, settings: Settings | None = None, name: str = "") -> Built:
    """The object code and metadata for PTX text(s) (linked in order), from the cache or
    compiled now and stored. Raises the compiler's errors."""
    return _build(ptx, [None], target, settings, name)[0]


def build_parts(ptx: list[str], parts: list[str], target: Target = CPU, settings: Settings | None = None,
                name: str = "", module=None) -> list[Built]:
    """`build` for parts of a module (compiler/parts.py), each its own cache entry; the missing
    ones are compiled together (their code generation in parallel). `module`: the linked AST,
    when the caller has parsed it already."""
    return _build(ptx, parts, target, settings, name, module)


def _build(ptx: list[str], parts: list, target: Target, settings: Settings | None, name: str,
           module=None) -> list[Built]:
    settings = settings or from_environment()
    for problem in settings.problems:
        events.warn_once(problem)
    keys = [cache_key(ptx, target, part) for part in parts]
    store = store_for(settings) if settings.enabled else None
    out: dict[str, Built] = {}

    def look_up() -> None:
        for key in keys:
            found = store.get(key) if store is not None and key not in out else None
            if found is not None:
                events.record(events.HIT, f"{key[:16]} {_label(found[1])}")
                out[key] = Built(key, found[0], found[1], True)

    look_up()
    if len(out) < len(keys):
        with ExitStack() as locks:
            if store is not None:  # another process may be compiling them: wait, then take its entries
                for key in sorted(set(keys) - set(out)):
                    locks.enter_context(store.compiling(key))
                look_up()
            todo = [(key, part) for key, part in zip(keys, parts) if key not in out]
            if not todo:  # built meanwhile by whoever held the locks
                return [out[key] for key in keys]
            what = (_what(name, todo[0][1], target) if len(todo) == 1
                    else f"{len(todo)} parts of {_what(name, None, target)}")
            with progress.announce(what, cached=store is not None):
                for built in _compile(ptx, target, todo, module):
                    out[built.key] = built
                    if store is not None:
                        store.put(built.key, build_id(target), _label(built.metadata), built.object_code,
                                  built.metadata, settings.max_size)
    return [out[key] for key in keys]


def _compile(ptx: list[str], target: Target, todo: list[tuple[str, str | None]], module) -> list[Built]:
    from zluda_py.compiler.pipeline import compile_object, compile_parts

    start = time.perf_counter()
    if todo[0][1] is None:
        results = [compile_object(ptx, target)]
    else:
        names = [part for _, part in todo]
        results = compile_parts(module if module is not None else _part_module(ptx, names), names, target)
    seconds = time.perf_counter() - start
    built = []
    for (key, _), (ir_text, object_code, metadata) in zip(todo, results):
        events.record(events.COMPILED, f"{key[:16]} {_label(metadata)} in {seconds:.3f} s")
        built.append(Built(key, object_code, metadata, False, ir_text))
    return built


HELPERS = "(shared helpers)"  # the part name of a target's helpers' entry


def helpers(target: Target, settings: Settings | None = None) -> bytes | None:
    """`target.helpers_object()`, an entry of its own: a warm process loads it, like its kernels,
    without running LLVM."""
    settings = settings or from_environment()
    if not settings.enabled:
        return target.helpers_object()
    store, key = store_for(settings), cache_key([], target, HELPERS)
    with store.compiling(key):
        found = store.get(key)
        if found is not None:
            return found[0]
        object_code = target.helpers_object()
        if object_code is not None:
            store.put(key, build_id(target), HELPERS, object_code, {}, settings.max_size)
        return object_code


use_helpers(lambda: helpers(CPU))


_linked: dict[tuple[str, ...], object] = {}
_linked_lock = threading.Lock()


def linked(ptx: list[str]):
    """The PTX parsed (and so checked) and linked, once per input in this process."""
    from zluda_py.compiler.linker import link
    from zluda_py.ptx import parse

    key = tuple(ptx)
    with _linked_lock:
        module = _linked.get(key)
    if module is None:
        module = link([parse(text) for text in ptx])
        with _linked_lock:
            module = _linked.setdefault(key, module)
    return module


def checked(ptx: list[str]):
    """The PTX parsed, checked and linked for a lazy load, which builds only the variables' part
    from it: bodies are checked without building their AST where fastcheck.py can (same errors
    and facts). Not kept in this process (`linked`): kernels are built from a full parse. A
    module the device runtime is linked into, or that leaves absent kernels out, is `linked`."""
    from zluda_py.compiler.linker import link
    from zluda_py.ptx import parse

    if len(ptx) != 1:
        return linked(ptx)
    module = parse(ptx[0], unbuilt=True)
    # which kernels reach an absent query is found by walking bodies: those must be built
    if any(f.facts is not None and f.facts.absent_query for f in module.functions()) or link([module]) is not module:
        return linked(ptx)
    return module


_sources: dict[tuple[str, ...], PartSource] = {}


def release(ptx: list[str], module=None) -> None:
    """Let the linked AST of a module built per kernel go (`module`, or the one `linked` keeps),
    keeping its text to parse parts from (part_source.py); a module linked from several texts
    keeps its AST."""
    key = tuple(ptx)
    if module is None:
        with _linked_lock:
            module = _linked.get(key)
    if module is None or len(ptx) != 1:
        return
    source = PartSource.of(module, ptx[0])
    if source is not None:
        with _linked_lock:
            _sources[key] = source
            _linked.pop(key, None)


def _part_module(ptx: list[str], parts: list[str]):
    """The AST these parts of a module built per kernel are lowered from: the linked module
    while this process holds it, else the text of what the kernels reach, parsed."""
    from zluda_py.compiler.parts import VARIABLES

    key = tuple(ptx)
    with _linked_lock:
        module, source = _linked.get(key), _sources.get(key)
    if module is not None:
        return module
    if source is not None and VARIABLES not in parts:
        from zluda_py.compiler.linker import link

        return link([source.module(parts)])
    module = linked(ptx)  # the load did not parse it (its variables' part was cached)
    release(ptx)
    return module


def known(ptx: list[str], target: Target, part: str | None) -> bool:
    """Whether the entry is built in this process or stored in the cache (nothing is compiled)."""
    if (target, part, *ptx) in _built_once:
        return True
    settings = from_environment()
    return settings.enabled and store_for(settings).get(cache_key(ptx, target, part)) is not None


_built_once: dict[tuple, Built] = {}
_built_once_lock = threading.Lock()


def build_once(ptx: list[str], target: Target = CPU, name: str = "") -> Built:
    """`build`, remembered for the life of the process. The driver instantiates a module anew
    for every cuModuleLoad* (each load has its own variables, as on NVIDIA's driver); this
    keeps repeated loads of one image from consulting the cache each time."""
    return parts_once(ptx, [None], target, name)[0]


def parts_once(ptx: list[str], parts: list, target: Target = CPU, name: str = "", module=None) -> list[Built]:
    """`build_parts` (`build` for [None]), each part remembered for the life of the process."""
    with _built_once_lock:
        missing = [part for part in parts if (target, part, *ptx) not in _built_once]
    if missing:  # built outside the lock: a kernel's first launch must not wait for another's compile
        for part, built in zip(missing, _build(ptx, missing, target, None, name, module)):
            with _built_once_lock:
                _built_once.setdefault((target, part, *ptx), dataclasses.replace(built, ir_text=None))
    with _built_once_lock:
        return [_built_once[(target, part, *ptx)] for part in parts]


def compile_cached(ptx: "str | list[str]", target: Target = CPU, once: bool = False, name: str = ""):
    """zluda_py.compiler.compile, through the persistent cache: a hit is loaded without
    running LLVM at all. Each call loads a new instance of the module; `once` looks the
    code up only the first time in this process (`build_once`)."""
    from zluda_py.compiler.pipeline import compile, load

    texts = ptx if isinstance(ptx, list) else [ptx]
    if not all(isinstance(t, str) for t in texts):
        return compile(ptx, target)  # ASTs have no stable text to key on
    start = time.perf_counter()
    built = (build_once if once else build)(texts, target, name=name)
    module = load(built.object_code, built.metadata, target)
    events.record(events.LOADED, f"{built.key[:16]} {'from the cache' if built.cached else 'compiled'} "
                                 f"in {time.perf_counter() - start:.4f} s")
    return module
