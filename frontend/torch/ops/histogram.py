"""``torch.histogram``: a static bin count (``bins`` an int, over the data's range or a given
``range``) or bin edges as a tensor; ``weight`` and ``density``. Returns ``(hist,
bin_edges)``; the edges of a data range are run-time values of static shape ``[bins + 1]``
(ir/binning.py)."""

from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ....errors import OperandError
from ....ir import binning, core, movement, reduction, reshapes
from ..importer import OpContext
from . import table


def _flat(ctx: OpContext, value: Any, dtype: np.dtype, what: str) -> ir.Value:
    tensor = ctx.tensor(value, dtype)
    shape = core.static_shape(tensor)
    if None in shape:
        raise OperandError(f"histogram of a {what} with dynamic dims")
    return reshapes.reshape(tensor, [int(np.prod(shape))])


def _float_dtype(ctx: OpContext) -> np.dtype:
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"histogram of a {dtype} tensor (floating point only)")
    return dtype


def _histogram(ctx: OpContext, x: ir.Value, edges: ir.Value, weight: Any, density: bool,
               dtype: np.dtype) -> tuple[ir.Value, ir.Value]:
    weights = None
    if weight is not None:
        weights = _flat(ctx, weight, dtype, "weight")
        if core.static_shape(weights) != core.static_shape(x):
            raise OperandError("histogram: weight must have the shape of the input")
    counts = binning.counts_by_edges(x, edges, weights)
    return (binning.density(counts, edges) if density else counts), edges


@table.aten("histogram.bin_ct")
def histogram_bin_count(ctx: OpContext, x: Any, bins: int = 100, *, range: Sequence[float] | None = None,  # noqa: A002
                        weight: Any = None, density: bool = False) -> tuple[ir.Value, ir.Value]:
    """Equal bins over ``range``, else over the data's ``[min, max]``; a range of one point
    is widened by 0.5 on each side (eager's, numpy's)."""
    dtype = _float_dtype(ctx)
    if not isinstance(bins, int) or bins <= 0:
        raise OperandError(f"histogram: bins must be a positive integer, got {bins!r}")
    flat = _flat(ctx, x, dtype, "tensor")
    element = core.element_type(dtype)
    if range is not None:
        low_value, high_value = (float(v) for v in range)
        if not (math.isfinite(low_value) and math.isfinite(high_value)) or low_value > high_value:
            raise OperandError(f"histogram: range {tuple(range)} must be finite and increasing")
        low, high = ctx.tensor(low_value, dtype), ctx.tensor(high_value, dtype)
    elif core.static_shape(flat)[0] == 0:
        low, high = ctx.tensor(0.0, dtype), ctx.tensor(0.0, dtype)
    else:
        low, high = reduction.reduce(flat, [0], "min"), reduction.reduce(flat, [0], "max")
    return _histogram(ctx, flat, _edges(low, high, bins, element), weight, density, dtype)


def _edges(low: ir.Value, high: ir.Value, bins: int, element: ir.Type) -> ir.Value:
    """Equal bins over ``[low, high]`` (0-d), widened by 0.5 on each side when that is one
    point (eager's, numpy's)."""
    half = lambda v: core.scalar_constant(0.5, v.type)  # noqa: E731
    same = lambda a, b: arith.cmpf(arith.CmpFPredicate.OEQ, a, b)  # noqa: E731
    low, high = (core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.subf(a, half(a)), a)),
                 core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.addf(b, half(b)), b)))
    return binning.linspace_edges(low, high, bins)


@table.aten("histogram.bins_tensor")
def histogram_bin_edges(ctx: OpContext, x: Any, bins: Any, *, weight: Any = None,
                        density: bool = False) -> tuple[ir.Value, ir.Value]:
    """Bins between the given increasing edges (a 1-D tensor of at least 2)."""
    dtype = _float_dtype(ctx)
    edges = ctx.tensor(bins, dtype)
    if table.rank(edges) != 1 or core.static_shape(edges)[0] is None or core.static_shape(edges)[0] < 2:
        raise OperandError("histogram: bins must be a 1-D tensor of at least 2 static edges")
    return _histogram(ctx, _flat(ctx, x, dtype, "tensor"), edges, weight, density, dtype)


