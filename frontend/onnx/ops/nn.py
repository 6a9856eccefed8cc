"""ONNX contraction, convolution and pooling operators.

The handlers only translate ONNX conventions (auto_pad, the pads layout
``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``, ConvTranspose's output_shape, Gemm's
transposes) into the arguments of the framework-neutral emitters in
``ir/contraction.py``, ``conv.py`` and ``pooling.py``, which the PyTorch frontend
shares.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from ....ir import contraction, conv, core, pooling
from ....ir import deform_conv as deformable
from ....ir import roi_align as regions
from ..node import HandlerError, NodeContext
from ....errors import OperandError
from ..registry import onnx_op
from . import operands, quantization

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


# --- contractions ----------------------------------------------------------------------------


@onnx_op("MatMul")
def matmul(ctx: NodeContext) -> list[ir.Value]:
    return [contraction.matmul(ctx.value(0), ctx.value(1))]


def _maybe_transposed(ctx: NodeContext, index: int, transpose: bool) -> tuple[ir.Value, bool]:
    """Input ``index`` and whether it still needs transposing: a constant (a weight) is
    transposed here by numpy, once, so the product reads it row by row."""
    array = ctx.const(index)
    if transpose and array is not None:
        if array.ndim != 2:
            raise HandlerError(f"Gemm input {index} must be 2-D, got shape {array.shape}")
        return core.constant(np.ascontiguousarray(array.T), name=f"{ctx.node.input[index]}_T"), False
    return ctx.value(index), transpose


@onnx_op("Gemm")
def gemm(ctx: NodeContext) -> list[ir.Value]:
    a, trans_a = _maybe_transposed(ctx, 0, bool(ctx.attr("transA", 0)))
    b, trans_b = _maybe_transposed(ctx, 1, bool(ctx.attr("transB", 0)))
    for name, value in (("A", a), ("B", b)):
        if core.tensor_type(value).rank != 2:
            raise HandlerError(f"Gemm input {name} must be 2-D, got {value.type}")
    c = ctx.value(2) if ctx.has_input(2) else None
    return [contraction.gemm(
        a, b, c, alpha=float(ctx.attr("alpha", 1.0)), beta=float(ctx.attr("beta", 1.0)),
        trans_a=trans_a, trans_b=trans_b,
    )]


@onnx_op("Einsum", since=12)
def einsum(ctx: NodeContext) -> list[ir.Value]:
    values = [ctx.value(i) for i in range(len(ctx.inputs))]
    return [contraction.einsum(ctx.attr("equation"), values)]


# --- window attributes -----------------------------------------------------------------------


def _spatial_rank(ctx: NodeContext) -> int:
    rank = core.tensor_type(ctx.value(0)).rank
    if rank < 3:
        raise HandlerError(f"{ctx.op_type} needs an input of rank >= 3 (N, C, spatial...), got {rank}")
    return rank - 2


def _ints(ctx: NodeContext, name: str, count: int, default: int) -> list[int]:
    """A per-spatial-dim int attribute, checked to have ``count`` entries."""
    values = ctx.attr(name, None)
    if values is None:
        return [default] * count
    values = [int(v) for v in values]
    if len(values) != count:
        raise HandlerError(f"attribute {name!r} has {len(values)} entries for {count} spatial dims")
    return values


def _auto_pad(ctx: NodeContext) -> str:
    mode = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if mode not in _AUTO_PADS:
        raise HandlerError(f"auto_pad={mode!r} is not one of {_AUTO_PADS}")
    return mode


def _static_spatial(ctx: NodeContext, why: str) -> list[int]:
    extents = core.static_shape(ctx.value(0))[2:]
    if None in extents:
        raise HandlerError(f"{why} needs static spatial extents, got {ctx.value(0).type}")
    return extents


def _split_same(total: int, mode: str) -> tuple[int, int]:
    """SAME_UPPER puts the odd element of padding at the end, SAME_LOWER at the start."""
    small, large = total // 2, total - total // 2
    return (small, large) if mode == "SAME_UPPER" else (large, small)


def _window_padding(
    ctx: NodeContext, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> tuple[list[int], list[int]]:
    """(low, high) padding per spatial dim from ``pads`` or ``auto_pad``.

    SAME pads so that ``out = ceil(in / stride)``, with the dilated window; the odd
    element goes as :func:`_split_same` says.
    """
    spatial = len(kernel)
    mode = _auto_pad(ctx)
    if mode == "NOTSET":
        pads = _ints(ctx, "pads", 2 * spatial, 0)
        if any(p < 0 for p in pads):
            raise HandlerError(f"negative pads {pads}")
        return pads[:spatial], pads[spatial:]
    if mode == "VALID":
        return [0] * spatial, [0] * spatial
    extents = _static_spatial(ctx, f"auto_pad={mode}")
    low, high = [], []
    for extent, k, s, d in zip(extents, kernel, strides, dilations):
        out = -(-extent // s)
        total = max(0, (out - 1) * s + conv.window_span(k, d) - extent)
        lo, hi = _split_same(total, mode)
        low.append(lo)
        high.append(hi)
    return low, high


def _kernel(ctx: NodeContext, filter_shape: Sequence[int | None]) -> list[int]:
    """kernel_shape, which must agree with the filter's spatial extents when both are known."""
    spatial = len(filter_shape) - 2
    kernel = ctx.attr("kernel_shape", None)
    if kernel is None:
        if None in filter_shape[2:]:
            raise HandlerError(f"the filter's spatial extents {filter_shape[2:]} must be static")
        return list(filter_shape[2:])
    kernel = [int(k) for k in kernel]
    if len(kernel) != spatial or any(f is not None and f != k for f, k in zip(filter_shape[2:], kernel)):
        raise HandlerError(f"kernel_shape {kernel} does not match the filter shape {list(filter_shape)}")
    return kernel


