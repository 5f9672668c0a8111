"""Entry points: CUDA graphs (nodes of every kind, dependencies, instantiation, launch, exec
update, clone, DOT print, user objects).

A node holds its *work*: the same checked, callable object a stream op runs (launch.KernelLaunch,
memory.Memcpy, memory.Memset, launch.HostCall) or one of the graph-only kinds below; each has
`node_type` (CUgraphNodeType). Works are never changed in place: a SetParams call gives the node
a new one, so clones and instantiated graphs share works safely. An instantiated graph is a
clone; a launch runs its nodes in a topological order as one op of the stream, after the work
queued there before it and after the event waits of its wait nodes, and before anything queued
after it: the ordering of the equivalent stream work, with independent branches serialized."""

from __future__ import annotations

import itertools
import threading
from typing import Callable, Iterable

from . import context as ctxs, device as devices, memops
from .api import entry
from ..cdata import addr, ffi, read_bytes, store, store_ptr
from ..curesult import (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED,
                     CudaError)
from .handles import HandleTable
from .init_device import require
from .launch import HostCall, KernelLaunch
from .memory import Memcpy, Memset, _memory
from .stream import Stream
from .stream_api import Event, events

ffi.cdef("""
typedef struct {
    void *func; unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams; void **extra; void *kern; void *ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct { unsigned long long dst; size_t pitch; unsigned int value, elementSize; size_t width, height; void *ctx; }
    CUDA_MEMSET_NODE_PARAMS;
typedef struct { void *fn; void *userData; } CUDA_HOST_NODE_PARAMS;
typedef struct { int type; int id; } CUmemLocation_;
typedef struct {
    int allocType; int handleTypes; CUmemLocation_ location; void *win32SecurityAttributes; size_t maxSize;
    unsigned short usage; unsigned char reserved[54];
} CUmemPoolProps;
typedef struct { CUmemLocation_ location; int flags; } CUmemAccessDesc;
typedef struct {
    CUmemPoolProps poolProps; const CUmemAccessDesc *accessDescs; size_t accessDescCount; size_t bytesize;
    unsigned long long dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
typedef struct { unsigned char from_port, to_port, type, reserved[5]; } CUgraphEdgeData;
typedef struct { unsigned long long flags; void *hUploadStream; void *hErrNode_out; int result_out; }
    CUDA_GRAPH_INSTANTIATE_PARAMS;
typedef struct { int result; void *errorNode; void *errorFromNode; } CUgraphExecUpdateResultInfo;
typedef struct { int flags; int reserved; void *copyCtx; CUDA_MEMCPY3D copyParams; } CUDA_MEMCPY_NODE_PARAMS;
typedef struct { unsigned long long handle; int type; unsigned int size; void **phGraph_out; void *ctx; }
    CUDA_CONDITIONAL_NODE_PARAMS;
typedef struct {
    int type; int reserved0[3];
    union {
        long long reserved1[29]; CUDA_KERNEL_NODE_PARAMS kernel; CUDA_MEMCPY_NODE_PARAMS memcpy;
        CUDA_MEMSET_NODE_PARAMS memset; CUDA_HOST_NODE_PARAMS host; struct { void *graph; int ownership; } graph;
        struct { void *event; } eventWait; struct { void *event; } eventRecord; CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        struct { unsigned long long dptr; } free; CUDA_CONDITIONAL_NODE_PARAMS conditional;
    };
    long long reserved2;
} CUgraphNodeParams;
""")

KERNEL, MEMCPY, MEMSET, HOST, GRAPH, EMPTY, WAIT_EVENT, EVENT_RECORD = range(8)
EXT_SEMAS_SIGNAL, EXT_SEMAS_WAIT, MEM_ALLOC, MEM_FREE, BATCH_MEM_OP, CONDITIONAL = range(8, 14)
TYPE_NAMES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset", HOST: "host", GRAPH: "graph", EMPTY: "empty",
              WAIT_EVENT: "wait_event", EVENT_RECORD: "event_record", EXT_SEMAS_SIGNAL: "ext_semas_signal",
              EXT_SEMAS_WAIT: "ext_semas_wait", MEM_ALLOC: "mem_alloc", MEM_FREE: "mem_free",
              BATCH_MEM_OP: "batch_mem_op", CONDITIONAL: "conditional"}
INSTANTIATE_AUTO_FREE_ON_LAUNCH, INSTANTIATE_UPLOAD, INSTANTIATE_DEVICE_LAUNCH, INSTANTIATE_USE_NODE_PRIORITY = 1, 2, 4, 8
UPDATE_SUCCESS, UPDATE_ERROR, UPDATE_TOPOLOGY_CHANGED, UPDATE_NODE_TYPE_CHANGED = 0, 1, 2, 3
UPDATE_PARAMETERS_CHANGED = 5
CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, CU_GRAPH_USER_OBJECT_MOVE = 1, 1
EDGE_DEFAULT, EDGE_PROGRAMMATIC = 0, 1
COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2
COND_ASSIGN_DEFAULT = 1
_NO_EDGE_DATA = bytes(8)


# ---- the graph-only kinds of work ----
class Empty:
    node_type = EMPTY

    def __call__(self) -> None:
        pass


class EventRecord:
    """Records its event when the graph reaches it (GraphExec.launch queues the record)."""
    node_type = EVENT_RECORD

    def __init__(self, event: Event) -> None:
        self.event = event

    def __call__(self) -> None:
        pass


class EventWait:
    """Waits for its event's last record as of the launch (GraphExec.launch makes it a dependency)."""
    node_type = WAIT_EVENT

    def __init__(self, event: Event) -> None:
        self.event = event

    def __call__(self) -> None:
        pass


class MemAlloc:
    """Graph memory: its address is fixed when the node is made (as NVIDIA's: the same for every
    launch of the graph), so the memory exists from then on and a launch has nothing to do. A
    launch allocates it (`outstanding`) until a free node, cuMemFree(Async) or the next launch of
    an AUTO_FREE_ON_LAUNCH exec frees it; it goes when the last graph holding the node goes and
    it is not outstanding, or at the free after that."""
    node_type = MEM_ALLOC

    def __init__(self, size: int, props: bytes) -> None:
        if size == 0:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "graph allocation of 0 bytes")
        self.size, self.props, self.refs = size, props, 0
        self.outstanding = False
        self.allocation = _memory().allocate(size, "device", 0, ctxs.current())
        _graph_memory.add(self)

    def __call__(self) -> None:
        pass

    def retain(self) -> None:
        self.refs += 1

    def release(self) -> None:
        self.refs -= 1
        if self.refs == 0 and not self.outstanding:
            self._drop()

    def free(self) -> None:
        """Freed by the program or a free node: the next launch makes it again at its address."""
        self.outstanding = False
        if self.refs == 0:
            self._drop()

    def _drop(self) -> None:
        _graph_memory.discard(self)
        if _memory().find(self.allocation.base) is self.allocation:
            _memory().release(self.allocation.base)


_graph_memory: set[MemAlloc] = set()
_graph_memory_high = [0]


