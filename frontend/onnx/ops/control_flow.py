"""Control flow: If as ``scf.if``, Scan as ``scf.for``, Loop as ``scf.while`` (not unrolled).

A body graph is imported into the region of its op, seeing outer values by name
(``NodeContext.subgraph``). The region's result types are only known once the body is
imported, so a body is first imported into a placeholder op without results; the real op
is then built with the (joined) types and the placeholder's operations are moved into it.
An ``If`` whose condition is known at import time imports only the branch taken.
"""

from __future__ import annotations

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import arith, scf, tensor

from ....ir import core, movement, reshapes
from ....ir.checks import emit_check
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op
from . import operands
from .sequence import joined_type


def _materialized(ctx: NodeContext, values: list, what: str, graph: onnx.GraphProto | None = None) -> list[ir.Value]:
    """The body's outputs as SSA tensors; with ``graph``, an output whose extent the import
    left dynamic where the body declares it static is cast to the declared extent (a Slice at
    the iteration count declared ``float[1]``), so loop-carried types and scan outputs stay
    static. A run-time check compares the extent with the declaration (a ShapeMismatchError
    after the call; inside a region the computation goes on, as for index checks)."""
    result = []
    for position, value in enumerate(values):
        if isinstance(value, np.ndarray):
            value = ctx.materialize(value, what)
        if not isinstance(value, ir.Value):
            raise HandlerError(f"{what} yields a {type(value).__name__}; only tensors may leave a region here")
        if graph is not None and position < len(graph.output):
            value = _refined(value, graph.output[position])
        result.append(value)
    return result


def _refined(value: ir.Value, declared: onnx.ValueInfoProto) -> ir.Value:
    if not isinstance(value.type, ir.RankedTensorType) or not declared.type.HasField("tensor_type"):
        return value
    dims = declared.type.tensor_type.shape.dim if declared.type.tensor_type.HasField("shape") else None
    have = core.static_shape(value)
    if dims is None or len(dims) != len(have):
        return value
    want = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    refined = [h if h is not None else w for h, w in zip(have, want)]
    if refined == have or any(h is not None and w is not None and h != w for h, w in zip(have, want)):
        return value
    sizes = core.sizes(value)
    for axis, (h, w) in enumerate(zip(have, want)):
        if h is None and w is not None:
            ok = arith.cmpi(arith.CmpIPredicate.eq, sizes[axis], core.index(w))
            message = f"body output {declared.name!r}: extent {{value}} of axis {axis} differs from the declared"
            message += " {bound}"
            emit_check(ok, sizes[axis], core.index(w), "shape", message)
    target = ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size() if d is None else d for d in refined],
                                     core.tensor_type(value).element_type)
    return tensor.cast(target, value)


def _move_body(source: ir.Block, target: ir.Block) -> None:
    for op in list(source.operations):
        target.append(op)


def _rebind(old: list[ir.Value], new: list[ir.Value]):
    """Point every use of the placeholder's block arguments ``old`` at ``new``; returns the
    translation for values the handler still holds (a body output may be an argument)."""
    for a, b in zip(old, new):
        a.replace_all_uses_with(b)
    mapping = list(zip(old, new))
    return lambda value: next((b for a, b in mapping if a == value), value)


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
            "Scan body", body,
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
    renamed = _rebind([placeholder.induction_variable, *placeholder.inner_iter_args],
                      [loop.induction_variable, *loop.inner_iter_args])
    new_states, per_iteration = [renamed(v) for v in new_states], [renamed(v) for v in per_iteration]
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


def _tensor_of(scalar: ir.Value) -> ir.Value:
    return tensor.from_elements(ir.RankedTensorType.get([], scalar.type), [scalar])


def _scalar_of(value: ir.Value) -> ir.Value:
    return tensor.extract(value, [core.index(0)] * core.tensor_type(value).rank)


@onnx_op("Loop", since=1)
def loop(ctx: NodeContext) -> list[Output]:
    """``scf.while`` (the trip count and the condition may be runtime values): carried
    ``(iteration, condition, states..., scan outputs so far...)``; the before region tests
    ``condition and iteration < M``, the after region runs the body. Scan outputs grow by
    one slice per iteration (``tensor.concat``), as their final extent may be unknown.
    Loop-carried values must keep their type across iterations."""
    body = ctx.attr("body")
    i64, i1 = ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(1)
    limit = _scalar_of(ctx.value(0)) if ctx.has_input(0) else arith.constant(i64, (1 << 63) - 1)
    cond0 = _scalar_of(ctx.value(1)) if ctx.has_input(1) else arith.constant(i1, 1)
    states = [ctx.value(i) for i in range(2, len(ctx.inputs)) if ctx.inputs[i] is not None]
    names = [i.name for i in body.input]
    zero = arith.constant(i64, 0)

    # 1. The body in a placeholder loop, to learn its result types.
    placeholder = scf.ForOp(core.index(0), core.index(1), core.index(1), [zero, cond0, *states])
    with ir.InsertionPoint(placeholder.body):
        iteration, condition, *carried = placeholder.inner_iter_args
        bindings = {names[0]: _tensor_of(iteration), names[1]: _tensor_of(condition), **dict(zip(names[2:], carried))}
        outputs = _materialized(ctx, ctx.subgraph(body, bindings), "Loop body", body)
    cond_out, new_states, scanned = outputs[0], outputs[1:1 + len(states)], outputs[1 + len(states):]
    for new, old in zip(new_states, states):
        if joined_type([new, old]) != old.type:
            raise HandlerError(f"a loop-carried value changes type ({old.type} -> {new.type})")
    accumulators = []
    for value in scanned:
        extents = core.sizes(value)
        if any(isinstance(e, ir.Value) for e in extents):
            raise HandlerError("Loop scan outputs with dynamic extents are not supported")
        accumulators.append(core.empty([0, *extents], core.tensor_type(value).element_type))
    grown = [ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size(), *core.static_shape(v)],
                                     core.tensor_type(v).element_type) for v in scanned]
    accumulators = [tensor.cast(t, a) for t, a in zip(grown, accumulators)]

    # 2. The while loop; the placeholder's operations move into its after region.
    inits = [zero, cond0, *states, *accumulators]
    types = [v.type for v in inits]
    op = scf.WhileOp(types, inits)
    before = op.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        go = arith.andi(before.arguments[1], arith.cmpi(arith.CmpIPredicate.slt, before.arguments[0], limit))
        scf.ConditionOp(go, list(before.arguments))
    after = op.after.blocks.append(*types)
    _move_body(placeholder.body, after)
    renamed = _rebind(list(placeholder.inner_iter_args), list(after.arguments))
    cond_out, new_states, scanned = renamed(cond_out), [renamed(v) for v in new_states], [renamed(v) for v in scanned]
    with ir.InsertionPoint(after):
        yields = [arith.addi(after.arguments[0], arith.constant(i64, 1)), _scalar_of(cond_out)]
        yields += [v if v.type == s.type else tensor.cast(s.type, v) for v, s in zip(new_states, states)]
        for value, accumulator in zip(scanned, after.arguments[2 + len(states):]):
            unit = reshapes.reshape(value, [1, *core.sizes(value)])
            yields.append(movement.concat([accumulator, unit], 0))
        scf.YieldOp(yields)
    placeholder.operation.erase()
    return list(op.results)[2:]
