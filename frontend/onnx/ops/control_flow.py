"""Control flow: If as ``scf.if``, Scan as ``scf.for`` (not unrolled).

A body graph is imported into the region of its op, seeing outer values by name
(``NodeContext.subgraph``). The region's result types are only known once the body is
imported, so a body is first imported into a placeholder op without results; the real op
is then built with the (joined) types and the placeholder's operations are moved into it.
An ``If`` whose condition is known at import time imports only the branch taken.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...emit import core, movement, reshapes
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op
from . import operands
from .sequence import joined_type


def _materialized(ctx: NodeContext, values: list, what: str) -> list[ir.Value]:
    result = []
    for value in values:
        if isinstance(value, np.ndarray):
            value = ctx.materialize(value, what)
        if not isinstance(value, ir.Value):
            raise HandlerError(f"{what} yields a {type(value).__name__}; only tensors may leave a region here")
        result.append(value)
    return result


def _move_body(source: ir.Block, target: ir.Block) -> None:
    for op in list(source.operations):
        target.append(op)


def _scalar_condition(ctx: NodeContext) -> ir.Value:
    cond = ctx.value(0)
    return tensor.extract(cond, [core.index(0)] * core.tensor_type(cond).rank)


@onnx_op("If", since=1)
def if_(ctx: NodeContext) -> list[Output]:
    """Both branches must give each output one rank and element type; extents that differ
    between them become dynamic."""
    then_graph, else_graph = ctx.attr("then_branch"), ctx.attr("else_branch")
    known = ctx.const(0)
    if known is not None:
        return ctx.subgraph(then_graph if bool(known.reshape(-1)[0]) else else_graph, {})
    cond = _scalar_condition(ctx)
    placeholder = scf.IfOp(cond, [], has_else=True)
    branches = []
    for graph, block in ((then_graph, placeholder.then_block), (else_graph, placeholder.else_block)):
        with ir.InsertionPoint(block):
            branches.append(_materialized(ctx, ctx.subgraph(graph, {}), "If branch"))
    then_values, else_values = branches
    if len(then_values) != len(else_values):
        raise HandlerError(f"If branches give {len(then_values)} and {len(else_values)} outputs")
    types = [joined_type([a, b]) for a, b in zip(then_values, else_values)]
    result = scf.IfOp(cond, types, has_else=True)
    for source, target, values in ((placeholder.then_block, result.then_block, then_values),
                                   (placeholder.else_block, result.else_block, else_values)):
        _move_body(source, target)
        with ir.InsertionPoint(target):
            scf.YieldOp([v if v.type == t else tensor.cast(t, v) for v, t in zip(values, types)])
    placeholder.operation.erase()
    return list(result.results)


def _insert_at(accumulator: ir.Value, value: ir.Value, axis: int, position: ir.Value) -> ir.Value:
    """``accumulator`` with ``value`` (one iteration's output) stored at ``position`` along
    ``axis``."""
    extents = core.sizes(value)
    unit = reshapes.reshape(value, [*extents[:axis], 1, *extents[axis:]])
    sizes = core.sizes(unit)
    offsets: list = [0] * len(sizes)
    offsets[axis] = position
    dynamic = ir.ShapedType.get_dynamic_size()
    static_offsets = [o if isinstance(o, int) else dynamic for o in offsets]
    static_sizes = [s if isinstance(s, int) else dynamic for s in sizes]
    return tensor.insert_slice(
        unit, accumulator,
        [o for o in offsets if not isinstance(o, int)], [s for s in sizes if not isinstance(s, int)], [],
        static_offsets, static_sizes, [1] * len(sizes),
    )


@onnx_op("Scan", since=9)
def scan(ctx: NodeContext) -> list[Output]:
    """``scf.for`` over the scan axis: states are loop-carried, each scan input is sliced at
    the iteration (from the end for direction 1), each scan output is inserted into a
    tensor with the iteration count along its axis."""
    body = ctx.attr("body")
    count = int(ctx.attr("num_scan_inputs"))
    states = [ctx.value(i) for i in range(len(ctx.inputs) - count)]
    scans = [ctx.value(i) for i in range(len(ctx.inputs) - count, len(ctx.inputs))]
    in_axes = list(ctx.attr("scan_input_axes", [0] * count))
    in_directions = list(ctx.attr("scan_input_directions", [0] * count))
    if not scans:
        raise HandlerError("Scan needs at least one scan input")
    in_axes = [operands.axis(a, core.tensor_type(x).rank) for a, x in zip(in_axes, scans)]
    trips = [core.sizes(x)[a] for x, a in zip(scans, in_axes)]
    trip = next((t for t in trips if isinstance(t, int)), trips[0])
    trip_index = trip if isinstance(trip, ir.Value) else core.index(trip)
    zero, one = core.index(0), core.index(1)
    body_inputs = [i.name for i in body.input]

    def bind(iteration: ir.Value, carried: list[ir.Value]) -> dict:
        last = scf_sub(trip_index, iteration)
        bindings = dict(zip(body_inputs, carried))
        for name, x, axis, direction in zip(body_inputs[len(states):], scans, in_axes, in_directions):
            bindings[name] = movement.select(x, axis, last if direction else iteration)
        return bindings

    placeholder = scf.ForOp(zero, trip_index, one, states)
    with ir.InsertionPoint(placeholder.body):
        outputs = _materialized(
            ctx, ctx.subgraph(body, bind(placeholder.induction_variable, list(placeholder.inner_iter_args))),
            "Scan body",
        )
    new_states, per_iteration = outputs[:len(states)], outputs[len(states):]
    out_axes = list(ctx.attr("scan_output_axes", [0] * len(per_iteration)))
    out_directions = list(ctx.attr("scan_output_directions", [0] * len(per_iteration)))
    out_axes = [operands.axis(a, core.tensor_type(v).rank + 1) for a, v in zip(out_axes, per_iteration)]
    accumulators = []
    for value, axis in zip(per_iteration, out_axes):
        extents = core.sizes(value)
        if any(isinstance(e, ir.Value) for e in extents):
            raise HandlerError("Scan outputs with dynamic extents are not supported")
        accumulators.append(core.empty([*extents[:axis], trip, *extents[axis:]], core.tensor_type(value).element_type))
    loop = scf.ForOp(zero, trip_index, one, [*states, *accumulators])
    _move_body(placeholder.body, loop.body)
    placeholder.induction_variable.replace_all_uses_with(loop.induction_variable)
    for old, new in zip(placeholder.inner_iter_args, loop.inner_iter_args):
        old.replace_all_uses_with(new)
    with ir.InsertionPoint(loop.body):
        carried = list(loop.inner_iter_args)
        yields = [v if v.type == s.type else tensor.cast(s.type, v) for v, s in zip(new_states, states)]
        iteration = loop.induction_variable
        for value, accumulator, axis, direction in zip(per_iteration, carried[len(states):], out_axes, out_directions):
            position = scf_sub(trip_index, iteration) if direction else iteration
            yields.append(_insert_at(accumulator, value, axis, position))
        scf.YieldOp(yields)
    placeholder.operation.erase()
    return list(loop.results)


def scf_sub(trip: ir.Value, iteration: ir.Value) -> ir.Value:
    """``trip - 1 - iteration``: the position of a reversed iteration."""
    return arith.subi(arith.subi(trip, core.index(1)), iteration)
