"""Graph, exec and node ids, cuGraphNodeGetParams and cuGraphNodeGetContainingGraph;
cuPointerSetAttribute and cuMemRangeGetAttributes, through libcuda.so.1. The documented facts
checked: ids are unique (a node's local id with its graph's id), the ids appear in
cuGraphDebugDotPrint's output, cuGraphNodeGetParams hands back what cuGraphAddNode was given,
SYNC_MEMOPS is the settable pointer attribute and reads back, managed ranges only for the
range queries (which answer as their singular form does)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

INVALID_VALUE = 1
CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_EMPTY = 2, 5
SYNC_MEMOPS = 6


class MemsetParams(ctypes.Structure):
    _fields_ = [("dst", c_ulonglong), ("pitch", c_size_t), ("value", c_uint), ("elementSize", c_uint),
                ("width", c_size_t), ("height", c_size_t), ("ctx", c_void_p)]


class NodeParams(ctypes.Structure):
    _fields_ = [("type", c_int), ("reserved0", c_int * 3), ("memset", MemsetParams),
                ("rest", ctypes.c_longlong * (29 - 6)), ("reserved2", ctypes.c_longlong)]


def test_graph_ids_and_node_params(cu, tmp_path):
    g1, g2 = c_void_p(), c_void_p()
    cu.ok(cu.cuGraphCreate(byref(g1), 0))
    cu.ok(cu.cuGraphCreate(byref(g2), 0))
    id1, id2 = c_uint(), c_uint()
    cu.ok(cu.cuGraphGetId(g1, byref(id1)))
    cu.ok(cu.cuGraphGetId(g2, byref(id2)))
    assert id1.value != id2.value
    buf = c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(buf), c_size_t(256)))
    a, b, c = c_void_p(), c_void_p(), c_void_p()
    cu.ok(cu.cuGraphAddEmptyNode(byref(a), g1, None, 0))
    cu.ok(cu.cuGraphAddEmptyNode(byref(b), g1, None, 0))
    given = NodeParams(CU_GRAPH_NODE_TYPE_MEMSET)
    given.memset = MemsetParams(buf.value, 64, 0x5A, 1, 16, 4, cu.ctx.value)
    cu.ok(cu.cuGraphAddNode(byref(c), g1, None, 0, byref(given)))
    ids = []
    for n in (a, b, c):
        local, tools = c_uint(), c_ulonglong()
        cu.ok(cu.cuGraphNodeGetLocalId(n, byref(local)))
        cu.ok(cu.cuGraphNodeGetToolsId(n, byref(tools)))
        ids.append((local.value, tools.value))
        owner = c_void_p()
        cu.ok(cu.cuGraphNodeGetContainingGraph(n, byref(owner)))
        assert owner.value == g1.value
    assert len({i for i, _ in ids}) == 3 and len({t for _, t in ids}) == 3
    cu.ok(cu.cuGraphDestroyNode(b))
    d = c_void_p()
    cu.ok(cu.cuGraphAddEmptyNode(byref(d), g1, None, 0))
    local = c_uint()
    cu.ok(cu.cuGraphNodeGetLocalId(d, byref(local)))
    assert local.value not in {i for i, _ in ids}  # a removed node's id is not handed out again
    got = NodeParams()
    cu.ok(cu.cuGraphNodeGetParams(c, byref(got)))
    assert got.type == CU_GRAPH_NODE_TYPE_MEMSET
    assert (got.memset.dst, got.memset.pitch, got.memset.value, got.memset.elementSize, got.memset.width,
            got.memset.height) == (buf.value, 64, 0x5A, 1, 16, 4)
    cu.ok(cu.cuGraphNodeGetParams(a, byref(got)))
    assert got.type == CU_GRAPH_NODE_TYPE_EMPTY
    assert cu.cuGraphNodeGetParams(a, None) == INVALID_VALUE
    dot = tmp_path / "g.dot"
    cu.ok(cu.cuGraphDebugDotPrint(g1, str(dot).encode(), 0))
    text = dot.read_text()
    assert f"graph_{id1.value}" in text
    for n in (a, c, d):
        cu.ok(cu.cuGraphNodeGetLocalId(n, byref(local)))
        assert f"graph_{id1.value}_node_{local.value}" in text
    exe, exe2, eid, eid2 = c_void_p(), c_void_p(), c_uint(), c_uint()
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exe), g1, 0))
    cu.ok(cu.cuGraphInstantiateWithFlags(byref(exe2), g1, 0))
    cu.ok(cu.cuGraphExecGetId(exe, byref(eid)))
    cu.ok(cu.cuGraphExecGetId(exe2, byref(eid2)))
    assert eid.value != eid2.value
    assert cu.cuGraphExecGetId(exe, None) == INVALID_VALUE
    for e in (exe, exe2):
        cu.ok(cu.cuGraphExecDestroy(e))
    for g in (g1, g2):
        cu.ok(cu.cuGraphDestroy(g))
    cu.ok(cu.cuMemFree_v2(buf))


def test_pointer_and_range_attributes(cu):
    buf, managed = c_ulonglong(), c_ulonglong()
    cu.ok(cu.cuMemAlloc_v2(byref(buf), c_size_t(256)))
    cu.ok(cu.cuMemAllocManaged(byref(managed), c_size_t(4096), 1))
    cu.cuPointerSetAttribute.argtypes = [c_void_p, c_int, c_ulonglong]
    off = c_uint(0)
    cu.ok(cu.cuPointerSetAttribute(byref(off), SYNC_MEMOPS, buf.value + 16))
    value = c_uint(7)
    cu.ok(cu.cuPointerGetAttribute(byref(value), SYNC_MEMOPS, buf))
    assert value.value == 0
    on = c_uint(1)
    cu.ok(cu.cuPointerSetAttribute(byref(on), SYNC_MEMOPS, buf.value))
    cu.ok(cu.cuPointerGetAttribute(byref(value), SYNC_MEMOPS, buf))
    assert value.value == 1
    assert cu.cuPointerSetAttribute(byref(on), 1, buf.value) == INVALID_VALUE  # CONTEXT is read-only
    assert cu.cuPointerSetAttribute(byref(on), SYNC_MEMOPS, 0x10) == INVALID_VALUE  # not a CUDA pointer
    assert cu.cuPointerSetAttribute(None, SYNC_MEMOPS, buf.value) == INVALID_VALUE
    # each result as cuMemRangeGetAttribute writes it
    attrs = (c_int * 2)(1, 4)  # READ_MOSTLY, LAST_PREFETCH_LOCATION
    plural = [c_int(-7), c_int(-7)]
    data = (c_void_p * 2)(*[ctypes.cast(byref(v), c_void_p) for v in plural])
    sizes = (c_size_t * 2)(4, 4)
    cu.ok(cu.cuMemRangeGetAttributes(data, sizes, attrs, c_size_t(2), managed, c_size_t(4096)))
    for attribute, got in zip(attrs, plural):
        single = c_int(-9)
        cu.ok(cu.cuMemRangeGetAttribute(byref(single), c_size_t(4), attribute, managed, c_size_t(4096)))
        assert got.value == single.value
    assert cu.cuMemRangeGetAttributes(data, sizes, attrs, c_size_t(2), buf, c_size_t(256)) == INVALID_VALUE
    assert cu.cuMemRangeGetAttributes(None, sizes, attrs, c_size_t(2), managed, c_size_t(4096)) == INVALID_VALUE
    cu.ok(cu.cuMemFree_v2(buf))
    cu.ok(cu.cuMemFree_v2(managed))


HOST_POINTER, DEVICE_POINTER, ACCESS_FLAGS, MEMPOOL_HANDLE = 4, 3, 16, 17


def _attribute(cu, attribute: int, ptr: int) -> tuple[int, int]:
    value = c_ulonglong(0x7777)
    return cu.cuPointerGetAttribute(byref(value), attribute, c_ulonglong(ptr)), value.value


def test_pointer_attributes_a_pointer_has_no_value_for(cu):
    dev, managed, host = c_ulonglong(), c_ulonglong(), c_void_p()
    cu.ok(cu.cuMemAlloc_v2(byref(dev), c_size_t(256)))
    cu.ok(cu.cuMemAllocManaged(byref(managed), c_size_t(256), 1))
    cu.ok(cu.cuMemAllocHost_v2(byref(host), c_size_t(256)))
    # cuda.h: no host pointer through which the host may access ptr -> CUDA_ERROR_INVALID_VALUE
    assert _attribute(cu, HOST_POINTER, dev.value + 8)[0] == INVALID_VALUE
    assert _attribute(cu, HOST_POINTER, managed.value + 8) == (0, managed.value + 8)
    assert _attribute(cu, HOST_POINTER, host.value) == (0, host.value)
    assert _attribute(cu, DEVICE_POINTER, dev.value) == (0, dev.value)
    # the plural writes the NULL value instead (cudaPointerAttributes.hostPointer: NULL if none)
    attrs = (c_int * 2)(HOST_POINTER, DEVICE_POINTER)
    got = [c_ulonglong(0x7777), c_ulonglong(0x7777)]
    data = (c_void_p * 2)(*[ctypes.cast(byref(v), c_void_p) for v in got])
    cu.ok(cu.cuPointerGetAttributes(c_uint(2), attrs, data, dev))
    assert [v.value for v in got] == [0, dev.value]
    # ACCESS_FLAGS: memory registered CU_MEMHOSTREGISTER_READ_ONLY is read-only to the device
    pinned = ctypes.create_string_buffer(8192)
    cu.ok(cu.cuMemHostRegister_v2(pinned, c_size_t(8192), 0x08))
    assert _attribute(cu, ACCESS_FLAGS, ctypes.addressof(pinned)) == (0, 1)  # CU_POINTER_ACCESS_FLAG_READ
    assert _attribute(cu, ACCESS_FLAGS, dev.value) == (0, 3)  # READWRITE
    cu.ok(cu.cuMemHostUnregister(pinned))
    # MEMPOOL_HANDLE: the pool a stream-ordered allocation came from; none for cuMemAlloc's
    pool, pooled = c_void_p(), c_ulonglong()
    cu.ok(cu.cuDeviceGetDefaultMemPool(byref(pool), 0))
    cu.ok(cu.cuMemAllocAsync(byref(pooled), c_size_t(256), None))
    assert _attribute(cu, MEMPOOL_HANDLE, pooled.value) == (0, pool.value)
    assert _attribute(cu, MEMPOOL_HANDLE, dev.value) == (0, 0)
    cu.ok(cu.cuMemFreeAsync(pooled, None))
    cu.ok(cu.cuCtxSynchronize())
    for p in (dev, managed):
        cu.ok(cu.cuMemFree_v2(p))
    cu.ok(cu.cuMemFreeHost(host))
