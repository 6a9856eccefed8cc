"""Linear quantization: QuantizeLinear, DynamicQuantizeLinear, DequantizeLinear, QLinearMatMul,
MatMulInteger, and the requantizing end QLinearConv shares with QLinearMatMul.

Integer targets only (int8/uint8/int16/uint16 and wider integers): float8/float4/int4/int2
have no MLIR element type the runtime can hand to numpy, so a model using them gets the
import error that names its type.

Scales and zero points come in three layouts (ONNX opset 21): one value for the whole
tensor, one per slice along ``axis`` (1-D), or one per block of ``block_size`` elements
along ``axis`` (same rank as the input). All three are one indexing map of a single
``linalg.generic`` — ``d_axis floordiv block_size`` for blocks — so no broadcast copy of the
parameters is materialized.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from mlir import ir
from mlir.dialects import arith, math

from ....ir import contraction, core, small_types
from ....ir import elementwise as ew
from ..model import ONNX_DTYPES
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op

_F32 = ir.F32Type.get
_F64 = ir.F64Type.get


def _axis(ctx: NodeContext, rank: int) -> int:
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis < max(rank, 1):
        raise HandlerError(f"axis {axis} is out of range for a rank-{rank} input")
    return axis % rank if rank else 0


def _parameter_map(ctx: NodeContext, name: str, parameter: ir.Value, x: ir.Value) -> ir.AffineMap:
    """How element ``(d0, ..., dn)`` of ``x`` finds its scale / zero point in ``parameter``."""
    x_shape = core.static_shape(x)
    rank = len(x_shape)
    shape = core.static_shape(parameter)
    block_size = int(ctx.attr("block_size", 0))
    dims = [ir.AffineDimExpr.get(d) for d in range(rank)]
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1 and block_size == 0):
        return ir.AffineMap.get(rank, 0, [ir.AffineConstantExpr.get(0)] * len(shape))
    axis = _axis(ctx, rank)
    if block_size == 0:
        if len(shape) != 1 or shape[0] not in (x_shape[axis], None) or x_shape[axis] is None and shape[0] is None:
            raise HandlerError(
                f"{name} of shape {shape} fits neither per-tensor nor per-axis quantization of an "
                f"input of shape {x_shape} along axis {axis}"
            )
        return ir.AffineMap.get(rank, 0, [dims[axis]])
    if block_size < 0:
        raise HandlerError(f"block_size must be positive, got {block_size}")
    expected = list(x_shape)
    if expected[axis] is not None:
        expected[axis] = -(-expected[axis] // block_size)
    if len(shape) != rank or any(a is not None and b is not None and a != b for a, b in zip(shape, expected)):
        raise HandlerError(
            f"blocked {name} must have shape {expected} (block_size {block_size} along axis {axis}), got {shape}"
        )
    exprs = list(dims)
    exprs[axis] = ir.AffineExpr.get_floor_div(dims[axis], block_size)
    return ir.AffineMap.get(rank, 0, exprs)


def _map_with_parameters(
    ctx: NodeContext, x: ir.Value, parameters: list[tuple[str, ir.Value]], result: ir.Type, body
) -> ir.Value:
    """One ``linalg.generic`` over ``x`` reading each parameter through its layout's map."""
    rank = core.tensor_type(x).rank
    maps = [ir.AffineMap.get_identity(rank)]
    maps += [_parameter_map(ctx, name, value, x) for name, value in parameters]
    maps.append(ir.AffineMap.get_identity(rank))
    init = core.empty(core.sizes(x), result)
    inputs = [x, *(value for _, value in parameters)]
    return contraction.generic_op(inputs, init, maps, rank, 0, lambda *args: body(*args[:-1]))


def _to_float(scalar: ir.Value, to: ir.Type, *, unsigned: bool) -> ir.Value:
    return core.convert_scalar(scalar, to, unsigned=unsigned)


def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)


