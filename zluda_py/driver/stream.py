"""Streams: one worker thread per stream runs its operations in order, asynchronously to the
host. Ordering across streams (the legacy default stream's implicit synchronization, event
waits) is expressed as dependencies an operation waits for before it runs."""

from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Callable

from .errors import CUDA_ERROR_LAUNCH_FAILED, CudaError

CU_STREAM_NON_BLOCKING = 0x1
# errors that corrupt the context: every later call in it returns them
STICKY_ERRORS = frozenset({700, 710, 714, 715, 716, 717, 718, 719})

_ids = itertools.count(1)


class Op:
    """One queued operation; `done` is set once it ran, `finished_at` is when (perf_counter)."""

    __slots__ = ("fn", "deps", "done", "finished_at")

    def __init__(self, fn: Callable[[], None], deps: list[Op]) -> None:
        self.fn = fn
        self.deps = deps
        self.done = threading.Event()
        self.finished_at = 0.0


class Stream:
    def __init__(self, ctx, flags: int = 0, priority: int = 0, kind: str = "user") -> None:
        self.ctx = ctx
        self.flags = flags
        self.priority = priority
        self.kind = kind  # "user", "legacy" or "per-thread"
        self.id = next(_ids)
        self.handle = 0
        self.last: Op | None = None
        self.error = 0  # a non-sticky asynchronous error, reported by the next synchronization
        self._queue: collections.deque[Op] = collections.deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def blocking(self) -> bool:
        """Whether it synchronizes with the legacy default stream."""
        return not self.flags & CU_STREAM_NON_BLOCKING

    def submit(self, fn: Callable[[], None], deps: list[Op]) -> Op:
        op = Op(fn, deps)
        with self._cv:
            self._queue.append(op)
            self.last = op
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=f"zluda-stream-{self.id}", daemon=True)
                self._thread.start()
            self._cv.notify()
        return op

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                op = self._queue[0]
            for dep in op.deps:
                dep.done.wait()
            self._execute(op)
            with self._cv:
                self._queue.popleft()
            op.finished_at = time.perf_counter()
            op.done.set()

    def _execute(self, op: Op) -> None:
        if self.ctx.sticky_error:
            return  # a corrupted context runs nothing more
        try:
            op.fn()
        except Exception as e:  # noqa: BLE001 - every failure becomes a CUDA error code
            code = getattr(e, "cu_result", None) or (e.code if isinstance(e, CudaError) else CUDA_ERROR_LAUNCH_FAILED)
            if code in STICKY_ERRORS:
                self.ctx.sticky_error = code
            else:
                self.error = self.error or code
            if not isinstance(e, CudaError):
                import sys
                print(f"zluda: {e}", file=sys.stderr)

    def idle(self) -> bool:
        return self.last is None or self.last.done.is_set()

    def synchronize(self) -> None:
        last = self.last
        if last is not None:
            last.done.wait()
        self.raise_error()

    def raise_error(self) -> None:
        if self.ctx.sticky_error:
            raise CudaError(self.ctx.sticky_error)
        if self.error:
            code, self.error = self.error, 0
            raise CudaError(code)
