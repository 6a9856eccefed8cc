"""Operator fusion into ``graph.fusion_group`` ops, and their lowering back to linalg.

The rules follow TVM's FuseOps, on linalg ops instead of Relay calls. Each op gets a class:

- *anchors*: convolutions (``conv``), pooling (``pooling``), contractions with both an M
  and an N loop (``matmul``), other ops with a reduction loop (``reduction``);
- ``elementwise``: all loops parallel, every operand indexed by a projected permutation
  (TVM's kElemWise and kBroadcast);
- ``injective``: data movement (``tensor.pad``, ``linalg.transpose``,
  ``linalg.broadcast``, slices, concatenation); ``reshape``: ``tensor.expand_shape`` and
  ``collapse_shape``, which move no data, so they go wherever elementwise ops go;
- ``init``: ``tensor.empty`` and ``linalg.fill`` (an op's output buffer and its zeroing);
- everything else is opaque and left outside groups.

A producer group joins its consumer's group only when *every* user of every value it
defines is in that consumer group: so no work is ever duplicated (a producer with two
consumers in different groups stays a kernel of its own), and the merged set is convex. The
merge must also keep at most one anchor, with these pairings:

- anchor + elementwise consumers (bias add, ReLU/GELU/SiLU, residual add, casts): TVM's
  "out-elemwise-fusable" rule;
- injective producers into any anchor (a ``tensor.pad`` into its convolution, a transpose
  or reshape into a matmul); elementwise producers only into reductions (TVM fuses
  injective ops into reductions; into a convolution or matmul an elementwise producer would
  be recomputed once per window or per output tile);
- elementwise and injective ops with each other, with no anchor involved;
- the one exception to "one anchor": reductions that produce the same shape (softmax's max
  and sum, layer norm's mean and variance: row statistics of one row set) share a group,
  so softmax and layer normalization are one kernel each.

``tilecraft-unpack-groups`` inlines every group again before the schedule stage, tagging
its ops with ``tilecraft.group = <n>`` (and the anchor with ``tilecraft.group_anchor``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from mlir import ir

from ...dialects import graph
from ..ir_queries import RESHAPE_OPS, defined_functions, ops_where
from ..loop_nest import BACKEND_SCHEDULE_ATTR, LoopNest, analyze_loop_nests
from ..passes import register_pass
from .grouped_epilogues import sink_grouped_epilogues

GROUP_ATTR = "tilecraft.group"
ANCHOR_ATTR = "tilecraft.group_anchor"

ANCHORS = ("conv", "pooling", "matmul", "reduction")
# Reshapes (RESHAPE_OPS) move no data: they go wherever elementwise ops go.
_INJECTIVE_OPS = frozenset({
    "tensor.pad", "tensor.extract_slice",
    "tensor.insert_slice", "tensor.concat", "tensor.cast", "linalg.transpose",
    "linalg.broadcast", "linalg.copy",
})
_INIT_OPS = frozenset({"tensor.empty", "linalg.fill"})
# Top-level loops whose bodies may hold a fusion group (a grouped convolution's).
_LOOPS = frozenset({"scf.for", "scf.forall"})


def classify(op: ir.Operation, nest: LoopNest | None) -> str | None:
    """The fusion class of a top-level op (see the module docstring); ``None``: opaque."""
    if BACKEND_SCHEDULE_ATTR in op.attributes:
        return None  # an offload backend schedules it (pipelines/offload/)
    name = op.name
    if name in _INIT_OPS:
        return "init"
    if name in RESHAPE_OPS:
        return "reshape"
    if name in _INJECTIVE_OPS:
        return "injective"
    if nest is None:
        return None
    if nest.convolution:
        return "pooling" if "pooling" in nest.op_name else "conv"
    if nest.contraction and nest.contraction[1] and nest.contraction[2]:
        return "matmul"
    if not all(nest.parallel):
        return "reduction"
    return "elementwise" if nest.projected else "injective"


@dataclass
class _Group:
    """A fusion group being grown; its anchors and set of classes are kept as members join so
    that a group of thousands of ops answers :func:`can_merge` without a scan."""

    ops: list[ir.Operation] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    anchors: list[tuple[ir.Operation, str]] = field(init=False)
    class_set: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.anchors = [(o, c) for o, c in zip(self.ops, self.classes) if c in ANCHORS]
        self.class_set = set(self.classes)

    def absorb(self, other: "_Group") -> None:
        self.ops.extend(other.ops)
        self.classes.extend(other.classes)
        self.anchors.extend(other.anchors)
        self.class_set |= other.class_set

    def has_only(self, allowed: set[str]) -> bool:
        return self.class_set <= allowed


def _top_level(op: ir.Operation, block_owner: ir.Operation) -> ir.Operation | None:
    """The ancestor of ``op`` directly in ``block_owner``'s body (``None`` if not inside)."""
    while op is not None:
        parent = op.parent
        if parent is None:
            return None
        parent = graph._op(parent)
        if parent == block_owner:
            return op
        op = parent
    return None