# --- convolutions ----------------------------------------------------------------------------


@onnx_op("Conv")
def conv_op(ctx: NodeContext) -> list[ir.Value]:
    bias = ctx.value(2) if ctx.has_input(2) else None
    return [_convolution(ctx, ctx.value(0), ctx.value(1), bias)]


def _integer_conv(ctx: NodeContext, x_index: int, x_zero_index: int, w_index: int, w_zero_index: int,
                  bias: np.ndarray | None = None) -> ir.Value | None:
    """The i32 convolution as ``conv.integer_conv2d`` (8-bit operands kept, for the int8
    kernels) when it applies: a 2-D, ungrouped convolution of an 8-bit input whose zero point
    is known at import by a constant int8 filter without zero point; else ``None``."""
    weight = ctx.const(w_index)
    zero = ctx.const(x_zero_index) if ctx.has_input(x_zero_index) else np.zeros((), np.uint8)
    if (weight is None or weight.dtype != np.int8 or weight.ndim != 4 or _spatial_rank(ctx) != 2
            or int(ctx.attr("group", 1)) != 1 or ctx.dtype(x_index) not in (np.dtype(np.uint8), np.dtype(np.int8))
            or zero is None or zero.size != 1 or not quantization.absent_or_zero(ctx, w_zero_index)):
        return None
    kernel = _kernel(ctx, list(weight.shape))
    strides = _ints(ctx, "strides", 2, 1)
    dilations = _ints(ctx, "dilations", 2, 1)
    low, high = _window_padding(ctx, kernel, strides, dilations)
    return conv.integer_conv2d(
        ctx.value(x_index), weight, x_zero=int(zero.reshape(())), x_unsigned=ctx.is_unsigned(x_index),
        strides=strides, padding_low=low, padding_high=high, dilations=dilations, bias=bias)


@onnx_op("ConvInteger", since=10)
def conv_integer(ctx: NodeContext) -> list[ir.Value]:
    """Conv of the operands widened to i32 with their zero points subtracted; padding the
    centered input with 0 is padding the original with its zero point, as ONNX says."""
    fast = _integer_conv(ctx, 0, 2, 1, 3)
    if fast is not None:
        return [fast]
    x = quantization.centered_i32(ctx, 0, 2, "x")
    w = quantization.centered_i32(ctx, 1, 3, "w", per_row=True)
    return [_convolution(ctx, x, w, None)]


@onnx_op("QLinearConv", since=10)
def qlinear_conv(ctx: NodeContext) -> list[ir.Value]:
    """ConvInteger of the centered operands plus the optional i32 bias, requantized as
    QLinearMatMul is, with a weight scale per tensor or per output channel."""
    has_bias = ctx.has_input(8)
    if has_bias and str(ctx.element_type(8)) != "i32":
        raise HandlerError(f"QLinearConv's bias must be int32, got {ctx.element_type(8)}")
    # Constants are read before anything materializes them (the int8 path needs neither
    # the filter nor the bias as IR values).
    constant_bias = ctx.const(8) if has_bias else None
    filter_shape = ctx.const(3).shape if ctx.const(3) is not None else core.static_shape(ctx.value(3))
    accumulator = None
    if not has_bias or constant_bias is not None:
        accumulator = _integer_conv(ctx, 0, 2, 3, 5, constant_bias)
    if accumulator is None:
        x = quantization.centered_i32(ctx, 0, 2, "x")
        w = quantization.centered_i32(ctx, 3, 5, "w", per_row=True)
        accumulator = _convolution(ctx, x, w, ctx.value(8) if has_bias else None)
    rank = core.tensor_type(accumulator).rank
    channels = filter_shape[0]
    scales = [quantization.per_tensor(ctx, 1, "x_scale"),
              quantization.per_output_channel_scale(ctx, 4, "w_scale", channels, rank),
              quantization.per_tensor(ctx, 6, "y_scale")]
    return [quantization.requantize(ctx, accumulator, scales, zero_index=7, input_index=0)]


