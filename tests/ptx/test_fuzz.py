"""10,000 seeded mutations of corpus files: the parser raises PtxError or returns a module,
never another exception, never hangs and never runs away with memory."""

from __future__ import annotations

import random
import time
import tracemalloc

from zluda_py import ptx
from zluda_py.fuzz.hostile.cases import mutate_ptx

from .corpus import HAND_WRITTEN

MUTATIONS = 10_000
# Hang and runaway guards, far above normal (a mutation parses in <15 ms of CPU and a few MiB).
# CPU time of this thread, not wall time: a loaded CI machine stalls the wall clock for seconds.
MAX_CPU_SECONDS = 5.0
MAX_PEAK_BYTES = 256 << 20


def test_mutations_raise_only_ptx_error(nvcc):
    seeds = [nvcc(["vector_add.cu"], ["-ptx", "-arch=sm_80"], ".ptx").read_text()]
    seeds += [p.read_text() for p in HAND_WRITTEN]
    rng = random.Random(20240613)
    outcomes = {"ok": 0, "error": 0}
    slowest = 0.0
    tracemalloc.start()
    for n in range(MUTATIONS):
        text = mutate_ptx(rng, seeds[n % len(seeds)])
        tracemalloc.reset_peak()
        start = time.thread_time()
        try:
            ptx.parse(text, "fuzz.ptx")
            outcomes["ok"] += 1
        except ptx.PtxError as e:
            assert e.line >= 1 and e.col >= 1, (str(e), text)
            outcomes["error"] += 1
        except Exception as e:  # pragma: no cover - the failure being tested for
            raise AssertionError(f"mutation {n} raised {type(e).__name__}: {e}\n{text}") from e
        slowest = max(slowest, time.thread_time() - start)
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < MAX_PEAK_BYTES, f"mutation {n} peaked at {peak >> 20} MiB while parsing"
    tracemalloc.stop()
    assert slowest < MAX_CPU_SECONDS, f"a mutation took {slowest:.2f}s of CPU to parse"
    # Both outcomes must occur, or the mutations are not exercising the parser.
    assert outcomes["ok"] > 100 and outcomes["error"] > 1000, outcomes
