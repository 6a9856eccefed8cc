"""One converter per TFLite builtin operator: TFLite's conventions written as ONNX nodes.

Images stay NHWC: a convolution or pooling reads its input through a Transpose to NCHW (the
ONNX op's layout) and its result goes through one back; the graph stage's layout pass
(``pipelines/graph/layout.py``) turns the convolution into its NHWC form and cancels each
such pair, so the compiled model has transposes only where TFLite had them. Reductions,
resizes and elementwise ops work on NHWC directly (ONNX ``axes``). Fused activations become
the elementwise op after the one they are fused into, which the fusion stage fuses back.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .builder import ONNX_TYPES, TO_NCHW, TO_NHWC, ConversionError, OpContext

Convert = Callable[[OpContext], None]
CONVERTERS: dict[str, Convert] = {}


def converts(*names: str) -> Callable[[Convert], Convert]:
    def register(function: Convert) -> Convert:
        for name in names:
            CONVERTERS[name] = function
        return function

    return register


# ActivationFunctionType (schema.fbs): NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT.
def fused_activation(ctx: OpContext, name: str, code: int) -> str:
    if code == 0:
        return name
    if code == 1:
        return ctx.node("Relu", [name])
    if code == 2:
        return ctx.node("Clip", [name, ctx.const(-1.0, np.float32), ctx.const(1.0, np.float32)])
    if code == 3:
        return ctx.node("Clip", [name, ctx.const(0.0, np.float32), ctx.const(6.0, np.float32)])
    if code == 4:
        return ctx.node("Tanh", [name])
    raise ConversionError(f"fused activation function {code} (SIGN_BIT) is not supported")


def _same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow's SAME padding: output ceil(size / stride), the odd pixel at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _pads(padding: int, spatial: tuple[int, int], kernel: tuple[int, int],
          strides: tuple[int, int], dilations: tuple[int, int] = (1, 1)) -> list[int]:
    """ONNX ``pads`` (begins then ends) for TFLite's Padding (0 SAME, 1 VALID)."""
    if padding == 1:
        return [0, 0, 0, 0]
    if padding != 0:
        raise ConversionError(f"padding {padding} is not SAME or VALID")
    (top, bottom), (left, right) = (_same_padding(s, k, st, d) for s, k, st, d in zip(spatial, kernel, strides, dilations))
    return [top, left, bottom, right]


def _image(ctx: OpContext, i: int) -> tuple[str, tuple[int, ...]]:
    shape = ctx.shape(i)
    if len(shape) != 4:
        raise ConversionError(f"input {i} has shape {list(shape)}, expected a 4-D NHWC image")
    return ctx.value(i, perm=TO_NCHW), shape


def _finish_image(ctx: OpContext, nchw: str, activation: int) -> None:
    ctx.set_output(0, fused_activation(ctx, ctx.node("Transpose", [nchw], perm=list(TO_NHWC)), activation))


