"""Tuning tasks: the distinct kernels of a model, each with its static shapes.

A task is what the ``schedule`` stage turns into one loop nest, as it sees it (after the
``input``, ``graph`` and ``simplify`` stages):

- a *fusion group* that becomes one loop nest (``schedule/group.py``'s
  ``FusionUnit``, found when the model is compiled at ``opt_level`` 3): its anchor (conv,
  matmul, pooling, reduction) with the ops fused around it — bias + activation epilogues,
  zero fills, transposes, softmax's and layer norm's other reductions. The tuner searches
  the anchor's knobs; the other ops follow the anchor's tiles;
- any other structured op (named or generic), alone.

Its *payload* is a standalone function holding the group (or op): values from outside
become arguments, except inits made of ``tensor.empty`` (and a ``linalg.fill`` of a
constant) and scalar constants, which are copied. The task *key* is a hash of the payload's
generalized form (indexing maps, iterators, bodies, shapes, element types): the same group
in two models, or twice in one model, is one task. Weights are arguments, so their values do
not change the key.

An argument that is a constant in the model (a filter, a bias) carries the unit attribute
``tilecraft.weight``, and :func:`measured_module` turns it back into a constant (of fixed
random values) before a candidate is compiled. Why: the pipeline treats a constant operand
differently from an argument: it pads a constant filter's rows and stores a constant read in
column blocks block-major (pipelines/tensor/blocked_constants.py). A candidate compiled with its
filters as arguments ran a different loop nest than the model's, 2 to 6 times slower on
ResNet-50's convolutions, and the tuner ranked schedules by a kernel the model never runs.
The attribute is left out of the key, so records keep matching.

Where the model writes an occurrence's result into a slice of a larger tensor (the interior
of the next convolution's ``tensor.pad``, its part of a ``tensor.concat``, a
``tensor.insert_slice``), the task records that :class:`Placement` (:attr:`Task.placement`),
and the module the tuner measures writes its result into that slice of a fresh tensor of
the larger shape (:func:`measured_module`, :func:`place_result`). Why: the model's kernel is
built for that destination and the bare payload's was not. The graph stage keeps a
convolution's filters at a multiple of 8 when its result is padded or concatenated next
(pipelines/graph/padded_extents.py, ``into_destination``) and rounds them up to 16 lanes
otherwise: ShuffleNet's 7x7, 232 -> 232 convolutions, all written into a pad or a concat,
ran on 8-lane vectors in the model and on 16-lane ones, twice as fast, in the tuner. And the
stores differ: MobileNetV2's 112x112, 16 -> 96 expansion writes the next depthwise layer's
pad interior, 114-pixel rows of a fresh 5 MB buffer, and measured faster writing a
contiguous tensor of its own (docs/tuning.md, "Faithful measurement: the kernel's
destination"). The placement is not part of the key: a record
applies to every occurrence, wherever it writes.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
from mlir import ir, passmanager
from mlir.dialects import arith, func, tensor

from ..errors import TaskExtractionError
from ..frontend.loader import Model, is_onnx_source, load_module
from ..pipelines.cpu import cpu_pipeline
from ..pipelines.ir_queries import defining_op
from ..pipelines.loop_nest import LoopNest, analyze_loop_nests, is_structured
from ..pipelines.pipeline import Pipeline
from ..pipelines.profiling import kernel_name
from ..pipelines.scratch import scratch_copy
from ..pipelines.target import Target
from ..pipelines.tensor.static_slices import insert_static
from .group import FusionUnit, find_fusion_units, prepare_groups
from .matmul_plan import plans_as_contraction
from .op_schedule import DECOMPOSABLE

ENTRY = "task"
# The most distinct producers a task's measurement runs (Task.producer_cycle): each is one
# more build in the tuning worker.
PRODUCERS_MEASURED = 4
WEIGHT = "tilecraft.weight"  # a payload argument that is a constant in the model


@dataclass(frozen=True)
class Placement:
    """Where the model writes a task occurrence's result: the slice at ``offsets`` of size
    ``sizes`` (the result's shape; unit strides) of a tensor of ``shape``, the destination a
    padding or concatenation passes to its producer (pipelines/tensor/pad_destinations.py,
    concat_destinations.py)."""

    shape: tuple[int, ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    def region(self) -> tuple[slice, ...]:
        """The result's slice of the destination, for numpy."""
        return tuple(slice(o, o + n) for o, n in zip(self.offsets, self.sizes))


@dataclass(frozen=True)
class Producer:
    """The kernel that writes what a task occurrence reads: the producing task's ``payload``
    (measured with its default schedule, its result written into a tensor of its own) and
    the index of the candidate's argument its result is, among the measured module's
    arguments (weights are constants there, :func:`measured_module`). Its result may reach
    the argument through reshapes (the same elements, another shape).

    Why: a tuning worker runs the producer before each timed call of a candidate
    (tuning/measure.py), so the candidate reads its input as the model's kernel does, just
    written, its lines in the caches of the cores that wrote them in the split the
    producer's parallel loop made. Read again by one thread after the cache flush, the
    input sat in the reading core's cache: a small two-thread 1x1 expansion ran 13-26 %
    faster in the tuner than in the model (docs/tuning.md, "Faithful measurement: the
    producer before the call")."""

    payload: str
    argument: int


@dataclass(frozen=True)
class Task:
    """One tunable op.

    Attributes:
      key: stable signature (hex) of the generalized op, its shapes and element types.
      name: readable name, e.g. ``matmul_1024x1024x1024_f32``.
      kind: kernel class: ``matmul``, ``conv2d``, ``depthwise_conv2d``, ``pooling``,
        ``reduction`` or ``elementwise``.
      op_name: the op as it appears in the model (``linalg.matmul``).
      ranges: loop extents; ``parallel``: per loop, parallel (True) or reduction.
      element_type: MLIR element type of the result (``f32``).
      flops: arithmetic operations of one execution (2 per multiply-add).
      count: how many ops of the model are this task.
      payload: MLIR text of ``func.func @task`` holding the op alone.
      kernels: per occurrence in the model, the names the profiler may give its kernel
        (pipelines/profiling.py's ``kernel_name`` of the unit's anchor, then of its other
        ops: the loop nest carries one of their locations): how a profile of the model is
        joined with the task (the tuner's time next to the in-model time). The first name
        is the anchor's, which no other task claims before this one.
      weight_bytes: bytes of the model's constants one occurrence reads (its
        ``tilecraft.weight`` arguments): whether a model's weights outgrow the caches.
      moved_bytes: bytes of the payload's arguments and result, each read or written once:
        the least one execution moves, which with ``flops`` gives its arithmetic intensity
        and so its roofline bound (runtime/peak.py).
      runs: per occurrence, how many times one call of the model executes its loop nest:
        the product of the static trip counts of the loops around it at the schedule stage
        (1 for an op at the top of its function). Why: the frontend computes a grouped
        convolution as per-group kernels inside a loop over the groups (and bands of rows),
        so RegNet's 14x14, 13-group 3x3 is one task of a 7-row, one-group nest run 26 times
        per call; counted once, its in-model time made it look 26x slower than it is.
      placements: per occurrence, where the model writes its result (:class:`Placement`),
        ``None`` where it is a tensor of its own: what a candidate's measured module
        reproduces (:attr:`placement`, :func:`measured_module`).
      producers: per occurrence, the task whose result it reads (:class:`Producer`),
        ``None`` where no task's result reaches it through reshapes alone (a model input,
        a pad's or concat's result): what the tuner runs before each timed call
        (:attr:`producer_cycle`).
    """

    key: str
    name: str
    kind: str
    op_name: str
    ranges: tuple[int, ...]
    parallel: tuple[bool, ...]
    element_type: str
    flops: int
    count: int
    payload: str
    kernels: tuple[tuple[str, ...], ...] = ()
    weight_bytes: int = 0
    moved_bytes: int = 0
    runs: tuple[int, ...] = ()
    placements: tuple[Placement | None, ...] = ()
    producers: tuple[Producer | None, ...] = ()

    def merged(self, other: "Task") -> "Task":
        """This task with ``other``'s occurrences (same key) added."""
        return Task(**{**self.__dict__, "count": self.count + other.count,
                       "kernels": self.kernels + other.kernels,
                       "runs": self.occurrence_runs + other.occurrence_runs,
                       "placements": self.occurrence_placements + other.occurrence_placements,
                       "producers": self.occurrence_producers + other.occurrence_producers})

    @property
    def occurrence_placements(self) -> tuple[Placement | None, ...]:
        """:attr:`placements`, one per occurrence (``None`` each where they were not given)."""
        return self.placements if len(self.placements) == self.count else (None,) * self.count

    @property
    def placement(self) -> Placement | None:
        """The destination the tuner measures the task with: the one most of its executions
        write (ties: the first occurrence's), ``None`` (a tensor of its own) included."""
        executions: Counter[Placement | None] = Counter()
        for placement, runs in zip(self.occurrence_placements, self.occurrence_runs):
            executions[placement] += runs
        return executions.most_common(1)[0][0] if executions else None

    @property
    def occurrence_producers(self) -> tuple[Producer | None, ...]:
        """:attr:`producers`, one per occurrence (``None`` each where they were not given)."""
        return self.producers if len(self.producers) == self.count else (None,) * self.count

    @property
    def producer_cycle(self) -> tuple[Producer | None, ...]:
        """What the tuner runs before its timed calls, one entry per call in turn: each
        occurrence's producer, repeated by its runs, ``None`` for an execution that reads no
        task's result (its arguments are read back into the caches instead) and for
        producers beyond the :data:`PRODUCERS_MEASURED` most executions read. Empty when no
        occurrence has a producer. Why in turn: the task's time in the model is the mean
        over its executions, whatever each one reads."""
        executions: Counter[Producer] = Counter()
        for producer, runs in zip(self.occurrence_producers, self.occurrence_runs):
            if producer is not None:
                executions[producer] += runs
        kept = {producer for producer, _ in executions.most_common(PRODUCERS_MEASURED)}
        if not kept:
            return ()
        return tuple(producer if producer in kept else None
                     for producer, runs in zip(self.occurrence_producers, self.occurrence_runs)
                     for _ in range(runs))

    @property
    def occurrence_runs(self) -> tuple[int, ...]:
        """:attr:`runs`, one per occurrence (1 each where it was not given)."""
        return self.runs if len(self.runs) == self.count else (1,) * self.count

    @property
    def executions(self) -> int:
        """How many times one call of the model executes this task's loop nest, all
        occurrences together: what its time per execution is multiplied by in the model."""
        return sum(self.occurrence_runs)

    def describe(self) -> dict[str, Any]:
        """The JSON-able summary stored in every record (everything but the payload)."""
        return {"key": self.key, "name": self.name, "kind": self.kind, "op": self.op_name,
                "ranges": list(self.ranges), "dtype": self.element_type, "flops": self.flops,
                "count": self.count}


def kernel_class(nest: LoopNest) -> str | None:
    """The kernel class of a loop nest, or ``None`` when the op is not tunable."""
    if not nest.static or 0 in nest.ranges:
        return None
    if nest.op_name == "linalg.fill":
        return None  # fused into its consumer's tasks, or a memset not worth a search
    if plans_as_contraction(nest):
        return "matmul"
    if nest.convolution and nest.op_name in DECOMPOSABLE:
        if "pooling" in nest.op_name:
            return "pooling"
        return "depthwise_conv2d" if "depthwise" in nest.op_name else "conv2d"
    if not nest.projected:
        return None  # the default schedule leaves such ops as loops (see plan_default_schedule)
    return "reduction" if nest.reduction_dims else "elementwise"


def _strip_tilecraft_attributes(op: ir.Operation) -> None:
    for name in [attribute if isinstance(attribute, str) else attribute.name
                 for attribute in op.attributes]:
        if name.startswith("tilecraft."):
            del op.attributes[name]


def _inner_ops(op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        found.append(inner)
        return ir.WalkResult.ADVANCE

    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _remap_captured(twin: ir.Operation, mapping: dict) -> None:
    for inner_op in _inner_ops(twin):
        for index, value in enumerate(inner_op.operands):
            for original, replacement in mapping.items():
                if value == original:
                    inner_op.operands[index] = replacement


def build_payload(ops: "list[ir.Operation]", results: "list[ir.Value]") -> ir.Module:
    """A new module whose ``@task`` function computes ``ops`` (of one block, in any order)
    and returns ``results``. Values from outside become arguments in first-use order, except
    shape-only inits and scalar constants, which are copied (:func:`_copyable`)."""
    ops = _in_block_order(ops)
    outside = payload_arguments(ops)
    with ops[0].context, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            function = func.FuncOp(ENTRY, ir.FunctionType.get(
                [v.type for v in outside], [r.type for r in results]))
        weights = [_is_weight(defining_op(value)) for value in outside]
        if any(weights):
            function.attributes["arg_attrs"] = ir.ArrayAttr.get([
                ir.DictAttr.get({WEIGHT: ir.UnitAttr.get()} if weight else {}) for weight in weights])
        entry = function.add_entry_block()
        mapping: list[tuple[ir.Value, ir.Value]] = list(zip(outside, entry.arguments))

        def mapped(value: ir.Value) -> ir.Value:
            for original, replacement in mapping:
                if value == original:
                    return replacement
            producer = defining_op(value)  # a shape-only init or a scalar constant
            operands = [mapped(operand) for operand in producer.operands]  # cloned first
            clone = producer.clone()
            for index, operand in enumerate(operands):
                clone.operands[index] = operand
            _strip_tilecraft_attributes(clone)
            mapping.extend(zip(producer.results, clone.results))
            return mapped(value)

        with ir.InsertionPoint(entry):
            for op in ops:
                operands = [mapped(v) for v in op.operands]
                captured = {value: mapped(value) for value in _captured_values(op)}
                twin = op.clone()
                for index, value in enumerate(operands):
                    twin.operands[index] = value
                _remap_captured(twin, captured)
                _strip_tilecraft_attributes(twin)
                mapping.extend(zip(op.results, twin.results))
            func.ReturnOp([mapped(r) for r in results])
        return module


def _block_positions(op: ir.Operation) -> dict[ir.Operation, int]:
    """Each op of ``op``'s block -> its index in the block."""
    parent = op.parent
    block = getattr(parent, "operation", parent).regions[0].blocks[0]
    return {inner.operation: index for index, inner in enumerate(block.operations)}


def _in_block_order(ops: "list[ir.Operation]",
                    position: "Mapping[ir.Operation, int] | None" = None) -> "list[ir.Operation]":
    """``ops`` (of one block) in the block's order (``position``: the block's
    :func:`_block_positions`, when the caller has them)."""
    return sorted(ops, key=(position or _block_positions(ops[0])).__getitem__)


def payload_arguments(ops: "list[ir.Operation]",
                      position: "Mapping[ir.Operation, int] | None" = None) -> list[ir.Value]:
    """The values from outside ``ops`` (of one block) that their payload takes as arguments,
    in first-use order (the order of the payload's ``@task`` arguments): all but shape-only
    inits and scalar constants (:func:`_copyable`)."""
    ops = _in_block_order(ops, position)
    inside = set(ops)
    outside: list[ir.Value] = []
    for op in ops:
        for value in [*op.operands, *_captured_values(op)]:
            producer = defining_op(value)
            if producer in inside or _copyable(producer) or any(value == v for v in outside):
                continue
            outside.append(value)
    return outside


# Ops whose result holds their operand's elements, in the same order, in another shape: a
# producer's result reaches a task's argument through them unchanged (:func:`data_producer`).
_RESHAPES = ("tensor.collapse_shape", "tensor.expand_shape")


def moves_data_only(op: ir.Operation) -> bool:
    """A transpose or copy: a ``linalg.transpose``/``linalg.copy``, or a ``linalg.generic``
    whose body yields one of its block arguments unchanged."""
    if op.name in ("linalg.transpose", "linalg.copy"):
        return True
    if op.name != "linalg.generic":
        return False
    body = list(op.regions[0].blocks[0].operations)
    return (len(body) == 1 and len(body[0].operands) == 1
            and isinstance(body[0].operands[0], ir.BlockArgument))


def data_producer(ops: "list[ir.Operation]", produced: "Mapping[ir.Operation, str | None]") -> Producer | None:
    """The :class:`Producer` of the argument of the payload of ``ops`` that the model
    computes last before them: the one the result of an op in ``produced`` (a task's root
    op -> that task's payload) reaches through reshapes alone, written by the latest such op
    of their block. Why the latest: that kernel runs just before this one, and its result is
    what sits in the cores' caches as it wrote it (a residual block's skip tensor, also an
    argument, was written kernels earlier). ``None`` when no argument is produced so
    (weights, model inputs, results that pass a pad or a concat first), or when the latest
    writer's payload is ``None`` in ``produced``: a transpose or copy
    (:func:`moves_data_only`), which the stages after the schedule often fold into the
    kernel before it (ShuffleNet's channel shuffles: its compiled model has no transpose
    kernel), so running it would not be the model's order."""
    position = _block_positions(ops[0])
    arguments = [v for v in payload_arguments(ops, position) if not _is_weight(defining_op(v))]
    latest: tuple[int, Producer | None] | None = None
    for index, value in enumerate(arguments):
        owner = defining_op(value)
        while owner is not None and owner.name in _RESHAPES:
            owner = defining_op(owner.operands[0])
        if owner is None or owner not in produced or owner not in position:
            continue
        if latest is None or position[owner] > latest[0]:
            payload = produced[owner]
            latest = (position[owner], Producer(payload, index) if payload is not None else None)
    return latest[1] if latest is not None else None


def _copyable(producer: ir.Operation | None) -> bool:
    """Shape-only inits (``tensor.empty``, and a ``linalg.fill`` of a scalar constant into
    one) and scalar constants: copied into a payload, not passed in; a fill is then fused the
    way the schedule fuses it."""
    if producer is None:
        return False
    if producer.name == "tensor.empty":
        return len(producer.operands) == 0
    if producer.name == "linalg.fill":
        return all(_copyable(defining_op(operand)) for operand in producer.operands)
    return producer.name == "arith.constant" and not isinstance(producer.results[0].type, ir.ShapedType)


def _is_weight(producer: ir.Operation | None) -> bool:
    """A tensor constant (``arith.constant`` of a shaped type): a weight of the model."""
    return (producer is not None and producer.name == "arith.constant"
            and isinstance(producer.results[0].type, ir.RankedTensorType))


def measured_module(payload: "str | ir.Module", context: ir.Context, seed: int = 1,
                    placement: Placement | None = None) -> ir.Module:
    """The payload as a candidate is compiled and measured: a module in ``context`` whose
    ``tilecraft.weight`` arguments are constants again (uniform in [-1, 1), or integers in
    [0, 8), from ``seed``: the same in every worker, so outputs compare), the others left
    as arguments. The model's weight values are not kept in the task; only their being
    constants changes the code the pipeline builds. ``placement``: the result is written
    into that slice of a larger tensor, as in the model (:func:`place_result`)."""
    if isinstance(payload, ir.Module):
        payload = str(payload)
    module = ir.Module.parse(payload, context=context)
    function = next(op for op in module.body.operations
                    if op.operation.name == "func.func" and op.sym_name.value == ENTRY)
    if "arg_attrs" in function.attributes:
        _weights_as_constants(function, context, seed)
    if placement is not None:
        place_result(module, placement)
    return module


def _weights_as_constants(function: Any, context: ir.Context, seed: int) -> None:
    """``function``'s ``tilecraft.weight`` arguments replaced by constants of random values
    drawn from ``seed`` (:func:`measured_module`)."""
    rng = np.random.default_rng(seed)
    entry = function.regions[0].blocks[0]
    values = [_random_values(rng, ir.RankedTensorType(argument.type))
              if WEIGHT in ir.DictAttr(attrs) else None
              for attrs, argument in zip(function.attributes["arg_attrs"], entry.arguments)]
    flags = [value is not None for value in values]
    with context, ir.Location.unknown(), ir.InsertionPoint.at_block_begin(entry):
        for index in reversed([i for i, weight in enumerate(flags) if weight]):
            argument = entry.arguments[index]
            tensor_type = ir.RankedTensorType(argument.type)
            constant = arith.ConstantOp(tensor_type, ir.DenseElementsAttr.get(values[index], type=tensor_type))
            argument.replace_all_uses_with(constant.result)
            entry.erase_argument(index)
        kept = [i for i, weight in enumerate(flags) if not weight]
        old_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [old_type.inputs[i] for i in kept], old_type.results))
        arg_attrs = list(function.attributes["arg_attrs"])
        function.attributes["arg_attrs"] = ir.ArrayAttr.get([arg_attrs[i] for i in kept])


