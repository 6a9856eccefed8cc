"""Pairwise distances: ``_cdist_forward`` (``torch.cdist``) and ``_pdist_forward``
(``nn.functional.pdist``), as one broadcast difference reduced over the feature dim.

Why not the matmul form (``|a|^2 + |b|^2 - 2ab``) eager uses for large Euclidean inputs:
it cancels catastrophically for near points (eager's own ``compute_mode`` lets one opt out
of it); the direct form is exact to rounding and vectorizes along the features.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from ....errors import OperandError
from ....ir import core, elementwise, movement, reduction, reshapes
from ..importer import OpContext
from . import table


def _distances(x1: ir.Value, x2: ir.Value, p: float, out_extents: list[Any]) -> ir.Value:
    """``x1 [..., P, M]`` and ``x2 [..., R, M]`` -> ``[..., P, R]`` p-norm distances."""
    if not isinstance(p, (int, float)) or p < 0:
        raise OperandError(f"cdist: p must be a non-negative number, got {p!r}")
    rank = table.rank(x1)
    features = core.sizes(x1)[-1]
    left = reduction.expand_dims(x1, [rank - 1])  # [..., P, 1, M]
    right = reduction.expand_dims(x2, [rank - 2])  # [..., 1, R, M]
    full = movement.broadcast_to(left, [*out_extents, features])
    element = core.tensor_type(x1).element_type
    axes = [len(out_extents)]

    def gap(a: ir.Value, b: ir.Value) -> ir.Value:
        return math.absf(arith.subf(a, b))

    if p == float("inf"):
        return reduction.reduce(full, axes, "max", extra=[right], body=gap)
    if p == 0:
        return reduction.reduce(full, axes, "sum", extra=[right], body=lambda a, b: arith.select(
            arith.cmpf(arith.CmpFPredicate.UNE, a, b), elementwise.like(1, a), elementwise.like(0, a)))
    if p == 1:
        return reduction.reduce(full, axes, "sum", extra=[right], body=gap)
    if p == 2:
        squares = reduction.reduce(full, axes, "sum", extra=[right],
                                   body=lambda a, b: arith.mulf(arith.subf(a, b), arith.subf(a, b)))
        return core.elementwise([squares], element, math.sqrt)
    powered = reduction.reduce(full, axes, "sum", extra=[right],
                               body=lambda a, b: math.powf(gap(a, b), elementwise.like(float(p), a)))
    return core.elementwise([powered], element, lambda v: math.powf(v, elementwise.like(1.0 / p, v)))


def _static(ctx: OpContext) -> list[int]:
    shape = list(ctx.meta.shape)
    if not all(isinstance(d, int) for d in shape):
        raise OperandError("pairwise distances with dynamic dims")
    return shape


@table.aten("_cdist_forward.default")
def cdist(ctx: OpContext, x1: Any, x2: Any, p: float, compute_mode: Any = None) -> ir.Value:
    dtype = ctx.result_dtype()
    x1, x2 = ctx.tensor(x1, dtype), ctx.tensor(x2, dtype)
    if table.rank(x1) < 2 or table.rank(x2) < 2:
        raise OperandError("cdist: both inputs need at least 2 dims ([..., points, features])")
    return _distances(x1, x2, p, _static(ctx))


@table.aten("_pdist_forward.default")
def pdist(ctx: OpContext, x: Any, p: float = 2.0) -> ir.Value:
    """The upper triangle (``i < j``, row-major) of ``cdist(x, x)``, as eager orders it."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    if table.rank(x) != 2 or None in core.static_shape(x):
        raise OperandError("pdist: the input must be a static 2-D [points, features] tensor")
    n = core.static_shape(x)[0]
    square = _distances(x, x, p, [n, n])
    rows, columns = np.triu_indices(n, 1)
    flat = reshapes.reshape(square, [n * n])
    return movement.gather(flat, ctx.tensor(np.asarray(rows * n + columns, dtype=np.int64)), 0)