def free_graph_memory(dptr: int) -> bool:
    """cuMemFree(Async) of graph memory: False when `dptr` is not graph memory. Freeing it when
    no launch has allocated it (never launched, or freed already) is CUDA_ERROR_INVALID_VALUE."""
    m = next((m for m in _graph_memory if m.allocation.base == dptr), None)
    if m is None:
        return False
    if not m.outstanding:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"graph memory {dptr:#x} is not allocated: its graph did not launch since it was freed")
    m.free()
    return True


class MemFree:
    node_type = MEM_FREE

    def __init__(self, dptr: int) -> None:
        self.alloc = next((m for m in _graph_memory if m.allocation.base == dptr), None)
        if self.alloc is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{dptr:#x} is not memory a graph allocated")
        self.dptr = dptr

    def __call__(self) -> None:
        pass


class ChildGraph:
    """A child graph node runs its own copy of the graph (made when the node is)."""
    node_type = GRAPH

    def __init__(self, graph: Graph) -> None:
        if any(n.type in (MEM_ALLOC, MEM_FREE) for n in graph.nodes):
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "a child graph may not hold memory nodes")
        self.graph = graph.clone(register=False)

    def __call__(self) -> None:
        _run_graph(self.graph)


class ConditionalHandle:
    """cuGraphConditionalHandleCreate's handle: the address of the 32-bit condition in device
    memory, which the device runtime's cudaGraphSetConditional stores to
    (compiler/device_runtime.py)."""

    def __init__(self, ctx, default: int, flags: int) -> None:
        self.default, self.flags = default, flags
        self.slot = _memory().allocate(4, "device", 0, ctx)
        self.address = self.slot.base
        self._write(default)

    def _write(self, value: int) -> None:
        _memory().copy(self.address, int(ffi.cast("uintptr_t", ffi.new("unsigned int *", value))), 4)

    def start(self) -> None:
        """The graph holding it starts running: CU_GRAPH_COND_ASSIGN_DEFAULT applies the default."""
        if self.flags & COND_ASSIGN_DEFAULT:
            self._write(self.default)

    def value(self) -> int:
        out = ffi.new("unsigned int *")
        _memory().copy(int(ffi.cast("uintptr_t", out)), self.address, 4)
        return out[0]


conditional_handles: dict[int, ConditionalHandle] = {}


class Conditional:
    """A conditional node: its body graphs (made with the node; the program fills them) run as
    the condition says when the node is reached: if/else, while, or switch."""
    node_type = CONDITIONAL

    def __init__(self, handle: ConditionalHandle, kind: int, bodies: list[Graph]) -> None:
        self.handle, self.kind, self.bodies = handle, kind, bodies
        self.out = ffi.new("void *[]", [ffi.cast("void *", g.handle) for g in bodies])  # phGraph_out: ours

    def __call__(self) -> None:
        value = self.handle.value()
        if self.kind == COND_WHILE:
            while value:
                _run_graph(self.bodies[0])
                value = self.handle.value()
        elif self.kind == COND_IF and (value or len(self.bodies) == 2):
            _run_graph(self.bodies[0 if value else 1])
        elif self.kind == COND_SWITCH and value < len(self.bodies):
            _run_graph(self.bodies[value])


def _run_graph(graph: Graph) -> None:
    for h in graph.conditional_handles:
        h.start()
    for work in graph.plan():
        work()


def _conditional_work(p) -> Conditional:
    handle = conditional_handles.get(p.handle)
    if handle is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"{p.handle:#x} is not a conditional handle")
    sizes = {COND_IF: (1, 2), COND_WHILE: (1,)}
    if p.type not in (COND_IF, COND_WHILE, COND_SWITCH) or p.size == 0 or p.size not in sizes.get(p.type, (p.size,)):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"conditional node type {p.type} with {p.size} bodies")
    bodies = []
    for _ in range(p.size):
        g = Graph()
        g.handle = graphs.add(g)
        bodies.append(g)
    work = Conditional(handle, p.type, bodies)
    p.phGraph_out = work.out
    return work


# ---- graphs and nodes ----
_ids = itertools.count(1)  # graph and graph exec ids (cuGraphGetId, cuGraphExecGetId, DOT print)


class Node:
    def __init__(self, graph: Graph, work: Callable[[], None], deps: list[Node], edges: list[bytes]) -> None:
        self.graph, self.work, self.deps, self.edges = graph, work, deps, edges
        self.enabled = True
        self.handle = 0
        self.local_id = 0  # unique in its graph, never reused (cuGraphNodeGetLocalId, DOT print)
        if isinstance(work, MemAlloc):
            work.retain()

    @property
    def type(self) -> int:
        return self.work.node_type

    def set_work(self, work) -> None:
        if work.node_type != self.type:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"a {TYPE_NAMES[self.type]} node cannot take {TYPE_NAMES[work.node_type]} parameters")
        self.work = work

    def dependents(self) -> list[Node]:
        return [n for n in self.graph.nodes if self in n.deps]


class Graph:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.handle = 0
        self.user_objects: dict[UserObject, int] = {}
        self.conditional_handles: list[ConditionalHandle] = []  # made for it: reset as it starts running
        self.origin: dict[Node, Node] = {}  # a clone's node -> the original's
        self.lock = threading.Lock()
        self.id = next(_ids)
        self._local_ids = itertools.count()

    def add(self, work, deps: Iterable[Node] = (), edges: Iterable[bytes] | None = None, register: bool = True) -> Node:
        deps = list(deps)
        edges = list(edges) if edges is not None else [_NO_EDGE_DATA] * len(deps)
        for d in deps:
            if d.graph is not self:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
        if len(set(deps)) != len(deps):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency is listed twice")
        node = Node(self, work, deps, edges)
        node.local_id = next(self._local_ids)
        if register:
            nodes.add(node)
        with self.lock:
            self.nodes.append(node)
        return node

    def plan(self) -> list[Callable[[], None]]:
        """The enabled nodes' works in a topological order (creation order among ready nodes)."""
        done: set[Node] = set()
        order: list[Callable[[], None]] = []
        pending = list(self.nodes)
        while pending:
            ready = [n for n in pending if all(d in done for d in n.deps)]
            if not ready:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "the graph has a cycle")
            for n in ready:
                done.add(n)
                if n.enabled:
                    order.append(n.work)
            pending = [n for n in pending if n not in done]
        return order

    def clone(self, register: bool = True) -> Graph:
        copy = Graph()
        mapping: dict[Node, Node] = {}
        for n in self.nodes:  # every node first: an edge may point to a node made after it
            mapping[n] = copy.add(n.work, (), None, register)
            copy.origin[mapping[n]] = n
            mapping[n].local_id = n.local_id  # a node keeps its id in clones and execs
        for n in self.nodes:
            mapping[n].deps, mapping[n].edges = [mapping[d] for d in n.deps], list(n.edges)
        for obj, count in self.user_objects.items():
            obj.retain(count)
            copy.user_objects[obj] = count
        copy.conditional_handles = self.conditional_handles
        copy._local_ids = itertools.count(max((n.local_id for n in self.nodes), default=-1) + 1)
        return copy

    def remove_node(self, node: Node) -> None:
        with self.lock:
            self.nodes.remove(node)
            for n in self.nodes:
                while node in n.deps:
                    i = n.deps.index(node)
                    del n.deps[i], n.edges[i]
        if isinstance(node.work, MemAlloc):
            node.work.release()
        if nodes.find(node.handle) is node:
            nodes.remove(node.handle)

    def destroy(self) -> None:
        for n in list(self.nodes):
            self.remove_node(n)
        self.release_user_objects()

    def release_user_objects(self) -> None:
        for obj, count in self.user_objects.items():
            obj.release(count)
        self.user_objects.clear()


