"""``torch.histogram``: a static bin count (``bins`` an int, over the data's range or a given
``range``) or bin edges as a tensor; ``weight`` and ``density``. Returns ``(hist,
bin_edges)``; the edges of a data range are run-time values of static shape ``[bins + 1]``
(ir/binning.py)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ....errors import OperandError
from ....ir import binning, core, reduction, reshapes
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
    half = lambda v: core.scalar_constant(0.5, v.type)  # noqa: E731
    same = lambda a, b: arith.cmpf(arith.CmpFPredicate.OEQ, a, b)  # noqa: E731
    low, high = (core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.subf(a, half(a)), a)),
                 core.elementwise([low, high], element, lambda a, b: arith.select(same(a, b), arith.addf(b, half(b)), b)))
    return _histogram(ctx, flat, binning.linspace_edges(low, high, bins), weight, density, dtype)


@table.aten("histogram.bins_tensor")
def histogram_bin_edges(ctx: OpContext, x: Any, bins: Any, *, weight: Any = None,
                        density: bool = False) -> tuple[ir.Value, ir.Value]:
    """Bins between the given increasing edges (a 1-D tensor of at least 2)."""
    dtype = _float_dtype(ctx)
    edges = ctx.tensor(bins, dtype)
    if table.rank(edges) != 1 or core.static_shape(edges)[0] is None or core.static_shape(edges)[0] < 2:
        raise OperandError("histogram: bins must be a 1-D tensor of at least 2 static edges")
    return _histogram(ctx, _flat(ctx, x, dtype, "tensor"), edges, weight, density, dtype)
