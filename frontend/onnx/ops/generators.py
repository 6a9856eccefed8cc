"""ONNX generators: ConstantOfShape, Range, Trilu, OneHot, EyeLike."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor
from mlir.dialects import math as mmath

from ...emit import core, extent_math, movement, scatter
from ...emit import (
    resize as resampling,  # the module; `resize` below is the ONNX handler
)
from ..model import ONNX_DTYPES
from ..node import HandlerError, NodeContext
from ..registry import onnx_op
from . import operands


@onnx_op("ConstantOfShape", since=9)
def constant_of_shape(ctx: NodeContext) -> list[ir.Value]:
    value = ctx.attr("value", np.zeros(1, np.float32))
    element = core.element_type(value.dtype)
    try:
        extents = extent_math.extents_from_tensor(ctx.value(0))
    except ValueError as error:
        raise HandlerError(str(error)) from error
    extents = operands.settle(list(extents), ctx.output_infos[0])
    return [core.filled(extents, value.reshape(-1)[0].item(), element)]


def _scalar_value(ctx: NodeContext, index: int) -> ir.Value:
    """Input ``index`` as an SSA scalar (constants become ``arith.constant``)."""
    known = operands.scalar(ctx, index)
    if isinstance(known, ir.Value):
        return known
    return core.scalar_constant(known, ctx.element_type(index))


@onnx_op("Range", since=11)
def range_(ctx: NodeContext) -> list[ir.Value]:
    """``start + i * delta`` for ``i < max(ceil((limit - start) / delta), 0)`` (the count is
    computed at run time unless shape inference knows it)."""
    start, limit, delta = (_scalar_value(ctx, i) for i in range(3))
    element = start.type
    if core.is_float(element):  # the count in f64, as numpy's arange computes it
        span = arith.subf(resampling.as_f64(limit), resampling.as_f64(start))
        steps = mmath.ceil(arith.divf(span, resampling.as_f64(delta)))
        steps = arith.fptosi(ir.IntegerType.get_signless(64), steps)
        count = extent_math.maximum(extent_math.scalar_to_index(steps), 0)
    else:
        span = arith.subi(extent_math.scalar_to_index(limit), extent_math.scalar_to_index(start))
        count = extent_math.maximum(extent_math.ceildiv(span, extent_math.scalar_to_index(delta)), 0)
    (count,) = operands.settle([count], ctx.output_infos[0])
    return [movement.arange(start, delta, count)]


@onnx_op("Trilu", since=14)
def trilu(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    if core.tensor_type(x).rank < 2:
        raise HandlerError("Trilu needs a tensor of rank >= 2")
    k: int | ir.Value = 0
    if ctx.has_input(1):
        k = operands.scalar(ctx, 1)
        k = int(k) if not isinstance(k, ir.Value) else extent_math.scalar_to_index(k)
    return [movement.triangular(x, upper=bool(ctx.attr("upper", 1)), k=k)]


@onnx_op("OneHot", since=9)
def one_hot(ctx: NodeContext) -> list[ir.Value]:
    indices = ctx.value(0)
    depth = operands.scalar(ctx, 1)
    if isinstance(depth, ir.Value):
        if core.is_float(depth.type):
            depth = arith.fptosi(ir.IntegerType.get_signless(64), depth)
        depth = extent_math.scalar_to_index(depth)
    else:
        depth = int(depth)
        if depth < 1:
            raise HandlerError(f"depth {depth} is not positive")
    rank = core.tensor_type(indices).rank + 1
    axis = operands.axis(ctx.attr("axis", -1), rank)
    values = ctx.value(2)
    off = tensor.extract(values, [core.index(0)])
    on = tensor.extract(values, [core.index(1)])
    return [movement.one_hot(indices, depth, axis, off, on)]


@onnx_op("EyeLike", since=9)
def eye_like(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    if core.tensor_type(x).rank != 2:
        raise HandlerError("EyeLike needs a 2-D input")
    dtype = ctx.attr("dtype", None)
    if dtype is None:
        element = core.tensor_type(x).element_type
    elif dtype in ONNX_DTYPES:
        element = core.element_type(ONNX_DTYPES[dtype])
    else:
        raise HandlerError(f"EyeLike dtype {dtype} is not supported")
    return [movement.eye(core.sizes(x), element, int(ctx.attr("k", 0)))]


@onnx_op("NonZero", since=9)
def non_zero(ctx: NodeContext) -> list[ir.Value]:
    """Data-dependent result extent: counted, then written, by sequential loops."""
    return [scatter.nonzero(ctx.value(0))]