def _convolution(ctx: NodeContext, x: ir.Value, w: ir.Value, bias: ir.Value | None) -> ir.Value:
    """Conv / ConvInteger with the node's strides, dilations, pads (or auto_pad) and groups."""
    spatial = _spatial_rank(ctx)
    kernel = _kernel(ctx, core.static_shape(w))
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    low, high = _window_padding(ctx, kernel, strides, dilations)
    return conv.conv(
        x, w, bias, strides=strides, padding_low=low, padding_high=high,
        dilations=dilations, groups=int(ctx.attr("group", 1)),
    )


def _conv_transpose_padding(
    ctx: NodeContext, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    output_padding: Sequence[int],
) -> tuple[list[int], list[int]]:
    """(low, high) padding of ConvTranspose: from ``output_shape`` when given (pads are then
    ignored, as the spec says), from ``auto_pad`` SAME (``out = in * stride``), else ``pads``."""
    spatial = len(kernel)
    mode = _auto_pad(ctx)
    output_shape = ctx.attr("output_shape", None)
    if output_shape is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [e * s for e, s in zip(_static_spatial(ctx, f"auto_pad={mode}"), strides)]
    if output_shape is not None:
        output_shape = [int(o) for o in output_shape][-spatial:]
        extents = _static_spatial(ctx, "output_shape")
        low, high = [], []
        for e, k, s, d, p, o in zip(extents, kernel, strides, dilations, output_padding, output_shape):
            total = s * (e - 1) + p + conv.window_span(k, d) - o
            lo, hi = _split_same(total, "SAME_UPPER" if mode == "SAME_UPPER" else "SAME_LOWER")
            low.append(lo)
            high.append(hi)
        return low, high
    if mode == "VALID":
        return [0] * spatial, [0] * spatial
    pads = _ints(ctx, "pads", 2 * spatial, 0)
    return pads[:spatial], pads[spatial:]


@onnx_op("ConvTranspose")
def conv_transpose(ctx: NodeContext) -> list[ir.Value]:
    spatial = _spatial_rank(ctx)
    x = ctx.value(0)
    weight = ctx.const(1)
    w = weight if weight is not None else ctx.value(1)
    filter_shape = list(weight.shape) if weight is not None else core.static_shape(w)
    kernel = _kernel(ctx, filter_shape)
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    output_padding = _ints(ctx, "output_padding", spatial, 0)
    low, high = _conv_transpose_padding(ctx, kernel, strides, dilations, output_padding)
    bias = ctx.value(2) if ctx.has_input(2) else None
    return [conv.conv_transpose(
        x, w, bias, strides=strides, padding_low=low, padding_high=high,
        output_padding=output_padding, dilations=dilations, groups=int(ctx.attr("group", 1)),
    )]


# --- pooling ---------------------------------------------------------------------------------


def _pool_arguments(ctx: NodeContext) -> dict:
    """kernel, strides, padding, dilations and ceil mode of a pooling node, for ``pool``."""
    spatial = _spatial_rank(ctx)
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    if len(kernel) != spatial:
        raise HandlerError(f"kernel_shape {kernel} does not match {spatial} spatial dims")
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    if _auto_pad(ctx) in ("SAME_UPPER", "SAME_LOWER") and any(d != 1 for d in dilations):
        # The reference and onnxruntime disagree on SAME padding of a dilated pool window.
        raise HandlerError(f"auto_pad={_auto_pad(ctx)} with dilations {dilations} is ambiguous")
    low, high = _window_padding(ctx, kernel, strides, dilations)
    return {
        "kernel": kernel, "strides": strides, "dilations": dilations,
        "padding_low": low, "padding_high": high, "ceil_mode": bool(ctx.attr("ceil_mode", 0)),
    }


@onnx_op("AveragePool")
def average_pool(ctx: NodeContext) -> list[ir.Value]:
    arguments = _pool_arguments(ctx)
    return [pooling.pool(
        ctx.value(0), "avg", arguments.pop("kernel"),
        count_include_pad=bool(ctx.attr("count_include_pad", 0)), **arguments,
    )]