def _top_level_producers(op: ir.Operation, block_owner: ir.Operation) -> list[ir.Operation]:
    """Top-level ops of ``block_owner``'s body whose results ``op`` or an op nested in it
    reads, in walk order (``op`` itself excluded)."""
    found: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for value in inner.operands:
            owner = graph._op(value.owner) if isinstance(value, ir.OpResult) else None
            top = _top_level(owner, block_owner) if owner is not None else None
            if top is not None and top != op:
                found.append(top)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _reduction_shape(op: ir.Operation) -> str:
    """The result types with unit dims dropped: a row statistic kept as ``16x1`` (ONNX
    keepdims, or a reshape the simplify stage folded in) and one as ``16`` are the same rows."""
    shapes = []
    for result in op.results:
        shaped = ir.ShapedType(result.type)
        dims = "x".join(str(d) for d in shaped.shape if d != 1)
        shapes.append(f"{dims}:{shaped.element_type}")
    return ",".join(shapes)


def can_merge(producer: _Group, consumer: _Group) -> bool:
    """TVM's pairing rules (module docstring) for ``producer`` joining ``consumer``."""
    anchors = producer.anchors + consumer.anchors
    if len(anchors) > 1:
        return (all(cls == "reduction" for _, cls in anchors)
                and len({_reduction_shape(op) for op, _ in anchors}) == 1
                and producer.has_only({"reduction", "elementwise", "reshape", "injective", "init"})
                and consumer.has_only({"reduction", "elementwise", "reshape", "injective", "init"}))
    if producer.has_only({"init"}):
        return True
    if producer.anchors:
        # out-elemwise-fusable: the consumer side holds only elementwise ops (and inits).
        return consumer.has_only({"elementwise", "reshape", "init"})
    if consumer.anchors:
        kind = consumer.anchors[0][1]
        allowed = {"injective", "reshape", "init"} | ({"elementwise"} if kind == "reduction" else set())
        return producer.has_only(allowed)
    return True


def _group_kind(group: _Group) -> tuple[str, ir.Operation | None]:
    if group.anchors:
        op, cls = group.anchors[0]
        return cls, op
    if "injective" in group.class_set or "elementwise" not in group.class_set:
        return "injective", None
    return "elementwise", None


def private_inits(func: ir.Operation) -> None:
    """Give every user of a shared ``tensor.empty`` or ``linalg.fill`` its own copy.

    Why: CSE merges equal inits (all zero accumulators of one shape become one fill); they
    are an op's output buffer, not shared work, and a shared one would tie otherwise
    independent groups together (or stay a kernel of its own)."""
    block = func.regions[0].blocks[0]
    for op in [o.operation for o in block.operations]:
        if op.name not in _INIT_OPS or len(op.results) != 1:
            continue
        for use in list(op.results[0].uses)[1:]:
            owner = graph._op(use.owner)
            clone = op.clone(ip=ir.InsertionPoint(op))
            if op.name == "linalg.fill":
                init = op.operands[1]
                source = graph._op(init.owner) if isinstance(init, ir.OpResult) else None
                if source is not None and source.name == "tensor.empty":
                    clone.operands[1] = source.clone(ip=ir.InsertionPoint(clone)).results[0]
            owner.operands[use.operand_number] = clone.results[0]


