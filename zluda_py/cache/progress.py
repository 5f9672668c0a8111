"""Telling a waiting user what is being compiled.

A compile that runs past AFTER_S seconds says once on stderr what it compiles (module, kernel,
target), and, when it ends, how long it took and whether the result was cached. On by default
when stderr is a terminal; ZLUDA_PROGRESS=1 turns it on elsewhere, ZLUDA_PROGRESS=0 off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

AFTER_S = 2.0


def enabled() -> bool:
    setting = os.environ.get("ZLUDA_PROGRESS", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def _say(line: str) -> None:
    try:
        print(f"zluda: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # a progress line is never worth failing a program


@contextmanager
def announce(what: str, cached: bool) -> Iterator[None]:
    """Around compiling `what` ("kernel K of module M for cpu"); `cached`: the result is stored."""
    if not enabled():
        yield
        return
    start = time.perf_counter()
    said = threading.Event()

    def slow() -> None:
        said.set()
        _say(f"compiling {what} ...")

    timer = threading.Timer(AFTER_S, slow)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            outcome = "cached for later runs" if cached else "not cached (the cache is off)"
            _say(f"compiled {what} in {time.perf_counter() - start:.1f} s, {outcome}")
