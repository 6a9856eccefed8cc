"""Reductions and normalizations (softmax, layer/batch/group norm)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from ....ir import (
    core,
    elementwise,
    extent_math,
    reduction,
    reshapes,
)
from ..importer import OpContext
from . import table
from ....errors import OperandError


@table.aten("sum.dim_IntList", "sum.default")
def sum_(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    if result == np.bool_:
        raise OperandError("a sum in bool")
    return reduction.reduce(x, table.dims(dims, table.rank(x)), "sum", keepdims=keepdim, unsigned=table.unsigned(result))


@table.aten("prod.dim_int", "prod.default")
def prod(ctx: OpContext, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    return reduction.reduce(x, table.dims(dim, table.rank(x)), "prod", keepdims=keepdim, unsigned=table.unsigned(result))


@table.aten("mean.dim", "mean.default")
def mean(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    x = ctx.tensor(x, ctx.result_dtype())
    return reduction.mean(x, table.dims(dims, table.rank(x)), keepdims=keepdim)


@table.aten("amax.default", "amin.default", "max.default", "min.default")
def amax(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    kind = "max" if ctx.node.target._opname in ("amax", "max") else "min"
    return reduction.reduce(x, table.dims(dims, table.rank(x)), kind, keepdims=keepdim,
                            unsigned=table.unsigned(ctx.result_dtype()))


@table.aten("max.dim", "min.dim")
def max_dim(ctx: OpContext, x: Any, dim: int, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    kind = ctx.node.target._opname
    if table.rank(x) == 0:  # a 0-d tensor is its own extremum, at position 0
        table.dim(dim, 0)
        return x, core.filled([], 0, core.element_type(table.INT64))
    axes = [table.dim(dim, table.rank(x))]
    unsigned = table.unsigned(ctx.result_dtype(0))
    values = reduction.reduce(x, axes, kind, keepdims=keepdim, unsigned=unsigned)
    return values, reduction.arg_reduce(x, axes, kind, keepdims=keepdim, unsigned=unsigned)


@table.aten("argmax.default", "argmin.default")
def argmax(ctx: OpContext, x: Any, dim: int | None = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    kind = "max" if ctx.node.target._opname == "argmax" else "min"
    if table.rank(x) == 0:
        if dim is not None:
            table.dim(dim, 0)
        return core.filled([], 0, core.element_type(table.INT64))
    if dim is None:
        flat = reshapes.reshape(x, [extent_math.product(core.sizes(x))])
        result = reduction.arg_reduce(flat, [0], kind)
        return reshapes.reshape(result, [1] * table.rank(x)) if keepdim else result
    return reduction.arg_reduce(x, [table.dim(dim, table.rank(x))], kind, keepdims=keepdim)


@table.aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def any_(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x, np.dtype(np.bool_))
    kind = "max" if ctx.node.target._opname == "any" else "min"
    return reduction.reduce(x, table.dims(dims, table.rank(x)), kind, keepdims=keepdim, unsigned=True)


def _variance(ctx: OpContext, x: Any, dims: Any, correction: float, keepdim: bool,
              index: int | None = None) -> ir.Value:
    """Sum of squared deviations from the mean over ``dims``, divided by ``N - correction``."""
    dtype = ctx.result_dtype(index)
    x = ctx.tensor(x, dtype)
    axes = table.dims(dims, table.rank(x))
    element = core.element_type(dtype)
    centre = reduction.mean(x, axes, keepdims=True)
    squares = reduction.reduce(x, axes, "sum", keepdims=keepdim, extra=[centre],
                               body=lambda v, m: arith.mulf(arith.subf(v, m), arith.subf(v, m)))
    extents = core.sizes(x)
    count = reduction.count([extents[a] for a in axes], element)
    denominator = arith.subf(count, core.scalar_constant(float(correction), element))
    return core.elementwise([squares], element, lambda s: arith.divf(s, denominator))


@table.aten("var.correction")
def var_correction(ctx: OpContext, x: Any, dims: Any = None, *, correction: float | None = None,
                   keepdim: bool = False) -> ir.Value:
    return _variance(ctx, x, dims, 1 if correction is None else correction, keepdim)


@table.aten("var.dim")
def var_dim(ctx: OpContext, x: Any, dims: Any = None, unbiased: bool = True, keepdim: bool = False) -> ir.Value:
    return _variance(ctx, x, dims, 1 if unbiased else 0, keepdim)


@table.aten("_softmax.default", "_log_softmax.default", "softmax.int", "log_softmax.int")
def softmax(ctx: OpContext, x: Any, dim: int, half_to_float: Any = False) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    return reduction.softmax(x, [table.dim(dim, table.rank(x))], log="log_softmax" in ctx.node.target._opname)


@table.aten("native_layer_norm.default")
def layer_norm(ctx: OpContext, x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any,
               eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    rank = table.rank(x)
    axes = list(range(rank - len(normalized_shape), rank))
    scale = None if weight is None else ctx.tensor(weight, dtype)
    shift = None if bias is None else ctx.tensor(bias, dtype)
    return reduction.normalize(x, axes, eps, scale=scale, bias=shift)


@table.aten("_native_batch_norm_legit_no_training.default")
def batch_norm(ctx: OpContext, x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
               momentum: float, eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Inference batch norm; the saved statistics are empty (shape ``[0]``), as eager's."""
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    channels = core.static_shape(x)[1]
    if channels is None:
        raise OperandError("batch norm needs a static channel dim")
    ones, zeros = np.ones([channels], dtype), np.zeros([channels], dtype)
    params = [ctx.tensor(ones if weight is None else weight, dtype),
              ctx.tensor(zeros if bias is None else bias, dtype),
              ctx.tensor(running_mean, dtype), ctx.tensor(running_var, dtype)]
    rank = table.rank(x)
    params = [reduction.channel_view(p, rank) for p in params]
    nothing = core.filled([0], 0, ctx.result_element(1))
    return reduction.batch_norm_inference(x, *params, eps), nothing, nothing


