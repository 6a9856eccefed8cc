"""ONNX generators: ConstantOfShape, Range, Trilu, OneHot, EyeLike."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor
from mlir.dialects import math as mmath

from ....ir import core, extent_math, movement, scatter
from ....ir.checks import emit_check
from ....ir import (
    resize as resampling,  # the module; `resize` below is the ONNX handler
)
from ..model import ONNX_DTYPES
from ..node import HandlerError, NodeContext
from ....errors import OperandError
from ..registry import onnx_op
from . import operands


@onnx_op("ConstantOfShape", since=9)
def constant_of_shape(ctx: NodeContext) -> list[ir.Value]:
    value = ctx.attr("value", np.zeros(1, np.float32))
    element = core.element_type(value.dtype)
    try:
        extents = extent_math.extents_from_tensor(ctx.value(0))
    except OperandError as error:  # the emitter refused the model's operands
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
    known_delta = operands.scalar(ctx, 2)
    if not isinstance(known_delta, ir.Value) and known_delta == 0:
        raise HandlerError("Range with a delta of 0 never ends")
    start, limit, delta = (_scalar_value(ctx, i) for i in range(3))
    element = start.type
    i64 = ir.IntegerType.get_signless(64)
    if core.is_float(element):  # the count in f64, as numpy's arange computes it
        step = resampling.as_f64(delta)
        nonzero = arith.cmpf(arith.CmpFPredicate.UNE, step, core.scalar_constant(0.0, step.type))
        span = arith.subf(resampling.as_f64(limit), resampling.as_f64(start))
        steps = mmath.ceil(arith.divf(span, step))
        # fptosi of inf, NaN or >= 2^63 is undefined: such counts become 2^62 (refused by the
        # allocation check) instead
        big = core.scalar_constant(float(1 << 62), steps.type)
        steps = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, steps, big), steps, big)
        steps = arith.fptosi(i64, steps)
        count = extent_math.maximum(extent_math.scalar_to_index(steps), 0)
    else:
        step = extent_math.scalar_to_index(delta)
        zero = core.index(0)
        nonzero = arith.cmpi(arith.CmpIPredicate.ne, step, zero)
        span = arith.subi(extent_math.scalar_to_index(limit), extent_math.scalar_to_index(start))
        # Division by 0 and INT64_MIN / -1 trap (SIGFPE kills the process): divide by 1
        # when the delta is 0 (the check below fails), and by -1 one above INT64_MIN.
        smallest = core.index(-(1 << 63))
        span = arith.select(arith.cmpi(arith.CmpIPredicate.eq, span, smallest), core.index(-(1 << 63) + 1), span)
        divisor = arith.select(nonzero, step, core.index(1))
        count = extent_math.maximum(extent_math.ceildiv(span, divisor), 0)
    emit_check(nonzero, arith.constant(i64, 0), arith.constant(i64, 0), "shape",
               "a delta of 0 never ends the range")
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
