"""Streams: one worker thread per stream runs its operations in order, asynchronously to the
host. Ordering across streams (the legacy default stream's implicit synchronization, event
waits) is expressed as dependencies an operation waits for before it runs."""

from __future__ import annotations

import collections
import itertools
import sys
import threading
import time
from typing import Callable

from ..curesult import CUDA_ERROR_LAUNCH_FAILED, CudaError
from . import native

CU_STREAM_NON_BLOCKING = 0x1
# errors that corrupt the context: every later call in it returns them
STICKY_ERRORS = frozenset({700, 710, 714, 715, 716, 717, 718, 719})

_ids = itertools.count(1)


class Op:
    """One queued operation; `done` is set once it ran, `finished_at` is when (perf_counter).
    A `claimed` op is run by the thread that submitted it (see Stream.submit)."""

    __slots__ = ("fn", "deps", "done", "finished_at", "claimed")

    def __init__(self, fn: Callable[[], None], deps: list[Op], claimed: bool = False) -> None:
        self.fn = fn
        self.deps = deps
        self.done = threading.Event()
        self.finished_at = 0.0
        self.claimed = claimed


class Stream:
    def __init__(self, ctx, flags: int = 0, priority: int = 0, kind: str = "user") -> None:
        self.ctx = ctx
        self.flags = flags
        self.priority = priority
        self.kind = kind  # "user", "legacy" or "per-thread"
        self.id = next(_ids)
        self.handle = 0
        self._last: Op | None = None  # the last Python op
        self.error = 0  # a non-sticky asynchronous error, reported by the next synchronization
        self.capture = None  # capture.StreamCapture while the stream is captured
        self._queue: collections.deque[Op] = collections.deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self.native = native.stream(self)  # its twin in the shim's native launch path

    @property
    def last(self) -> Op | native.Mark | None:
        """The stream's last work: a Python op, or a launch queued by the native path after it."""
        return native.last(self) or self._last

    @property
    def blocking(self) -> bool:
        """Whether it synchronizes with the legacy default stream."""
        return not self.flags & CU_STREAM_NON_BLOCKING

    def submit(self, fn: Callable[[], None], deps: list[Op], inline: bool = False, reserved: bool = False) -> Op:
        """Queue fn after deps. With `inline`, when nothing is queued and every dependency is
        done, the op is claimed instead: it holds the stream's place in line while the caller
        runs it with `run_claimed`. A synchronous call then costs no hand-off to the worker
        thread (a scheduler time slice when the CPUs are busy). `reserved`: the caller took
        the op's place with native.reserve (and put what it returned in deps) already."""
        with self._cv:
            before = None if reserved else native.reserve(self)
            if before is not None:  # after the native launches queued before it
                deps = [*deps, before]
            if inline and not self._queue and all(d.done.is_set() for d in deps):
                op = Op(fn, [], claimed=True)
                self._queue.append(op)
                self._last = op
                return op
            op = Op(fn, deps)
            self._queue.append(op)
            self._last = op
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=f"zluda-stream-{self.id}", daemon=True)
                self._thread.start()
            self._cv.notify()
        return op

    def run_claimed(self, op: Op) -> None:
        """Run a claimed op in the calling thread; work queued behind it then proceeds."""
        self._execute(op)
        self._finish(op)

    def _finish(self, op: Op) -> None:
        op.finished_at = time.perf_counter()
        native.finished(self)  # before a waiter wakes: a launch it makes next may go native
        op.done.set()
        with self._cv:
            self._queue.popleft()
            self._cv.notify()

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._queue or self._queue[0].claimed:
                    self._cv.wait()
                op = self._queue[0]
            for dep in op.deps:
                dep.done.wait()
            self._execute(op)
            self._finish(op)

    def _execute(self, op: Op) -> None:
        if self.ctx.sticky_error:
            return  # a corrupted context runs nothing more
        try:
            op.fn()
        except Exception as e:  # noqa: BLE001 - every failure becomes a CUDA error code
            self.fail(e)

    def fail(self, e: Exception) -> None:
        """An op of this stream failed with e (a launch run by the native path too)."""
        code = getattr(e, "cu_result", None) or (e.code if isinstance(e, CudaError) else CUDA_ERROR_LAUNCH_FAILED)
        if not isinstance(e, CudaError):
            # Written whole and flushed before the error is visible: a program that sees the error
            # and exits at once must not cut the message (a worker thread dies at exit).
            sys.stderr.write(f"zluda: {e}\n")
            sys.stderr.flush()
        if code in STICKY_ERRORS:
            self.ctx.sticky_error = code
        else:
            self.error = self.error or code

    def idle(self) -> bool:
        last = self.last
        return last is None or last.done.is_set()

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