graphs: HandleTable[Graph] = HandleTable("graph", CUDA_ERROR_INVALID_VALUE)
nodes: HandleTable[Node] = HandleTable("graph node", CUDA_ERROR_INVALID_VALUE)


class GraphExec:
    """An instantiated graph: a private clone, whose nodes the exec setters change, found
    through the nodes of the graph it was made from (or last updated from)."""

    def __init__(self, graph: Graph, flags: int) -> None:
        if flags & INSTANTIATE_DEVICE_LAUNCH:
            raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "device-launchable graphs (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)")
        if flags & ~(INSTANTIATE_AUTO_FREE_ON_LAUNCH | INSTANTIATE_UPLOAD | INSTANTIATE_USE_NODE_PRIORITY):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"instantiate flags {flags:#x}")
        self.flags = flags
        self.id = next(_ids)
        self.graph = graph.clone(register=False)
        self.graph.plan()  # a cycle fails here, not at launch
        self.of = {orig: mine for mine, orig in self.graph.origin.items()}
        self.handle = 0
        self.last = None
        self.lock = threading.Lock()

    def node(self, original: Node) -> Node:
        mine = self.of.get(original)
        if mine is None:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "the node is not part of the instantiated graph")
        return mine

    def launch(self, stream: Stream) -> None:
        with self.lock:
            plan = self.graph.plan()
            outstanding = any(w.node_type == MEM_ALLOC and w.outstanding for w in plan)
            if outstanding and not self.flags & INSTANTIATE_AUTO_FREE_ON_LAUNCH:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, "the graph's memory from its previous launch is not freed")
            # the allocations a launch makes and frees, in the program's order (the address stays)
            for w in plan:
                if w.node_type == MEM_ALLOC:
                    w.outstanding = True
                elif w.node_type == MEM_FREE:
                    w.alloc.free()
            run = GraphRun(self.graph, plan)
            waits = [w.event.op for w in plan if w.node_type == WAIT_EVENT and w.event.op is not None]
            # launches of one exec are ordered among themselves, whatever their streams
            op = stream.ctx.submit(stream, run, waits + ([self.last] if self.last is not None else []))
            if op is None:
                return  # recorded into a stream capture as a child graph
            self.last = op
            for w in plan:
                if w.node_type == EVENT_RECORD:
                    w.event.op = stream.ctx.submit(stream, lambda: None)


class GraphRun:
    """One launch of an instantiated graph, as a stream op (or, captured, a child graph node)."""
    node_type = GRAPH

    def __init__(self, graph: Graph, plan: list[Callable[[], None]]) -> None:
        self.graph, self.plan = graph, plan

    def __call__(self) -> None:
        for h in self.graph.conditional_handles:
            h.start()
        for work in self.plan:
            work()


execs: HandleTable[GraphExec] = HandleTable("graph exec", CUDA_ERROR_INVALID_VALUE)


class UserObject:
    def __init__(self, ptr: int, destroy: int, count: int) -> None:
        self.ptr, self.destroy, self.count = ptr, destroy, count
        self.handle = 0
        self.lock = threading.Lock()

    def retain(self, count: int) -> None:
        with self.lock:
            self.count += count

    def release(self, count: int) -> None:
        with self.lock:
            if count > self.count:
                raise CudaError(CUDA_ERROR_INVALID_VALUE, f"releasing {count} references of {self.count}")
            self.count -= count
            gone = self.count == 0
        if gone:
            user_objects.remove(self.handle)
            # the destructor may not call CUDA and may run late: never on the caller's thread
            fn = ffi.cast("void (*)(void *)", self.destroy)
            threading.Thread(target=fn, args=(ffi.cast("void *", self.ptr),), daemon=True).start()


user_objects: HandleTable[UserObject] = HandleTable("user object", CUDA_ERROR_INVALID_VALUE)


# ---- decoding parameters ----
def _kernel_work(p) -> KernelLaunch:
    work = KernelLaunch(addr(p.func) or addr(p.kern), (p.gridDimX, p.gridDimY, p.gridDimZ),
                        (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, p.kernelParams, p.extra)
    work.by_kernel = not addr(p.func)  # GetParams hands the handle back in the field it came in
    return work


def _write_kernel(p, work: KernelLaunch) -> None:
    info = work.function.info
    blob = ffi.from_buffer(bytearray(work.params)) if work.params else ffi.NULL
    pointers = ffi.new("void *[]", max(len(info.params), 1))
    for i, param in enumerate(info.params):
        pointers[i] = ffi.cast("char *", blob) + param.offset
    work.kept = (blob, pointers)  # the pointers stay valid while the node has these parameters
    by_kernel = getattr(work, "by_kernel", False)  # captured launches came as a CUfunction or CUkernel alike
    p.func = ffi.cast("void *", 0 if by_kernel else work.handle)
    # a library's CUfunction and CUkernel are one handle; cudart finds its kernel by `kern`
    in_library = by_kernel or work.function.module.library is not None
    p.gridDimX, p.gridDimY, p.gridDimZ = work.grid
    p.blockDimX, p.blockDimY, p.blockDimZ = work.block
    p.sharedMemBytes, p.kernelParams, p.extra = work.shared, pointers, ffi.NULL
    p.kern, p.ctx = ffi.cast("void *", work.handle if in_library else 0), ffi.cast("void *", work.ctx.handle)


def _memset_work(p) -> Memset:
    pitch = p.pitch if p.height > 1 else p.width * p.elementSize  # one row: the pitch is unused
    return Memset(p.dst, pitch, p.value, p.elementSize, p.width, p.height)


def _write_memset(p, work: Memset) -> None:
    p.dst, p.pitch, p.value, p.elementSize, p.width, p.height = (work.dst, work.pitch, work.value, work.elem,
                                                                 work.width, work.height)


def _event(h) -> Event:
    return events.get(addr(h))


def _mem_alloc_work(p) -> MemAlloc:
    props = read_bytes(addr(ffi.addressof(p, "poolProps")), ffi.sizeof("CUmemPoolProps"))
    if p.poolProps.allocType != 1 or p.poolProps.location.type != 1:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "graph memory must be pinned device memory")
    work = MemAlloc(p.bytesize, props)
    p.dptr = work.allocation.base
    return work


