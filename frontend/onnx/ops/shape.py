"""ONNX shape and data-movement operators.

These handlers run only when an input is a runtime tensor: nodes whose inputs are all known
are folded at import (``folding.py``). So a ``Shape`` of a static tensor answers with a
numpy array (which lets the following Gather/Concat/Reshape fold too), while a dynamic
dimension is read at run time with ``tensor.dim``.

Operands given as inputs may be runtime tensors wherever the result's *rank* does not
depend on them: reshape targets, slice bounds, steps and axes, pads, repeats, split sizes,
resize scales and sizes are then read at run time (result extents become dynamic, or the
static extents shape inference or the model declares). Where the rank itself would depend on
the data (Squeeze/Unsqueeze axes), the declared output shape is used, and its absence is a
``HandlerError``. Declared output types are trusted, as in every ONNX importer: a model that
declares a wrong static shape is invalid.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor

from ....ir import checks, core, extent_math, movement, reshapes
from ..model import TensorInfo
from ..node import HandlerError, NodeContext
from ....errors import OperandError
from ..registry import onnx_op
from . import operands

Extent = "int | ir.Value"

# Static slice bounds beyond this mean "to the end" (INT64_MAX / INT64_MIN in models): no
# tensor has 2**62 elements along a dim, so clamping them needs no runtime min/max.
_HUGE = 1 << 62


# --------------------------------------------------------------------------------------
# Shape, Size
# --------------------------------------------------------------------------------------

@onnx_op("Shape")
def shape(ctx: NodeContext) -> list[ir.Value | np.ndarray]:
    """Static dims fold to an array (so shape arithmetic keeps folding); dynamic ones are
    read at run time."""
    x = ctx.value(0)
    rank = core.tensor_type(x).rank
    start, end = ctx.attr("start", 0), ctx.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    dims = core.static_shape(x)[start:end] if start < end else []
    if None not in dims:
        return [np.array(dims, dtype=np.int64)]
    return [reshapes.shape_of(x, start, end)]


@onnx_op("Size")
def size(ctx: NodeContext) -> list[ir.Value | np.ndarray]:
    x = ctx.value(0)
    total = extent_math.product(core.sizes(x))
    if isinstance(total, int):
        return [np.array(total, dtype=np.int64)]
    return [reshapes.scalar_tensor(arith.index_cast(ir.IntegerType.get_signless(64), total))]


# --------------------------------------------------------------------------------------
# Reshape family
# --------------------------------------------------------------------------------------

def _reshape_extents(source: list[Extent], target: Sequence[int], allowzero: bool) -> list[Extent]:
    """ONNX target shape -> extents: 0 copies the input dim (unless ``allowzero``), one -1
    is inferred from the element count."""
    if sum(1 for t in target if t == -1) > 1:
        raise HandlerError(f"shape {list(target)} has more than one -1")
    if allowzero and -1 in target and 0 in target:
        raise HandlerError(f"shape {list(target)} mixes 0 and -1 with allowzero=1")
    extents: list[Extent | None] = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(source):
                raise HandlerError(f"shape {list(target)} copies dim {i} of a rank-{len(source)} input")
            extents.append(source[i])
        elif t == -1:
            extents.append(None)
        elif t < 0:
            raise HandlerError(f"shape {list(target)} has the invalid extent {t}")
        else:
            extents.append(int(t))
    missing = [i for i, e in enumerate(extents) if e is None]
    if missing:
        position = missing[0]
        known = [e for e in extents if e is not None]
        try:
            extents[position] = extent_math.infer_extent(source, known)
        except OperandError as error:  # the emitter refused the model's operands
            raise HandlerError(str(error)) from error
    if all(isinstance(e, int) for e in [*source, *extents]) and math.prod(source) != math.prod(extents):
        raise HandlerError(f"cannot reshape {source} into {list(target)}")
    return extents


def _runtime_reshape_extents(source: list[Extent], shape: ir.Value, allowzero: bool) -> list[Extent]:
    """The same rules as :func:`_reshape_extents`, computed at run time from a shape tensor."""
    try:
        extents = extent_math.extents_from_tensor(shape)
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
    zero, minus_one, one = core.index(0), core.index(-1), core.index(1)
    if not allowzero:
        extents = [
            arith.select(arith.cmpi(arith.CmpIPredicate.eq, e, zero), extent_math.as_index(source[i]), e)
            if i < len(source) else e
            for i, e in enumerate(extents)
        ]
    is_inferred = [arith.cmpi(arith.CmpIPredicate.eq, e, minus_one) for e in extents]
    known = extent_math.product([arith.select(m, one, e) for m, e in zip(is_inferred, extents)])
    # No -1 leaves `inferred` unused, but the division still runs: keep it off zero.
    known = arith.select(arith.cmpi(arith.CmpIPredicate.eq, known, zero), one, extent_math.as_index(known))
    inferred = extent_math.floordiv(extent_math.product(source), known)
    return [arith.select(m, extent_math.as_index(inferred), e) for m, e in zip(is_inferred, extents)]


@onnx_op("Reshape", since=5)
def reshape(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    allowzero = bool(ctx.attr("allowzero", 0))
    source = core.sizes(x)
    target = ctx.const(1)
    if target is not None:
        extents = _reshape_extents(source, [int(t) for t in target.reshape(-1)], allowzero)
    else:
        extents = _runtime_reshape_extents(source, ctx.value(1), allowzero)
    return [reshapes.reshape(x, operands.settle(extents, ctx.output_infos[0]))]


@onnx_op("Flatten")
def flatten(ctx: NodeContext) -> list[ir.Value]:
    """2-D ``[prod(dims[:axis]), prod(dims[axis:])]``."""
    x = ctx.value(0)
    extents = core.sizes(x)
    axis = ctx.attr("axis", 1)
    axis = axis + len(extents) if axis < 0 else axis
    if not 0 <= axis <= len(extents):
        raise HandlerError(f"axis {ctx.attr('axis', 1)} is out of range for rank {len(extents)}")
    result = [extent_math.product(extents[:axis]), extent_math.product(extents[axis:])]
    return [reshapes.reshape(x, operands.settle(result, ctx.output_infos[0]))]


@onnx_op("Squeeze")
def squeeze(ctx: NodeContext) -> list[ir.Value]:
    """Drop the given unit dims, or every unit dim when no axes are given (then dynamic
    dims must be provably not 1: shape inference must agree on the result rank)."""
    x = ctx.value(0)
    if operands.runtime_operand(ctx, 1, 13):
        return [operands.reshape_to_declared(ctx, x, "axes")]
    dims = core.static_shape(x)
    axes = operands.int_list(ctx, "axes", 1, 13, "axes")
    if axes is None:
        axes = [d for d, n in enumerate(dims) if n == 1]
        info = ctx.output_infos[0]
        if None in dims and (info is None or info.shape is None or len(info.shape) != len(dims) - len(axes)):
            raise HandlerError("Squeeze without axes on a tensor with dynamic dims: which dims are 1 is unknown")
    axes = sorted({operands.axis(a, len(dims)) for a in axes})
    for a in axes:
        if dims[a] not in (1, None):
            raise HandlerError(f"cannot squeeze axis {a} of extent {dims[a]}")
    x = operands.assume_static(x, {a: 1 for a in axes})
    extents = [e for d, e in enumerate(core.sizes(x)) if d not in axes]
    return [reshapes.reshape(x, extents)]


@onnx_op("Unsqueeze")
def unsqueeze(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    if operands.runtime_operand(ctx, 1, 13):
        return [operands.reshape_to_declared(ctx, x, "axes")]
    axes = operands.int_list(ctx, "axes", 1, 13, "axes")
    if axes is None:
        raise HandlerError("Unsqueeze needs axes")
    extents = core.sizes(x)
    rank = len(extents) + len(axes)
    axes = sorted(operands.axis(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise HandlerError(f"Unsqueeze axes {axes} repeat")
    source = iter(extents)
    return [reshapes.reshape(x, [1 if d in axes else next(source) for d in range(rank)])]


# --------------------------------------------------------------------------------------
# Concat, Split, Slice
# --------------------------------------------------------------------------------------

@onnx_op("Concat")
def concat(ctx: NodeContext) -> list[ir.Value]:
    values = ctx.values()
    rank = core.tensor_type(values[0]).rank
    return [movement.concat(values, operands.axis(ctx.attr("axis"), rank))]


def _split_sizes(ctx: NodeContext, extent: Extent, axis: int, parts: int) -> list[Extent]:
    """Sizes from the split attribute/input (read at run time when it is a runtime tensor),
    else equal parts (opset 18: the last one smaller)."""
    if operands.runtime_operand(ctx, 1, 13):
        sizes = operands.numbers(ctx, 1, int)
        if sizes is None or len(sizes) != parts:
            raise HandlerError(f"split has {0 if sizes is None else len(sizes)} parts for {parts} outputs")
        return sizes
    if ctx.opset < 13:
        sizes = ctx.attr("split", None)
    elif ctx.has_input(1):
        sizes = ctx.require_const(1, "split").reshape(-1).tolist()
    else:
        sizes = None
    if sizes is not None:
        if len(sizes) != parts:
            raise HandlerError(f"split {list(sizes)} has {len(sizes)} parts for {parts} outputs")
        if isinstance(extent, int) and sum(sizes) != extent:
            raise HandlerError(f"split {list(sizes)} does not add up to the axis extent {extent}")
        return [int(s) for s in sizes]
    if ctx.opset >= 18:
        parts = ctx.attr("num_outputs", parts)
    chunk = extent_math.ceildiv(extent, parts)
    last = extent_math.sub(extent, extent_math.mul(chunk, parts - 1))
    if isinstance(last, int) and last < 0:
        raise HandlerError(f"cannot split extent {extent} into {parts} parts")
    return [chunk] * (parts - 1) + [last]


@onnx_op("Split")
def split(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    extents = core.sizes(x)
    axis = operands.axis(ctx.attr("axis", 0), len(extents))
    sizes = _split_sizes(ctx, extents[axis], axis, len(ctx.node.output))
    results, offset = [], 0
    for k, size in enumerate(sizes):
        settled = operands.settle([size], operands.axis_info(ctx.output_infos[k], axis))[0] if k < len(ctx.output_infos) else size
        results.append(movement.slice_axis(x, axis, offset, settled))
        offset = extent_math.add(offset, size)
    return results


def _slice_operands(ctx: NodeContext, rank: int) -> tuple[list, list, list, list]:
    """Starts, ends, axes and steps: ints when known at import, index values otherwise."""
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", list(range(len(starts))))
        return list(starts), list(ends), list(axes), [1] * len(starts)
    starts, ends = operands.numbers(ctx, 1, int) or [], operands.numbers(ctx, 2, int) or []
    axes = operands.numbers(ctx, 3, int) or list(range(len(starts)))
    steps = operands.numbers(ctx, 4, int) or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise HandlerError("Slice starts, ends, axes and steps differ in length")
    if 0 in [s for s in steps if isinstance(s, int)]:
        raise HandlerError("Slice step 0 is invalid")
    return starts, ends, axes, steps


def _normalize_bound(bound: Extent, n: Extent) -> Extent:
    """A slice bound with negative values counted from the end; static bounds beyond
    +-2**62 (INT64_MAX / INT64_MIN in models) mean "past the end" without runtime code."""
    if isinstance(bound, int):
        if bound >= _HUGE:
            return n
        if bound <= -_HUGE:
            return -1
        return bound if bound >= 0 else extent_math.add(bound, n)
    return extent_math.normalize_index(bound, n)


def _slice_bounds(start: Extent, end: Extent, step: int, n: Extent) -> tuple[Extent, Extent]:
    """First element and count of a Python-style slice ``start:end:step`` of ``n`` elements.

    Bounds are clamped to ``[0, n]`` for positive steps and ``[-1, n - 1]`` for negative
    ones (ONNX's rules, which are Python's).
    """
    start, end = _normalize_bound(start, n), _normalize_bound(end, n)
    if step > 0:
        start, end = extent_math.clamp(start, 0, n), extent_math.clamp(end, 0, n)
        count = extent_math.maximum(extent_math.ceildiv(extent_math.sub(end, start), step), 0)
    else:
        start, end = extent_math.clamp(start, 0, extent_math.sub(n, 1)), extent_math.clamp(end, -1, extent_math.sub(n, 1))
        count = extent_math.maximum(extent_math.ceildiv(extent_math.sub(start, end), -step), 0)
    return start, count


def _static_slice(x: ir.Value, starts: list, ends: list, axes: list[int], steps: list[int],
                  info: TensorInfo | None) -> ir.Value:
    """A strided ``tensor.extract_slice`` (a view); negative steps slice the same elements
    in ascending order, then reverse those axes."""
    extents = core.sizes(x)
    rank = len(extents)
    offsets, sizes, strides = [0] * rank, list(extents), [1] * rank
    reversed_axes = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        first, count = _slice_bounds(start, end, step, extents[axis])
        sizes[axis] = count
        if step > 0:
            offsets[axis], strides[axis] = first, step
        else:  # the last element selected is the lowest address
            last = extent_math.add(first, extent_math.mul(extent_math.sub(count, 1), step))
            offsets[axis], strides[axis] = extent_math.maximum(last, 0), -step
            reversed_axes.append(axis)
    sliced = movement.extract_slice(x, offsets, operands.settle(sizes, info), strides)
    return movement.reverse(sliced, reversed_axes)


def _runtime_slice(x: ir.Value, starts: list, ends: list, axes: list, steps: list,
                   info: TensorInfo | None) -> ir.Value:
    """Slice with axes or steps known only at run time: per dim, the first element, step
    and count are selected at run time (both step signs computed), then gathered."""
    extents = core.sizes(x)
    rank = len(extents)
    ix = extent_math.as_index
    first = [core.index(0)] * rank
    stride = [core.index(1)] * rank
    count = [ix(e) for e in extents]
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis, step = ix(extent_math.normalize_index(axis, rank)), ix(step)
        positive = arith.cmpi(arith.CmpIPredicate.sgt, step, core.index(0))
        for d, n in enumerate(extents):
            s = ix(_normalize_bound(start, n))
            e = ix(_normalize_bound(end, n))
            up_first, up_count = _slice_bounds_dynamic(s, e, step, n, ascending=True)
            down_first, down_count = _slice_bounds_dynamic(s, e, step, n, ascending=False)
            hit = arith.cmpi(arith.CmpIPredicate.eq, axis, core.index(d))
            first[d] = arith.select(hit, arith.select(positive, up_first, down_first), first[d])
            count[d] = arith.select(hit, arith.select(positive, up_count, down_count), count[d])
            stride[d] = arith.select(hit, step, stride[d])
    out = operands.settle(list(count), info)

    def body(positions, _):
        return tensor.extract(x, [arith.addi(f, arith.muli(i, t)) for f, i, t in zip(first, positions, stride)])

    return movement.indexed_generic(out, core.tensor_type(x).element_type, body)


def _slice_bounds_dynamic(start: ir.Value, end: ir.Value, step: ir.Value, n: Extent,
                          ascending: bool) -> tuple[ir.Value, ir.Value]:
    """:func:`_slice_bounds` for a step whose sign is assumed (``ascending``)."""
    n = extent_math.as_index(n)
    if ascending:
        start, end = extent_math.clamp(start, 0, n), extent_math.clamp(end, 0, n)
        span = extent_math.sub(end, start)
    else:
        top = extent_math.sub(n, 1)
        start, end = extent_math.clamp(start, 0, top), extent_math.clamp(end, -1, top)
        span = extent_math.sub(start, end)
    magnitude = arith.maxsi(step, arith.subi(core.index(0), step))
    count = extent_math.maximum(extent_math.ceildiv(span, magnitude), 0)
    return extent_math.as_index(start), extent_math.as_index(count)


@onnx_op("Slice")
def slice_(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    rank = core.tensor_type(x).rank
    starts, ends, axes, steps = _slice_operands(ctx, rank)
    info = ctx.output_infos[0]
    partial = reshapes.known_elements(x)
    if partial is not None and operands.is_known(*starts, *ends, *steps) and len(starts) == 1:
        picked = partial[slice(starts[0], ends[0], steps[0])]
        if None not in picked:  # static dims of a partly dynamic shape: fold on
            return [np.array(picked, dtype=np.int64)]
    if not operands.is_known(*axes, *steps):
        return [_runtime_slice(x, starts, ends, axes, steps, info)]
    axes = [operands.axis(a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise HandlerError(f"Slice axes {axes} repeat")
    return [_static_slice(x, starts, ends, axes, steps, info)]


# --------------------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------------------

def _constant_gather(data: ir.Value, indices: np.ndarray, axis: int) -> ir.Value | None:
    """A gather whose indices are known at import as a slice, when they form one: a
    scalar index selects, an ascending arithmetic run is a strided slice."""
    extent = core.static_shape(data)[axis]
    if extent is None and (indices < 0).any():
        return None
    flat = np.where(indices < 0, indices + (extent or 0), indices).reshape(-1).astype(np.int64)
    if indices.ndim == 0:
        return movement.select(data, axis, int(flat[0]))
    if flat.size == 0 or indices.ndim != 1:
        return None
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if step <= 0 or not np.array_equal(flat, flat[0] + step * np.arange(flat.size)):
        return None
    return movement.slice_axis(data, axis, int(flat[0]), int(flat.size), step)


@onnx_op("Gather")
def gather(ctx: NodeContext) -> list[ir.Value | np.ndarray]:
    data = ctx.value(0)
    axis = operands.axis(ctx.attr("axis", 0), core.tensor_type(data).rank)
    known = ctx.const(1)
    partial = reshapes.known_elements(data)
    if known is not None and partial is not None and all(-len(partial) <= i < len(partial) for i in known.reshape(-1)):
        picked = [partial[int(i)] for i in known.reshape(-1)]
        if None not in picked:  # static dims of a partly dynamic shape: fold on
            return [np.array(picked, dtype=np.int64).reshape(known.shape)]
    if known is not None:
        sliced = _constant_gather(data, known, axis)
        if sliced is not None:
            return [sliced]
    return [movement.gather(data, ctx.value(1), axis)]


@onnx_op("GatherElements", since=11)
def gather_elements(ctx: NodeContext) -> list[ir.Value]:
    data = ctx.value(0)
    axis = operands.axis(ctx.attr("axis", 0), core.tensor_type(data).rank)
    return [movement.gather_elements(data, ctx.value(1), axis)]


@onnx_op("GatherND", since=11)
def gather_nd(ctx: NodeContext) -> list[ir.Value]:
    indices = ctx.value(1)
    if not core.static_shape(indices) or core.static_shape(indices)[-1] is None:
        raise HandlerError("GatherND needs indices of rank >= 1 with a static last dim")
    return [movement.gather_nd(ctx.value(0), indices, ctx.attr("batch_dims", 0))]


# --------------------------------------------------------------------------------------
# Expand, Tile, Transpose, Pad
# --------------------------------------------------------------------------------------

def _expand_extents(source: list[Extent], target: list[Extent]) -> list[Extent]:
    """numpy broadcasting of the input dims with the target dims. A dynamic input dim is
    taken to be the result extent (it cannot be broadcast at run time by an affine map).

    Where the input dim is not a static 1, the target dim must equal it or be 1: checked
    here when both are static, else at run time (a target that does not broadcast would
    otherwise return the input unchanged, where ONNX fails)."""
    rank = max(len(source), len(target))
    source = [1] * (rank - len(source)) + list(source)
    target = [1] * (rank - len(target)) + list(target)
    result = []
    for d, (s, t) in enumerate(zip(source, target)):
        if isinstance(s, int) and s == 1:
            result.append(t)
            continue
        if isinstance(s, int):
            message = f"the shape has {{value}} along axis {d}, which does not broadcast with the input's {{bound}}"
        else:
            message = (f"the shape has {{value}} along axis {d} where the input has {{bound}} (an input size"
                       " known only at run time must equal the shape's, or the shape's be 1)")
        try:
            checks.check_broadcast(t, s, message)
        except OperandError as error:  # the emitter refused the model's operands
            raise HandlerError(str(error)) from None
        result.append(s)
    return result


@onnx_op("Expand", since=8)
def expand(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    known = ctx.const(1)
    if known is not None:
        target: list[Extent] = [int(t) for t in known.reshape(-1)]
    else:
        target = extent_math.extents_from_tensor(ctx.value(1))
    extents = operands.settle(_expand_extents(core.sizes(x), target), ctx.output_infos[0])
    return [movement.broadcast_to(x, extents)]


@onnx_op("Tile", since=6)
def tile(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    repeats = operands.numbers(ctx, 1, int) or []
    if len(repeats) != core.tensor_type(x).rank or any(operands.is_known(r) and r < 0 for r in repeats):
        raise HandlerError(f"repeats {repeats} do not fit a rank-{core.tensor_type(x).rank} input")
    if operands.is_known(*repeats):
        return [movement.tile(x, repeats)]
    extents = [extent_math.mul(n, r) for n, r in zip(core.sizes(x), repeats)]
    return [movement.tile_to(x, operands.settle(extents, ctx.output_infos[0]))]


@onnx_op("Transpose")
def transpose(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    rank = core.tensor_type(x).rank
    perm = [operands.axis(p, rank) for p in ctx.attr("perm", list(range(rank))[::-1])]
    if sorted(perm) != list(range(rank)):
        raise HandlerError(f"perm {perm} is not a permutation of {rank} axes")
    return [core.transpose(x, perm)]


def _pads(ctx: NodeContext, rank: int) -> tuple[list[Extent], list[Extent]]:
    """Per-axis (low, high) pads from the attribute (opset < 11) or the inputs (ints, or
    index values read at run time), with the axes input of opset 18 selecting which axes
    the pads apply to."""
    if ctx.opset < 11:
        pads = [int(p) for p in ctx.attr("pads", ctx.attr("paddings", []))]
        axes = list(range(rank))
    else:
        pads = operands.numbers(ctx, 1, int) or []
        axes = (operands.numbers(ctx, 3, int) if ctx.opset >= 18 else None) or list(range(rank))
        if not operands.is_known(*axes):
            return _pads_on_runtime_axes(pads, axes, rank)
        axes = [operands.axis(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise HandlerError(f"pads {pads} do not have 2 entries per padded axis ({len(axes)})")
    low, high = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        low[a], high[a] = pads[k], pads[k + len(axes)]
    return low, high


def _pads_on_runtime_axes(pads: list, axes: list, rank: int) -> tuple[list[ir.Value], list[ir.Value]]:
    """Per-dim pads when the padded axes are known only at run time: each dim sums the
    pads of the entries naming it (negative axes count from the end)."""
    if len(pads) != 2 * len(axes):
        raise HandlerError(f"{len(pads)} pads for {len(axes)} padded axes")
    low, high = [], []
    for d in range(rank):
        lo: Extent = 0
        hi: Extent = 0
        for k, a in enumerate(axes):
            hit = arith.cmpi(arith.CmpIPredicate.eq, extent_math.as_index(extent_math.normalize_index(a, rank)), core.index(d))
            lo = extent_math.add(lo, arith.select(hit, extent_math.as_index(pads[k]), core.index(0)))
            hi = extent_math.add(hi, arith.select(hit, extent_math.as_index(pads[k + len(axes)]), core.index(0)))
        low.append(lo)
        high.append(hi)
    return low, high


@onnx_op("Pad", since=2)
def pad(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    rank = core.tensor_type(x).rank
    mode = ctx.attr("mode", "constant")
    if mode not in movement.PAD_MODES or (mode == "wrap" and ctx.opset < 19):
        raise HandlerError(f"pad mode {mode!r} is not supported in opset {ctx.opset}")
    low, high = _pads(ctx, rank)
    if ctx.opset < 11:
        fill: float | int | ir.Value = ctx.attr("value", 0.0)
    else:
        fill = operands.scalar(ctx, 2) if ctx.has_input(2) else 0
    if mode != "constant":
        extents = core.static_shape(x)
        if any(extents[d] == 0 and not (low[d] == 0 == high[d]) for d in range(rank)
               if operands.is_known(low[d], high[d])):
            raise HandlerError(f"{mode} padding of an empty axis has nothing to repeat")
    padded = movement.pad(x, low, high, mode, fill)
    declared = operands.declared_shape(ctx)
    if declared is not None and core.static_shape(padded) != declared:
        padded = tensor.cast(core.shape_type(declared, core.tensor_type(padded).element_type), padded)
    return [padded]


# --------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth
# --------------------------------------------------------------------------------------

def _block(ctx: NodeContext, x: ir.Value) -> int:
    block = int(ctx.attr("blocksize"))
    if core.tensor_type(x).rank != 4 or block < 1:
        raise HandlerError(f"expects a 4-D NCHW input and blocksize >= 1 (got {block})")
    return block


@onnx_op("DepthToSpace")
def depth_to_space(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    block = _block(ctx, x)
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise HandlerError(f"DepthToSpace mode {mode!r} is not DCR or CRD")
    channels = core.static_shape(x)[1]
    if channels is not None and channels % (block * block):
        raise HandlerError(f"{channels} channels are not divisible by blocksize^2 = {block * block}")
    return [movement.depth_to_space(x, block, channel_major=mode == "CRD")]


@onnx_op("SpaceToDepth")
def space_to_depth(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    block = _block(ctx, x)
    _, _, h, w = core.static_shape(x)
    if any(d is not None and d % block for d in (h, w)):
        raise HandlerError(f"spatial dims {h}x{w} are not divisible by blocksize {block}")
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise HandlerError(f"SpaceToDepth mode {mode!r} is not DCR or CRD")
    return [movement.space_to_depth(x, block, channel_major=mode == "CRD")]