def _saturate_to_integer(value: ir.Value, dtype: np.dtype) -> ir.Value:
    """A float already rounded to an integer value, clamped to ``dtype``'s range and converted.

    ``maxnumf``/``minnumf`` against the constant bounds, as DynamicQuantizeLinear's clamp: each
    is one ``vmaxps``/``vminps`` on x86, where ``maximumf``/``minimumf`` take six, and an int8
    kernel's requantizing epilogue clamps once or twice per 16 outputs (docs/performance.md).
    The integer is the same for every number (a ``-0.0`` the bound may keep converts to 0);
    a NaN becomes the low bound instead of going through an undefined conversion."""
    low, high = _integer_range(dtype)
    clamped = arith.minnumf(arith.maxnumf(value, ew.like(float(low), value)), ew.like(float(high), value))
    return ew.cast_dtypes(clamped, _numpy_of(clamped.type), dtype, core.element_type(dtype), saturate=True)


def _numpy_of(element: ir.Type) -> np.dtype:
    return {"f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
            "bf16": np.dtype(ml_dtypes.bfloat16)}[str(element)]


def _is_float_like(dtype: np.dtype) -> bool:
    """float8 and float4 quantized types (ml_dtypes' kind is ``V``, float8_e5m2's ``f``)."""
    return dtype.name.startswith(("float8", "float4"))


def _to_compute(scalar: ir.Value, dtype: np.dtype, compute: ir.Type) -> ir.Value:
    """A quantized value or zero point of numpy type ``dtype`` as a ``compute`` float."""
    return ew.cast_dtypes(scalar, dtype, _numpy_of(compute), compute, saturate=True)


def _quantized_dtype(ctx: NodeContext, zero_index: int, default: np.dtype) -> np.dtype:
    """The integer type of the quantized output: declared, else the zero point's, else
    ``default`` (uint8 for QuantizeLinear, the input's type for QLinearMatMul)."""
    info = ctx.output_infos[0] if ctx.output_infos else None
    output_dtype = int(ctx.attr("output_dtype", 0))
    if output_dtype and output_dtype not in ONNX_DTYPES:
        # FLOAT8E8M0 and the like: shape inference leaves no info for such outputs, so
        # without this check the default type would be used — a wrong answer.
        name = onnx.TensorProto.DataType.Name(output_dtype) if output_dtype in onnx.TensorProto.DataType.values() else str(output_dtype)
        raise HandlerError(f"{ctx.op_type} to {name} is not supported (integer types of 8 bits and more only)")
    if output_dtype:
        dtype = ONNX_DTYPES[output_dtype]
    elif info is not None:
        dtype = np.dtype(info.dtype)
    elif ctx.has_input(zero_index) and ctx.const(zero_index) is not None:
        dtype = ctx.const(zero_index).dtype
    elif ctx.has_input(zero_index) and ctx.input_infos[zero_index] is not None:
        dtype = np.dtype(ctx.input_infos[zero_index].dtype)
    else:
        dtype = np.dtype(default)
    if dtype.kind not in "iu" and not small_types.is_sub_byte(dtype) and not _is_float_like(dtype):
        raise HandlerError(f"{ctx.op_type} to {dtype} is not supported (integer, float8 and float4 types only)")
    return dtype


def _compute_type(element: ir.Type) -> ir.Type:
    """f16/bf16 arithmetic happens in f32 (as contraction.accumulator_type does for sums)."""
    return element if element.width >= 32 else _F32()


@onnx_op("QuantizeLinear", since=10)
def quantize_linear(ctx: NodeContext) -> list[Output]:
    """``y = saturate(rint(x / scale) + zero_point)``, halves to even like ``numpy.rint``.

    float8/float4 outputs: ``x / scale + zero_point`` rounded to the type (``saturate``
    attribute, default 1, as Cast)."""
    x, scale = ctx.value(0), ctx.value(1)
    x_element = core.tensor_type(x).element_type
    if not core.is_float(x_element):
        raise HandlerError(f"QuantizeLinear needs a float input, got {x_element}")
    dtype = _quantized_dtype(ctx, 2, np.dtype(np.uint8))
    compute = _compute_type(x_element)
    parameters = [("y_scale", scale)]
    # The zero point has the output's type (ONNX requires it); its own value info may be
    # missing inside an expanded function body, so its type comes from ``dtype``.
    if ctx.has_input(2):
        parameters.append(("y_zero_point", ctx.value(2)))
    to_float = _is_float_like(dtype)
    saturate = bool(ctx.attr("saturate", 1))

    def body(x_scalar: ir.Value, scale_scalar: ir.Value, *zero: ir.Value) -> ir.Value:
        quotient = arith.divf(_to_float(x_scalar, compute, unsigned=False), _to_float(scale_scalar, compute, unsigned=False))
        rounded = quotient if to_float else math.roundeven(quotient)
        if zero:
            rounded = arith.addf(rounded, _to_compute(zero[0], dtype, compute))
        if to_float:
            return ew.cast_dtypes(rounded, _numpy_of(compute), dtype, core.element_type(dtype), saturate=saturate)
        return _saturate_to_integer(rounded, dtype)

    return [_map_with_parameters(ctx, x, parameters, core.element_type(dtype), body)]