def place_result(module: ir.Module, placement: Placement) -> None:
    """Rewrite ``module``'s ``@task`` to write its result where the model does: into the
    slice at ``placement.offsets`` of a fresh tensor of ``placement.shape``
    (``tensor.empty`` + ``tensor.insert_slice``), which it returns. Bufferized, the kernel
    stores straight into that slice (``eliminate-empty-tensors``), as the model's kernel
    stores into the pad or concat its result is destined for (module docstring). Outside
    the slice the result is uninitialized: compare :meth:`Placement.region` only.
    Its ``sizes`` must be the result's."""
    function = next(op for op in module.body.operations
                    if op.operation.name == "func.func" and op.sym_name.value == ENTRY)
    terminator = list(function.regions[0].blocks[0].operations)[-1]
    with module.context, ir.Location.unknown(), ir.InsertionPoint(terminator):
        result = terminator.operands[0]
        element = ir.RankedTensorType(result.type).element_type
        destination = tensor.EmptyOp(list(placement.shape), element).result
        terminator.operands[0] = insert_static(result, destination, placement.offsets)
        old_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(old_type.inputs, [destination.type]))


def _static_shape(value: ir.Value) -> tuple[int, ...] | None:
    value_type = ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None
    return tuple(value_type.shape) if value_type is not None and value_type.has_static_shape else None