def partition_function(func: ir.Operation, nests: Mapping[ir.Operation, LoopNest]
                       ) -> list[tuple[list[ir.Operation], str, ir.Operation | None]]:
    """Partition the body of ``func`` into fusion groups: ``(ops in block order, kind,
    anchor)`` per group, in the order the groups' last ops appear. ``func`` may also be a
    loop (its body's ops, ops nested in them counted as theirs): a grouped convolution's
    loop over groups (grouped_epilogues.py)."""
    block = func.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    group_of: dict[ir.Operation, int] = {}
    groups: dict[int, _Group] = {}
    for op in ops:
        cls = classify(op, nests.get(op))
        if cls is None:
            continue
        group_of[op] = len(groups)
        groups[len(groups)] = _Group([op], [cls])

    # Each op's top-level producers and users, found once; a group's are kept as the merges
    # go (members removed), so a chain of thousands of elementwise ops merging into one group
    # costs linear time, not a walk over every member per merge.
    producer_ops: dict[int, dict[ir.Operation, None]] = {}
    user_ops: dict[int, dict[ir.Operation | None, None]] = {}
    for op, gid in group_of.items():
        producer_ops[gid] = dict.fromkeys(_top_level_producers(op, func))
        user_ops[gid] = dict.fromkeys(
            _top_level(graph._op(use.owner), func) for result in op.results for use in result.uses
        )

    def prune(table: dict[int, dict], group_id: int) -> dict:
        """``table[group_id]`` without the group's own members (merged in since)."""
        kept = {top: None for top in table[group_id] if top is None or group_of.get(top) != group_id}
        table[group_id] = kept
        return kept

    def users(group_id: int) -> set[int | None]:
        return {group_of.get(top) if top is not None else None for top in prune(user_ops, group_id)}

    def producers(group_id: int) -> list[int]:
        found = (group_of.get(top) for top in prune(producer_ops, group_id))
        return list(dict.fromkeys(gid for gid in found if gid is not None))

    for op in ops:
        if op not in group_of or groups[group_of[op]].classes == ["init"]:
            continue
        current = group_of[op]
        changed = True
        while changed:
            changed = False
            for gid in producers(current):
                if users(gid) - {gid, current}:
                    continue
                if not can_merge(groups[gid], groups[current]):
                    continue
                merged = groups.pop(gid)
                for member in merged.ops:
                    group_of[member] = current
                groups[current].absorb(merged)
                for table in (producer_ops, user_ops):
                    table[current].update(table.pop(gid))
                changed = True
                break
    # Plans are made before any op moves: outlining moves ops into regions.
    order = {op: index for index, op in enumerate(ops)}
    plans = []
    for gid in sorted(groups, key=lambda g: max(order[o] for o in groups[g].ops)):
        group = groups[gid]
        if group.has_only({"init"}) and all(o.name == "tensor.empty" for o in group.ops):
            continue  # an empty alone computes nothing
        plans.append((sorted(group.ops, key=order.__getitem__), *_group_kind(group)))
    return plans


def fuse_function(func: ir.Operation, nests: Mapping[ir.Operation, LoopNest]) -> list[graph.FusionGroup]:
    """Partition the body of ``func`` into fusion groups and outline them; returns them."""
    plans = partition_function(func, nests)
    return [graph.outline_group(members, kind=kind, anchor=anchor) for members, kind, anchor in plans]


def _tag(op: ir.Operation, index: int, anchor: bool) -> None:
    op.attributes[GROUP_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64, op.context), index)
    if anchor:
        op.attributes[ANCHOR_ATTR] = ir.UnitAttr.get(op.context)


