"""Stream capture: work queued on a capturing stream becomes graph nodes instead of running.

`Context.submit` hands work on a capturing stream to `record`: a typed work object (its
`node_type`: kernels, copies, sets, host functions, graph launches) becomes a node depending on
the stream's current dependency set, which it then replaces. Events carry dependencies between
streams: recording one in a capture remembers the stream's set, and a stream that waits for it
joins the capture (fork) or merges the set (join). The errors are NVIDIA's: calls that would
wait for captured work fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the
capture, the legacy stream may not wait for a capturing blocking stream (..._IMPLICIT), and in
global and thread-local modes the potentially unsafe calls (synchronous allocation, copies and
synchronization) are refused while a capture that the mode covers is under way."""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Callable

from . import context as ctxs
from ..curesult import (CUDA_ERROR_CAPTURED_EVENT, CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE,
                     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                     CUDA_ERROR_STREAM_CAPTURE_ISOLATION, CUDA_ERROR_STREAM_CAPTURE_MERGE,
                     CUDA_ERROR_STREAM_CAPTURE_UNJOINED, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, CudaError)
from .stream import Op, Stream

if TYPE_CHECKING:
    from .graphs import Graph, Node
    from .recapture import Recapture

GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
STATUS_NONE, STATUS_ACTIVE, STATUS_INVALIDATED = 0, 1, 2
ADD_CAPTURE_DEPENDENCIES, SET_CAPTURE_DEPENDENCIES = 0, 1
_ids = itertools.count(1)
_lock = threading.RLock()
_active: set[Capture] = set()
_thread_mode = threading.local()


class Capture:
    def __init__(self, origin: Stream, graph: Graph, mode: int, owns_graph: bool,
                 recapture: Recapture | None = None) -> None:
        self.id = next(_ids)
        self.origin, self.graph, self.mode, self.owns_graph = origin, graph, mode, owns_graph
        self.recapture = recapture  # cuStreamBeginRecaptureToGraph: the graph whose nodes are re-made
        self.thread = threading.get_ident()
        self.invalidated = False
        self.streams: set[Stream] = set()

    def add(self, work, deps: list[Node]) -> tuple[Node, Node]:
        """A node for `work` after `deps`: (the captured graph's node, the node that holds the
        work from now on: under a recapture the existing graph's)."""
        node = self.graph.add(work, deps)
        if self.recapture is None:
            return node, node
        try:
            return node, self.recapture.match(self.graph, node)
        except CudaError:
            invalidate(self)
            raise


class StreamCapture:
    """A stream's part in a capture: the nodes its next work depends on."""

    def __init__(self, capture: Capture, deps: list[Node]) -> None:
        self.capture, self.deps = capture, deps
        self.kept = None  # the arrays cuStreamGetCaptureInfo last handed out


def thread_mode() -> int:
    return getattr(_thread_mode, "mode", GLOBAL)


def exchange_mode(mode: int) -> int:
    if mode not in (GLOBAL, THREAD_LOCAL, RELAXED):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"capture mode {mode}")
    previous = thread_mode()
    _thread_mode.mode = mode
    return previous


def invalidate(capture: Capture) -> None:
    capture.invalidated = True


def check_unsafe(what: str) -> None:
    """Refuse a potentially unsafe call (it could wait for, or disturb, captured work) while a
    capture covers the calling thread: one of its own unless relaxed, or another thread's
    global one unless this thread's mode is thread-local or relaxed."""
    if not _active:
        return
    me, mine = threading.get_ident(), thread_mode()
    if mine == RELAXED:
        return
    with _lock:
        for cap in _active:
            if cap.mode == RELAXED:
                continue
            if cap.thread == me:
                invalidate(cap)
                raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, f"{what} while this thread captures")
            if cap.mode == GLOBAL and mine == GLOBAL:
                raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, f"{what} while another thread captures in global mode")


def check_not_capturing(stream: Stream, what: str) -> None:
    """A call that waits for the stream's work cannot be made on a capturing stream: it fails
    and invalidates the capture."""
    sc = stream.capture
    if sc is not None:
        invalidate(sc.capture)
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, f"{what} of a capturing stream")


def record(stream: Stream, fn: Callable[[], None], extra_deps: list[Op]) -> bool:
    """Context.submit's path for a stream in capture (True: fn became a node), and for the
    legacy stream while a stream of its context captures (False: it runs as usual)."""
    from . import graphs

    sc = stream.capture
    if sc is None:  # the legacy stream would wait for a capturing blocking stream
        for s in stream.ctx.all_streams():
            if s.capture is not None and s.blocking:
                invalidate(s.capture.capture)
                raise CudaError(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "the legacy stream would wait for a capturing stream")
        return False
    cap = sc.capture
    if cap.invalidated:
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated")
    if extra_deps:
        invalidate(cap)
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "a dependency on work outside the capture")
    node_type = getattr(fn, "node_type", None)
    if node_type is None:
        invalidate(cap)
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "this operation cannot be captured")
    work = graphs.ChildGraph(fn.graph) if node_type == graphs.GRAPH else fn
    with _lock:
        sc.deps = [cap.add(work, sc.deps)[0]]
    return True