def _work_of(params) -> Callable[[], None]:
    """The work a CUgraphNodeParams describes (cuGraphAddNode, cuGraphNodeSetParams)."""
    t = params.type
    if t == KERNEL:
        return _kernel_work(params.kernel)
    if t == MEMCPY:
        return Memcpy(ffi.addressof(params.memcpy, "copyParams"))
    if t == MEMSET:
        return _memset_work(params.memset)
    if t == HOST:
        return HostCall(addr(params.host.fn), addr(params.host.userData))
    if t == GRAPH:
        return ChildGraph(graphs.get(addr(params.graph.graph)))
    if t == EMPTY:
        return Empty()
    if t == WAIT_EVENT:
        return EventWait(_event(params.eventWait.event))
    if t == EVENT_RECORD:
        return EventRecord(_event(params.eventRecord.event))
    if t == MEM_ALLOC:
        return _mem_alloc_work(params.alloc)
    if t == MEM_FREE:
        return MemFree(params.free.dptr)
    if t == BATCH_MEM_OP:
        return memops.node_work(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", ffi.addressof(params, "reserved1")))
    if t == CONDITIONAL:
        return _conditional_work(params.conditional)
    return _refused(t)


def _refused(t: int):
    reason = {EXT_SEMAS_SIGNAL: "external semaphores", EXT_SEMAS_WAIT: "external semaphores"}.get(t)
    if reason is None:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"graph node type {t}")
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, f"{reason} are not implemented")


def _deps(pdeps, count: int) -> list[Node]:
    if count and pdeps == ffi.NULL:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL dependency array")
    return [nodes.get(addr(pdeps[i])) for i in range(count)]


def _edges(pdata, count: int) -> list[bytes] | None:
    """Edge data: default and programmatic edges (the latter kept as full dependencies,
    which orders more than NVIDIA requires); no node kind defines ports here."""
    if pdata == ffi.NULL:
        return None
    out = []
    for i in range(count):
        e = pdata[i]
        if e.from_port or e.to_port or e.type not in (EDGE_DEFAULT, EDGE_PROGRAMMATIC):
            raise CudaError(CUDA_ERROR_INVALID_VALUE, f"edge data ports {e.from_port}/{e.to_port}, type {e.type}")
        out.append(bytes(ffi.buffer(ffi.addressof(pdata, i), 8)))
    return out


def _add(pnode, hgraph, pdeps, count: int, make: Callable[[], Callable[[], None]], pedges=ffi.NULL) -> None:
    require(pnode)
    graph = graphs.get(addr(hgraph))
    deps, edges = _deps(pdeps, count), _edges(ffi.cast("CUgraphEdgeData *", pedges), count)
    node = graph.add(make(), deps, edges)
    store_ptr(pnode, node.handle)


def _node(h, kind: int | None = None) -> Node:
    node = nodes.get(addr(h))
    if kind is not None and node.type != kind:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"a {TYPE_NAMES[node.type]} node, not a {TYPE_NAMES[kind]} node")
    return node


# ---- graphs ----
@entry("cuGraphCreate")
def cuGraphCreate(pgraph, flags):
    require(pgraph)
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "flags must be 0")
    store_ptr(pgraph, graphs.add(Graph()))


@entry("cuGraphDestroy")
def cuGraphDestroy(hgraph):
    graphs.remove(addr(hgraph)).destroy()


@entry("cuGraphClone")
def cuGraphClone(pclone, hgraph):
    require(pclone)
    store_ptr(pclone, graphs.add(graphs.get(addr(hgraph)).clone()))


@entry("cuGraphNodeFindInClone")
def cuGraphNodeFindInClone(pnode, horiginal, hclone):
    require(pnode)
    original, clone = nodes.get(addr(horiginal)), graphs.get(addr(hclone))
    for mine, orig in clone.origin.items():
        if orig is original:
            store_ptr(pnode, mine.handle)
            return
    raise CudaError(CUDA_ERROR_INVALID_VALUE, "the graph is not a clone holding that node")


# ---- adding nodes ----
@entry("cuGraphAddKernelNode_v2", "cuGraphAddKernelNode")
def cuGraphAddKernelNode(pnode, hgraph, pdeps, count, params):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: _kernel_work(ffi.cast("CUDA_KERNEL_NODE_PARAMS *", params)))


@entry("cuGraphAddMemcpyNode")
def cuGraphAddMemcpyNode(pnode, hgraph, pdeps, count, params, ctx):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: Memcpy(ffi.cast("CUDA_MEMCPY3D *", params)))


@entry("cuGraphAddMemsetNode")
def cuGraphAddMemsetNode(pnode, hgraph, pdeps, count, params, ctx):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: _memset_work(ffi.cast("CUDA_MEMSET_NODE_PARAMS *", params)))


@entry("cuGraphAddHostNode")
def cuGraphAddHostNode(pnode, hgraph, pdeps, count, params):
    require(params)
    p = ffi.cast("CUDA_HOST_NODE_PARAMS *", params)
    _add(pnode, hgraph, pdeps, count, lambda: HostCall(addr(p.fn), addr(p.userData)))


@entry("cuGraphAddChildGraphNode")
def cuGraphAddChildGraphNode(pnode, hgraph, pdeps, count, child):
    _add(pnode, hgraph, pdeps, count, lambda: ChildGraph(graphs.get(addr(child))))


@entry("cuGraphAddEmptyNode")
def cuGraphAddEmptyNode(pnode, hgraph, pdeps, count):
    _add(pnode, hgraph, pdeps, count, Empty)


@entry("cuGraphAddEventRecordNode")
def cuGraphAddEventRecordNode(pnode, hgraph, pdeps, count, event):
    _add(pnode, hgraph, pdeps, count, lambda: EventRecord(_event(event)))


@entry("cuGraphAddEventWaitNode")
def cuGraphAddEventWaitNode(pnode, hgraph, pdeps, count, event):
    _add(pnode, hgraph, pdeps, count, lambda: EventWait(_event(event)))


@entry("cuGraphAddMemAllocNode")
def cuGraphAddMemAllocNode(pnode, hgraph, pdeps, count, params):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: _mem_alloc_work(ffi.cast("CUDA_MEM_ALLOC_NODE_PARAMS *", params)))


@entry("cuGraphAddMemFreeNode")
def cuGraphAddMemFreeNode(pnode, hgraph, pdeps, count, dptr):
    _add(pnode, hgraph, pdeps, count, lambda: MemFree(dptr))


@entry("cuGraphAddNode_v2")
def cuGraphAddNode_v2(pnode, hgraph, pdeps, pedges, count, params):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: _work_of(ffi.cast("CUgraphNodeParams *", params)), pedges)


@entry("cuGraphAddNode")
def cuGraphAddNode(pnode, hgraph, pdeps, count, params):
    cuGraphAddNode_v2(pnode, hgraph, pdeps, ffi.NULL, count, params)


@entry("cuGraphAddExternalSemaphoresSignalNode", "cuGraphAddExternalSemaphoresWaitNode")
def cuGraphAddRefusedNode(pnode, hgraph, pdeps, count, params):
    _refused(EXT_SEMAS_SIGNAL)