# Lanes of the partial minimum and maximum (_range_with_zero): four 512-bit vectors of f32
# (eight 256-bit ones on AVX2), independent accumulators the vector stage keeps in registers;
# the fastest of 16-128 with AVX-512 and within 3 % of it for AVX2 (docs/performance.md).
_RANGE_LANES = 64


def _min_max(x: ir.Value, reduced: list[int], *, high_of: ir.Value | None = None) -> tuple[ir.Value, ir.Value]:
    """``(min, max)`` of ``x`` over the dims ``reduced``, both started at 0, in one
    ``linalg.generic`` with two outputs; with ``high_of`` (shaped as ``x``) the maximum is
    that of ``high_of``. ``minimumf``/``maximumf`` propagate NaN, as numpy's ``min`` and
    ``max`` (ONNX's reference) do."""
    shape = core.static_shape(x)
    rank = len(shape)
    kept = [d for d in range(rank) if d not in reduced]
    # Loops: kept dims (parallel) first, then the reduced ones, as generic_op orders them.
    order = kept + reduced
    in_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(order.index(d)) for d in range(rank)])
    out_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(len(kept))])
    zero = core.filled([shape[d] for d in kept], 0.0, core.tensor_type(x).element_type)
    inputs = [x] if high_of is None else [x, high_of]

    def body(*scalars: ir.Value) -> tuple[ir.Value, ir.Value]:
        low_in, high_in, low, high = scalars if high_of is not None else (scalars[0], *scalars)
        return arith.minimumf(low, low_in), arith.maximumf(high, high_in)

    low, high = contraction.generic_op(inputs, [zero, zero], [in_map] * len(inputs) + [out_map] * 2,
                                       len(kept), len(reduced), body)
    return low, high


