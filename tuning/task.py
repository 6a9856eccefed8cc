"""Tuning tasks: the distinct linalg ops of a model, each with its static shapes.

A task is one structured op (named or generic) as the ``schedule`` stage sees it, i.e. after
the pipeline's ``input`` and ``simplify`` stages (elementwise producers already fused). Its
*payload* is a standalone function holding the op alone: operands become arguments, except
an init made of ``tensor.empty`` (and a ``linalg.fill`` of a constant), which is copied so the
fill can be fused as the default schedule does. The task *key* is a hash of the payload's
generalized form (indexing maps, iterators, body, shapes, element types): the same op in two
models, or twice in one model, is one task. Weights are arguments, so their values do not
change the key.

The graph issue will extend tasks to fusion groups; the key then covers the whole group.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mlir import ir, passmanager
from mlir.dialects import func

from ..errors import TaskExtractionError
from ..frontend.loader import load_module
from ..pipelines.cpu import cpu_pipeline
from ..pipelines.loop_nest import LoopNest, analyze_loop_nests
from ..pipelines.pipeline import Pipeline
from ..pipelines.schedule import _DECOMPOSABLE
from ..pipelines.scratch import scratch_copy
from ..pipelines.target import Target

ENTRY = "task"
# Init producers copied into the payload rather than passed in (no data, only a shape/value).
_INIT_OPS = frozenset({"tensor.empty", "arith.constant"})


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

    def with_count(self, count: int) -> "Task":
        return Task(**{**self.__dict__, "count": count})

    def describe(self) -> dict[str, Any]:
        """The JSON-able summary stored in every record (everything but the payload)."""
        return {"key": self.key, "name": self.name, "kind": self.kind, "op": self.op_name,
                "ranges": list(self.ranges), "dtype": self.element_type, "flops": self.flops}


def kernel_class(nest: LoopNest) -> str | None:
    """The kernel class of a loop nest, or ``None`` when the op is not tunable."""
    if not nest.static or 0 in nest.ranges:
        return None
    if nest.op_name == "linalg.fill":
        return None  # fused into its consumer's tasks, or a memset not worth a search
    if nest.contraction and nest.projected and nest.contraction[1] and nest.contraction[2]:
        return "matmul"
    if nest.convolution and nest.op_name in _DECOMPOSABLE:
        if "pooling" in nest.op_name:
            return "pooling"
        return "depthwise_conv2d" if "depthwise" in nest.op_name else "conv2d"
    if not nest.projected:
        return None  # the default schedule leaves such ops as loops (see plan_default_schedule)
    return "reduction" if nest.reduction_dims else "elementwise"


def _defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def _init_chain(value: ir.Value) -> list[ir.Operation] | None:
    """The ops to copy for an operand that is only a shape and a value, else ``None``."""
    producer = _defining_op(value)
    if producer is None:
        return None
    if producer.name == "tensor.empty" and len(producer.operands) == 0:
        return [producer]
    if producer.name == "linalg.fill":
        scalar, init = producer.operands[0], producer.operands[1]
        scalar_op, init_op = _defining_op(scalar), _defining_op(init)
        if (scalar_op is not None and scalar_op.name == "arith.constant" and init_op is not None
                and init_op.name == "tensor.empty" and len(init_op.operands) == 0):
            return [scalar_op, init_op, producer]
    return None


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


def _captured_constants(op: ir.Operation) -> list[ir.Value]:
    """Values the op's body uses from outside it (constants such as a ReLU's zero)."""
    inner = _inner_ops(op)
    local: list[ir.Value] = []
    for inner_op in inner:
        local.extend(inner_op.results)
    for region in op.regions:
        for block in region.blocks:
            local.extend(block.arguments)
    for inner_op in inner:
        for block_region in inner_op.regions:
            for block in block_region.blocks:
                local.extend(block.arguments)
    captured: list[ir.Value] = []
    for inner_op in inner:
        for value in inner_op.operands:
            if any(value == known for known in local) or any(value == c for c in captured):
                continue
            producer = _defining_op(value)
            if producer is None or producer.name != "arith.constant":
                raise TaskExtractionError(f"{op.name} captures a non-constant value; not tunable")
            captured.append(value)
    return captured


def _remap_captured(twin: ir.Operation, mapping: dict) -> None:
    for inner_op in _inner_ops(twin):
        for index, value in enumerate(inner_op.operands):
            for original, replacement in mapping.items():
                if value == original:
                    inner_op.operands[index] = replacement


def build_payload(op: ir.Operation) -> ir.Module:
    """A new module (in ``op``'s context) whose ``@task`` function computes ``op`` alone."""
    with op.context, ir.Location.unknown():
        module = ir.Module.create()
        copied: list[list[ir.Operation] | None] = [_init_chain(v) for v in op.operands]
        arguments = [v.type for v, chain in zip(op.operands, copied) if chain is None]
        results = [r.type for r in op.results]
        with ir.InsertionPoint(module.body):
            function = func.FuncOp(ENTRY, ir.FunctionType.get(arguments, results))
        block = function.add_entry_block()
        with ir.InsertionPoint(block):
            next_argument = iter(block.arguments)
            new_operands = []
            for chain in copied:
                if chain is None:
                    new_operands.append(next(next_argument))
                    continue
                clones = [c.clone() for c in chain]
                for clone in clones:
                    _strip_tilecraft_attributes(clone)
                if len(clones) == 3:  # constant, empty, fill
                    clones[2].operands[0] = clones[0].results[0]
                    clones[2].operands[1] = clones[1].results[0]
                new_operands.append(clones[-1].results[0])
            captured = [(value, _defining_op(value).clone()) for value in _captured_constants(op)]
            twin = op.clone()
            for index, value in enumerate(new_operands):
                twin.operands[index] = value
            _remap_captured(twin, {original: clone.results[0] for original, clone in captured})
            _strip_tilecraft_attributes(twin)
            func.ReturnOp(list(twin.results))
        return module


def task_key(payload: ir.Module) -> str:
    """Hash of the payload's generalized form: named and generic spellings of one op agree."""
    _container, twin = scratch_copy(payload.operation)
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


def describe_op(op: ir.Operation, nest: LoopNest) -> Task | None:
    """The task of one analysed op (count 1), or ``None`` when the op is not tunable."""
    kind = kernel_class(nest)
    if kind is None or len(op.results) != 1:
        return None
    payload = build_payload(op)
    element_type = _element_type(op)
    short = op.name.removeprefix("linalg.")
    name = f"{short}_{'x'.join(str(r) for r in nest.ranges)}_{element_type}"
    return Task(
        key=task_key(payload), name=name, kind=kind, op_name=op.name, ranges=nest.ranges,
        parallel=nest.parallel, element_type=element_type, flops=_flops(op, nest, kind), count=1,
        payload=str(payload),
    )


def _schedule_input(module: ir.Module, target: Target, opt_level: int) -> None:
    """Run the stages before ``schedule`` so ops look as the schedule pass sees them."""
    pipeline = cpu_pipeline(target, opt_level=opt_level)
    stages = pipeline.stages[: pipeline.stage_names.index("schedule")]
    Pipeline(stages).run(module)


def extract_tasks(model: Any, target: "str | Target" = "llvm", *,
                  shape_dict: Any = None, opt_level: int = 3) -> list[Task]:
    """The distinct tunable ops of ``model``, heaviest (flops x count) first.

    ``model`` is anything :func:`tilecraft.compile` accepts (MLIR text or bytecode, an
    ``mlir.ir.Module``, an ``onnx.ModelProto``, a path). ``opt_level`` must be the one the
    model will be compiled with (the graph passes it enables change the ops; 3 is
    :func:`tilecraft.compile`'s default). Raises :class:`TaskExtractionError` when no op is
    tunable (dynamic shapes only: pass ``shape_dict``; or no linalg op).
    """
    target = Target.parse(target)
    context = ir.Context()
    module = load_module(model, context, shape_dict=shape_dict)
    with context, ir.Location.unknown():
        _schedule_input(module, target, opt_level)
        found: dict[str, Task] = {}
        for op, nest in analyze_loop_nests(module.operation):
            task = describe_op(op, nest)
            if task is None:
                continue
            previous = found.get(task.key)
            found[task.key] = task if previous is None else previous.with_count(previous.count + 1)
    if not found:
        raise TaskExtractionError(
            "the model has no tunable op (static-shaped linalg ops other than fills); "
            "for a model with dynamic dims, fix them with shape_dict="
        )
    return sorted(found.values(), key=lambda t: -t.flops * t.count)