@register_pass(
    "tilecraft-fuse-ops",
    "Group linalg ops into graph.fusion_group kernels (TVM FuseOps rules: one anchor per "
    "group with its elementwise consumers and injective producers, no duplicated work)",
    prepare=graph.load,
)
def fuse_ops_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: one kernel per group instead of one per op keeps intermediate tensors in cache
    (bias add and ReLU applied to a convolution's tile while it is hot), and each group's
    signature names a tuning task."""
    functions = defined_functions(module)
    for func in functions:
        private_inits(func)
    # Analyzed after the inits are copied: the pairing of ops with their nests is by object.
    nests = dict(analyze_loop_nests(module))
    for func in defined_functions(module):
        fuse_function(func, nests)


@register_pass(
    "tilecraft-mark-groups",
    "Partition like tilecraft-fuse-ops but only tag each group's ops tilecraft.group = <n> "
    "(the anchor also tilecraft.group_anchor) instead of outlining them",
)
def mark_groups_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the default pipeline needs only the partition before scheduling: tagging in
    place moves and erases no op and leaves nothing to unpack (see docs/graph-dialect.md,
    "Why the default pipeline tags instead of outlining")."""
    mark_groups(module)


def mark_groups(module: ir.Operation) -> None:
    """Tag every op of ``module``'s functions with its fusion group (see
    :func:`mark_groups_pass`): what the pipeline does, for IR built outside it (a tuning
    task's payload)."""
    functions = defined_functions(module)
    for func in functions:
        private_inits(func)
    # Before the loop nests are analyzed: moving an epilogue replaces it.
    group_loops = [loop for func in functions for loop in sink_grouped_epilogues(func)]
    nests = dict(analyze_loop_nests(module))
    index = 0
    # A grouped convolution's loop over groups holds a group of its own (its convolution and
    # epilogue), partitioned like a function body.
    for owner in [*defined_functions(module), *group_loops]:
        for members, _kind, anchor in partition_function(owner, nests):
            for op in members:
                _tag(op, index, anchor is not None and op == anchor)
            index += 1


@register_pass(
    "tilecraft-unpack-groups",
    "Inline every graph.fusion_group back into linalg ops tagged tilecraft.group = <n>",
    prepare=graph.load,
)
def unpack_groups_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the schedule and bufferization work on linalg ops; the tags keep the grouping
    visible to them (the anchor is tagged ``tilecraft.group_anchor``)."""
    i64 = ir.IntegerType.get_signless(64, module.context)
    for index, group in enumerate(graph.fusion_groups(module)):
        anchor = group.anchor
        if anchor is not None:
            anchor.attributes[ANCHOR_ATTR] = ir.UnitAttr.get(module.context)
        graph.inline_group(group, marker=[(GROUP_ATTR, ir.IntegerAttr.get(i64, index))])


def tagged_groups(func: ir.Operation) -> list[tuple[list[ir.Operation], ir.Operation | None]]:
    """The groups ``tilecraft-mark-groups`` tagged in ``func``: ``(ops in block order,
    anchor)`` per group, in the order the groups' last ops appear. Untagged ops belong to no
    group. The ops of a group share one block: the function's body, or a grouped
    convolution's loop over groups (grouped_epilogues.py). Why read back instead of
    partitioning again: the partition is made once, and every later stage (the schedule,
    task extraction) sees the same groups."""
    members: dict[int, list[ir.Operation]] = {}
    anchors: dict[int, ir.Operation] = {}
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        for inner in [op, *_loop_body_ops(op)]:
            if GROUP_ATTR not in inner.attributes:
                continue
            index = ir.IntegerAttr(inner.attributes[GROUP_ATTR]).value
            members.setdefault(index, []).append(inner)
            if ANCHOR_ATTR in inner.attributes:
                anchors[index] = inner
    return [(ops, anchors.get(index)) for index, ops in members.items()]


def _loop_body_ops(op: ir.Operation) -> list[ir.Operation]:
    """The ops nested in a top-level loop, in pre-order (where a grouped convolution's loop
    over groups holds its group); none for other ops. Only ``tilecraft-mark-groups`` tags
    ops, and nested ones only in such a loop."""
    if op.name not in _LOOPS:
        return []
    return ops_where(op, lambda inner: inner != op)


def count_groups(module: ir.Operation) -> int:
    """How many fusion groups ``module`` holds (the kernels after fusion): its
    ``graph.fusion_group`` ops, or else the distinct ``tilecraft.group`` tags."""
    outlined = len(graph.fusion_groups(module))
    if outlined:
        return outlined
    tags: set[int] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if GROUP_ATTR in op.attributes:
            tags.add(ir.IntegerAttr(op.attributes[GROUP_ATTR]).value)
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return len(tags)
