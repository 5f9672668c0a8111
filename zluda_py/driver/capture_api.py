"""Entry points: stream capture (begin, end, status, dependencies; capture.py holds the rules)."""

from __future__ import annotations

from . import capture, context as ctxs
from .api import entry
from ..cdata import addr, ffi, store, store_ptr
from ..curesult import CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE, CudaError
from .graphs import Node, _deps, _edges, graphs
from .init_device import require
from .recapture import Recapture
from .stream import Stream


def _stream(h) -> Stream:
    return ctxs.resolve_stream(addr(h))


@entry("cuStreamBeginCapture_v2")
def cuStreamBeginCapture_v2(h, mode):
    capture.begin(_stream(h), mode)


@entry("cuStreamBeginCapture")
def cuStreamBeginCapture(h):
    capture.begin(_stream(h), capture.GLOBAL)  # CUDA 10.0's form, before capture modes


@entry("cuStreamBeginCaptureToGraph")
def cuStreamBeginCaptureToGraph(h, hgraph, pdeps, pedges, count, mode):
    graph = graphs.get(addr(hgraph))
    deps = _deps(pdeps, count)
    _edges(ffi.cast("CUgraphEdgeData *", pedges), count)
    if any(d.graph is not graph for d in deps):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
    capture.begin(_stream(h), mode, graph, deps)


@entry("cuStreamBeginRecaptureToGraph")
def cuStreamBeginRecaptureToGraph(h, mode, hgraph, callback, data):
    graph = graphs.get(addr(hgraph))
    capture.begin(_stream(h), mode, recapture=Recapture(graph, addr(callback), addr(data)))
    graph.release_user_objects()  # cuda.h: released before the recapture


@entry("cuStreamEndCapture")
def cuStreamEndCapture(h, pgraph):
    stream = _stream(h)
    # a capture into the program's graph (cuStreamBeginCaptureToGraph) may be ended without
    # asking for the graph back, as cuda-samples' graphConditionalNodes does on NVIDIA's driver
    into_graph = stream.capture is not None and not stream.capture.capture.owns_graph
    if pgraph == ffi.NULL and into_graph:
        capture.end(stream)
        return
    require(pgraph)
    store_ptr(pgraph, 0)
    graph = capture.end(stream)
    store_ptr(pgraph, graph.handle or graphs.add(graph))


@entry("cuStreamIsCapturing")
def cuStreamIsCapturing(h, status):
    require(status)
    store(status, capture.status(_stream(h)))


def _info(h, status, pid, pgraph, pdeps, pedges, pcount) -> None:
    require(status)
    s = _stream(h)
    store(status, capture.status(s))
    sc = s.capture
    if sc is None:
        return
    if pid != ffi.NULL:
        store(pid, sc.capture.id)
    if pgraph != ffi.NULL:
        graph = sc.capture.graph
        store_ptr(pgraph, graph.handle or graphs.add(graph))
    deps = list(sc.deps)
    if pdeps != ffi.NULL:
        handles = ffi.new("void *[]", [ffi.cast("void *", d.handle) for d in deps] or [ffi.NULL])
        edges = ffi.new("unsigned char[]", 8 * max(len(deps), 1))
        sc.kept = (handles, edges)  # valid until the next query or the end of the capture, as NVIDIA's
        store_ptr(pdeps, addr(handles) if deps else 0)
        if pedges != ffi.NULL:
            store_ptr(pedges, addr(edges) if deps else 0)
    if pcount != ffi.NULL:
        store(pcount, len(deps))


@entry("cuStreamGetCaptureInfo_v3")
def cuStreamGetCaptureInfo_v3(h, status, pid, pgraph, pdeps, pedges, pcount):
    _info(h, status, pid, pgraph, pdeps, pedges, pcount)


@entry("cuStreamGetCaptureInfo_v2")
def cuStreamGetCaptureInfo_v2(h, status, pid, pgraph, pdeps, pcount):
    _info(h, status, pid, pgraph, pdeps, ffi.NULL, pcount)


@entry("cuStreamGetCaptureInfo")
def cuStreamGetCaptureInfo(h, status, pid):
    _info(h, status, pid, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL)


@entry("cuStreamUpdateCaptureDependencies_v2")
def cuStreamUpdateCaptureDependencies_v2(h, pdeps, pedges, count, flags):
    s = _stream(h)
    sc = s.capture
    if sc is None:
        raise CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
    if flags not in (capture.ADD_CAPTURE_DEPENDENCIES, capture.SET_CAPTURE_DEPENDENCIES):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"flags {flags:#x}")
    deps: list[Node] = _deps(pdeps, count)
    _edges(ffi.cast("CUgraphEdgeData *", pedges), count)
    if any(d.graph is not sc.capture.graph for d in deps):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "a node outside the capture's graph")
    if flags == capture.SET_CAPTURE_DEPENDENCIES:
        sc.deps = list(dict.fromkeys(deps))
    else:
        sc.deps += [d for d in dict.fromkeys(deps) if d not in sc.deps]


@entry("cuStreamUpdateCaptureDependencies")
def cuStreamUpdateCaptureDependencies(h, pdeps, count, flags):
    cuStreamUpdateCaptureDependencies_v2(h, pdeps, ffi.NULL, count, flags)


@entry("cuThreadExchangeStreamCaptureMode")
def cuThreadExchangeStreamCaptureMode(mode):
    require(mode)
    store(mode, capture.exchange_mode(mode[0]))
