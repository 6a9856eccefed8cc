"""Selection ATen ops: ``kthvalue``, ``median``/``nanmedian``, ``mode``, ``cummax``/``cummin``,
``searchsorted``/``bucketize``, on the order-statistics emitters of ir/selection.py.

Each moves its dim last (the emitters' layout), computes, and moves it back. Medians take
the lower middle element as eager does; ``median`` of a row holding a NaN is that NaN (the
first one in sorted order), ``nanmedian`` skips NaNs. Among equal values the position
returned may differ from eager's (its CPU kernels do not promise one either).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith

from ....errors import OperandError
from ....ir import (
    core,
    movement,
    reduction,
    reshapes,
    selection,
)
from ..importer import OpContext, numpy_dtype
from . import table


def _zero_d(ctx: OpContext, x: ir.Value, dim: int | None) -> tuple[ir.Value, ir.Value]:
    """A 0-d tensor is its own statistic, at position 0."""
    if dim is not None:
        table.dim(dim, 0)
    return x, core.filled([], 0, core.element_type(table.INT64))


def _kept(values: ir.Value, indices: ir.Value, axis: int, keepdim: bool) -> tuple[ir.Value, ir.Value]:
    if not keepdim:
        return values, indices
    return reduction.expand_dims(values, [axis]), reduction.expand_dims(indices, [axis])


@table.aten("kthvalue.default")
def kthvalue(ctx: OpContext, x: Any, k: int, dim: int = -1, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank == 0:
        if k != 1:
            raise OperandError(f"kthvalue: k={k} of a 0-d tensor (only k=1 exists)")
        return _zero_d(ctx, x, dim)
    axis = table.dim(dim, rank)
    extent = core.static_shape(x)[axis]
    if not isinstance(k, int) or (extent is not None and not 1 <= k <= extent):
        raise OperandError(f"kthvalue: k={k} is out of range for a dim of extent {extent}")
    values, indices = reduction.top_k(selection.along_last(x, axis), rank - 1, k, largest=False,
                                      unsigned=table.unsigned(ctx.result_dtype(0)))
    values, indices = movement.select(values, rank - 1, k - 1), movement.select(indices, rank - 1, k - 1)
    return _kept(values, indices, axis, keepdim)


def _middle(ctx: OpContext, x: ir.Value, axis: int, skip_nan: bool) -> tuple[ir.Value, ir.Value]:
    """The lower median along ``axis`` (dropped) and its position."""
    rows = selection.along_last(x, axis)
    n = core.static_shape(rows)[-1]
    if n is None:
        raise OperandError("a median along a dynamic dim")
    values, positions = selection.sort_last(rows, unsigned=table.unsigned(numpy_dtype(ctx.arg_meta(0).dtype)))
    nans = selection.count_nan(rows)
    i64 = core.element_type(table.INT64)

    def slot(count: ir.Value) -> ir.Value:
        size = arith.constant(i64, n)
        if skip_nan:  # the lower middle of the numbers (slot 0, a NaN, when there are none)
            numbers = arith.subi(size, count)
            middle = arith.divsi(arith.subi(numbers, arith.constant(i64, 1)), arith.constant(i64, 2))
            return arith.select(arith.cmpi(arith.CmpIPredicate.sgt, numbers, arith.constant(i64, 0)), middle,
                                arith.constant(i64, 0))
        # NaNs sort last: with any, the first of them is the median
        return arith.select(arith.cmpi(arith.CmpIPredicate.sgt, count, arith.constant(i64, 0)),
                            arith.subi(size, count), arith.constant(i64, (n - 1) // 2))

    slots = core.elementwise([nans], i64, slot)
    return selection.pick(values, slots), selection.pick(positions, slots)


@table.aten("median.default", "nanmedian.default")
def median(ctx: OpContext, x: Any) -> ir.Value:
    x = ctx.tensor(x)
    flat = reshapes.reshape(x, [int(np.prod(core.static_shape(x)))]) if table.rank(x) != 1 else x
    if None in core.static_shape(x):
        raise OperandError("a median of a tensor with dynamic dims")
    values, _ = _middle(ctx, flat, 0, ctx.node.target._opname == "nanmedian")
    return values


@table.aten("median.dim", "nanmedian.dim")
def median_dim(ctx: OpContext, x: Any, dim: int = -1, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank == 0:
        return _zero_d(ctx, x, dim)
    axis = table.dim(dim, rank)
    values, indices = _middle(ctx, x, axis, ctx.node.target._opname == "nanmedian")
    return _kept(values, indices, axis, keepdim)


@table.aten("mode.default")
def mode(ctx: OpContext, x: Any, dim: int = -1, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank == 0:
        return _zero_d(ctx, x, dim)
    axis = table.dim(dim, rank)
    values, indices = selection.mode(selection.along_last(x, axis), unsigned=table.unsigned(ctx.result_dtype(0)))
    return _kept(values, indices, axis, keepdim)


@table.aten("cummax.default", "cummin.default")
def cummax(ctx: OpContext, x: Any, dim: int) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank == 0:
        return _zero_d(ctx, x, dim)
    axis = table.dim(dim, rank)
    values, indices = selection.running_extreme(selection.along_last(x, axis),
                                                largest=ctx.node.target._opname == "cummax",
                                                unsigned=table.unsigned(ctx.result_dtype(0)))
    return selection.back_from_last(values, axis), selection.back_from_last(indices, axis)


def _insertion_points(ctx: OpContext, boundaries: Any, values: Any, right: bool, side: str | None,
                      sorter: Any, boundaries_position: int, values_position: int) -> ir.Value:
    if side is not None:
        if side not in ("left", "right"):
            raise OperandError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise OperandError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    metas = [table.meta_dtype(ctx.arg_meta(p)) for p in (boundaries_position, values_position)]
    dtype = numpy_dtype(torch.result_type(metas[0], metas[1]))
    boundaries = ctx.tensor(boundaries, dtype)
    values = ctx.tensor(values, dtype)
    if table.rank(boundaries) == 0:
        raise OperandError("searchsorted: the sorted sequence must have at least one dim")
    if sorter is not None:
        boundaries = movement.gather_elements(boundaries, ctx.tensor(sorter, table.INT64),
                                              table.rank(boundaries) - 1)
    scalar = table.rank(values) == 0
    if scalar:
        values = reshapes.reshape(values, [1])
    points = selection.count_below(boundaries, values, right=right, unsigned=table.unsigned(dtype))
    if scalar:
        points = reshapes.reshape(points, [])
    result = ctx.result_dtype()
    return points if result == table.INT64 else ctx.tensor(points, result)


@table.aten("searchsorted.Tensor", "searchsorted.Scalar")
def searchsorted(ctx: OpContext, sorted_sequence: Any, x: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Any = None) -> ir.Value:
    return _insertion_points(ctx, sorted_sequence, x, right, side, sorter, 0, 1)


@table.aten("bucketize.Tensor", "bucketize.Scalar")
def bucketize(ctx: OpContext, x: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False) -> ir.Value:
    meta = ctx.arg_meta(1)
    if not isinstance(meta, torch.Tensor) or meta.dim() != 1:
        raise OperandError("bucketize: boundaries must be 1-D")
    return _insertion_points(ctx, boundaries, x, right, None, None, 1, 0)


@table.aten("histc.default")
def histc(ctx: OpContext, x: Any, bins: int = 100, min: float = 0, max: float = 0) -> ir.Value:  # noqa: A002
    """Bin edges ``[min, max]``; ``min == max`` (both 0 by default): the data's own range,
    widened by 1 on each side when that range is one point, as eager does."""
    dtype = ctx.result_dtype()
    if dtype.kind != "f":
        raise OperandError(f"histc of a {dtype} tensor (floating point only)")
    if not isinstance(bins, int) or bins <= 0:
        raise OperandError(f"histc: bins must be a positive integer, got {bins!r}")
    if min > max:
        raise OperandError(f"histc: min {min} is above max {max}")
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    if None in shape:
        raise OperandError("histc of a tensor with dynamic dims")
    flat = reshapes.reshape(x, [int(np.prod(shape))])
    element = core.element_type(dtype)
    if min == max:
        low = reduction.reduce(flat, [0], "min")
        high = reduction.reduce(flat, [0], "max")
        same = lambda a, b: arith.cmpf(arith.CmpFPredicate.OEQ, a, b)  # noqa: E731
        one = lambda v: core.scalar_constant(1, v.type)  # noqa: E731
        low, high = (core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.subf(a, one(a)), a)),
                     core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.addf(b, one(b)), b)))
    else:
        low, high = ctx.tensor(float(min), dtype), ctx.tensor(float(max), dtype)
    return selection.histogram(flat, bins, low, high)


@table.aten("segment_reduce.default")
def segment_reduce(ctx: OpContext, data: Any, reduce: str, *, lengths: Any = None, indices: Any = None,
                   offsets: Any = None, axis: int = 0, unsafe: bool = False, initial: Any = None) -> ir.Value:
    """``torch.segment_reduce``: segment ``s`` covers positions ``[start_s, end_s)`` along
    ``axis`` (from ``lengths`` or ``offsets``, known only at run time); each output is one
    masked reduction over the whole axis. ``initial`` joins every segment's reduction (the
    sum of a mean, not its count) and is an empty segment's value."""
    if reduce not in ("sum", "prod", "max", "min", "mean"):
        raise OperandError(f"segment_reduce: unknown reduction {reduce!r}")
    if indices is not None or (lengths is None) == (offsets is None):
        raise OperandError("segment_reduce: give exactly one of lengths and offsets (indices are not supported)")
    dtype = ctx.result_dtype()
    if dtype.kind != "f":
        raise OperandError(f"segment_reduce of a {dtype} tensor (floating point only)")
    x = ctx.tensor(data, dtype)
    rank = table.rank(x)
    if rank == 0:
        raise OperandError("segment_reduce of a 0-d tensor")
    axis = table.dim(axis, rank)
    bounds = ctx.tensor(lengths if lengths is not None else offsets, table.INT64)
    if table.rank(bounds) != 1:
        raise OperandError("segment_reduce with lengths or offsets of rank other than 1")
    i64 = core.element_type(table.INT64)
    if lengths is not None:
        ends = reduction.cumulative(bounds, 0, "sum")
        starts = core.elementwise([ends, bounds], i64, arith.subi)
    else:
        total = core.static_shape(bounds)[0]
        starts = movement.slice_axis(bounds, 0, 0, total - 1)
        ends = movement.slice_axis(bounds, 0, 1, total - 1)
    rows = selection.along_last(x, axis)
    values = selection.segments(rows, starts, ends, "sum" if reduce == "mean" else reduce)
    element = core.element_type(dtype)
    start_end = [reduction.expand_dims(v, list(range(table.rank(values) - 1))) for v in (starts, ends)]
    if reduce == "mean":
        def average(total: ir.Value, start: ir.Value, end: ir.Value) -> ir.Value:
            count = arith.subi(end, start)
            if initial is not None:
                total = arith.addf(total, core.scalar_constant(float(initial), element))
            mean = arith.divf(total, arith.sitofp(element, count))
            if initial is None:
                return mean
            empty = arith.cmpi(arith.CmpIPredicate.eq, count, arith.constant(i64, 0))
            return arith.select(empty, core.scalar_constant(float(initial), element), mean)

        values = core.elementwise([values, *start_end], element, average)
    elif initial is not None:
        values = core.elementwise([values], element, lambda v: reduction.combine(
            reduce, v, core.scalar_constant(float(initial), element)))
    return selection.back_from_last(values, axis)
