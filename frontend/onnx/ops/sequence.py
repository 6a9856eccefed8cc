"""Sequences and optionals: SequenceEmpty/Construct/Insert/Erase/At/Length,
SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.

An optional that holds a value is that value itself; an empty one is :class:`EmptyOptional`
(so whether it holds one is always known at import time).

A sequence exists only at import time: a :class:`TensorSequence`, the tuple of its tensors,
whose *length* must be known when the model is imported (every op here keeps it known:
inserting adds one, erasing removes one, splitting yields as many as the split says).
Positions may be runtime values: the element at a runtime position is a chain of
``arith.select`` over the candidates (cast to one joined type — a dim is dynamic where the
candidates differ), so no tensor of tensors ever reaches the IR. Sequences as graph inputs
or outputs, and loops that grow a sequence, are out of scope (the length would be dynamic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor

from ....ir import core, extent_math, movement, reshapes
from ..model import ONNX_DTYPES
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op
from . import operands

Item = "ir.Value | np.ndarray"


@dataclass(frozen=True)
class TensorSequence:
    """An ONNX sequence of known length: its tensors (SSA values or import-time arrays)."""

    items: tuple
    dtype: np.dtype | None = None  # the element type of an empty sequence


def _sequence(ctx: NodeContext, index: int) -> TensorSequence:
    value = ctx.inputs[index] if index < len(ctx.inputs) else None
    if not isinstance(value, TensorSequence):
        raise HandlerError(f"input {index} must be a sequence of known length, got {type(value).__name__}")
    return value


def _as_value(ctx: NodeContext, item: Item) -> ir.Value:
    return ctx.materialize(item, "sequence_item") if isinstance(item, np.ndarray) else item


def _position(ctx: NodeContext, index: int, length: int) -> int | ir.Value:
    """Input ``index`` as a position in ``[0, length)`` (``length + 1`` slots for insert is
    the caller's business): an int when known, else an ``index`` value; negatives count from
    the end."""
    known = ctx.const(index)
    if known is not None:
        if known.size != 1:
            raise HandlerError(f"position (input {index}) must hold one value, not {known.size}")
        position = int(known.reshape(-1)[0])
        return position + length if position < 0 else position
    value = ctx.value(index)
    scalar = extent_math.scalar_to_index(tensor.extract(value, [core.index(0)] * core.tensor_type(value).rank))
    negative = arith.cmpi(arith.CmpIPredicate.slt, scalar, core.index(0))
    return arith.select(negative, arith.addi(scalar, core.index(length)), scalar)


def joined_type(values: list[ir.Value]) -> ir.RankedTensorType:
    """The tensor type of all ``values``: a dim is static where all agree, else dynamic."""
    shapes = [core.static_shape(v) for v in values]
    elements = {str(core.tensor_type(v).element_type) for v in values}
    if len({len(s) for s in shapes}) != 1 or len(elements) != 1:
        raise HandlerError("values chosen at run time must have one rank and element type")
    dims = [column[0] if len(set(column)) == 1 else None for column in zip(*shapes)]
    return ir.RankedTensorType.get(
        [d if d is not None else ir.ShapedType.get_dynamic_size() for d in dims],
        core.tensor_type(values[0]).element_type,
    )


def _joined(values: list[ir.Value]) -> list[ir.Value]:
    """``values`` cast to their :func:`joined_type`."""
    target = joined_type(values)
    return [v if v.type == target else tensor.cast(target, v) for v in values]


def _choose(position: ir.Value, candidates: list[tuple[int, ir.Value]], default: ir.Value) -> ir.Value:
    """``candidates[k][1]`` where ``position == candidates[k][0]``, else ``default``."""
    joined = _joined([default, *(v for _, v in candidates)])
    result = joined[0]
    for (slot, _), value in zip(reversed(candidates), reversed(joined[1:])):
        hit = arith.cmpi(arith.CmpIPredicate.eq, position, core.index(slot))
        result = arith.select(hit, value, result)
    return result


def _pick(ctx: NodeContext, items: tuple, position: int | ir.Value) -> Item:
    if isinstance(position, int):
        if not 0 <= position < len(items):
            raise HandlerError(f"position {position} is out of range for a sequence of {len(items)}")
        return items[position]
    if not items:
        raise HandlerError("position into an empty sequence")
    values = [_as_value(ctx, item) for item in items]
    return _choose(position, list(enumerate(values[:-1])), values[-1])


def _element_dtype(ctx: NodeContext, default: int = 1) -> np.dtype:
    code = int(ctx.attr("dtype", default))
    if code not in ONNX_DTYPES:
        raise HandlerError(f"sequence element type {code} is not supported")
    return ONNX_DTYPES[code]


@onnx_op("SequenceEmpty", since=11)
def sequence_empty(ctx: NodeContext) -> list[Output]:
    return [TensorSequence((), _element_dtype(ctx))]


@onnx_op("SequenceConstruct", since=11)
def sequence_construct(ctx: NodeContext) -> list[Output]:
    return [TensorSequence(tuple(ctx.inputs))]


@onnx_op("SequenceLength", since=11)
def sequence_length(ctx: NodeContext) -> list[Output]:
    return [np.array(len(_sequence(ctx, 0).items), dtype=np.int64)]


@onnx_op("SequenceAt", since=11)
def sequence_at(ctx: NodeContext) -> list[Output]:
    items = _sequence(ctx, 0).items
    return [_pick(ctx, items, _position(ctx, 1, len(items)))]


@onnx_op("SequenceInsert", since=11)
def sequence_insert(ctx: NodeContext) -> list[Output]:
    """Insert input 1 at ``position`` (default: the end); a runtime position makes every
    element a choice between its old neighbours and the new tensor."""
    sequence = _sequence(ctx, 0)
    items, new = list(sequence.items), ctx.inputs[1]
    position = _position(ctx, 2, len(items)) if ctx.has_input(2) else len(items)
    if isinstance(position, int):
        if not 0 <= position <= len(items):
            raise HandlerError(f"insert position {position} is out of range for a sequence of {len(items)}")
        return [TensorSequence(tuple(items[:position] + [new] + items[position:]), sequence.dtype)]
    values = [_as_value(ctx, item) for item in items]
    new_value = _as_value(ctx, new)
    result = []
    for j in range(len(values) + 1):
        # j < position: the old element j; j == position: the new one; j > position: old j-1.
        before = values[j] if j < len(values) else None
        after = values[j - 1] if j >= 1 else None
        if before is None:
            result.append(_choose(position, [(j, new_value)], after))
        elif after is None:
            less = arith.cmpi(arith.CmpIPredicate.sgt, position, core.index(j))
            a, b = _joined([before, new_value])
            result.append(arith.select(less, a, b))
        else:
            less = arith.cmpi(arith.CmpIPredicate.sgt, position, core.index(j))
            a, b, c = _joined([before, new_value, after])
            at = arith.cmpi(arith.CmpIPredicate.eq, position, core.index(j))
            result.append(arith.select(less, a, arith.select(at, b, c)))
    return [TensorSequence(tuple(result), sequence.dtype)]


@onnx_op("SequenceErase", since=11)
def sequence_erase(ctx: NodeContext) -> list[Output]:
    sequence = _sequence(ctx, 0)
    items = list(sequence.items)
    if not items:
        raise HandlerError("SequenceErase on an empty sequence")
    position = _position(ctx, 1, len(items)) if ctx.has_input(1) else len(items) - 1
    if isinstance(position, int):
        if not 0 <= position < len(items):
            raise HandlerError(f"erase position {position} is out of range for a sequence of {len(items)}")
        return [TensorSequence(tuple(items[:position] + items[position + 1:]), sequence.dtype)]
    values = [_as_value(ctx, item) for item in items]
    result = []
    for j in range(len(values) - 1):  # j < position: element j, else element j + 1
        keep, shifted = _joined([values[j], values[j + 1]])
        result.append(arith.select(arith.cmpi(arith.CmpIPredicate.sgt, position, core.index(j)), keep, shifted))
    return [TensorSequence(tuple(result), sequence.dtype)]


@onnx_op("ConcatFromSequence", since=11)
def concat_from_sequence(ctx: NodeContext) -> list[Output]:
    """Concatenate along ``axis``, or with ``new_axis=1`` stack along a new one."""
    values = [_as_value(ctx, item) for item in _sequence(ctx, 0).items]
    if not values:
        raise HandlerError("ConcatFromSequence of an empty sequence")
    rank = core.tensor_type(values[0]).rank
    if int(ctx.attr("new_axis", 0)):
        axis = operands.axis(int(ctx.attr("axis")), rank + 1)
        values = [reshapes.reshape(v, [*core.sizes(v)[:axis], 1, *core.sizes(v)[axis:]]) for v in values]
    else:
        axis = operands.axis(int(ctx.attr("axis")), rank)
    return [movement.concat(values, axis)]


@onnx_op("SplitToSequence", since=11)
def split_to_sequence(ctx: NodeContext) -> list[Output]:
    """Pieces along ``axis``: of size 1 without ``split`` (then ``keepdims=0`` drops the
    axis), of the scalar ``split``'s size (the last one smaller), or of the 1-D ``split``'s
    sizes (read at run time when it is a runtime tensor of static length)."""
    x = ctx.value(0)
    extents = core.sizes(x)
    axis = operands.axis(int(ctx.attr("axis", 0)), len(extents))
    extent = extents[axis]
    split = ctx.const(1) if ctx.has_input(1) else None
    if not ctx.has_input(1):
        if not isinstance(extent, int):
            raise HandlerError("SplitToSequence without split needs a static extent along the axis")
        if not int(ctx.attr("keepdims", 1)):
            return [TensorSequence(tuple(movement.select(x, axis, k) for k in range(extent)))]
        sizes: list = [1] * extent
    elif split is not None and split.ndim == 0:
        if not isinstance(extent, int):
            raise HandlerError("SplitToSequence with a scalar split needs a static extent along the axis")
        chunk = int(split)
        sizes = [min(chunk, extent - start) for start in range(0, extent, chunk)]
    elif core.tensor_type(ctx.value(1)).rank == 0:
        raise HandlerError("SplitToSequence with a runtime scalar split: the sequence length is unknown")
    else:
        sizes = operands.numbers(ctx, 1, int) or []
    pieces, offset = [], 0
    for size in sizes:
        pieces.append(movement.slice_axis(x, axis, offset, size))
        offset = extent_math.add(offset, size)
    return [TensorSequence(tuple(pieces))]


@dataclass(frozen=True)
class EmptyOptional:
    """An optional without a value (ONNX ``Optional`` with no input)."""

    type_proto: object = None


@onnx_op("Optional", since=15)
def optional(ctx: NodeContext) -> list[Output]:
    if ctx.has_input(0):
        return [ctx.inputs[0]]
    return [EmptyOptional(ctx.attr("type", None))]


@onnx_op("OptionalHasElement", since=15)
def optional_has_element(ctx: NodeContext) -> list[Output]:
    """Known at import time: an absent input or an empty optional has none."""
    present = ctx.has_input(0) and not isinstance(ctx.inputs[0], EmptyOptional)
    return [np.array(present)]


@onnx_op("OptionalGetElement", since=15)
def optional_get_element(ctx: NodeContext) -> list[Output]:
    if not ctx.has_input(0) or isinstance(ctx.inputs[0], EmptyOptional):
        raise HandlerError("OptionalGetElement of an empty optional")
    return [ctx.inputs[0]]
