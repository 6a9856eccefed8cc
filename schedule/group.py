"""Fusion groups lowered to one loop nest each: tile the group's root, fuse its producers.

The graph stage partitions a function into fusion groups with TVM's FuseOps rules
(``pipelines/graph/fusion.py``: one anchor — conv, matmul, pooling, reduction — with its
elementwise consumers and injective producers). The default schedule (``plan.py``)
plans one op at a time; here the plans of a group's ops become one
:class:`~tilecraft.schedule.plan.GroupSchedule`, as IREE and TVM compute a group:

1. the *root* is the group's last op (its result leaves the group: the bias + ReLU after a
   convolution, or the anchor itself);
2. the anchor's thread tiles, mapped through the indexing maps onto the root's loops, tile
   the root with ``scf.forall`` — the group's one parallel loop;
3. the group's other ops that the root depends on (the anchor, its zero fill, elementwise ops
   in between) are fused into that loop, consumers first (``fuse_into_containing_op``),
   each computing only the slice its consumer reads;
4. inside the loop each op gets its own inner levels: the anchor keeps its plan's (default
   or tuned register/reduction tiles), the others are planned for their slice's extents.

The anchor's intermediate result is then one task's tile (allocated per task) instead of a
whole tensor written by one kernel and read back by the next.

The partition is read from the ``tilecraft.group`` tags that ``tilecraft-mark-groups`` sets at
the end of the ``simplify`` stage (after elementwise fusion, which replaces ops, so the tags
describe the ops the schedule sees): partitioned once, read by the schedule and by task
extraction alike. What stays out of a group's loop
nest, with the per-op schedule: ops reached only through a reshape (``fuse_into_containing_op``
cannot fuse through ``expand_shape``/``collapse_shape``), ops whose result is also used
outside the group, groups whose anchor has no thread level (too little work to split, or
one thread) unless it is a convolution or pooling (then the group's loop is a sequential
``scf.for`` over bands of rows, ``conv_plan.sequential_tiles``, or one band holding the
whole output), and a convolution's or pooling's ``tensor.pad``. The pad becomes the
destination its source's producer writes into (``pipelines/tensor/pad_destinations.py``, at
bufferization): the group reads its padded input in place. Fused per task, it copied each
task's band of input rows (MobileNetV2 slower end to end; before that, with tasks over
output channels, each task padded the whole input, slower still; docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Mapping

from mlir import ir

from ..pipelines.graph.fusion import ANCHORS, classify, private_inits, tagged_groups
from ..pipelines.ir_queries import KERNEL_FUNCTION_PREFIX, RESHAPE_OPS, defined_functions, defining_op, users
from ..pipelines.loop_nest import LoopNest, is_structured
from ..pipelines.target import CacheHierarchy
from .conv_kernels import epilogue_register_tiles
from .conv_plan import depthwise_channel_dim, sequential_tiles
from .op_schedule import GroupSchedule, OpSchedule
from .plan import plan_default_schedule


def prepare_groups(module: ir.Operation) -> None:
    """Give each op its own init (see :func:`~tilecraft.pipelines.graph.fusion.private_inits`):
    a shared zero fill would tie two groups together. Runs before the loop nests are analyzed."""
    for func in defined_functions(module):
        private_inits(func)


def _users(op: ir.Operation) -> list[ir.Operation]:
    """The ops using any result of ``op``."""
    return [user for result in op.results for user in users(result)]


def _fused_producers(root: ir.Operation, anchor: ir.Operation, members: set[ir.Operation],
                     nests: dict[ir.Operation, LoopNest]
                     ) -> tuple[list[ir.Operation], list[ir.Operation]] | None:
    """The group members the root depends on that can be fused into its loop, and the
    reshapes between them (not fused themselves: their slices are bubbled up, see
    :func:`~tilecraft.schedule.plan.render_group_sequence`). ``None`` when one of them
    is also needed outside (fusing would compute it twice) or cannot be computed by slices:
    an op whose output is indexed by more than loop dims (``(d0, 0)``) is not tileable, and
    ``fuse_into_containing_op`` would then clone it whole into every task.

    A convolution or pooling anchor's inputs are not followed: it reads them through
    windows (``2 * oh + kh``), so a band of output rows or a task has no slice of such a
    producer to compute but the whole of it, again in every band. The NCHW -> NHWC
    transpose of a model's input, fused into the stem's group, then failed to vectorize and
    the group fell apart into one loop nest per op (fill, conv, bias + ReLU: SqueezeNet's
    stem on one thread, docs/performance.md "Small groups on one thread"). Left out, the
    producer runs before the group as an op of its own."""
    chosen: list[ir.Operation] = []
    reshapes: list[ir.Operation] = []
    anchor_nest = nests.get(anchor)
    windowed = anchor_nest is not None and bool(anchor_nest.convolution)
    stack = [root]
    while stack:
        consumer = stack.pop()
        for index, operand in enumerate(consumer.operands):
            if windowed and consumer == anchor and index < anchor_nest.num_inputs:
                continue
            producer = defining_op(operand)
            if producer is None or producer not in members or producer in chosen or producer in reshapes:
                continue
            if producer.name in RESHAPE_OPS:
                reshapes.append(producer)
            elif producer in nests:
                if None in nests[producer].output_dims:
                    return None
                chosen.append(producer)
            else:
                continue
            stack.append(producer)
    inside = {*chosen, *reshapes, root}
    if any(user not in inside for op in (*chosen, *reshapes) for user in _users(op)):
        return None
    return chosen, reshapes


def _shape(value: ir.Value) -> list[int]:
    return list(ir.ShapedType(value.type).shape)


def _reassociation(op: ir.Operation) -> list[list[int]]:
    return [[ir.IntegerAttr(i).value for i in group] for group in op.attributes["reassociation"]]


def _through_reshape(op: ir.Operation, sizes: list[int], *, to_result: bool) -> list[int] | None:
    """Slice sizes of a reshape's source carried to its result (or back): a reassociation
    group keeps its slice when at most one of its high-rank dims is not 1, or when the slice
    covers the whole group; otherwise the slice is not a box on the other side (``None``)."""
    source, result = _shape(op.operands[0]), _shape(op.results[0])
    high, low = (result, source) if op.name == "tensor.expand_shape" else (source, result)
    expanding = (op.name == "tensor.expand_shape") == to_result
    out = [0] * (len(high) if expanding else len(low))
    for low_dim, group in enumerate(_reassociation(op)):
        wide = [d for d in group if high[d] != 1]
        if expanding:
            whole = sizes[low_dim] == low[low_dim]
            if len(wide) > 1 and not whole:
                return None
            for d in group:
                out[d] = high[d] if whole or d not in wide else sizes[low_dim]
        elif len(wide) > 1 and any(sizes[d] != high[d] for d in group):
            # Still a box (one run of the row-major collapsed dim) when only the group's
            # outermost wide dim is partial: whole panels of a (panels, 32) column split
            # (graph/weight_panels.py) are a block of columns.
            if any(sizes[d] != high[d] for d in wide[1:]):
                return None
            out[low_dim] = math.prod(sizes[d] for d in group)
        else:
            out[low_dim] = sizes[wide[0]] if len(wide) == 1 else low[low_dim]
    return out


def _root_thread_tiles(anchor: ir.Operation, root: ir.Operation, order: list[ir.Operation],
                       nests: dict[ir.Operation, LoopNest], anchor_tiles: tuple[int, ...]
                       ) -> tuple[int, ...] | None:
    """The anchor's thread tiles carried forward (maps, reshapes) onto the root's loops.
    ``order``: the root, then its producers and reshapes, consumers first."""
    anchor_nest = nests[anchor]
    out_sizes: dict[ir.Operation, list[int]] = {anchor: [
        (anchor_tiles[d] or anchor_nest.ranges[d]) if d is not None else extent
        for d, extent in zip(anchor_nest.output_dims, _shape(anchor.results[0]))]}
    for op in reversed(order):  # producers first, the root last
        if op in out_sizes:
            continue
        if op.name in RESHAPE_OPS:
            source = defining_op(op.operands[0])
            if source in out_sizes:
                carried = _through_reshape(op, out_sizes[source], to_result=True)
                if carried is None:
                    return None
                out_sizes[op] = carried
            continue
        if op not in nests:
            continue  # a fused pad feeds the anchor: not on the way from it to the root
        nest = nests[op]
        sizes = list(nest.ranges)
        known = False
        for index, operand in enumerate(op.operands):
            producer = defining_op(operand)
            if producer not in out_sizes or index >= len(nest.operand_dims):
                continue
            known = True
            for j, d in enumerate(nest.operand_dims[index]):
                if d is None:
                    continue
                size = out_sizes[producer][j]
                if sizes[d] != nest.ranges[d] and size != sizes[d]:
                    return None
                sizes[d] = min(sizes[d], size)
        if not known:
            continue
        if op == root:
            if all(size >= extent for size, extent in zip(sizes, nest.ranges)):
                return None
            # A matmul behind a reshape: whole parallel dims are tiled by their extent,
            # not left untiled (0). With a task spanning all 128 rows of a BERT
            # projection, a root tiled only along its columns could not fuse the matmul
            # behind the reshape ("could not find next producer to fuse"), and the group
            # fell apart into one loop nest per op. Elsewhere untiled dims stay 0 (a
            # softmax's row max and sum, tiled by their extent, each recomputed the exp
            # they share).
            whole = bool(anchor_nest.contraction) and any(op.name in RESHAPE_OPS for op in order)
            return tuple(size if size < extent or (whole and nest.parallel[d]) else 0
                         for d, (size, extent) in enumerate(zip(sizes, nest.ranges)))
        out_sizes[op] = [sizes[d] if d is not None else extent
                         for d, extent in zip(nest.output_dims, _shape(op.results[0]))]
    return None


def _slice_extents(order: list[ir.Operation], nests: dict[ir.Operation, LoopNest],
                   root_extents: tuple[int, ...]) -> dict[ir.Operation, tuple[int, ...]] | None:
    """Per structured op of ``order`` (root first, then producers and reshapes consumers
    first), the extents of its loops inside one task: the slice its consumers read, its
    reduction loops whole. ``None`` when two consumers read different slices of one op."""
    loops: dict[ir.Operation, tuple[int, ...]] = {order[0]: root_extents}
    wanted: dict[ir.Operation, list[int]] = {}  # result slice sizes, per producer

    def want(producer: ir.Operation | None, sizes: list[int] | None) -> bool:
        if producer is None or (producer not in nests and producer.name not in RESHAPE_OPS):
            return True
        if sizes is None or wanted.setdefault(producer, sizes) != sizes:
            return False
        if producer in nests:
            nest = nests[producer]
            loops[producer] = tuple(
                sizes[nest.output_dims.index(d)] if d in nest.output_dims else extent
                for d, extent in enumerate(nest.ranges))
        return True

    for consumer in order:
        if consumer.name in RESHAPE_OPS:
            if consumer in wanted and not want(defining_op(consumer.operands[0]), _through_reshape(
                    consumer, wanted[consumer], to_result=False)):
                return None
            continue
        if consumer not in loops:
            continue
        nest = nests[consumer]
        for index, operand in enumerate(consumer.operands):
            if index >= len(nest.operand_dims) or not isinstance(operand.type, ir.ShapedType):
                continue
            sizes = [loops[consumer][d] if d is not None else extent
                     for d, extent in zip(nest.operand_dims[index], _shape(operand))]
            if not want(defining_op(operand), sizes):
                return None
    return loops


@dataclass(frozen=True, eq=False)
class FusionUnit:
    """A fusion group whose ops can be computed as one loop nest (structure only; whether it
    is depends on the anchor's plan having a thread level).

    Attributes:
      anchor: the group's conv/matmul/pooling/reduction op, whose knobs the tuner searches.
      root: the group's last op (its result leaves the group); may be the anchor.
      producers: the ops fused into the root's loop, consumers first (the anchor among them
        unless it is the root).
      reshapes: reshapes between them (their slices are moved above them, not fused).
    """

    anchor: ir.Operation
    root: ir.Operation
    producers: tuple[ir.Operation, ...]
    reshapes: tuple[ir.Operation, ...]

    @cached_property
    def ops(self) -> list[ir.Operation]:
        """Every op of the unit, consumers first (sorted once: a block-order walk)."""
        return _consumers_first([self.root, *self.producers, *self.reshapes])


def _unit(members: list[ir.Operation], anchor: ir.Operation,
          nests: dict[ir.Operation, LoopNest]) -> FusionUnit | None:
    member_set = set(members)
    structured = [op for op in members if op in nests]
    root = structured[-1] if structured else None
    # A reshape after the root (the collapse of a matmul on weight panels back to 2-D,
    # pipelines/graph/weight_panels.py) moves no data: the group's loop nest ends before it.
    if (root is None or any(u in member_set and u.name not in RESHAPE_OPS for u in _users(root))
            or None in nests[root].output_dims):
        return None
    found = _fused_producers(root, anchor, member_set, nests)
    if found is None or (root != anchor and anchor not in found[0]):
        return None
    producers, reshapes = found
    if root == anchor and all(op.name == "linalg.fill" for op in producers):
        return None  # the anchor and its fill alone: its own plan already is one loop nest
    block_order = {op: index for index, op in enumerate(members)}
    producers.sort(key=block_order.__getitem__, reverse=True)  # consumers first
    reshapes.sort(key=block_order.__getitem__, reverse=True)
    return FusionUnit(anchor, root, tuple(producers), tuple(reshapes))


def find_fusion_units(module: ir.Operation, nests: Mapping[ir.Operation, LoopNest]
                      ) -> list[FusionUnit]:
    """The fusion groups of ``module`` (the tags ``tilecraft-mark-groups`` set at the end of
    the ``simplify`` stage) that can become one loop nest, in block order. Untagged IR has
    none. Call :func:`prepare_groups` before analysing the loop nests."""
    units = []
    for func in defined_functions(module):
        for members, anchor in tagged_groups(func):
            if anchor is not None and classify(anchor, nests.get(anchor)) in ANCHORS:
                unit = _unit(members, anchor, dict(nests))
                if unit is not None:
                    units.append(unit)
    return units


def _plan_unit(unit: FusionUnit, nests: dict[ir.Operation, LoopNest],
               tags: dict[ir.Operation, int], plans: dict[int, OpSchedule],
               standalone: set[int], vector_bits: int,
               caches: CacheHierarchy) -> GroupSchedule | None:
    anchor, root = unit.anchor, unit.root
    anchor_plan = plans.get(tags[anchor])
    if anchor_plan is None:
        return None
    sequential = not anchor_plan.thread_tiles
    if sequential:
        # No thread level: the group is still one loop nest, a sequential one (scf.for),
        # over bands of rows, or one band when the whole output fits (``_whole_band``).
        tiles = sequential_tiles(nests[anchor], caches, anchor_plan.register_tiles)
        whole_band = tiles is None
        if whole_band:
            tiles = _whole_band(nests[anchor])
        if tiles is None:
            return None
        anchor_plan = replace(anchor_plan, thread_tiles=tiles)
    order = _consumers_first([root, *unit.producers, *unit.reshapes])
    if root == anchor:
        root_tiles = anchor_plan.thread_tiles
    elif sequential and whole_band:
        # One band that is the whole output (``_whole_band``), carried onto the root.
        root_tiles = _carried_tiles(nests[anchor], nests[root], anchor_plan.thread_tiles)
    else:
        root_tiles = _root_thread_tiles(anchor, root, order, nests, anchor_plan.thread_tiles)
    if root_tiles is None:
        return None
    extents = _slice_extents(order, nests, tuple(
        tile or extent for tile, extent in zip(root_tiles, nests[root].ranges)))
    if extents is None or any(op not in extents for op in unit.producers if op in nests):
        return None
    producers = list(unit.producers)
    if root == anchor and all(op.name == "linalg.fill" for op in producers):
        return None  # the anchor's own plan is the same loop nest
    inner = {"thread_tiles": None, "fused_init_tag": None, "init_register_tiles": None}

    def inner_plan(op: ir.Operation) -> OpSchedule:
        if op == anchor:
            return replace(anchor_plan, **inner)
        return plan_default_schedule(replace(nests[op], ranges=extents[op]), tags[op],
                                     vector_bits=vector_bits, num_threads=1, caches=caches)

    root_plan = replace(inner_plan(root), thread_tiles=root_tiles)
    fallback = tuple(plans[tags[op]] for op in reversed(order) if tags.get(op) in standalone)
    # A sequential group too (its band is an scf.for: conv_kernels.py's task_loop): on one
    # thread ResNet-50 and MobileNetV2 ran faster with the epilogue in registers.
    accumulators = _accumulator_epilogue(unit, nests, anchor_plan)
    return GroupSchedule(root_plan, tuple(inner_plan(op) for op in producers), fallback,
                         bubble_up_slices=bool(unit.reshapes), sequential=sequential,
                         accumulator_tiles=accumulators[0] if accumulators else None,
                         accumulator_interchange=accumulators[1] if accumulators else None,
                         anchor_tag=tags[anchor] if accumulators else None)


def _whole_band(nest: LoopNest) -> tuple[int, ...] | None:
    """Sequential tiles of one band holding the whole output: the output rows tiled by
    their extent, for a convolution or pooling whose output fits the L2 share a band may
    take (``sequential_tiles`` then has no band to cut: SqueezeNet's squeezes, every
    convolution of a grouped convolution's loop over groups). Why a band at all: the group's
    epilogue reaches the anchor's accumulators only as a sequential group, whose
    register-tile loops sit in such a band loop (conv_kernels.py; the one-iteration loop
    then folds away). Planned op by op instead, the conv wrote its result and a second loop
    nest reread it for the bias and ReLU, and a padded consumer's interior could not be the
    group's destination: at one thread SqueezeNet copied each squeeze out of its 3x3
    expand's padded input and back (docs/performance.md, "Small groups on one thread")."""
    if not nest.convolution or not nest.convolution[1] or not nest.static:
        return None
    tiles = [0] * len(nest.ranges)
    rows = nest.convolution[1][0]
    tiles[rows] = nest.ranges[rows]
    return tuple(tiles)


def _carried_tiles(anchor: LoopNest, root: LoopNest, tiles: tuple[int, ...]) -> tuple[int, ...] | None:
    """The anchor's ``tiles`` on the root's loops, output dim by output dim (both index
    their outputs by plain loops; ``None`` otherwise)."""
    if len(anchor.output_dims) != len(root.output_dims) or None in (*anchor.output_dims, *root.output_dims):
        return None
    carried = [0] * len(root.ranges)
    for a, r in zip(anchor.output_dims, root.output_dims):
        carried[r] = tiles[a]
    return tuple(carried)


def _accumulator_epilogue(unit: FusionUnit, nests: dict[ir.Operation, LoopNest],
                          anchor_plan: OpSchedule
                          ) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """The root's register tiles when the group is a convolution followed by elementwise
    ops on its output's shape (bias, folded batch norm, residual add, ReLU): those ops then run
    on the conv's accumulators (conv_kernels.py). ``None`` for other groups.

    A depthwise convolution (NHWC, ``depthwise_channel_dim``) too: its register tile is
    pixels x one vector of channels, the same loops as the epilogue's. Left out, its group
    wrote each task's result to a scratch tile (zero-filled first, read back as the first
    accumulators) and a second loop nest reread it for the bias and ReLU6
    (docs/performance.md, "Depthwise epilogues and windows"). Pooling keeps its own loop
    nests."""
    anchor, root = unit.anchor, unit.root
    nest = nests[anchor]
    if (root == anchor or unit.reshapes or not nest.convolution
            or not (nest.convolution[2] or depthwise_channel_dim(nest) is not None)
            or not anchor_plan.decompose or not anchor_plan.register_tiles
            or (anchor_plan.cache_tiles and any(anchor_plan.cache_tiles))):
        return None
    shape = _shape(anchor.results[0])
    if _feeds_anchor_inputs(unit, nest):
        return None
    for op in (root, *unit.producers):
        if op in (anchor,) or op.name == "linalg.fill":
            continue
        if op not in nests or not all(nests[op].parallel) or _shape(op.results[0]) != shape:
            return None
    return epilogue_register_tiles(anchor_plan.register_tiles, nest.output_dims,
                                   anchor_plan.register_interchange, nests[root].output_dims,
                                   len(nests[root].ranges))


def _feeds_anchor_inputs(unit: FusionUnit, nest: LoopNest) -> bool:
    """Whether a fused producer computes one of the anchor's inputs (not its init): an
    injective op before a convolution, such as the NCHW -> NHWC transpose of a model's
    input. Such an op is no epilogue even when its result has the conv's output shape (as
    many input as output channels), and fused into the accumulator tile's loop it was
    recomputed whole (every input channel of the tile's pixels) for each tile of output
    channels, as one vector: vector<2048x1x7xf32> for a 2048-channel 1x1 layer on a 7x7
    NCHW input, which LLVM did not finish compiling in 10 minutes."""
    members = {op for op in (*unit.producers, *unit.reshapes) if op.name != "linalg.fill"}
    inputs = list(unit.anchor.operands)[:nest.num_inputs]
    return any(defining_op(value) in members for value in inputs)


def _consumers_first(ops: list[ir.Operation]) -> list[ir.Operation]:
    """``ops`` (of one block) from the last to the first."""
    parent = ops[0].parent
    block = getattr(parent, "operation", parent).regions[0].blocks[0]
    position = {op.operation: index for index, op in enumerate(block.operations)}
    return sorted(ops, key=position.__getitem__, reverse=True)


def plan_groups(units: list[FusionUnit], analyzed: list[tuple[ir.Operation, LoopNest]],
                tags: dict[ir.Operation, int], plans: dict[int, OpSchedule],
                standalone: set[int], *, vector_bits: int,
                caches: CacheHierarchy = CacheHierarchy()) -> list[GroupSchedule]:
    """One :class:`GroupSchedule` per unit whose anchor plan has a thread level (see the
    module docstring); ``plans`` are the ops' own plans by tag, ``standalone`` the tags of
    those applied on their own (not fused into another op's plan)."""
    nests = dict(analyzed)
    groups = []
    for unit in units:
        group = _plan_unit(unit, nests, tags, plans, standalone, vector_bits, caches)
        if group is not None:
            groups.append(group)
    return groups


# Top-level ops after the schedule stage that each run as a kernel of their own: loop nests,
# linalg ops left unscheduled, data movement that bufferization turns into copies, and the
# straight-line vector code of an op small enough to be one register tile.
_KERNEL_OPS = frozenset({"scf.forall", "scf.for", "scf.parallel", "tensor.pad", "tensor.concat",
                         "tensor.insert_slice", "vector.transfer_write"})


def count_kernels(module: ir.Operation) -> int:
    """How many kernels the scheduled ``module`` runs: top-level loop nests and copies of its
    functions (what ``tilecraft run --profile`` times one by one). A kernel function the
    entry calls (schedule/repeated_kernels.py, ``keep-kernels``) counts once per call."""
    own: dict[str, int] = {}
    calls: dict[str, list[str]] = {}
    for func in defined_functions(module):
        name = ir.StringAttr(func.attributes["sym_name"]).value
        own[name], calls[name] = 0, []
        for op in func.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "tensor.pad" and defining_op(op.operands[0]) is not None:
                continue  # its source's producer writes into it (pipelines/tensor/pad_destinations.py)
            if op.name == "func.call":
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                if callee.startswith(KERNEL_FUNCTION_PREFIX):
                    calls[name].append(callee)
            elif op.name in _KERNEL_OPS or is_structured(op):
                own[name] += 1
    return sum(own[name] + sum(own.get(callee, 0) for callee in calls[name])
               for name in own if not name.startswith(KERNEL_FUNCTION_PREFIX))