def _dd_edges(ctx: OpContext, x: Any, bins: Any, range: Sequence[float] | None,  # noqa: A002
              dtype: np.dtype) -> tuple[list[ir.Value], list[ir.Value]]:
    """The point coordinates (one 1-D column per dim) and each dim's edges, for
    ``histogramdd``'s input ``[..., D]`` (points in the leading dims)."""
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    if None in shape or len(shape) < 1:
        raise OperandError("histogramdd of a tensor with dynamic dims or no dims")
    dims = shape[-1]
    counts = [bins] * dims if isinstance(bins, int) else list(bins)
    if len(counts) != dims or not all(isinstance(b, int) and b > 0 for b in counts):
        raise OperandError(f"histogramdd: bins {bins!r} must be {dims} positive integers (edges as tensors "
                           "are not supported)")
    if range is not None and len(range) != 2 * dims:
        raise OperandError(f"histogramdd: range needs {2 * dims} numbers, got {len(range)}")
    points = reshapes.reshape(x, [int(np.prod(shape[:-1])), dims])
    element = core.element_type(dtype)
    columns, edges = [], []
    for d in builtins.range(dims):  # ``range`` is the op's argument here
        column = reshapes.reshape(movement.slice_axis(points, 1, d, 1), [core.static_shape(points)[0]])
        if range is not None:
            low, high = ctx.tensor(float(range[2 * d]), dtype), ctx.tensor(float(range[2 * d + 1]), dtype)
        elif core.static_shape(column)[0] == 0:
            low, high = ctx.tensor(0.0, dtype), ctx.tensor(0.0, dtype)
        else:
            low, high = reduction.reduce(column, [0], "min"), reduction.reduce(column, [0], "max")
        columns.append(column)
        edges.append(_edges(low, high, counts[d], element))
    return columns, edges


def _histogram_nd(ctx: OpContext, columns: list[ir.Value], edges: list[ir.Value], weight: Any, density: bool,
                  dtype: np.dtype) -> ir.Value:
    weights = None
    if weight is not None:
        weights = _flat(ctx, weight, dtype, "weight")
        if core.static_shape(weights) != core.static_shape(columns[0]):
            raise OperandError("histogramdd: weight must have one value per point")
    counts = binning.counts_by_edges_nd(columns, edges, weights)
    return binning.density_nd(counts, edges) if density else counts


@table.aten("_histogramdd_bin_edges.default")
def histogramdd_bin_edges(ctx: OpContext, x: Any, bins: Any, *, range: Sequence[float] | None = None,  # noqa: A002
                          weight: Any = None, density: bool = False) -> tuple[ir.Value, ...]:
    """``histogramdd``'s edges: per dim, equal bins over the given range or the data's."""
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"histogramdd of a {dtype} tensor (floating point only)")
    return tuple(_dd_edges(ctx, x, bins, range, dtype)[1])


@table.aten("_histogramdd_from_bin_cts.default")
def histogramdd_counts(ctx: OpContext, x: Any, bins: Any, *, range: Sequence[float] | None = None,  # noqa: A002
                       weight: Any = None, density: bool = False) -> ir.Value:
    """``histogramdd``'s counts over the edges :func:`histogramdd_bin_edges` makes."""
    dtype = _float_dtype(ctx)
    columns, edges = _dd_edges(ctx, x, bins, range, dtype)
    return _histogram_nd(ctx, columns, edges, weight, density, dtype)


@table.aten("_histogramdd_from_bin_tensors.default")
def histogramdd_counts_by_edges(ctx: OpContext, x: Any, bins: Sequence[Any], *, weight: Any = None,
                                density: bool = False) -> ir.Value:
    """``histogramdd`` with each dim's increasing edges given as a 1-D tensor."""
    dtype = _float_dtype(ctx)
    edges = [ctx.tensor(b, dtype) for b in bins]
    if any(table.rank(e) != 1 or core.static_shape(e)[0] is None or core.static_shape(e)[0] < 2 for e in edges):
        raise OperandError("histogramdd: each dim's bins must be a 1-D tensor of at least 2 static edges")
    columns, _ = _dd_edges(ctx, x, [core.static_shape(e)[0] - 1 for e in edges], None, dtype)
    return _histogram_nd(ctx, columns, edges, weight, density, dtype)
