"""Function bodies as control-flow graphs: scopes flattened, basic blocks in reconvergence order.

The CPU target reconverges divergent lanes by always running the lowest-numbered block some
lane waits at (the "thread frontier"), so the numbering decides where lanes meet again. It is
a topological order of the CFG with every loop (strongly connected region) laid out
contiguously, header first: all blocks of a loop come before the loop's exits, so lanes that
left a loop wait at its exit until the lanes still iterating have left it too. Plain reverse
post-order does not guarantee that (a latch block reached by fall-through can come after the
exit), and a barrier or warp collective after the loop then ran early.
Barriers end a block, so a warp can yield to the block scheduler between blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Callable, Iterator

from zluda_py.ptx import ast

BARRIER_OPS = {"bar", "barrier"}  # bar.warp.sync is not a block barrier (see is_block_barrier)


def is_block_barrier(inst: ast.Instruction) -> bool:
    return inst.opcode in BARRIER_OPS and not inst.has("warp") and not inst.has("cluster")


def is_terminator(inst: ast.Instruction) -> bool:
    """Ends a basic block: branches, returns, barriers, and calls (lanes may exit in the callee)."""
    return inst.opcode in ("bra", "brx", "ret", "exit", "trap", "call") or is_block_barrier(inst)


@dataclass
class BasicBlock:
    index: int  # position in reconvergence order; the entry is 0
    label: str | None
    insts: list[ast.Instruction] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)
    fallthrough: int | None = None  # the block that follows in source order


@dataclass
class FunctionBody:
    """A function body after scope flattening: unique variable names, blocks in reconvergence order."""

    variables: list[ast.Variable]
    blocks: list[BasicBlock]
    labels: dict[str, int]  # label -> block index
    directives: list[ast.Directive]

    def table(self, kind: str, name: str) -> ast.Directive | None:
        """The `.callprototype` / `.branchtargets` / `.calltargets` directive labelled `name`."""
        return next((d for d in self.directives if d.name == kind and d.args[0] == name), None)


def normalize(inst: ast.Instruction, keep: Callable[[str], bool]) -> ast.Instruction:
    """Split a dotted opcode from the grammar (`brx.idx`, `redux.sync`) into opcode + leading
    modifiers, unless `keep(opcode)` (a semantics entry keyed by the dotted name)."""
    if "." not in inst.opcode or keep(inst.opcode):
        return inst
    head, *rest = inst.opcode.split(".")
    return ast.Instruction(head, (*rest, *inst.mods), inst.operands, inst.guard, inst.pos)


def flatten(body: list[ast.Statement], keep: Callable[[str], bool] = lambda _: False,
            ) -> tuple[list[ast.Variable], list[ast.Statement], list[ast.Directive]]:
    """Remove nested `{ }` scopes, renaming shadowing declarations so every name is unique.
    Of a parameterized declaration (`.reg .b32 %r<N>`) only the names the body mentions are
    kept, so a module costs what it uses, not what it declares."""
    variables: list[ast.Variable] = []
    out: list[ast.Statement] = []
    directives: list[ast.Directive] = []
    used: set[str] = set()
    mentioned = ast.mentioned_names(body)

    def walk(stmts: list[ast.Statement], env: dict[str, str]) -> None:
        env = dict(env)
        for s in stmts:
            if isinstance(s, ast.Variable):
                names = ast.declared_names(s, mentioned)
                for n in names:
                    new = n
                    k = 0
                    while new in used:
                        k += 1
                        new = f"{n}.s{k}"
                    used.add(new)
                    if new != n:
                        env[n] = new
                    variables.append(ast.Variable(new, s.space, s.type, s.array, s.align, s.vector,
                                                  None, s.linkage, s.init, s.ptr, s.pos))
            elif isinstance(s, ast.Block):
                walk(s.body, env)
            elif isinstance(s, ast.Instruction):
                guard = s.guard
                if guard is not None and guard.reg in env:
                    guard = ast.Guard(env[guard.reg], guard.negated)
                out.append(normalize(ast.Instruction(s.opcode, s.mods, [ast.renamed(o, env) for o in s.operands],
                                                     guard, s.pos), keep))
            elif isinstance(s, ast.Label):
                out.append(s)
            elif isinstance(s, ast.Directive):
                directives.append(s)

    walk(body, {})
    return variables, out, directives


def build(body: list[ast.Statement], keep: Callable[[str], bool] = lambda _: False) -> FunctionBody:
    """Flatten scopes, split into basic blocks, and number them in reconvergence order."""
    variables, stmts, directives = flatten(body, keep)
    raw: list[BasicBlock] = [BasicBlock(0, None)]
    label_of: dict[str, int] = {}
    for s in stmts:
        if isinstance(s, ast.Label):
            if raw[-1].insts or raw[-1].label is not None:
                raw.append(BasicBlock(len(raw), s.name))
            else:
                raw[-1].label = s.name
            label_of[s.name] = len(raw) - 1
            continue
        raw[-1].insts.append(s)
        if is_terminator(s):
            raw.append(BasicBlock(len(raw), None))
    tables = {d.args[0]: [t.name for t in d.args[1:]] for d in directives if d.name == "branchtargets"}
    for i, b in enumerate(raw):
        b.fallthrough = i + 1 if i + 1 < len(raw) else None
        b.succs = _successors(b, label_of, tables)
    order = reconvergence_order([b.succs for b in raw])
    new_index = {old: new for new, old in enumerate(order)}
    blocks = []
    for old in order:
        b = raw[old]
        blocks.append(BasicBlock(new_index[old], b.label, b.insts,
                                 [new_index[s] for s in b.succs],
                                 new_index.get(b.fallthrough) if b.fallthrough is not None else None))
    labels = {n: new_index[i] for n, i in label_of.items() if i in new_index}
    return FunctionBody(variables, blocks, labels, directives)


def _successors(b: BasicBlock, labels: dict[str, int], tables: dict[str, list[str]]) -> list[int]:
    last = b.insts[-1] if b.insts else None
    falls = [b.fallthrough] if b.fallthrough is not None else []
    if last is None or not is_terminator(last) or is_block_barrier(last) or last.opcode == "call":
        return falls
    if last.opcode in ("ret", "exit", "trap"):
        return falls if last.guard is not None else []
    names = [o.name for o in last.operands if isinstance(o, ast.Sym)]
    if last.opcode == "brx":
        names = [n for table in names if table in tables for n in tables[table]]
    targets = [labels[n] for n in names if n in labels]
    return (falls if last.guard is not None else []) + targets


def reconvergence_order(succs: list[list[int]]) -> list[int]:
    """The blocks reachable from block 0, in an order where each strongly connected region
    (a loop, reducible or not) is contiguous and starts at its entry block, and the regions
    follow a topological order of the graph they form; ties go to reverse post-order.
    Nested loops are ordered the same way inside their loop once its header is removed."""
    rank = {b: i for i, b in enumerate(_reverse_post_order(succs))}
    order: list[int] = []
    pending: list[Iterator[set[int]]] = [iter(_region_order(set(rank), succs, rank))]
    while pending:  # an explicit stack: loops may nest deeper than Python's recursion limit
        region = next(pending[-1], None)
        if region is None:
            pending.pop()
            continue
        header = min(region, key=rank.__getitem__)
        order.append(header)
        if len(region) > 1:
            pending.append(iter(_region_order(region - {header}, succs, rank)))
    return order


def _region_order(nodes: set[int], succs: list[list[int]], rank: dict[int, int]) -> list[set[int]]:
    """The strongly connected components of the subgraph on `nodes`, topologically sorted,
    the component holding the lowest-ranked block first among those ready."""
    comps = _components(nodes, succs, rank)
    comp_of = {n: k for k, c in enumerate(comps) for n in c}
    edges: list[set[int]] = [set() for _ in comps]
    indegree = [0] * len(comps)
    for k, c in enumerate(comps):
        for n in c:
            for s in succs[n]:
                j = comp_of.get(s)
                if j is not None and j != k and j not in edges[k]:
                    edges[k].add(j)
                    indegree[j] += 1
    key = [min(rank[n] for n in c) for c in comps]
    ready = [(key[k], k) for k in range(len(comps)) if indegree[k] == 0]
    heapify(ready)
    out: list[set[int]] = []
    while ready:
        _, k = heappop(ready)
        out.append(comps[k])
        for j in edges[k]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heappush(ready, (key[j], j))
    return out


def _components(nodes: set[int], succs: list[list[int]], rank: dict[int, int]) -> list[set[int]]:
    """Tarjan's strongly connected components of the subgraph on `nodes`, without recursion."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    comps: list[set[int]] = []
    for root in sorted(nodes, key=rank.__getitem__):
        if root in index:
            continue
        work: list[tuple[int, Iterator[int]]] = []

        def visit(n: int) -> None:
            index[n] = low[n] = len(index)
            stack.append(n)
            on_stack.add(n)
            work.append((n, iter([s for s in succs[n] if s in nodes])))

        visit(root)
        while work:
            node, rest = work[-1]
            s = next(rest, None)
            if s is not None:
                if s not in index:
                    visit(s)
                elif s in on_stack:
                    low[node] = min(low[node], index[s])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: set[int] = set()
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.add(n)
                    if n == node:
                        break
                comps.append(comp)
    return comps


