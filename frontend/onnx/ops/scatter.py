"""ONNX scatters: ScatterElements, ScatterND and the sequential writes ONNX defines."""

from __future__ import annotations

from mlir import ir

from ...emit import core, scatter
from ..node import HandlerError, NodeContext
from ..registry import onnx_op
from . import operands


def _reduction(ctx: NodeContext) -> str:
    reduction = ctx.attr("reduction", "none")
    if reduction not in scatter.SCATTER_REDUCTIONS:
        raise HandlerError(f"scatter reduction {reduction!r} is not supported")
    return reduction


@onnx_op("ScatterElements", since=11)
@onnx_op("Scatter", since=9, until=10)
def scatter_elements(ctx: NodeContext) -> list[ir.Value]:
    """Writes applied in row-major order of ``updates`` (so with a reduction, duplicates
    accumulate)."""
    data = ctx.value(0)
    axis = operands.axis(ctx.attr("axis", 0), core.tensor_type(data).rank)
    return [scatter.scatter_elements(data, ctx.value(1), ctx.value(2), axis, _reduction(ctx),
                                    unsigned=ctx.is_unsigned(0))]


@onnx_op("ScatterND", since=11)
def scatter_nd(ctx: NodeContext) -> list[ir.Value]:
    indices = ctx.value(1)
    if not core.static_shape(indices) or core.static_shape(indices)[-1] is None:
        raise HandlerError("ScatterND needs indices of rank >= 1 with a static last dim")
    return [scatter.scatter_nd(ctx.value(0), indices, ctx.value(2), _reduction(ctx),
                              unsigned=ctx.is_unsigned(0))]