def result_placement(result: ir.Value) -> Placement | None:
    """Where the model writes ``result`` (a fusion group's or op's only result): the slice of
    the ``tensor.pad``, ``tensor.concat`` or ``tensor.insert_slice`` (static, unit strides)
    that is its only user, else ``None``. One user only: a result read elsewhere too is
    not written in place (pad_destinations.py, concat_destinations.py)."""
    uses = list(result.uses)
    shape = _static_shape(result)
    if len(uses) != 1 or shape is None:
        return None
    user = uses[0].owner
    user = getattr(user, "operation", user)
    larger = _static_shape(user.results[0]) if len(user.results) == 1 else None
    if larger is None or len(larger) != len(shape):
        return None
    if user.name == "tensor.pad" and len(user.operands) == 1:
        low = _static_array(user, "static_low")
        return Placement(larger, tuple(low), shape) if low is not None else None
    if user.name == "tensor.concat":
        dim = ir.IntegerAttr(user.attributes["dim"]).value
        before = 0
        for operand in user.operands:
            if operand == result:
                return Placement(larger, tuple(before if d == dim else 0 for d in range(len(shape))), shape)
            part = _static_shape(operand)
            if part is None:
                return None
            before += part[dim]
        return None
    if user.name == "tensor.insert_slice" and user.operands[0] == result and len(user.operands) == 2:
        offsets = _static_array(user, "static_offsets")
        strides = _static_array(user, "static_strides")
        sizes = _static_array(user, "static_sizes")
        if offsets is not None and strides == [1] * len(shape) and sizes == list(shape):
            return Placement(larger, tuple(offsets), shape)
    return None