def _range_with_zero(x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(min(0, min(x)), max(0, max(x)))`` as 0-d tensors, reading ``x`` once.

    Why two steps when the size allows: a reduction of every dim to one scalar is vectorized
    as a horizontal reduction per vector, a chain through one scalar. Viewing ``x`` as
    ``[n / 64, 64]`` and reducing the rows into 64 lanes first keeps the minimum and maximum
    in vector registers (vertical ``min``/``max`` per load); the 64 lanes are reduced after.
    Min and max are exact, so the order changes nothing in the result."""
    shape = core.static_shape(x)
    rank = len(shape)
    size = int(np.prod(shape)) if None not in shape else None
    if size is None or size < 2 * _RANGE_LANES or size % _RANGE_LANES:
        return _min_max(x, list(range(rank)))
    flat = contraction.collapse(x, [list(range(rank))]) if rank != 1 else x
    rows = contraction.expand(flat, [[0, 1]], [size // _RANGE_LANES, _RANGE_LANES])
    lanes_low, lanes_high = _min_max(rows, [0])
    return _min_max(lanes_low, [0], high_of=lanes_high)


# DynamicQuantizeLinear's target: uint8 (the only type ONNX defines for it), range [0, 255].
_DYNAMIC_QMIN, _DYNAMIC_QMAX = 0.0, 255.0


@onnx_op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: NodeContext) -> list[Output]:
    """``(y, y_scale, y_zero_point)``: ``x`` quantized to uint8 with a scale and zero point
    from its own range, as ONNX's reference implementation computes them.

    Why a handler and not the op's ONNX function body: the body reads ``x`` three times
    (ReduceMin, ReduceMax, QuantizeLinear) and computes the parameters in a dozen 0-d
    kernels; here it is two passes over ``x``, which is what a dynamically quantized
    transformer pays before each of its matmuls:

    1. one ``linalg.generic`` with two reduction outputs, the minimum and the maximum, both
       starting at 0 (so the range includes zero, as the definition adjusts it);
    2. a 0-d ``linalg.generic`` for ``y_scale = (max - min) / 255`` (``1 / 255`` when
       ``max == min``, i.e. ``x`` is all zeros) and ``y_zero_point = rint(clamp(-min /
       y_scale, 0, 255))``;
    3. the elementwise ``y = saturate(rint(x / y_scale) + y_zero_point)``.

    Non-finite inputs give the reference's result, not garbage: a NaN makes ``y_scale``
    NaN, ``y_zero_point`` 255 (the clamp keeps its bound when the value is NaN, as the
    reference's ``max(qmin, min(qmax, z))`` does) and ``y`` 0; an infinity makes
    ``y_scale`` infinite. Rounding is half to even throughout, in f32 like the reference.
    """
    x = ctx.value(0)
    x_element = core.tensor_type(x).element_type
    if x_element != _F32():
        raise HandlerError(f"DynamicQuantizeLinear needs a float32 input, got {x_element}")
    dtype = np.dtype(np.uint8)
    u8 = core.element_type(dtype)
    low, high = _range_with_zero(x)

    def parameters(low: ir.Value, high: ir.Value, _scale: ir.Value, _zero: ir.Value) -> list[ir.Value]:
        levels = ew.like(_DYNAMIC_QMAX - _DYNAMIC_QMIN, low)
        empty_range = arith.cmpf(arith.CmpFPredicate.OEQ, high, low)
        scale = arith.divf(arith.select(empty_range, ew.like(1.0, low), arith.subf(high, low)), levels)
        initial = arith.subf(ew.like(_DYNAMIC_QMIN, low), arith.divf(low, scale))
        # minnumf/maxnumf return the bound for a NaN zero point, as the reference does.
        clamped = arith.maxnumf(arith.minnumf(initial, ew.like(_DYNAMIC_QMAX, low)), ew.like(_DYNAMIC_QMIN, low))
        return [scale, _saturate_to_integer(math.roundeven(clamped), dtype)]

    scalar = ir.AffineMap.get(0, 0, [])
    scale, zero_point = contraction.generic_op(
        [low, high], [core.empty([], x_element), core.empty([], u8)], [scalar] * 4, 0, 0, parameters)

    def quantized(value: ir.Value, scale: ir.Value, zero: ir.Value) -> ir.Value:
        rounded = arith.addf(math.roundeven(arith.divf(value, scale)), _to_compute(zero, dtype, x_element))
        # maxnumf/minnumf: a NaN becomes 0 here, not an undefined conversion; against a
        # constant bound each is one vmaxps/vminps on x86 (maximumf/minimumf take six).
        clamped = arith.minnumf(arith.maxnumf(rounded, ew.like(_DYNAMIC_QMIN, rounded)),
                                ew.like(_DYNAMIC_QMAX, rounded))
        return arith.trunci(u8, arith.fptosi(ir.IntegerType.get_signless(32), clamped))

    y = core.elementwise([x, scale, zero_point], u8, quantized)
    return [y, scale, zero_point]


@onnx_op("DequantizeLinear", since=10)
def dequantize_linear(ctx: NodeContext) -> list[Output]:
    """``y = (x - zero_point) * scale`` in f32, then the scale's (or ``output_dtype``'s) type."""
    x, scale = ctx.value(0), ctx.value(1)
    x_element = core.tensor_type(x).element_type
    x_dtype = ctx.dtype(0)
    if (not isinstance(x_element, ir.IntegerType) or x_element.width == 1) and not _is_float_like(x_dtype):
        raise HandlerError(f"DequantizeLinear needs an integer, float8 or float4 input, got {x_dtype}")
    info = ctx.output_infos[0] if ctx.output_infos else None
    result = core.element_type(info.dtype) if info is not None else core.tensor_type(scale).element_type
    if not core.is_float(result):
        raise HandlerError(f"DequantizeLinear to {result} is not supported")
    compute = _F32() if result.width <= 32 else result
    parameters = [("x_scale", scale)]  # the zero point has x's type
    if ctx.has_input(2):
        parameters.append(("x_zero_point", ctx.value(2)))

    def body(x_scalar: ir.Value, scale_scalar: ir.Value, *zero: ir.Value) -> ir.Value:
        value = _to_compute(x_scalar, x_dtype, compute)
        if zero:
            value = arith.subf(value, _to_compute(zero[0], x_dtype, compute))
        product = arith.mulf(value, _to_float(scale_scalar, compute, unsigned=False))
        return core.convert_scalar(product, result)

    return [_map_with_parameters(ctx, x, parameters, result, body)]


def per_tensor(ctx: NodeContext, index: int, what: str) -> ir.Value:
    """Input ``index`` as a 0-d tensor; QLinearMatMul and MatMulInteger accept one value
    (rank 0 or shape [1]) for the whole tensor here."""
    value = ctx.value(index)
    shape = core.static_shape(value)
    if shape == []:
        return value
    if shape == [1]:
        return contraction.collapse(value, [])
    raise HandlerError(f"{what} must hold one value for the whole tensor (shape [] or [1]), got {shape}")


def centered_i32(
    ctx: NodeContext, index: int, zero_index: int, what: str, *, per_row: bool = False
) -> ir.Value:
    """Input ``index`` widened to i32 with its zero point, if any, subtracted: the operand
    of MatMulInteger, QLinearMatMul and ConvInteger (nn.py). The zero point holds one value,
    or with ``per_row`` one per slice of dim 0 (ConvInteger's per-output-channel weights)."""
    i32 = ir.IntegerType.get_signless(32)
    value = ctx.value(index)
    unsigned = ctx.is_unsigned(index)
    inputs = [value]
    if ctx.has_input(zero_index):  # of the operand's type
        zero = ctx.value(zero_index)
        shape = core.static_shape(zero)
        rank = core.tensor_type(value).rank
        if per_row and len(shape) == 1 and shape[0] not in (1, None) and rank > 1:
            if shape[0] != core.static_shape(value)[0]:
                raise HandlerError(f"{what} zero point has {shape[0]} values for {core.static_shape(value)[0]} rows")
            inputs.append(contraction.expand(zero, [list(range(rank))], [shape[0]] + [1] * (rank - 1)))
        else:
            inputs.append(per_tensor(ctx, zero_index, f"{what} zero point"))

    def body(scalar: ir.Value, *zero: ir.Value) -> ir.Value:
        wide = core.convert_scalar(scalar, i32, unsigned=unsigned)
        if zero:
            wide = arith.subi(wide, core.convert_scalar(zero[0], i32, unsigned=unsigned))
        return wide

    return core.elementwise(inputs, i32, body)


_EIGHT_BIT = (np.dtype(np.int8), np.dtype(np.uint8))


def absent_or_zero(ctx: NodeContext, index: int) -> bool:
    """Whether input ``index`` (a zero point) is absent or known at import to be all zeros."""
    if not ctx.has_input(index):
        return True
    zero = ctx.const(index)
    return zero is not None and not np.any(zero)


def integer_product(ctx: NodeContext, a_index: int, a_zero_index: int, b_index: int, b_zero_index: int
                    ) -> ir.Value:
    """``(a - a_zero_point) @ (b - b_zero_point)`` in i32: MatMulInteger's result and
    QLinearMatMul's accumulator.

    With 8-bit operands, a 2-D ``b`` and no ``b`` zero point (the usual quantized weight:
    symmetric, often a constant), the product is formed from the raw operands
    (``contraction.integer_matmul``) and ``a``'s zero point is taken off afterwards as
    ``a_zero_point * column_sums(b)``, which is exact in integers and folds to a constant
    vector when ``b`` is one. That keeps the 8-bit operands for the u8 x s8 dot-product
    kernels (pipelines/graph/int8_matmul.py). Otherwise both operands are centered and
    widened first."""
    a_rank, b_rank = (core.tensor_type(ctx.value(i)).rank for i in (a_index, b_index))
    if (ctx.dtype(a_index) in _EIGHT_BIT and ctx.dtype(b_index) in _EIGHT_BIT and a_rank >= 2
            and b_rank == 2 and absent_or_zero(ctx, b_zero_index)):
        i32 = ir.IntegerType.get_signless(32)
        b = ctx.value(b_index)
        b_unsigned = ctx.is_unsigned(b_index)
        product = contraction.integer_matmul(ctx.value(a_index), b, a_unsigned=ctx.is_unsigned(a_index),
                                             b_unsigned=b_unsigned)
        if absent_or_zero(ctx, a_zero_index):
            return product
        zero = per_tensor(ctx, a_zero_index, "a zero point")
        zero_unsigned = ctx.is_unsigned(a_zero_index)
        k_dim, n_dim = (ir.AffineDimExpr.get(i) for i in (1, 0))  # loops (n | k)
        column_sums = contraction.generic_op(
            [b], core.filled([core.sizes(b)[1]], 0, i32),
            [ir.AffineMap.get(2, 0, [k_dim, n_dim]), ir.AffineMap.get(2, 0, [n_dim])], 1, 1,
            lambda w, acc: arith.addi(acc, core.convert_scalar(w, i32, unsigned=b_unsigned)))
        return core.elementwise(
            [product, column_sums, zero], i32,
            lambda p, s, z: arith.subi(p, arith.muli(core.convert_scalar(z, i32, unsigned=zero_unsigned), s)))
    a = centered_i32(ctx, a_index, a_zero_index, "a")
    b = centered_i32(ctx, b_index, b_zero_index, "b")
    return contraction.matmul(a, b)


@onnx_op("MatMulInteger", since=10)
def matmul_integer(ctx: NodeContext) -> list[Output]:
    """``(a - a_zero_point) @ (b - b_zero_point)`` accumulated in i32."""
    return [integer_product(ctx, 0, 2, 1, 3)]


@onnx_op("QLinearMatMul", since=10)
def qlinear_matmul(ctx: NodeContext) -> list[Output]:
    """Integer product of the centered operands, requantized with
    ``a_scale * b_scale / y_scale`` (formed in the scales' type, applied in f64 as the ONNX
    reference does) and saturated to the output's integer type."""
    product = integer_product(ctx, 0, 2, 3, 5)
    scales = [per_tensor(ctx, i, name) for i, name in ((1, "a_scale"), (4, "b_scale"), (6, "y_scale"))]
    return [requantize(ctx, product, scales, zero_index=7, input_index=0)]


def per_output_channel_scale(ctx: NodeContext, index: int, what: str, channels: int, rank: int) -> ir.Value:
    """Input ``index`` as a scale broadcasting over a ``rank``-d ``[N, C, ...]`` result: one
    value (0-d), or one per output channel (``[C]``, expanded to ``[C, 1, ...]``)."""
    shape = core.static_shape(ctx.value(index))
    if len(shape) == 1 and shape[0] not in (1, None):
        if shape[0] != channels:
            raise HandlerError(f"{what} has {shape[0]} values for {channels} output channels")
        return contraction.expand(ctx.value(index), [list(range(rank - 1))], [channels] + [1] * (rank - 2))
    return per_tensor(ctx, index, what)


def requantize(ctx: NodeContext, accumulator: ir.Value, scales: list[ir.Value], *, zero_index: int,
               input_index: int) -> ir.Value:
    """An i32 ``accumulator`` times ``scales[0] * scales[1] / scales[2]`` (input scale, weight
    scale, output scale: formed in the scales' type, applied in f64 as the ONNX reference
    does), plus the output zero point (input ``zero_index``), rounded half to even and
    saturated to the output's integer type (the zero point's, else input
    ``input_index``'s). QLinearMatMul and QLinearConv (nn.py) end this way."""
    info = ctx.input_infos[input_index]
    dtype = _quantized_dtype(ctx, zero_index, info.dtype if info is not None else np.dtype(np.uint8))
    zero = [per_tensor(ctx, zero_index, "y_zero_point")] if ctx.has_input(zero_index) else []
    zero_unsigned = core.is_unsigned_dtype(dtype)

    def body(c: ir.Value, x_scale: ir.Value, w_scale: ir.Value, y_scale: ir.Value, *zp: ir.Value) -> ir.Value:
        multiplier = arith.divf(arith.mulf(x_scale, w_scale), y_scale)
        value = arith.mulf(core.convert_scalar(c, _F64()), core.convert_scalar(multiplier, _F64()))
        if zp:
            value = arith.addf(value, core.convert_scalar(zp[0], _F64(), unsigned=zero_unsigned))
        return _saturate_to_integer(math.roundeven(value), dtype)

    return core.elementwise([accumulator, *scales, *zero], core.element_type(dtype), body)