def record_node(stream: Stream, work) -> Node:
    """Add a node made by the caller (memory nodes) to the stream's capture; the node holding
    its work from now on (a recapture's: the existing graph's, with its allocation)."""
    sc = stream.capture
    if sc.capture.invalidated:
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated")
    with _lock:
        node, holder = sc.capture.add(work, sc.deps)
        sc.deps = [node]
    return holder


def record_event(stream: Stream, event) -> bool:
    """cuEventRecord on a capturing stream: the event stands for the stream's dependency set
    (True), else it is an ordinary record (False)."""
    sc = stream.capture
    if sc is None:
        event.captured = None
        return False
    if sc.capture.invalidated:
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated")
    event.captured = (sc.capture, list(sc.deps))
    return True


def wait_event(stream: Stream, event) -> bool:
    """cuStreamWaitEvent with an event recorded in a capture: the stream joins the capture, or
    adds the event's nodes to its dependencies (True). False: an ordinary wait, unless the
    stream captures and the event's work is outside the capture and still pending."""
    captured = event.captured
    sc = stream.capture
    if captured is None:
        if sc is not None and event.op is not None and not event.op.done.is_set():
            invalidate(sc.capture)
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "waiting in a capture for work outside it")
        return sc is not None  # in a capture, finished work orders nothing
    cap, deps = captured
    if cap not in _active:
        raise CudaError(CUDA_ERROR_CAPTURED_EVENT, "the event was recorded in a capture that has ended")
    with _lock:
        if sc is None:
            if stream.kind == "legacy":
                invalidate(cap)
                raise CudaError(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "the legacy stream cannot join a capture")
            _join(stream, cap, list(deps))
        elif sc.capture is not cap:
            invalidate(sc.capture)
            invalidate(cap)
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_MERGE, "the event belongs to another capture")
        else:
            sc.deps += [d for d in deps if d not in sc.deps]
    return True


def is_live(cap: Capture) -> bool:
    """Whether the capture is still under way."""
    return cap in _active


def check_event(event, what: str) -> None:
    """Querying or waiting on the host for an event recorded in a live capture."""
    if event.captured is not None and event.captured[0] in _active:
        raise CudaError(CUDA_ERROR_CAPTURED_EVENT, f"{what} of an event recorded in a capture")


def _join(stream: Stream, cap: Capture, deps: list[Node]) -> None:
    stream.capture = StreamCapture(cap, deps)
    cap.streams.add(stream)
    with stream.ctx.lock:
        stream.ctx.capturing += 1


def _leave(stream: Stream) -> None:
    stream.capture = None
    with stream.ctx.lock:
        stream.ctx.capturing -= 1


def begin(stream: Stream, mode: int, graph: Graph | None = None, deps: list[Node] = (),
          recapture: Recapture | None = None) -> None:
    """`graph`: capture into it (cuStreamBeginCaptureToGraph); `recapture`: into a new graph
    whose nodes re-make the recapture's (cuStreamBeginRecaptureToGraph)."""
    from . import graphs

    if mode not in (GLOBAL, THREAD_LOCAL, RELAXED):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"capture mode {mode}")
    if stream.kind == "legacy":
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy default stream cannot be captured")
    if stream.capture is not None:
        raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is capturing already")
    owns = graph is None
    cap = Capture(stream, graphs.Graph() if owns else graph, mode, owns, recapture)
    with _lock:
        _active.add(cap)
        _join(stream, cap, list(deps))


def end(stream: Stream) -> Graph | None:
    """The captured graph; raises (and ends the capture) when it was invalidated."""
    sc = stream.capture
    if sc is None:
        raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
    cap = sc.capture
    if cap.origin is not stream:
        invalidate(cap)
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "the capture began in another stream")
    if cap.mode != RELAXED and cap.thread != threading.get_ident():
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "the capture began in another thread")
    with _lock:
        unjoined = not cap.invalidated and _unjoined(cap)
        for s in list(cap.streams):
            _leave(s)
        _active.discard(cap)
    if cap.invalidated or unjoined:
        if cap.owns_graph:
            cap.graph.destroy()
        if unjoined:
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "a stream forked into the capture was not joined back")
        raise CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated")
    return cap.graph if cap.recapture is None else cap.recapture.finish(cap.graph)


def _unjoined(cap: Capture) -> bool:
    """Whether a stream that joined has work the origin stream does not depend on."""
    reached: set[Node] = set()
    todo = list(cap.origin.capture.deps)
    while todo:
        n = todo.pop()
        if n not in reached:
            reached.add(n)
            todo += n.deps
    return any(d not in reached for s in cap.streams if s is not cap.origin for d in s.capture.deps)


def status(stream: Stream) -> int:
    sc = stream.capture
    if sc is None:
        return STATUS_NONE
    return STATUS_INVALIDATED if sc.capture.invalidated else STATUS_ACTIVE