def _moved_bytes(payload: ir.Module) -> int:
    """Bytes of ``payload``'s tensor arguments and results."""
    function = next(op for op in payload.body.operations if op.operation.name == "func.func")
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    total = 0
    for value_type in [*function_type.inputs, *function_type.results]:
        if isinstance(value_type, ir.ShapedType) and value_type.has_static_shape:
            shaped = value_type
            width = getattr(shaped.element_type, "width", 64)
            total += math.prod(shaped.shape) * max(width // 8, 1)
    return total


def _constant_index(value: ir.Value) -> int | None:
    owner = value.owner  # an OpView, an Operation, or a Block (a block argument)
    owner = getattr(owner, "operation", owner)
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        attribute = owner.attributes["value"]
        if isinstance(attribute, ir.IntegerAttr):
            return attribute.value
    return None


def _static_array(op: ir.Operation, name: str) -> list[int] | None:
    if name not in op.attributes:
        return None
    values = list(ir.DenseI64ArrayAttr(op.attributes[name]))
    return None if any(v == ir.ShapedType.get_dynamic_size() for v in values) else values


def enclosing_runs(op: ir.Operation) -> int:
    """How many times one call of the function executes ``op``: the product of the static
    trip counts of the ``scf.for`` and ``scf.forall`` loops around it (a loop whose trip
    count is not static counts once)."""
    runs = 1
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.for":
            bounds = [_constant_index(parent.operands[i]) for i in range(3)]
            if None not in bounds and bounds[2] > 0:
                runs *= max(-(-(bounds[1] - bounds[0]) // bounds[2]), 0)
        elif parent.name == "scf.forall":
            lower = _static_array(parent, "staticLowerBound")
            upper = _static_array(parent, "staticUpperBound")
            steps = _static_array(parent, "staticStep")
            if lower is not None and upper is not None and steps is not None:
                for low, high, step in zip(lower, upper, steps):
                    if step > 0:
                        runs *= max(-(-(high - low) // step), 0)
        parent = parent.parent
    return max(runs, 1)


def _weight_bytes(payload: ir.Module) -> int:
    """Bytes of ``payload``'s ``tilecraft.weight`` arguments."""
    function = next(op for op in payload.body.operations if op.operation.name == "func.func")
    if "arg_attrs" not in function.attributes:
        return 0
    total = 0
    for attrs, argument in zip(function.attributes["arg_attrs"], function.arguments):
        if WEIGHT in ir.DictAttr(attrs):
            shaped = ir.ShapedType(argument.type)
            width = getattr(shaped.element_type, "width", 64)  # index: 64 bits
            total += math.prod(shaped.shape) * max(width // 8, 1)
    return total


_FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _random_values(rng: np.random.Generator, tensor_type: ir.RankedTensorType) -> np.ndarray | None:
    """Values for a weight of ``tensor_type``, or ``None`` for an element type numpy does not
    hold (it then stays an argument)."""
    shape = tuple(tensor_type.shape)
    element = str(tensor_type.element_type)
    if element in _FLOATS:
        return (rng.random(shape) * 2 - 1).astype(_FLOATS[element])
    if element in ("i8", "i16", "i32", "i64"):
        return rng.integers(0, 8, size=shape).astype(f"int{element[1:]}")
    if element == "i1":
        return rng.random(shape) < 0.5
    return None


def _captured_values(op: ir.Operation) -> list[ir.Value]:
    """Values ``op``'s regions read from outside it."""
    inner = _inner_ops(op)
    local = [r for inner_op in inner for r in inner_op.results]
    for holder in [op, *inner]:
        for region in holder.regions:
            for block in region.blocks:
                local.extend(block.arguments)
    captured: list[ir.Value] = []
    for inner_op in inner:
        for value in inner_op.operands:
            if not any(value == known for known in local) and not any(value == c for c in captured):
                captured.append(value)
    return captured


def task_key(payload: ir.Module) -> str:
    """Hash of the payload's generalized form: named and generic spellings of one op agree."""
    _container, twin = scratch_copy(payload.operation)
    for function in twin.regions[0].blocks[0].operations:
        if "arg_attrs" in function.operation.attributes:  # which arguments are weights: not the key
            del function.operation.attributes["arg_attrs"]
    with payload.context:
        passmanager.PassManager.parse(
            "builtin.module(func.func(linalg-generalize-named-ops))"
        ).run(twin)
    text = twin.get_asm(print_generic_op_form=True, large_elements_limit=16)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _flops(op: ir.Operation, nest: LoopNest, kind: str) -> int:
    points = 1
    for extent in nest.ranges:
        points *= extent
    if kind in ("matmul", "conv2d", "depthwise_conv2d"):
        return 2 * points
    body_ops = 0
    if op.name == "linalg.generic":
        block = op.regions[0].blocks[0]
        body_ops = sum(1 for inner in block.operations if inner.operation.name != "linalg.yield")
    return points * max(body_ops, 1)


def _element_type(op: ir.Operation) -> str:
    value_type = op.results[0].type if len(op.results) else op.operands[-1].type
    return str(ir.ShapedType(value_type).element_type)


def unit_payload(unit: FusionUnit) -> ir.Module:
    """The payload of a fusion unit: its ops, returning the root's result."""
    return build_payload(unit.ops, list(unit.root.results))


def _kernel_names(ops: Sequence[ir.Operation]) -> tuple[str, ...]:
    names: list[str] = []
    for op in ops:
        if is_structured(op) and op.name != "linalg.fill" and kernel_name(op, 0) not in names:
            names.append(kernel_name(op, 0))
    return tuple(names)


def describe_unit(unit: FusionUnit, nests: Mapping[ir.Operation, LoopNest]) -> Task | None:
    """The task of a fusion unit (count 1), or ``None`` when its anchor is not tunable.
    ``nests`` must hold the anchor's; the flops count the unit's ops it holds."""
    anchor_nest = nests[unit.anchor]
    kind = kernel_class(anchor_nest)
    if kind is None or len(unit.root.results) != 1:
        return None
    payload = unit_payload(unit)
    element_type = _element_type(unit.anchor)
    short = unit.anchor.name.removeprefix("linalg.")
    fused = sum(1 for op in unit.ops
                if op != unit.anchor and op.name != "linalg.fill" and is_structured(op))
    name = f"{short}_{'x'.join(str(r) for r in anchor_nest.ranges)}_{element_type}"
    if fused:
        name += f"_fused{fused}"
    flops = sum(_flops(op, nests[op], kernel_class(nests[op]) or "elementwise")
                for op in unit.ops if op in nests and op.name != "linalg.fill")
    return Task(
        key=task_key(payload), name=name, kind=kind, op_name=unit.anchor.name,
        ranges=anchor_nest.ranges, parallel=anchor_nest.parallel, element_type=element_type,
        flops=flops, count=1, payload=str(payload), kernels=(_kernel_names([unit.anchor, unit.root, *unit.ops]),),
        weight_bytes=_weight_bytes(payload), moved_bytes=_moved_bytes(payload),
        runs=(enclosing_runs(unit.anchor),), placements=(result_placement(unit.root.results[0]),),
    )


def describe_op(op: ir.Operation, nest: LoopNest) -> Task | None:
    """The task of one analysed op (count 1), or ``None`` when the op is not tunable."""
    kind = kernel_class(nest)
    if kind is None or len(op.results) != 1:
        return None
    payload = build_payload([op], list(op.results))
    element_type = _element_type(op)
    short = op.name.removeprefix("linalg.")
    name = f"{short}_{'x'.join(str(r) for r in nest.ranges)}_{element_type}"
    return Task(
        key=task_key(payload), name=name, kind=kind, op_name=op.name, ranges=nest.ranges,
        parallel=nest.parallel, element_type=element_type, flops=_flops(op, nest, kind), count=1,
        payload=str(payload), kernels=(_kernel_names([op]),), weight_bytes=_weight_bytes(payload),
        moved_bytes=_moved_bytes(payload), runs=(enclosing_runs(op),),
        placements=(result_placement(op.results[0]),),
    )


def _schedule_input(module: ir.Module, target: Target, opt_level: int, offload: Sequence[str]) -> None:
    """Run the stages before ``schedule`` so ops look as the schedule pass sees them (an
    offloaded op is a call by then: no task)."""
    pipeline = cpu_pipeline(target, opt_level=opt_level, offload=offload)
    stages = pipeline.stages[: pipeline.stage_names.index("schedule")]
    Pipeline(stages).run(module)


def _read_once(model: Any, shape_dict: Any) -> tuple[Any, str | None]:
    """``model`` to import and the name its messages give it: an ONNX file is read here, once,
    and refused when it has string tensors (a model with strings is several compiled
    segments around host nodes, compiler/partitioned.py: its tasks are those of each
    segment, tuned one by one)."""
    if not is_onnx_source(model.source if isinstance(model, Model) else model):
        return model, None
    from ..frontend.onnx.string_partition import read_onnx_source  # onnx is optional

    read = read_onnx_source(model, shape_dict)
    if read.has_strings:
        raise TaskExtractionError(
            "the model has string tensors, whose nodes run on the host: tune its numeric segments "
            "(the models of split_at_strings(model).segments that are not on_host, "
            "tilecraft.frontend.onnx.string_partition) into one records file; compiling the whole "
            "model with those records applies them (docs/tuning.md)")
    return read.to_import(model)


def extract_tasks(model: Any, target: "str | Target" = "llvm", *,
                  shape_dict: Any = None, opt_level: int = 3, offload: Sequence[str] = ()) -> list[Task]:
    """The distinct tunable kernels of ``model`` — fusion groups computed as one loop nest,
    and the other ops — heaviest (flops x executions) first.

    ``model`` is anything :func:`tilecraft.compile` accepts (MLIR text or bytecode, an
    ``mlir.ir.Module``, an ``onnx.ModelProto``, a path). ``opt_level`` must be the one the
    model will be compiled with (the graph passes it enables change the ops; 3 is
    :func:`tilecraft.compile`'s default). Raises :class:`TaskExtractionError` when no op is
    tunable (dynamic shapes only: pass ``shape_dict``; or no linalg op). ``offload``: the
    backends the model will be compiled with; the ops they take are not tasks.
    """
    target = Target.parse(target)
    model, name = _read_once(model, shape_dict)
    context = ir.Context()
    module = load_module(model, context, shape_dict=shape_dict, name=name)
    with context, ir.Location.unknown():
        _schedule_input(module, target, opt_level, offload)
        fuse_groups = opt_level >= 3
        if fuse_groups:
            prepare_groups(module.operation)  # as tilecraft-schedule does before planning
        analyzed = analyze_loop_nests(module.operation)
        nests = dict(analyzed)
        units = find_fusion_units(module.operation, nests) if fuse_groups else []
        in_units = {op for unit in units for op in unit.ops}
        found: dict[str, Task] = {}
        described = [(unit.ops, unit.root, describe_unit(unit, nests)) for unit in units] + [
            ([op], op, describe_op(op, nest)) for op, nest in analyzed if op not in in_units]
        roots = {getattr(root, "operation", root): task for _, root, task in described if task is not None}
        produced = {root: None if moves_data_only(root) else task.payload for root, task in roots.items()}
        for ops, _, task in described:
            if task is None:
                continue
            task = replace(task, producers=(data_producer(list(ops), produced),))
            previous = found.get(task.key)
            found[task.key] = task if previous is None else previous.merged(task)
    if not found:
        raise TaskExtractionError(
            "the model has no tunable op (static-shaped linalg ops other than fills); "
            "for a model with dynamic dims, fix them with shape_dict="
        )
    return sorted(found.values(), key=lambda t: -t.flops * t.executions)