@converts("CONV_2D")
def conv_2d(ctx: OpContext) -> None:
    o = ctx.options
    x, shape = _image(ctx, 0)
    filters = ctx.input_tensor(1).shape  # O, KH, KW, I
    if len(filters) != 4:
        raise ConversionError(f"filter shape {list(filters)} is not [O, KH, KW, I]")
    groups = shape[3] // filters[3] if filters[3] else 0
    if groups < 1 or shape[3] != groups * filters[3]:
        raise ConversionError(f"{shape[3]} input channels for a filter of {filters[3]}")
    strides, dilations = (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    inputs = [x, ctx.weight(1, (0, 3, 1, 2))]
    bias = ctx.bias(2)
    inputs += [bias] if bias else []
    y = ctx.node("Conv", inputs, kernel_shape=list(filters[1:3]), strides=list(strides), dilations=list(dilations),
                 group=groups, pads=_pads(o.Padding(), shape[1:3], filters[1:3], strides, dilations))
    _finish_image(ctx, y, o.FusedActivationFunction())


@converts("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(ctx: OpContext) -> None:
    o = ctx.options
    x, shape = _image(ctx, 0)
    filters = ctx.input_tensor(1).shape  # 1, KH, KW, C * multiplier
    if len(filters) != 4 or filters[0] != 1 or filters[3] % shape[3]:
        raise ConversionError(f"depthwise filter shape {list(filters)} for {shape[3]} input channels")
    strides, dilations = (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    inputs = [x, ctx.weight(1, (3, 0, 1, 2))]
    bias = ctx.bias(2)
    inputs += [bias] if bias else []
    y = ctx.node("Conv", inputs, kernel_shape=list(filters[1:3]), strides=list(strides), dilations=list(dilations),
                 group=shape[3], pads=_pads(o.Padding(), shape[1:3], filters[1:3], strides, dilations))
    _finish_image(ctx, y, o.FusedActivationFunction())


@converts("TRANSPOSE_CONV")
def transpose_conv(ctx: OpContext) -> None:
    """Inputs (output shape, filter [O, KH, KW, I], input, bias?), written as the stride-1
    convolution it equals: zeros inserted between the input's pixels (on NHWC, by a reshape,
    a pad and a reshape), then a convolution with the filter flipped, padded so that output
    pixel ``o`` sums ``input[i] * filter[o + pad - i * stride]`` as TFLite's does (TFLite pads
    the way the forward convolution from the output to the input would: SAME puts the odd
    pixel at the end). Written so rather than as ONNX's ConvTranspose, which imports as an
    NCHW computation: this form is an NHWC convolution whose transposes cancel."""
    o = ctx.options
    shape = ctx.shape(2)
    if len(shape) != 4:
        raise ConversionError(f"input 2 has shape {list(shape)}, expected a 4-D NHWC image")
    out_shape = [int(d) for d in ctx.constant(0)]
    filters = ctx.input_tensor(1).shape
    if len(filters) != 4 or filters[3] != shape[3]:
        raise ConversionError(f"filter shape {list(filters)} for {shape[3]} input channels")
    n, h, w, c = shape
    strides = (o.StrideH(), o.StrideW())
    begins, ends = [], []
    for axis, (size, kernel, stride) in enumerate(zip((h, w), filters[1:3], strides)):
        total = (size - 1) * stride + kernel - out_shape[1 + axis]
        pad = max(total, 0) // 2 if o.Padding() == 0 else 0
        begin = kernel - 1 - pad
        # The zero-inserted input is size * stride long (stride - 1 zeros after the last pixel too).
        end = out_shape[1 + axis] + kernel - 1 - size * stride - begin
        if begin < 0:
            raise ConversionError(f"padding {pad} exceeds the filter's {kernel - 1} taps")
        begins.append(begin)
        ends.append(end)
    x, zero, real = ctx.stored(2)  # zeros inserted into the 8-bit values: the pattern stays QDQ
    if strides != (1, 1):
        x = ctx.node("Reshape", [x, ctx.const([n, h, 1, w, 1, c])])
        zeros = [0, 0, 0, 0, 0, 0, 0, 0, strides[0] - 1, 0, strides[1] - 1, 0]
        x = ctx.node("Pad", [x, ctx.const(zeros), zero])
        x = ctx.node("Reshape", [x, ctx.const([n, h * strides[0], w * strides[1], c])])
    if min(ends) < 0:
        lengths = [h * strides[0] + min(ends[0], 0), w * strides[1] + min(ends[1], 0)]
        x = ctx.node("Slice", [x, ctx.const([0, 0]), ctx.const(lengths), ctx.const([1, 2])])
        ends = [max(e, 0) for e in ends]
    inputs = [real(ctx.node("Transpose", [x], perm=list(TO_NCHW))), ctx.weight(1, (0, 3, 1, 2), flip=(2, 3))]
    bias = ctx.bias(3)
    inputs += [bias] if bias else []
    y = ctx.node("Conv", inputs, kernel_shape=list(filters[1:3]), pads=[*begins, *ends])
    activation = o.FusedActivationFunction() if hasattr(o, "FusedActivationFunction") else 0
    _finish_image(ctx, y, activation)


@converts("FULLY_CONNECTED")
def fully_connected(ctx: OpContext) -> None:
    o = ctx.options
    weights = ctx.input_tensor(1).shape  # N, K
    if len(weights) != 2:
        raise ConversionError(f"weight shape {list(weights)} is not [units, inputs]")
    if o.WeightsFormat() != 0:
        raise ConversionError("shuffled weight formats are not supported")
    shape = ctx.shape(0)
    rows = int(np.prod(shape)) // weights[1] if weights[1] else 0
    flat = [rows, weights[1]]
    x = ctx.value(0) if list(shape) == flat else ctx.value(0, shape=flat)
    inputs = [x, ctx.weight(1, (0, 1))]
    bias = ctx.bias(2)
    inputs += [bias] if bias else []
    y = ctx.node("Gemm", inputs, transB=1)
    out = ctx.output_tensor(0).shape
    if list(out) != [rows, weights[0]]:
        y = ctx.node("Reshape", [y, ctx.const(out)])
    ctx.set_output(0, fused_activation(ctx, y, o.FusedActivationFunction()))


@converts("BATCH_MATMUL")
def batch_matmul(ctx: OpContext) -> None:
    o = ctx.options
    operands = []
    for i, adjoint in ((0, o.AdjX()), (1, o.AdjY())):
        rank = len(ctx.shape(i))
        perm = [*range(rank - 2), rank - 1, rank - 2] if adjoint else None
        operands.append(ctx.weight(i, perm) if ctx.input_tensor(i).data is not None and perm
                        else ctx.value(i, perm=perm))
    ctx.set_output(0, ctx.node("MatMul", operands))


def _pool(ctx: OpContext, op_type: str) -> None:
    o = ctx.options
    x, shape = _image(ctx, 0)
    kernel, strides = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
    y = ctx.node(op_type, [x], kernel_shape=list(kernel), strides=list(strides),
                 pads=_pads(o.Padding(), shape[1:3], kernel, strides))
    _finish_image(ctx, y, o.FusedActivationFunction())


@converts("AVERAGE_POOL_2D")
def average_pool_2d(ctx: OpContext) -> None:
    _pool(ctx, "AveragePool")  # count_include_pad=0: TFLite averages only the pixels inside


@converts("MAX_POOL_2D")
def max_pool_2d(ctx: OpContext) -> None:
    _pool(ctx, "MaxPool")


def _axes(ctx: OpContext, i: int) -> list[int]:
    rank = len(ctx.shape(0))
    return sorted({int(a) % rank for a in np.asarray(ctx.constant(i)).reshape(-1)})


_REDUCTIONS = {"MEAN": "ReduceMean", "SUM": "ReduceSum", "REDUCE_MAX": "ReduceMax", "REDUCE_MIN": "ReduceMin",
               "REDUCE_PROD": "ReduceProd"}


@converts(*_REDUCTIONS)
def reduction(ctx: OpContext) -> None:
    keep = ctx.options.KeepDims()
    y = ctx.node(_REDUCTIONS[ctx.op.name], [ctx.value(0), ctx.const(_axes(ctx, 1))], keepdims=int(bool(keep)))
    ctx.set_output(0, y)


_BINARY = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "MAXIMUM": "Max", "MINIMUM": "Min",
           "POW": "Pow"}


@converts(*_BINARY)
def binary(ctx: OpContext) -> None:
    y = ctx.node(_BINARY[ctx.op.name], [ctx.value(0), ctx.value(1)])
    code = ctx.op.options.FusedActivationFunction() if hasattr(ctx.op.options, "FusedActivationFunction") else 0
    ctx.set_output(0, fused_activation(ctx, y, code))


@converts("SQUARED_DIFFERENCE")
def squared_difference(ctx: OpContext) -> None:
    difference = ctx.node("Sub", [ctx.value(0), ctx.value(1)])
    ctx.set_output(0, ctx.node("Mul", [difference, difference]))


_UNARY = {"LOGISTIC": "Sigmoid", "TANH": "Tanh", "RELU": "Relu", "HARD_SWISH": "HardSwish", "EXP": "Exp",
          "LOG": "Log", "SQRT": "Sqrt", "ABS": "Abs", "NEG": "Neg", "FLOOR": "Floor", "CEIL": "Ceil",
          "SIN": "Sin", "COS": "Cos"}


@converts(*_UNARY)
def unary(ctx: OpContext) -> None:
    ctx.set_output(0, ctx.node(_UNARY[ctx.op.name], [ctx.value(0)]))


@converts("RSQRT")
def rsqrt(ctx: OpContext) -> None:
    ctx.set_output(0, ctx.node("Reciprocal", [ctx.node("Sqrt", [ctx.value(0)])]))


@converts("RELU6", "RELU_N1_TO_1")
def clipped_relu(ctx: OpContext) -> None:
    ctx.set_output(0, fused_activation(ctx, ctx.value(0), 3 if ctx.op.name == "RELU6" else 2))


@converts("LEAKY_RELU")
def leaky_relu(ctx: OpContext) -> None:
    ctx.set_output(0, ctx.node("LeakyRelu", [ctx.value(0)], alpha=float(ctx.options.Alpha())))


@converts("PRELU")
def prelu(ctx: OpContext) -> None:
    ctx.set_output(0, ctx.node("PRelu", [ctx.value(0), ctx.value(1)]))


@converts("GELU")
def gelu(ctx: OpContext) -> None:
    approximate = bool(ctx.op.options.Approximate()) if ctx.op.options is not None else False
    ctx.set_output(0, ctx.node("Gelu", [ctx.value(0)], approximate="tanh" if approximate else "none"))


@converts("SOFTMAX", "LOG_SOFTMAX")
def softmax(ctx: OpContext) -> None:
    x = ctx.value(0)
    beta = float(ctx.op.options.Beta()) if ctx.op.name == "SOFTMAX" and ctx.op.options is not None else 1.0
    if beta != 1.0:
        x = ctx.node("Mul", [x, ctx.const(beta, np.float32)])
    ctx.set_output(0, ctx.node("Softmax" if ctx.op.name == "SOFTMAX" else "LogSoftmax", [x], axis=-1))


def _movement(ctx: OpContext, build: Callable[[str], str]) -> None:
    """A data-movement op: on the stored (8-bit) values when the quantization is unchanged."""
    raw = ctx.raw(0)
    if raw is not None:
        ctx.set_output(0, build(raw), raw=True)
    else:
        ctx.set_output(0, build(ctx.value(0)))


@converts("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def reshape(ctx: OpContext) -> None:
    """The output tensor's static shape is the new shape (a RESHAPE's shape input and a
    SQUEEZE's axes only say how TFLite got it)."""
    shape = ctx.const(ctx.output_tensor(0).shape)
    _movement(ctx, lambda x: ctx.node("Reshape", [x, shape]))


@converts("TRANSPOSE")
def transpose(ctx: OpContext) -> None:
    perm = [int(p) for p in ctx.constant(1)]
    _movement(ctx, lambda x: ctx.node("Transpose", [x], perm=perm))


@converts("CONCATENATION")
def concatenation(ctx: OpContext) -> None:
    o = ctx.options
    parts = [ctx.value(i) for i in range(len(ctx.op.inputs))]
    y = ctx.node("Concat", parts, axis=int(o.Axis()))
    ctx.set_output(0, fused_activation(ctx, y, o.FusedActivationFunction()))


@converts("PACK")
def pack(ctx: OpContext) -> None:
    axis = int(ctx.options.Axis())
    parts = [ctx.node("Unsqueeze", [ctx.value(i), ctx.const([axis])]) for i in range(len(ctx.op.inputs))]
    ctx.set_output(0, ctx.node("Concat", parts, axis=axis))


def _split(ctx: OpContext, data: int, axis: int, sizes: list[int]) -> None:
    raw = ctx.raw(data)
    x = raw if raw is not None else ctx.value(data)
    outputs = ctx.node("Split", [x, ctx.const(sizes)], outputs=len(sizes), axis=axis)
    for k, name in enumerate(outputs if len(sizes) > 1 else [outputs]):
        ctx.set_output(k, name, raw=raw is not None)


@converts("SPLIT")
def split(ctx: OpContext) -> None:
    axis = int(np.asarray(ctx.constant(0)).reshape(())) % len(ctx.shape(1))
    count = len(ctx.op.outputs)
    extent = ctx.shape(1)[axis]
    if count < 1 or extent % count:
        raise ConversionError(f"{extent} elements do not split into {count} equal parts")
    _split(ctx, 1, axis, [extent // count] * count)


@converts("SPLIT_V")
def split_v(ctx: OpContext) -> None:
    axis = int(np.asarray(ctx.constant(2)).reshape(())) % len(ctx.shape(0))
    _split(ctx, 0, axis, [ctx.output_tensor(k).shape[axis] for k in range(len(ctx.op.outputs))])


@converts("STRIDED_SLICE")
def strided_slice(ctx: OpContext) -> None:
    o = ctx.options
    if o.EllipsisMask() or o.NewAxisMask():
        raise ConversionError("ellipsis_mask and new_axis_mask are not supported")
    shape = ctx.shape(0)
    begin, end = (np.asarray(ctx.constant(i)).reshape(-1) for i in (1, 2))
    strides = np.asarray(ctx.constant(3)).reshape(-1) if ctx.has_input(3) else np.ones_like(begin)
    starts, ends, steps = [], [], []
    for d, extent in enumerate(shape):
        if d >= len(begin):
            starts.append(0), ends.append(extent), steps.append(1)
            continue
        step = int(strides[d])
        if step == 0:
            raise ConversionError("a stride of 0")
        start = int(begin[d])
        stop = start + int(end[d]) if o.Offset() else int(end[d])
        if o.BeginMask() >> d & 1:
            start = 0 if step > 0 else extent - 1
        if o.EndMask() >> d & 1:
            stop = extent if step > 0 else -extent - 1
        if o.ShrinkAxisMask() >> d & 1:
            start = start % extent if extent else 0
            stop, step = start + 1, 1
        starts.append(start), ends.append(stop), steps.append(step)
    out = ctx.output_tensor(0).shape

    def build(x: str) -> str:
        y = ctx.node("Slice", [x, ctx.const(starts), ctx.const(ends), ctx.const(list(range(len(shape)))),
                               ctx.const(steps)])
        return ctx.node("Reshape", [y, ctx.const(out)])

    _movement(ctx, build)


@converts("SLICE")
def slice_(ctx: OpContext) -> None:
    begin = [int(b) for b in ctx.constant(1)]
    size = [int(s) for s in ctx.constant(2)]
    ends = [e if s == -1 else b + s for b, s, e in zip(begin, size, ctx.shape(0))]
    _movement(ctx, lambda x: ctx.node("Slice", [x, ctx.const(begin), ctx.const(ends)]))


@converts("PAD", "PADV2")
def pad(ctx: OpContext) -> None:
    paddings = np.asarray(ctx.constant(1), np.int64).reshape(-1, 2)
    pads = [*paddings[:, 0], *paddings[:, 1]]
    tensor = ctx.input_tensor(0)
    raw = ctx.raw(0)
    if ctx.op.name == "PADV2" and ctx.has_input(2):
        fill_tensor = ctx.input_tensor(2)
        if raw is not None and fill_tensor.data is not None and fill_tensor.type == tensor.type:
            fill = ctx.const(np.asarray(fill_tensor.data).reshape(()), fill_tensor.dtype)
        else:
            raw, fill = None, ctx.node("Reshape", [ctx.value(2), ctx.const([])])
    elif raw is not None and tensor.quantization is not None:
        fill = ctx.const(tensor.quantization.zero_point.reshape(()), tensor.dtype)  # the padded zeros are real 0
    else:
        fill = ctx.const(0, tensor.dtype if raw is not None else np.float32)
    x = raw if raw is not None else ctx.value(0)
    ctx.set_output(0, ctx.node("Pad", [x, ctx.const(pads), fill]), raw=raw is not None)


def _resize(ctx: OpContext, mode: str) -> None:
    """Resized on NHWC directly (Resize over axes 1 and 2)."""
    o = ctx.options
    size = [int(s) for s in ctx.constant(1)]
    align, half = bool(o.AlignCorners()), bool(o.HalfPixelCenters())
    if mode == "linear":
        coordinates, nearest = ("align_corners" if align else "half_pixel" if half else "asymmetric"), "floor"
    else:
        # TF: align_corners rounds half away from zero; half_pixel_centers floors (x + 0.5) / scale,
        # which is ONNX's half_pixel rounded half up; otherwise it floors x / scale.
        coordinates = "align_corners" if align else "half_pixel" if half else "asymmetric"
        nearest = "round_prefer_ceil" if align or half else "floor"
    y = ctx.node("Resize", [ctx.value(0), "", "", ctx.const(size)], axes=[1, 2], mode=mode,
                 coordinate_transformation_mode=coordinates, nearest_mode=nearest)
    ctx.set_output(0, y)


@converts("RESIZE_BILINEAR")
def resize_bilinear(ctx: OpContext) -> None:
    _resize(ctx, "linear")


@converts("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest_neighbor(ctx: OpContext) -> None:
    _resize(ctx, "nearest")


@converts("QUANTIZE", "DEQUANTIZE")
def quantize(ctx: OpContext) -> None:
    """Both are the identity on real numbers: the input is read dequantized (or widened, for
    float16 weights) and the output quantized if its tensor is."""
    ctx.set_output(0, ctx.value(0))


@converts("CAST")
def cast(ctx: OpContext) -> None:
    ctx.set_output(0, ctx.node("Cast", [ctx.value(0)], to=ONNX_TYPES[np.dtype(ctx.output_tensor(0).dtype)]),
                   raw=True)