@table.aten("native_group_norm.default")
def group_norm(ctx: OpContext, x: Any, weight: Any, bias: Any, n: Any, c: int, hw: Any, groups: int,
               eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    extents = core.sizes(x)
    grouped = reshapes.reshape(x, [extents[0], groups, extent_math.product([c // groups, *extents[2:]])])
    y, mean_, rstd = reduction.normalize(grouped, [2], eps)
    y = reshapes.reshape(y, extents)
    rank = len(extents)
    if weight is not None or bias is not None:
        w = reduction.channel_view(ctx.tensor(np.ones([c], dtype) if weight is None else weight, dtype), rank)
        b = reduction.channel_view(ctx.tensor(np.zeros([c], dtype) if bias is None else bias, dtype), rank)
        y = core.elementwise([y, w, b], core.element_type(dtype),
                             lambda v, s, t: elementwise.add(elementwise.multiply(v, s), t))
    return y, reduction.drop_unit_dims(mean_, [2]), reduction.drop_unit_dims(rstd, [2])


@table.aten("cumsum.default", "cumprod.default")
def cumsum(ctx: OpContext, x: Any, dim: int, *, dtype: Any = None) -> ir.Value:
    x = ctx.tensor(x, ctx.result_dtype())
    kind = "sum" if ctx.node.target._opname == "cumsum" else "prod"
    if table.rank(x) == 0:
        table.dim(dim, 0)
        return x
    return reduction.cumulative(x, table.dim(dim, table.rank(x)), kind)


@table.aten("logcumsumexp.default")
def logcumsumexp(ctx: OpContext, x: Any, dim: int) -> ir.Value:
    """``log(cumsum(exp(x - m))) + m`` with ``m`` the max along ``dim`` (0 where that max is
    infinite, so all--inf rows stay -inf and a +inf gives +inf, as in eager)."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    if table.rank(x) == 0:
        table.dim(dim, 0)
        return x
    axis = table.dim(dim, table.rank(x))
    element = core.element_type(dtype)
    peak = core.elementwise([reduction.reduce(x, [axis], "max", keepdims=True)], element, lambda m: arith.select(
        elementwise.is_inf(m), elementwise.like(0, m), m))
    shifted = core.elementwise([x, peak], element, lambda v, m: math.exp(arith.subf(v, m)))
    running = reduction.cumulative(shifted, axis, "sum")
    return core.elementwise([running, peak], element, lambda r, m: arith.addf(math.log(r), m))


@table.aten("linalg_vector_norm.default")
def vector_norm(ctx: OpContext, x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> ir.Value:
    """``ord`` 2 (the common case), 1, 0 (nonzeros), +-inf (max/min of ``|x|``) or any other
    ``p``: ``(sum |x|^p)^(1/p)``."""
    if not isinstance(ord, (int, float)):
        raise OperandError(f"vector norm of order {ord!r}")
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    axes = table.dims(dim, table.rank(x))
    element = core.element_type(result)
    if ord == 2:
        squares = reduction.reduce(x, axes, "sum", keepdims=keepdim, body=lambda v: arith.mulf(v, v))
        return core.elementwise([squares], element, math.sqrt)
    magnitude = core.elementwise([x], element, math.absf)
    if ord in (float("inf"), float("-inf")):
        return reduction.reduce(magnitude, axes, "max" if ord > 0 else "min", keepdims=keepdim)
    if ord == 0:
        return reduction.reduce(x, axes, "sum", keepdims=keepdim, body=lambda v: arith.select(
            arith.cmpf(arith.CmpFPredicate.UNE, v, elementwise.like(0, v)), elementwise.like(1, v),
            elementwise.like(0, v)))
    if ord == 1:
        return reduction.reduce(magnitude, axes, "sum", keepdims=keepdim)
    powered = reduction.reduce(magnitude, axes, "sum", keepdims=keepdim,
                               body=lambda v: math.powf(v, elementwise.like(float(ord), v)))
    return core.elementwise([powered], element, lambda v: math.powf(v, elementwise.like(1.0 / ord, v)))


@table.aten("var_mean.correction")
def var_mean(ctx: OpContext, x: Any, dims: Any = None, *, correction: float | None = None,
             keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    variance = _variance(ctx, x, dims, 1 if correction is None else correction, keepdim, index=0)
    source = ctx.tensor(x, ctx.result_dtype(1))
    return variance, reduction.mean(source, table.dims(dims, table.rank(source)), keepdims=keepdim)


@table.aten("sort.default", "sort.stable")
def sort(ctx: OpContext, x: Any, dim: int = -1, descending: bool = False, *,
         stable: bool | None = None) -> tuple[ir.Value, ir.Value]:
    """Values and int64 positions in order; ties keep their input order (a stable sort, which
    is what eager's CPU sort gives), NaN above every number as in eager."""
    x = ctx.tensor(x)
    if table.rank(x) == 0:
        table.dim(dim, 0)
        return x, core.filled([], 0, core.element_type(table.INT64))
    axis = table.dim(dim, table.rank(x))
    return reduction.top_k(x, axis, core.sizes(x)[axis], largest=descending,
                           unsigned=table.unsigned(ctx.result_dtype(0)))


@table.aten("topk.default")
def topk(ctx: OpContext, x: Any, k: Any, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    if table.rank(x) == 0:
        table.dim(dim, 0)
        return x, core.filled([], 0, core.element_type(table.INT64))
    axis = table.dim(dim, table.rank(x))
    return reduction.top_k(x, axis, k, largest=largest, unsigned=table.unsigned(ctx.result_dtype(0)))



@table.aten("_native_batch_norm_legit.no_stats")
def batch_norm_batch_statistics(ctx: OpContext, x: Any, weight: Any, bias: Any, training: bool, momentum: float,
                                eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Batch norm by the batch's own statistics (every dim but the channel one), without
    running buffers: instance norm's form, and ``batch_norm(training=True)`` with none.
    (With running buffers, training mode writes them: the importer refuses that program.)
    Returns ``(y, mean, rstd)``, the statistics per channel."""
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    rank = table.rank(x)
    channels = core.static_shape(x)[1]
    if channels is None:
        raise OperandError("batch norm needs a static channel dim")
    ones, zeros = np.ones([channels], dtype), np.zeros([channels], dtype)
    scale = reduction.channel_view(ctx.tensor(ones if weight is None else weight, dtype), rank)
    shift = reduction.channel_view(ctx.tensor(zeros if bias is None else bias, dtype), rank)
    axes = [0, *range(2, rank)]
    y, mean_, rstd = reduction.normalize(x, axes, eps, scale=scale, bias=shift,
                                         compute_element=core.element_type(dtype))
    return y, reduction.drop_unit_dims(mean_, axes), reduction.drop_unit_dims(rstd, axes)
