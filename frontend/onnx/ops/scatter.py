"""ONNX scatters: ScatterElements, ScatterND, TensorScatter and the sequential writes ONNX defines."""

from __future__ import annotations

from mlir import ir

from ....ir import core, reshapes, scatter
from ..node import HandlerError, NodeContext
from ....errors import OperandError
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


@onnx_op("MaxUnpool", since=9)
def max_unpool(ctx: NodeContext) -> list[ir.Value]:
    """Zeros with each value of ``X`` written at its MaxPool index (indices run over the
    whole flattened output, batch and channels included): one ScatterElements on the
    flattened tensors. The output extents come from the attributes (an ``output_shape``
    read at run time would make them data-dependent)."""
    x, indices = ctx.value(0), ctx.value(1)
    shape = core.static_shape(x)
    if None in shape:
        raise HandlerError("MaxUnpool needs static input extents")
    if ctx.has_input(2):
        known = ctx.require_const(2, "output_shape")
        out = [int(v) for v in known.reshape(-1)]
    else:
        kernel = list(ctx.attr("kernel_shape"))
        spatial = len(kernel)
        strides = list(ctx.attr("strides", [1] * spatial))
        pads = list(ctx.attr("pads", [0] * (2 * spatial)))
        out = shape[:2] + [(shape[2 + d] - 1) * strides[d] + kernel[d] - pads[d] - pads[spatial + d]
                           for d in range(spatial)]
    total, count = 1, 1
    for extent in out:
        total *= extent
    for extent in shape:
        count *= extent
    element = core.tensor_type(x).element_type
    zeros = core.filled([total], 0, element)
    flat_values = reshapes.reshape(x, [count])
    flat_indices = reshapes.reshape(indices, [count])
    written = scatter.scatter_elements(zeros, flat_indices, flat_values, 0, "none", unsigned=False)
    return [reshapes.reshape(written, out)]


@onnx_op("TensorScatter", since=24)
def tensor_scatter(ctx: NodeContext) -> list[ir.Value]:
    cache = ctx.value(0)
    rank = len(core.sizes(cache))
    indices = ctx.value(2) if ctx.has_input(2) else None
    try:
        return [scatter.tensor_scatter(cache, ctx.value(1), indices, operands.axis(ctx.attr("axis", -2), rank),
                                       ctx.attr("mode", "linear"))]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