@entry("cuGraphAddBatchMemOpNode")
def cuGraphAddBatchMemOpNode(pnode, hgraph, pdeps, count, params):
    require(params)
    _add(pnode, hgraph, pdeps, count, lambda: memops.node_work(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", params)))


@entry("cuGraphConditionalHandleCreate")
def cuGraphConditionalHandleCreate(phandle, hgraph, ctx, default_value, flags):
    require(phandle)
    graph = graphs.get(addr(hgraph))
    if flags & ~COND_ASSIGN_DEFAULT:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"conditional handle flags {flags:#x}")
    handle = ConditionalHandle(ctxs.lookup(addr(ctx)), default_value, flags)
    conditional_handles[handle.address] = handle
    graph.conditional_handles.append(handle)
    store(phandle, handle.address)


# ---- node parameters ----
@entry("cuGraphNodeGetType")
def cuGraphNodeGetType(h, ptype):
    require(ptype)
    store(ptype, _node(h).type)


@entry("cuGraphKernelNodeGetParams_v2")
def cuGraphKernelNodeGetParams(h, params):
    require(params)
    _write_kernel(ffi.cast("CUDA_KERNEL_NODE_PARAMS *", params), _node(h, KERNEL).work)


@entry("cuGraphKernelNodeSetParams_v2", "cuGraphKernelNodeSetParams")
def cuGraphKernelNodeSetParams(h, params):
    require(params)
    _node(h, KERNEL).set_work(_kernel_work(ffi.cast("CUDA_KERNEL_NODE_PARAMS *", params)))


@entry("cuGraphMemcpyNodeGetParams")
def cuGraphMemcpyNodeGetParams(h, params):
    require(params)
    ffi.cast("CUDA_MEMCPY3D *", params)[0] = _node(h, MEMCPY).work.desc[0]


@entry("cuGraphMemcpyNodeSetParams")
def cuGraphMemcpyNodeSetParams(h, params):
    require(params)
    _node(h, MEMCPY).set_work(Memcpy(ffi.cast("CUDA_MEMCPY3D *", params)))


@entry("cuGraphMemsetNodeGetParams")
def cuGraphMemsetNodeGetParams(h, params):
    require(params)
    # the v1 struct (without ctx) is what this entry point fills
    p = ffi.cast("CUDA_MEMSET_NODE_PARAMS *", params)
    work = _node(h, MEMSET).work
    p.dst, p.pitch, p.value, p.elementSize, p.width, p.height = (work.dst, work.pitch, work.value, work.elem,
                                                                 work.width, work.height)


@entry("cuGraphMemsetNodeSetParams")
def cuGraphMemsetNodeSetParams(h, params):
    require(params)
    _node(h, MEMSET).set_work(_memset_work(ffi.cast("CUDA_MEMSET_NODE_PARAMS *", params)))


@entry("cuGraphBatchMemOpNodeGetParams")
def cuGraphBatchMemOpNodeGetParams(h, params):
    require(params)
    memops.write_node_params(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", params), _node(h, BATCH_MEM_OP).work)


@entry("cuGraphBatchMemOpNodeSetParams")
def cuGraphBatchMemOpNodeSetParams(h, params):
    require(params)
    _node(h, BATCH_MEM_OP).set_work(memops.node_work(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", params)))


@entry("cuGraphHostNodeGetParams")
def cuGraphHostNodeGetParams(h, params):
    require(params)
    work, p = _node(h, HOST).work, ffi.cast("CUDA_HOST_NODE_PARAMS *", params)
    p.fn, p.userData = ffi.cast("void *", work.fn), ffi.cast("void *", work.data)


@entry("cuGraphHostNodeSetParams")
def cuGraphHostNodeSetParams(h, params):
    require(params)
    p = ffi.cast("CUDA_HOST_NODE_PARAMS *", params)
    _node(h, HOST).set_work(HostCall(addr(p.fn), addr(p.userData)))


@entry("cuGraphChildGraphNodeGetGraph")
def cuGraphChildGraphNodeGetGraph(h, pgraph):
    require(pgraph)
    child = _node(h, GRAPH).work.graph
    if not child.handle:
        graphs.add(child)  # the node owns it; the handle is for queries only
    store_ptr(pgraph, child.handle)


@entry("cuGraphEventRecordNodeGetEvent")
def cuGraphEventRecordNodeGetEvent(h, pevent):
    require(pevent)
    store_ptr(pevent, _node(h, EVENT_RECORD).work.event.handle)


@entry("cuGraphEventRecordNodeSetEvent")
def cuGraphEventRecordNodeSetEvent(h, event):
    _node(h, EVENT_RECORD).set_work(EventRecord(_event(event)))


@entry("cuGraphEventWaitNodeGetEvent")
def cuGraphEventWaitNodeGetEvent(h, pevent):
    require(pevent)
    store_ptr(pevent, _node(h, WAIT_EVENT).work.event.handle)


@entry("cuGraphEventWaitNodeSetEvent")
def cuGraphEventWaitNodeSetEvent(h, event):
    _node(h, WAIT_EVENT).set_work(EventWait(_event(event)))


@entry("cuGraphMemAllocNodeGetParams")
def cuGraphMemAllocNodeGetParams(h, params):
    require(params)
    work, p = _node(h, MEM_ALLOC).work, ffi.cast("CUDA_MEM_ALLOC_NODE_PARAMS *", params)
    ffi.memmove(ffi.addressof(p, "poolProps"), work.props, len(work.props))
    p.accessDescs, p.accessDescCount, p.bytesize, p.dptr = ffi.NULL, 0, work.size, work.allocation.base


@entry("cuGraphMemFreeNodeGetParams")
def cuGraphMemFreeNodeGetParams(h, pdptr):
    require(pdptr)
    store(pdptr, _node(h, MEM_FREE).work.dptr)


@entry("cuGraphNodeGetParams")
def cuGraphNodeGetParams(h, params):
    require(params)
    write_node_params(_node(h), ffi.cast("CUgraphNodeParams *", params))


def write_node_params(node: Node, p) -> None:
    """The node's kind and parameters as one CUgraphNodeParams (cuGraphAddNode's input)."""
    h = node.handle
    ffi.memmove(ffi.addressof(p, "reserved1"), bytes(ffi.sizeof(p.reserved1)), ffi.sizeof(p.reserved1))
    p.type, work = node.type, node.work
    if node.type == KERNEL:
        _write_kernel(ffi.addressof(p, "kernel"), work)
    elif node.type == MEMCPY:
        p.memcpy.copyParams = work.desc[0]
    elif node.type == MEMSET:
        _write_memset(p.memset, work)
    elif node.type == HOST:
        p.host.fn, p.host.userData = ffi.cast("void *", work.fn), ffi.cast("void *", work.data)
    elif node.type == GRAPH:
        cuGraphChildGraphNodeGetGraph(h, ffi.addressof(p.graph, "graph"))
    elif node.type in (EVENT_RECORD, WAIT_EVENT):
        p.eventRecord.event = ffi.cast("void *", work.event.handle)
    elif node.type == MEM_ALLOC:
        cuGraphMemAllocNodeGetParams(h, ffi.addressof(p, "alloc"))
    elif node.type == MEM_FREE:
        p.free.dptr = work.dptr
    elif node.type == BATCH_MEM_OP:
        memops.write_node_params(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", ffi.addressof(p, "reserved1")), work)


@entry("cuGraphGetId")
def cuGraphGetId(hgraph, pid):
    require(pid)
    store(pid, graphs.get(addr(hgraph)).id)


@entry("cuGraphExecGetId")
def cuGraphExecGetId(hexec, pid):
    require(pid)
    store(pid, execs.get(addr(hexec)).id)


@entry("cuGraphNodeGetLocalId")
def cuGraphNodeGetLocalId(h, pid):
    require(pid)
    store(pid, _node(h).local_id)


@entry("cuGraphNodeGetToolsId")
def cuGraphNodeGetToolsId(h, pid):
    """Unique in the process: the graph's id above the node's local id."""
    require(pid)
    node = _node(h)
    store(pid, node.graph.id << 32 | node.local_id)


@entry("cuGraphNodeGetContainingGraph")
def cuGraphNodeGetContainingGraph(h, pgraph):
    require(pgraph)
    graph = _node(h).graph
    if not graph.handle:  # a child graph: owned by its node, as cuGraphChildGraphNodeGetGraph hands it out
        graphs.add(graph)
    store_ptr(pgraph, graph.handle)


@entry("cuGraphNodeSetParams")
def cuGraphNodeSetParams(h, params):
    require(params)
    node = _node(h)
    if node.type in (MEM_ALLOC, MEM_FREE):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "memory nodes cannot change their parameters")
    node.set_work(_work_of(ffi.cast("CUgraphNodeParams *", params)))


@entry("cuGraphKernelNodeGetAttribute", "cuGraphKernelNodeSetAttribute")
def cuGraphKernelNodeAttribute(h, attr, value):
    _node(h, KERNEL)
    raise CudaError(CUDA_ERROR_NOT_SUPPORTED, "kernel node launch attributes are not implemented")


@entry("cuGraphKernelNodeCopyAttributes")
def cuGraphKernelNodeCopyAttributes(dst, src):
    _node(dst, KERNEL), _node(src, KERNEL)  # no attributes are kept: nothing to copy


# ---- structure ----
def _fill(parray, pcount, values: list[int]) -> None:
    """The two-call pattern: a NULL array asks for the count; else up to *count are written
    (the rest NULL) and *count becomes how many there are, capped at the array's size."""
    require(pcount)
    if parray == ffi.NULL:
        store(pcount, len(values))
        return
    n = pcount[0]
    for i in range(n):
        parray[i] = ffi.cast("void *", values[i]) if i < len(values) else ffi.NULL
    store(pcount, min(n, len(values)))


def _fill_edges(pedges, pcount, edges: list[bytes]) -> None:
    if pedges != ffi.NULL:
        for i in range(min(pcount[0], len(edges))):
            ffi.memmove(ffi.cast("CUgraphEdgeData *", pedges) + i, edges[i], 8)


@entry("cuGraphGetNodes")
def cuGraphGetNodes(hgraph, pnodes, pcount):
    _fill(pnodes, pcount, [n.handle for n in graphs.get(addr(hgraph)).nodes])


@entry("cuGraphGetRootNodes")
def cuGraphGetRootNodes(hgraph, pnodes, pcount):
    _fill(pnodes, pcount, [n.handle for n in graphs.get(addr(hgraph)).nodes if not n.deps])


@entry("cuGraphGetEdges_v2")
def cuGraphGetEdges_v2(hgraph, pfrom, pto, pedges, pcount):
    require(pcount)
    graph = graphs.get(addr(hgraph))
    pairs = [(d, n, e) for n in graph.nodes for d, e in zip(n.deps, n.edges)]
    if (pfrom == ffi.NULL) != (pto == ffi.NULL):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "from and to must both be NULL or both be arrays")
    if pfrom != ffi.NULL:
        _fill(pto, ffi.new("size_t *", pcount[0]), [n.handle for _, n, _ in pairs])
        _fill_edges(pedges, pcount, [e for _, _, e in pairs])
    _fill(pfrom, pcount, [d.handle for d, _, _ in pairs])


@entry("cuGraphGetEdges")
def cuGraphGetEdges(hgraph, pfrom, pto, pcount):
    cuGraphGetEdges_v2(hgraph, pfrom, pto, ffi.NULL, pcount)


@entry("cuGraphNodeGetDependencies_v2")
def cuGraphNodeGetDependencies_v2(h, pdeps, pedges, pcount):
    node = _node(h)
    if pdeps != ffi.NULL:
        _fill_edges(pedges, pcount, node.edges)
    _fill(pdeps, pcount, [d.handle for d in node.deps])


@entry("cuGraphNodeGetDependencies")
def cuGraphNodeGetDependencies(h, pdeps, pcount):
    cuGraphNodeGetDependencies_v2(h, pdeps, ffi.NULL, pcount)


@entry("cuGraphNodeGetDependentNodes_v2")
def cuGraphNodeGetDependentNodes_v2(h, pdeps, pedges, pcount):
    node = _node(h)
    after = node.dependents()
    if pdeps != ffi.NULL:
        _fill_edges(pedges, pcount, [n.edges[n.deps.index(node)] for n in after])
    _fill(pdeps, pcount, [n.handle for n in after])


@entry("cuGraphNodeGetDependentNodes")
def cuGraphNodeGetDependentNodes(h, pdeps, pcount):
    cuGraphNodeGetDependentNodes_v2(h, pdeps, ffi.NULL, pcount)


def _pairs(hgraph, pfrom, pto, count: int) -> tuple[Graph, list[tuple[Node, Node]]]:
    graph = graphs.get(addr(hgraph))
    if count and (pfrom == ffi.NULL or pto == ffi.NULL):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "NULL from/to arrays")
    pairs = [(nodes.get(addr(pfrom[i])), nodes.get(addr(pto[i]))) for i in range(count)]
    if any(a.graph is not graph or b.graph is not graph or a is b for a, b in pairs):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "an edge joins nodes of another graph, or a node to itself")
    return graph, pairs


@entry("cuGraphAddDependencies_v2")
def cuGraphAddDependencies_v2(hgraph, pfrom, pto, pedges, count):
    graph, pairs = _pairs(hgraph, pfrom, pto, count)
    edges = _edges(ffi.cast("CUgraphEdgeData *", pedges), count) or [_NO_EDGE_DATA] * count
    if any(a in b.deps for a, b in pairs):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the dependency exists already")
    with graph.lock:
        for (a, b), e in zip(pairs, edges):
            b.deps.append(a)
            b.edges.append(e)


@entry("cuGraphAddDependencies")
def cuGraphAddDependencies(hgraph, pfrom, pto, count):
    cuGraphAddDependencies_v2(hgraph, pfrom, pto, ffi.NULL, count)


@entry("cuGraphRemoveDependencies_v2")
def cuGraphRemoveDependencies_v2(hgraph, pfrom, pto, pedges, count):
    graph, pairs = _pairs(hgraph, pfrom, pto, count)
    if any(a not in b.deps for a, b in pairs):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "no such dependency")
    with graph.lock:
        for a, b in pairs:
            i = b.deps.index(a)
            del b.deps[i], b.edges[i]


