"""cuStreamBeginRecaptureToGraph (CUDA 13.3) through libcuda.so.1, checked against cuda.h: the
recapture re-makes the existing graph's nodes in creation order; parameter changes reach the
callback (the graph's node, both CUgraphNodeParams, whether an instantiated graph can take them)
and the graph, whose node handles stay, so cuGraphExecUpdate applies them; a topology or node
kind mismatch fails at once, as does a callback answering an error
(CUDA_ERROR_GRAPH_RECAPTURE_FAILURE); a failed recapture is ended as an invalidated capture."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

RECAPTURE_FAILURE, CAPTURE_INVALIDATED = 918, 901
MEMSET_NODE, ELIGIBLE_FOR_UPDATE = 2, 0


class MemsetParams(ctypes.Structure):  # CUDA_MEMSET_NODE_PARAMS
    _fields_ = [("dst", c_ulonglong), ("pitch", c_size_t), ("value", c_uint), ("elementSize", c_uint),
                ("width", c_size_t), ("height", c_size_t)]


class NodeParams(ctypes.Structure):  # CUgraphNodeParams: 256 bytes
    _fields_ = [("type", c_int), ("reserved0", c_int * 3), ("memset", MemsetParams),
                ("rest", ctypes.c_longlong * (29 - 5)), ("reserved2", ctypes.c_longlong)]


Callback = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, POINTER(NodeParams), POINTER(NodeParams), c_int)


def _sets(cu, stream, first: c_ulonglong, value: int, second: c_ulonglong) -> list[int]:
    """Two memsets in a row: what each capture below records (node 0 takes `value`)."""
    return [cu.cuMemsetD32Async(first, value, c_size_t(16), stream),
            cu.cuMemsetD32Async(second, 2, c_size_t(16), stream)]


def test_recapture_updates_the_graph_and_its_exec(cu):
    stream, graph, exec_ = c_void_p(), c_void_p(), c_void_p()
    cu.ok(cu.cuStreamCreate(byref(stream), 1))
    first, second = c_ulonglong(), c_ulonglong()
    for d in (first, second):
        cu.ok(cu.cuMemAlloc_v2(byref(d), c_size_t(64)))
    cu.ok(cu.cuStreamBeginCapture_v2(stream, 2))
    assert _sets(cu, stream, first, 1, second) == [0, 0]
    cu.ok(cu.cuStreamEndCapture(stream, byref(graph)))
    nodes, count = (c_void_p * 2)(), c_size_t(2)
    cu.ok(cu.cuGraphGetNodes(graph, nodes, byref(count)))
    before = list(nodes)
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exec_), graph, c_ulonglong(0)))

    seen = []

    def changed(data, node, original, recaptured, status):
        seen.append((data, node, original[0].type, original[0].memset.value, recaptured[0].memset.value, status))
        return 0

    callback = Callback(changed)
    cu.ok(cu.cuStreamBeginRecaptureToGraph(stream, 2, graph, callback, c_void_p(0x5EED)))
    assert _sets(cu, stream, first, 7, second) == [0, 0]
    again = c_void_p()
    cu.ok(cu.cuStreamEndCapture(stream, byref(again)))
    assert again.value == graph.value
    # only node 0 changed; the callback saw the graph's node and both parameter sets
    assert seen == [(0x5EED, before[0], MEMSET_NODE, 1, 7, ELIGIBLE_FOR_UPDATE)]
    cu.ok(cu.cuGraphGetNodes(graph, nodes, byref(count)))
    assert list(nodes) == before and count.value == 2
    params = NodeParams()
    cu.ok(cu.cuGraphNodeGetParams(c_void_p(before[0]), byref(params)))
    assert params.memset.value == 7
    info = (c_void_p * 3)()
    cu.ok(cu.cuGraphExecUpdate_v2(exec_, graph, info))
    cu.ok(cu.cuGraphLaunch(exec_, stream))
    cu.ok(cu.cuStreamSynchronize(stream))
    out = (c_uint * 4)()
    cu.ok(cu.cuMemcpyDtoH_v2(out, first, c_size_t(16)))
    assert list(out) == [7] * 4
    cu.ok(cu.cuGraphExecDestroy(exec_))
    cu.ok(cu.cuGraphDestroy(graph))
    for d in (first, second):
        cu.ok(cu.cuMemFree_v2(d))
    cu.ok(cu.cuStreamDestroy_v2(stream))


def test_mismatches_fail_the_recapture(cu):
    stream, graph = c_void_p(), c_void_p()
    cu.ok(cu.cuStreamCreate(byref(stream), 1))
    d = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(d), c_size_t(64)))

    def captured() -> c_void_p:
        g = c_void_p()
        cu.ok(cu.cuStreamBeginCapture_v2(stream, 2))
        assert _sets(cu, stream, d, 1, d) == [0, 0]
        cu.ok(cu.cuStreamEndCapture(stream, byref(g)))
        return g

    def recapture(g: c_void_p, callback=None) -> None:
        cu.ok(cu.cuStreamBeginRecaptureToGraph(stream, 2, g, callback, None))

    ended = c_void_p()
    # another node kind first: the capturing call fails, and the capture is invalidated
    graph = captured()
    recapture(graph)
    assert cu.cuMemcpyDtoDAsync_v2(d, d, c_size_t(16), stream) == RECAPTURE_FAILURE
    assert cu.cuStreamEndCapture(stream, byref(ended)) == CAPTURE_INVALIDATED
    cu.ok(cu.cuGraphDestroy(graph))
    # more nodes than the graph has
    graph = captured()
    recapture(graph)
    assert _sets(cu, stream, d, 1, d) == [0, 0]
    assert cu.cuMemsetD32Async(d, 3, c_size_t(16), stream) == RECAPTURE_FAILURE
    assert cu.cuStreamEndCapture(stream, byref(ended)) == CAPTURE_INVALIDATED
    cu.ok(cu.cuGraphDestroy(graph))
    # fewer: found when the capture ends
    graph = captured()
    recapture(graph)
    assert cu.cuMemsetD32Async(d, 1, c_size_t(16), stream) == 0
    assert cu.cuStreamEndCapture(stream, byref(ended)) == RECAPTURE_FAILURE
    cu.ok(cu.cuGraphDestroy(graph))
    # a callback answering an error
    refuse = Callback(lambda *args: 1)
    graph = captured()
    recapture(graph, refuse)
    assert cu.cuMemsetD32Async(d, 5, c_size_t(16), stream) == RECAPTURE_FAILURE
    assert cu.cuStreamEndCapture(stream, byref(ended)) == CAPTURE_INVALIDATED
    cu.ok(cu.cuGraphDestroy(graph))
    # nothing captures afterwards
    status = c_int(7)
    cu.ok(cu.cuStreamIsCapturing(stream, byref(status)))
    assert status.value == 0
    cu.ok(cu.cuMemFree_v2(d))
    cu.ok(cu.cuStreamDestroy_v2(stream))