def _reverse_post_order(succs: list[list[int]]) -> list[int]:
    seen: set[int] = {0}
    post: list[int] = []
    stack: list[tuple[int, int]] = [(0, 0)]
    while stack:
        node, i = stack[-1]
        if i < len(succs[node]):
            stack[-1] = (node, i + 1)
            s = succs[node][i]
            if s not in seen:
                seen.add(s)
                stack.append((s, 0))
        else:
            stack.pop()
            post.append(node)
    return post[::-1]


# Instructions whose first operand is not a register they write (besides those whose first
# operand is an address, see _writes_first).
_NO_DEST = {"st", "red", "bar", "barrier", "call", "bra", "brx", "ret", "exit", "trap", "prefetch",
            "prefetchu", "cp", "membar", "fence", "nanosleep", "pmevent", "griddepcontrol", "brkpt"}


def _regs_in(op: ast.Operand) -> list[str]:
    if isinstance(op, ast.Reg):
        return [op.name]
    if isinstance(op, ast.Addr):  # the base, and a texture/surface address's coordinates
        return ([op.base.name] if isinstance(op.base, ast.Reg) else []) + [n for e in op.extra for n in _regs_in(e)]
    if isinstance(op, ast.Not):
        return [op.operand.name]
    if isinstance(op, ast.Vec):
        return [n for e in op.elems for n in _regs_in(e)]
    if isinstance(op, ast.PredOut):
        return [n for e in (op.dest, op.pred) for n in _regs_in(e)]
    if isinstance(op, ast.ArgList):
        return [n for e in op.args for n in _regs_in(e)]
    return []