@entry("cuGraphRemoveDependencies")
def cuGraphRemoveDependencies(hgraph, pfrom, pto, count):
    cuGraphRemoveDependencies_v2(hgraph, pfrom, pto, ffi.NULL, count)


@entry("cuGraphDestroyNode")
def cuGraphDestroyNode(h):
    node = _node(h)
    node.graph.remove_node(node)


# ---- instantiation and launch ----
def _instantiate(pexec, hgraph, flags: int) -> GraphExec:
    require(pexec)
    exe = GraphExec(graphs.get(addr(hgraph)), flags)
    store_ptr(pexec, execs.add(exe))
    return exe


@entry("cuGraphInstantiateWithFlags")
def cuGraphInstantiateWithFlags(pexec, hgraph, flags):
    _instantiate(pexec, hgraph, flags)


@entry("cuGraphInstantiate_v2", "cuGraphInstantiate")
def cuGraphInstantiate_v2(pexec, hgraph, perror_node, log, log_size):
    if perror_node != ffi.NULL:
        store_ptr(perror_node, 0)
    if log != ffi.NULL and log_size:
        log[0] = b"\0"
    _instantiate(pexec, hgraph, 0)


@entry("cuGraphInstantiateWithParams")
def cuGraphInstantiateWithParams(pexec, hgraph, params):
    require(params)
    p = ffi.cast("CUDA_GRAPH_INSTANTIATE_PARAMS *", params)
    p.hErrNode_out, p.result_out = ffi.NULL, 1  # CUDA_GRAPH_INSTANTIATE_ERROR until it succeeds
    try:
        exe = _instantiate(pexec, hgraph, p.flags)
    except CudaError as e:
        p.result_out = 3 if e.code == CUDA_ERROR_NOT_SUPPORTED else 1  # NODE_OPERATION_NOT_SUPPORTED
        raise
    p.result_out = 0
    if exe.flags & INSTANTIATE_UPLOAD:
        ctxs.resolve_stream(addr(p.hUploadStream))