@onnx_op("MaxPool")
def max_pool(ctx: NodeContext) -> list[ir.Value]:
    """The optional Indices output switches to the (unvectorized) index-tracking pool."""
    arguments = _pool_arguments(ctx)
    kernel = arguments.pop("kernel")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        storage_order = int(ctx.attr("storage_order", 0))
        if storage_order not in (0, 1):
            raise HandlerError(f"storage_order={storage_order} is not 0 or 1")
        if None in core.static_shape(ctx.value(0))[2:]:
            raise HandlerError("the Indices output needs static spatial extents")
        values, indices = pooling.max_pool_with_indices(
            ctx.value(0), kernel, column_major=storage_order == 1,
            unsigned=ctx.is_unsigned(0), **arguments,
        )
        return [values, indices]
    return [pooling.pool(ctx.value(0), "max", kernel, unsigned=ctx.is_unsigned(0), **arguments)]


@onnx_op("LpPool")
def lp_pool(ctx: NodeContext) -> list[ir.Value]:
    """``(sum |x|^p)^(1/p)`` over each window: a sum pool between two elementwise powers."""
    x = ctx.value(0)
    element = core.tensor_type(x).element_type
    p = float(ctx.attr("p", 2))
    if p <= 0:
        raise HandlerError(f"LpPool p={p} must be positive")
    arguments = _pool_arguments(ctx)

    def to_power(v: ir.Value) -> ir.Value:
        if p == 2:
            return arith.mulf(v, v)
        magnitude = math.absf(v)
        return magnitude if p == 1 else math.powf(magnitude, core.scalar_constant(p, element))

    def root(v: ir.Value) -> ir.Value:
        if p == 2:
            return math.sqrt(v)
        return v if p == 1 else math.powf(v, core.scalar_constant(1.0 / p, element))

    powered = core.elementwise([x], element, to_power)
    summed = pooling.pool(powered, "sum", arguments.pop("kernel"), **arguments)
    return [core.elementwise([summed], element, root)]


@onnx_op("GlobalAveragePool")
def global_average_pool(ctx: NodeContext) -> list[ir.Value]:
    _spatial_rank(ctx)
    return [pooling.global_pool(ctx.value(0), "avg")]


@onnx_op("GlobalMaxPool")
def global_max_pool(ctx: NodeContext) -> list[ir.Value]:
    _spatial_rank(ctx)
    return [pooling.global_pool(ctx.value(0), "max", unsigned=ctx.is_unsigned(0))]


@onnx_op("Col2Im", since=18)
def col2im(ctx: NodeContext) -> list[ir.Value]:
    image = operands.numbers(ctx, 1, int)
    block = operands.numbers(ctx, 2, int)
    if image is None or block is None:
        raise HandlerError("Col2Im needs a non-empty image_shape and block_shape")
    rank = len(image)
    try:
        image = operands.declared_extents(image, operands.known_dims(ctx.output_infos[0], rank + 2)[2:],
                                          "Col2Im: image_shape holds {value} where the model declares {bound}")
        return [conv.col2im(ctx.value(0), image, block,
                            strides=list(ctx.attr("strides", [1] * rank)),
                            dilations=list(ctx.attr("dilations", [1] * rank)),
                            pads=list(ctx.attr("pads", [0] * (2 * rank))))]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


@onnx_op("RoiAlign", since=10)
def roi_align(ctx: NodeContext) -> list[ir.Value]:
    """Opset 16 added ``coordinate_transformation_mode`` (default half_pixel); before, the
    regions were ``output_half_pixel``."""
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    if transform not in ("half_pixel", "output_half_pixel"):
        raise HandlerError(f"unsupported RoiAlign coordinate_transformation_mode {transform!r}")
    try:
        method = regions.RoiAlignMethod(
            output_height=int(ctx.attr("output_height", 1)), output_width=int(ctx.attr("output_width", 1)),
            sampling_ratio=int(ctx.attr("sampling_ratio", 0)), spatial_scale=float(ctx.attr("spatial_scale", 1.0)),
            mode=ctx.attr("mode", "avg"), half_pixel=transform == "half_pixel")
        return [regions.roi_align(ctx.value(0), ctx.value(1), ctx.value(2), method)]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


@onnx_op("DeformConv", since=19)
def deform_conv(ctx: NodeContext) -> list[ir.Value]:
    x, w = ctx.value(0), ctx.value(1)
    if len(core.sizes(x)) != 4:
        raise HandlerError(f"DeformConv is implemented for 2-D inputs [N, C, H, W]; got rank {len(core.sizes(x))}")
    _kernel(ctx, core.static_shape(w))  # kernel_shape must agree with the filter
    optional = [ctx.value(i) if ctx.has_input(i) else None for i in (3, 4)]
    try:
        return [deformable.deform_conv2d(
            x, w, ctx.value(2), *optional, strides=list(ctx.attr("strides", [1, 1])),
            pads=list(ctx.attr("pads", [0, 0, 0, 0])), dilations=list(ctx.attr("dilations", [1, 1])),
            groups=int(ctx.attr("group", 1)), offset_groups=int(ctx.attr("offset_group", 1)))]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