def live_in(body: FunctionBody) -> list[set[str]]:
    """Registers live on entry to each block; only unguarded writes of a destination kill."""
    gen: list[set[str]] = []
    kill: list[set[str]] = []
    for blk in body.blocks:
        g: set[str] = set()
        k: set[str] = set()
        for inst in blk.insts:
            uses = _source_regs(inst) | ({inst.guard.reg} if inst.guard is not None else set())
            g |= uses - k
            if inst.guard is None and _writes_first(inst):
                k |= set(_regs_in(inst.operands[0]))
        gen.append(g)
        kill.append(k)
    live = [set(g) for g in gen]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(body.blocks))):
            out: set[str] = set()
            for s in body.blocks[i].succs:
                out |= live[s]
            new = gen[i] | (out - kill[i])
            if new != live[i]:
                live[i] = new
                changed = True
    return live


def _writes_first(inst: ast.Instruction) -> bool:
    """Whether the first operand is a destination: never an address (`st`, `sust`, `sured`,
    `mbarrier.init`, `stmatrix` ... read theirs)."""
    return bool(inst.operands) and inst.opcode not in _NO_DEST and not isinstance(inst.operands[0], ast.Addr)


def _source_regs(inst: ast.Instruction) -> set[str]:
    ops = inst.operands[1:] if _writes_first(inst) else inst.operands
    return {n for op in ops for n in _regs_in(op)}