@entry("cuGraphExecGetFlags")
def cuGraphExecGetFlags(hexec, pflags):
    require(pflags)
    store(pflags, execs.get(addr(hexec)).flags)


@entry("cuGraphExecDestroy")
def cuGraphExecDestroy(hexec):
    execs.remove(addr(hexec)).graph.destroy()


@entry("cuGraphUpload")
def cuGraphUpload(hexec, stream):
    execs.get(addr(hexec))
    ctxs.resolve_stream(addr(stream))  # nothing to upload: the graph's code and memory exist


@entry("cuGraphLaunch")
def cuGraphLaunch(hexec, stream):
    exe = execs.get(addr(hexec))
    exe.launch(ctxs.resolve_stream(addr(stream)))


# ---- exec updates ----
def _exec_node(hexec, h, kind: int) -> Node:
    mine = execs.get(addr(hexec)).node(_node(h, kind))
    return mine


@entry("cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams")
def cuGraphExecKernelNodeSetParams(hexec, h, params):
    require(params)
    _exec_node(hexec, h, KERNEL).set_work(_kernel_work(ffi.cast("CUDA_KERNEL_NODE_PARAMS *", params)))


@entry("cuGraphExecMemcpyNodeSetParams")
def cuGraphExecMemcpyNodeSetParams(hexec, h, params, ctx):
    require(params)
    _exec_node(hexec, h, MEMCPY).set_work(Memcpy(ffi.cast("CUDA_MEMCPY3D *", params)))


@entry("cuGraphExecMemsetNodeSetParams")
def cuGraphExecMemsetNodeSetParams(hexec, h, params, ctx):
    require(params)
    _exec_node(hexec, h, MEMSET).set_work(_memset_work(ffi.cast("CUDA_MEMSET_NODE_PARAMS *", params)))


@entry("cuGraphExecBatchMemOpNodeSetParams")
def cuGraphExecBatchMemOpNodeSetParams(hexec, h, params):
    require(params)
    _exec_node(hexec, h, BATCH_MEM_OP).set_work(memops.node_work(ffi.cast("CUDA_BATCH_MEM_OP_NODE_PARAMS *", params)))


@entry("cuGraphExecHostNodeSetParams")
def cuGraphExecHostNodeSetParams(hexec, h, params):
    require(params)
    p = ffi.cast("CUDA_HOST_NODE_PARAMS *", params)
    _exec_node(hexec, h, HOST).set_work(HostCall(addr(p.fn), addr(p.userData)))


@entry("cuGraphExecChildGraphNodeSetParams")
def cuGraphExecChildGraphNodeSetParams(hexec, h, child):
    mine = _exec_node(hexec, h, GRAPH)
    new = ChildGraph(graphs.get(addr(child)))
    if _shape(new.graph) != _shape(mine.work.graph):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "the child graph's topology differs")
    mine.set_work(new)


@entry("cuGraphExecEventRecordNodeSetEvent")
def cuGraphExecEventRecordNodeSetEvent(hexec, h, event):
    _exec_node(hexec, h, EVENT_RECORD).set_work(EventRecord(_event(event)))


@entry("cuGraphExecEventWaitNodeSetEvent")
def cuGraphExecEventWaitNodeSetEvent(hexec, h, event):
    _exec_node(hexec, h, WAIT_EVENT).set_work(EventWait(_event(event)))


@entry("cuGraphExecNodeSetParams")
def cuGraphExecNodeSetParams(hexec, h, params):
    require(params)
    mine = execs.get(addr(hexec)).node(_node(h))
    if mine.type in (MEM_ALLOC, MEM_FREE):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "memory nodes cannot change their parameters")
    mine.set_work(_work_of(ffi.cast("CUgraphNodeParams *", params)))


@entry("cuGraphNodeSetEnabled")
def cuGraphNodeSetEnabled(hexec, h, enabled):
    mine = execs.get(addr(hexec)).node(_node(h))
    if mine.type not in (KERNEL, MEMCPY, MEMSET):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "only kernel, memcpy and memset nodes can be disabled")
    mine.enabled = bool(enabled)


@entry("cuGraphNodeGetEnabled")
def cuGraphNodeGetEnabled(hexec, h, penabled):
    require(penabled)
    mine = execs.get(addr(hexec)).node(_node(h))
    if mine.type not in (KERNEL, MEMCPY, MEMSET):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "only kernel, memcpy and memset nodes can be disabled")
    store(penabled, int(mine.enabled))


