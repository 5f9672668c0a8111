"""cuStreamBeginRecaptureToGraph (CUDA 13.3): a stream capture whose nodes re-make those of an
existing graph, in the same creation order (cuda.h).

The capture records into a scratch graph as any capture does; each node it adds is matched at
once with the existing graph's node of the same creation index (`Recapture.match`): another
kind, other dependencies, or a memory allocation or free node with other parameters fails the
recapture immediately (CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, the capture invalidated). Other
parameter changes are handed to the program's callback, with both nodes' CUgraphNodeParams and
whether an instantiated graph could take them (a kernel of another context could not, as in
cuGraphExecUpdate); a callback answering anything but CUDA_SUCCESS fails the recapture, else the
existing node takes the new parameters. Its allocation nodes keep their memory: the recaptured
cuMemAllocAsync answers the address the graph's node holds, so the work captured after it uses
the memory the graph frees. Ending the capture returns the existing graph, its node handles
unchanged, ready for cuGraphExecUpdate; fewer nodes than it has fail there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..cdata import ffi
from ..curesult import CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, CudaError

if TYPE_CHECKING:
    from .graphs import Graph, Node

ELIGIBLE_FOR_UPDATE, INELIGIBLE_FOR_UPDATE = 0, 1  # CUgraphRecaptureStatus


def _signature(work) -> object:
    """What a node's parameters are, comparable between two works of one kind."""
    from . import graphs as g

    kind = work.node_type
    if kind == g.KERNEL:
        return work.handle, work.grid, work.block, work.shared, bytes(work.params), work.ctx
    if kind == g.MEMCPY:
        return bytes(ffi.buffer(work.desc))
    if kind == g.MEMSET:
        return work.dst, work.pitch, work.value, work.elem, work.width, work.height
    if kind == g.HOST:
        return work.fn, work.data
    if kind in (g.EVENT_RECORD, g.WAIT_EVENT):
        return work.event
    if kind == g.GRAPH:
        return g._shape(work.graph), [_signature(n.work) for n in work.graph.nodes]
    if kind == g.MEM_ALLOC:
        return work.size, work.props
    if kind == g.MEM_FREE:
        return work.dptr
    if kind == g.BATCH_MEM_OP:
        return work.flags, [(op.operation, op.address, getattr(op, "value", 0), op.flags) for op in work.ops]
    return None  # empty nodes have no parameters


def _fail(why: str) -> CudaError:
    return CudaError(CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, f"recapture: {why}")


class Recapture:
    def __init__(self, target: Graph, callback: int, data: int) -> None:
        self.target, self.callback, self.data = target, callback, data

    def match(self, scratch: Graph, node: Node) -> Node:
        """The existing graph's node that `node`, just added to `scratch`, re-makes, with the
        new parameters taken over; raises CUDA_ERROR_GRAPH_RECAPTURE_FAILURE."""
        from . import graphs as g

        i = len(scratch.nodes) - 1
        if i >= len(self.target.nodes):
            raise _fail(f"node {i} is more than the graph's {len(self.target.nodes)}")
        old = self.target.nodes[i]
        new_index = {n: k for k, n in enumerate(scratch.nodes)}
        old_index = {n: k for k, n in enumerate(self.target.nodes)}
        if old.type != node.type:
            raise _fail(f"node {i} is a {g.TYPE_NAMES[node.type]} node, the graph's a {g.TYPE_NAMES[old.type]} one")
        if sorted(new_index[d] for d in node.deps) != sorted(old_index[d] for d in old.deps):
            raise _fail(f"node {i} depends on other nodes than the graph's")
        if _signature(node.work) == _signature(old.work):
            return old
        if node.type in (g.MEM_ALLOC, g.MEM_FREE):
            raise _fail(f"node {i}, a memory {'allocation' if node.type == g.MEM_ALLOC else 'free'}, has other parameters")
        if self.callback:
            eligible = node.type != g.KERNEL or node.work.ctx is old.work.ctx
            self._ask(old, node, ELIGIBLE_FOR_UPDATE if eligible else INELIGIBLE_FOR_UPDATE)
        old.set_work(node.work)
        return old

    def _ask(self, old: Node, node: Node, status: int) -> None:
        from .graphs import write_node_params

        params = ffi.new("CUgraphNodeParams[2]")
        write_node_params(old, params + 0)
        write_node_params(node, params + 1)
        call = ffi.cast("int (*)(void *, void *, void *, void *, int)", self.callback)
        rc = call(ffi.cast("void *", self.data), ffi.cast("void *", old.handle), params + 0, params + 1, status)
        if rc:
            raise _fail(f"the callback answered {rc} for node {old.local_id}")

    def finish(self, scratch: Graph) -> Graph:
        """The existing graph, once every one of its nodes was re-made; the scratch graph goes."""
        made = len(scratch.nodes)
        scratch.destroy()
        if made != len(self.target.nodes):
            raise _fail(f"{made} nodes captured, the graph has {len(self.target.nodes)}")
        return self.target
