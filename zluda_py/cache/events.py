"""What the cache did, for tests, benchmarks and the driver's trace log.

`counts` tallies events in this process. When the driver is loaded and tracing
(ZLUDA_TRACE / `zluda run --trace`), each event is also a `cache: ...` line in its calls log.
The driver is looked up, never imported: the cache sits below it and works without it.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter

HIT, COMPILED, STORED, CORRUPT, REBUILT, EVICTED = "hit", "compiled", "stored", "corrupt", "rebuilt", "evicted"
LOADED = "loaded"  # compile_cached's total for one module: lookup or compile, then load

counts: Counter[str] = Counter()
_lock = threading.Lock()
_warned: set[str] = set()


def record(event: str, detail: str, n: int = 1) -> None:
    with _lock:
        counts[event] += n
    trace = sys.modules.get("zluda_py.driver.trace")
    if trace is not None and trace.enabled():
        trace.note("cache", f"{event} {detail}")


def warn_once(message: str) -> None:
    """One line on stderr per distinct problem per process (a cache problem never fails a program)."""
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    print(f"zluda: warning: {message}", file=sys.stderr, flush=True)
    record("warning", message)