def _shape(graph: Graph) -> list[tuple[int, tuple[int, ...]]]:
    """The topology exec update compares: each node's type and dependencies, by creation order."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    return [(n.type, tuple(sorted(index[d] for d in n.deps))) for n in graph.nodes]


def _update_result(graph: Graph, mine: Graph) -> tuple[int, Node | None, Node | None]:
    if len(graph.nodes) != len(mine.nodes):
        return UPDATE_TOPOLOGY_CHANGED, None, None
    new, old = _shape(graph), _shape(mine)
    for i, node in enumerate(graph.nodes):
        if new[i][0] != old[i][0]:
            return UPDATE_NODE_TYPE_CHANGED, node, None
        if new[i][1] != old[i][1]:
            return UPDATE_TOPOLOGY_CHANGED, node, None
        if node.type == MEM_ALLOC and node.work.size != mine.nodes[i].work.size:
            return UPDATE_PARAMETERS_CHANGED, node, None
        if node.type == GRAPH and _shape(node.work.graph) != _shape(mine.nodes[i].work.graph):
            return UPDATE_TOPOLOGY_CHANGED, node, None
        if node.type == KERNEL and node.work.ctx is not mine.nodes[i].work.ctx:
            return UPDATE_PARAMETERS_CHANGED, node, None
    return UPDATE_SUCCESS, None, None


@entry("cuGraphExecUpdate_v2")
def cuGraphExecUpdate_v2(hexec, hgraph, pinfo):
    require(pinfo)
    exe, graph = execs.get(addr(hexec)), graphs.get(addr(hgraph))
    info = ffi.cast("CUgraphExecUpdateResultInfo *", pinfo)
    with exe.lock:
        result, error_node, from_node = _update_result(graph, exe.graph)
        info.result = result
        info.errorNode = ffi.cast("void *", error_node.handle if error_node else 0)
        info.errorFromNode = ffi.cast("void *", from_node.handle if from_node else 0)
        if result != UPDATE_SUCCESS:
            raise CudaError(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, f"exec update: result {result}")
        for node, mine in zip(graph.nodes, exe.graph.nodes):
            if node.type == MEM_ALLOC:  # the exec now holds the new graph's memory, which its kernels use
                node.work.retain()
                mine.work.release()
            mine.work = node.work
        exe.of = dict(zip(graph.nodes, exe.graph.nodes))


# ---- DOT ----
def _label(node: Node) -> str:
    work = node.work
    text = f"{TYPE_NAMES[node.type].upper()}\\nnode {node.handle:#x}"
    if node.type == KERNEL:
        text += f"\\n{work.function.name}\\ngrid {work.grid} block {work.block} shared {work.shared}"
    elif node.type == MEMCPY:
        d = work.desc
        text += f"\\n{d.WidthInBytes}x{d.Height}x{d.Depth} bytes"
    elif node.type == MEMSET:
        text += f"\\n{work.dst:#x} value {work.value:#x} x{work.width}x{work.height} ({work.elem}-byte)"
    elif node.type == HOST:
        text += f"\\nfn {work.fn:#x} data {work.data:#x}"
    elif node.type in (EVENT_RECORD, WAIT_EVENT):
        text += f"\\nevent {work.event.handle:#x}"
    elif node.type == MEM_ALLOC:
        text += f"\\n{work.size} bytes at {work.allocation.base:#x}"
    elif node.type == MEM_FREE:
        text += f"\\n{work.dptr:#x}"
    return text


def _dot(graph: Graph, name: str, lines: list[str]) -> None:
    lines.append(f'subgraph "cluster_{name}" {{\nlabel="{name}";')
    ids = {n: f"{name}_node_{n.local_id}" for n in graph.nodes}
    for n in graph.nodes:
        lines.append(f'"{ids[n]}" [shape=record, label="{_label(n)}"];')
        if n.type == GRAPH:
            _dot(n.work.graph, f"{ids[n]}_child", lines)
    for n in graph.nodes:
        for d in n.deps:
            lines.append(f'"{ids[d]}" -> "{ids[n]}";')
    lines.append("}")


@entry("cuGraphDebugDotPrint")
def cuGraphDebugDotPrint(hgraph, path, flags):
    require(path)
    graph = graphs.get(addr(hgraph))
    lines = ["digraph dot {"]
    _dot(graph, f"graph_{graph.id}", lines)
    lines.append("}")
    try:
        with open(ffi.string(path).decode(), "w") as f:
            f.write("\n".join(lines) + "\n")
    except OSError as e:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cannot write {e.filename}: {e.strerror}") from None


# ---- user objects ----
@entry("cuUserObjectCreate")
def cuUserObjectCreate(pobj, ptr, destroy, count, flags):
    require(pobj)
    if destroy == ffi.NULL or count == 0 or flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "needs a destructor, a count and CU_USER_OBJECT_NO_DESTRUCTOR_SYNC")
    store_ptr(pobj, user_objects.add(UserObject(addr(ptr), addr(destroy), count)))


@entry("cuUserObjectRetain")
def cuUserObjectRetain(obj, count):
    if count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "count 0")
    user_objects.get(addr(obj)).retain(count)


@entry("cuUserObjectRelease")
def cuUserObjectRelease(obj, count):
    if count == 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "count 0")
    user_objects.get(addr(obj)).release(count)


@entry("cuGraphRetainUserObject")
def cuGraphRetainUserObject(hgraph, obj, count, flags):
    graph, o = graphs.get(addr(hgraph)), user_objects.get(addr(obj))
    if count == 0 or flags & ~CU_GRAPH_USER_OBJECT_MOVE:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"count {count}, flags {flags:#x}")
    if not flags & CU_GRAPH_USER_OBJECT_MOVE:
        o.retain(count)
    graph.user_objects[o] = graph.user_objects.get(o, 0) + count


@entry("cuGraphReleaseUserObject")
def cuGraphReleaseUserObject(hgraph, obj, count):
    graph, o = graphs.get(addr(hgraph)), user_objects.get(addr(obj))
    held = graph.user_objects.get(o, 0)
    if count == 0 or count > held:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"the graph holds {held} references, not {count}")
    if held == count:
        del graph.user_objects[o]
    else:
        graph.user_objects[o] = held - count
    o.release(count)


# ---- graph memory ----
@entry("cuDeviceGraphMemTrim")
def cuDeviceGraphMemTrim(dev):
    devices.get(dev)  # graph memory is held by its graphs, nothing is cached beyond them


@entry("cuDeviceGetGraphMemAttribute")
def cuDeviceGetGraphMemAttribute(dev, attr, value):
    require(value)
    devices.get(dev)
    used = sum(m.size for m in _graph_memory)
    _graph_memory_high[0] = max(_graph_memory_high[0], used)
    if attr not in (0, 1, 2, 3):  # USED_MEM_CURRENT/HIGH, RESERVED_MEM_CURRENT/HIGH
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"graph memory attribute {attr}")
    ffi.cast("unsigned long long *", value)[0] = used if attr in (0, 2) else _graph_memory_high[0]


@entry("cuDeviceSetGraphMemAttribute")
def cuDeviceSetGraphMemAttribute(dev, attr, value):
    require(value)
    devices.get(dev)
    if attr not in (1, 3) or ffi.cast("unsigned long long *", value)[0] != 0:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "only the high watermarks can be set, to 0")
    _graph_memory_high[0] = sum(m.size for m in _graph_memory)
