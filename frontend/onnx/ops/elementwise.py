"""Elementwise ONNX operators (numpy broadcasting), emitted as one ``linalg.generic`` each.

The scalar semantics (signedness, integer division, casts, activation formulas) live in
``ir/elementwise.py`` so the PyTorch frontend shares them; this module only reads
ONNX attributes and inputs and picks the scalar body. ONNX types say which integers are
unsigned (MLIR integers are signless), so handlers pass ``ctx.is_unsigned`` along.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import arith, math
from onnx.reference.ops.op_cast import cast_to as onnx_cast_to

from ....ir import core, reshapes, small_types
from ....ir import elementwise as ew
from ..model import ONNX_DTYPES
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op

ScalarFn = Callable[..., ir.Value]
Handler = Callable[[NodeContext], list]


# --- shared shapes of handlers ------------------------------------------------------------

def _element(value: ir.Value) -> ir.Type:
    return core.tensor_type(value).element_type


def _require_float(ctx: NodeContext, index: int = 0) -> ir.Value:
    """Input ``index``, checked to be a float tensor (ONNX type constraints say so; a
    model that breaks them gets a clear error instead of IR that does not verify)."""
    value = ctx.value(index)
    if not core.is_float(_element(value)):
        raise HandlerError(f"{ctx.op_type} needs a float input, got {_element(value)}")
    return value


def _map(inputs: list[ir.Value], result: ir.Type, body: ScalarFn) -> list[ir.Value]:
    return [core.elementwise(inputs, result, body)]


def _same_type(ctx: NodeContext, body: ScalarFn) -> list[ir.Value]:
    """All present inputs broadcast together; the result has input 0's element type."""
    inputs = ctx.values()
    return _map(inputs, _element(inputs[0]), body)


def _register(op_type: str, since: int, handler: Handler) -> None:
    onnx_op(op_type, since=since)(handler)


# --- float functions of one tensor --------------------------------------------------------

def _float_unary(fn: ScalarFn) -> Handler:
    def handler(ctx: NodeContext) -> list[ir.Value]:
        x = _require_float(ctx)
        return _map([x], _element(x), fn)

    return handler


# ONNX op -> (first opset, scalar function). math ops where the CPU pipeline lowers them;
# formulas from ir/elementwise.py where it does not (erf, asinh, acosh, atanh).
_FLOAT_UNARY: dict[str, tuple[int, ScalarFn]] = {
    "Sqrt": (1, math.sqrt),
    "Exp": (1, math.exp),
    "Log": (1, math.log),
    "Ceil": (1, math.ceil),
    "Floor": (1, math.floor),
    "Round": (11, math.roundeven),  # halves to even, like numpy
    "Reciprocal": (1, ew.reciprocal),
    "Sin": (7, math.sin),
    "Cos": (7, math.cos),
    "Tan": (7, math.tan),
    "Asin": (7, math.asin),
    "Acos": (7, math.acos),
    "Atan": (7, math.atan),
    "Sinh": (9, math.sinh),
    "Cosh": (9, math.cosh),
    "Tanh": (1, math.tanh),
    "Asinh": (9, ew.asinh),
    "Acosh": (9, ew.acosh),
    "Atanh": (9, ew.atanh),
    "Erf": (9, ew.erf),
    "Sigmoid": (1, ew.sigmoid),
    "Softplus": (1, ew.softplus),
    "Softsign": (1, ew.softsign),
    "Mish": (18, ew.mish),
    "HardSwish": (14, ew.hard_swish),
}
for _op_type, (_since, _fn) in _FLOAT_UNARY.items():
    _register(_op_type, _since, _float_unary(_fn))


# --- float activations with attributes ----------------------------------------------------

def _activation(fn: ScalarFn, **defaults: float) -> Handler:
    """A float activation whose float attributes (with ONNX's defaults) are passed to
    ``fn`` as keyword arguments."""

    def handler(ctx: NodeContext) -> list[ir.Value]:
        x = _require_float(ctx)
        params = {name: float(ctx.attr(name, default)) for name, default in defaults.items()}
        return _map([x], _element(x), lambda v: fn(v, **params))

    return handler


_ACTIVATIONS: dict[str, tuple[int, Handler]] = {
    "LeakyRelu": (6, _activation(ew.leaky_relu, alpha=0.01)),
    "Elu": (6, _activation(ew.elu, alpha=1.0)),
    "Selu": (6, _activation(ew.selu, alpha=1.67326319217681884765625,
                            gamma=1.05070102214813232421875)),
    "Celu": (12, _activation(ew.celu, alpha=1.0)),
    "HardSigmoid": (6, _activation(ew.hard_sigmoid, alpha=0.2, beta=0.5)),
    "ThresholdedRelu": (10, _activation(ew.thresholded_relu, alpha=1.0)),
}
for _op_type, (_since, _handler) in _ACTIVATIONS.items():
    _register(_op_type, _since, _handler)


@onnx_op("Gelu", since=20)
def gelu(ctx: NodeContext) -> list[ir.Value]:
    x = _require_float(ctx)
    approximate = ctx.attr("approximate", "none")
    if approximate not in ew.GELU_APPROXIMATIONS:
        raise HandlerError(f"approximate={approximate!r} is not supported (only 'none', 'tanh')")
    return _map([x], _element(x), lambda v: ew.gelu(v, approximate))


@onnx_op("Relu", since=1)
def relu(ctx: NodeContext) -> list[ir.Value]:
    if ctx.is_unsigned(0):
        return [ctx.value(0)]
    return _same_type(ctx, ew.relu)


@onnx_op("PRelu", since=7)
def prelu(ctx: NodeContext) -> list[ir.Value]:
    """``slope`` broadcasts to ``X`` (unidirectional; plain numpy broadcasting covers it).

    One exception: a 1-D slope holding one value per channel (``X``'s dim 1) that does not
    broadcast against ``X``'s last dim is taken along the channel axis. PyTorch's exporter
    wrote ``nn.PReLU(num_parameters=C)`` that way for opsets 6-7 (ONNX's pytorch-converted
    PReLU_*_multiparam cases expect per-channel results); numpy broadcasting would refuse it.
    """
    unsigned = ctx.is_unsigned(0)
    x, slope = ctx.value(0), ctx.value(1)
    x_shape, slope_shape = core.static_shape(x), core.static_shape(slope)
    if (len(slope_shape) == 1 and len(x_shape) >= 3 and slope_shape[0] not in (None, 1)
            and x_shape[1] == slope_shape[0] and x_shape[-1] not in (None, 1, slope_shape[0])):
        slope = reshapes.reshape(slope, [slope_shape[0]] + [1] * (len(x_shape) - 2))
    return _map([x, slope], _element(x), lambda a, b: ew.prelu(a, b, unsigned=unsigned))


# --- numeric functions of one tensor (float or integer) -----------------------------------

@onnx_op("Abs", since=6)
def abs_(ctx: NodeContext) -> list[ir.Value]:
    unsigned = ctx.is_unsigned(0)
    return _same_type(ctx, lambda x: ew.absolute(x, unsigned=unsigned))


@onnx_op("Neg", since=6)
def neg(ctx: NodeContext) -> list[ir.Value]:
    return _same_type(ctx, ew.negate)


@onnx_op("Sign", since=9)
def sign(ctx: NodeContext) -> list[ir.Value]:
    unsigned = ctx.is_unsigned(0)
    return _same_type(ctx, lambda x: ew.sign(x, unsigned=unsigned))


@onnx_op("IsNaN", since=9)
def is_nan(ctx: NodeContext) -> list[ir.Value]:
    return _map([_require_float(ctx)], ir.IntegerType.get_signless(1), ew.is_nan)


@onnx_op("IsInf", since=10)
def is_inf(ctx: NodeContext) -> list[ir.Value]:
    positive = bool(ctx.attr("detect_positive", 1))
    negative = bool(ctx.attr("detect_negative", 1))
    return _map(
        [_require_float(ctx)], ir.IntegerType.get_signless(1),
        lambda x: ew.is_inf(x, positive=positive, negative=negative),
    )


# --- binary arithmetic --------------------------------------------------------------------

def _check_same_types(ctx: NodeContext) -> None:
    types = {str(ctx.element_type(i)) for i in range(len(ctx.inputs)) if ctx.has_input(i)}
    if len(types) > 1:
        raise HandlerError(f"{ctx.op_type} needs inputs of one element type, got {sorted(types)}")


def _uniform(fn: ScalarFn, *, signed_aware: bool = False) -> Handler:
    """An op whose inputs and result share one element type (arithmetic, logic, bitwise);
    ``signed_aware`` scalar functions also get ``unsigned=`` from input 0's ONNX type."""

    def handler(ctx: NodeContext) -> list[ir.Value]:
        _check_same_types(ctx)
        if signed_aware:
            body = functools.partial(fn, unsigned=ctx.is_unsigned(0))
        else:
            body = fn
        return _same_type(ctx, body)

    return handler


_register("Add", 7, _uniform(ew.add))
_register("Sub", 7, _uniform(ew.subtract))
_register("Mul", 7, _uniform(ew.multiply))
_register("Div", 7, _uniform(ew.divide, signed_aware=True))


@onnx_op("Mod", since=10)
def mod(ctx: NodeContext) -> list[ir.Value]:
    """``fmod=1``: C fmod (sign of the dividend); ``fmod=0``: Python's ``%`` (sign of the
    divisor). ONNX requires ``fmod=1`` for floats; ``fmod=0`` on floats follows numpy's
    ``mod`` as the reference does."""
    _check_same_types(ctx)
    fmod = int(ctx.attr("fmod", 0))
    if fmod not in (0, 1):
        raise HandlerError(f"fmod={fmod} is not 0 or 1")
    unsigned = ctx.is_unsigned(0)
    return _same_type(ctx, lambda a, b: ew.remainder(a, b, floored=not fmod, unsigned=unsigned))


@onnx_op("Pow", since=7)
def pow_(ctx: NodeContext) -> list[ir.Value]:
    """The result has the base's type; base and exponent may differ (opset 12+). A float
    base raised to a constant 1, 2, 3 or 4 is multiplied out (``ew.float_power_by_multiplication``
    says why): the tanh form of GELU is ``Pow(x, 3)``."""
    base = ctx.value(0)
    exponent_value = ctx.const(1)
    small = None if exponent_value is None else ew.small_integer_exponent(exponent_value)
    if (small is not None and core.is_float(_element(base))
            and exponent_value.ndim <= core.tensor_type(base).rank):  # no broadcast by the exponent
        return _map([base], _element(base), lambda b: ew.float_power_by_multiplication(b, small))
    exponent = ctx.value(1)
    base_unsigned, exponent_unsigned = ctx.is_unsigned(0), ctx.is_unsigned(1)
    return _map(
        [base, exponent], _element(base),
        lambda b, e: ew.power(b, e, base_unsigned=base_unsigned, exponent_unsigned=exponent_unsigned),
    )


# --- variadic ------------------------------------------------------------------------------

def _variadic(combine: ScalarFn, *, signed_aware: bool = False) -> Handler:
    """Max/Min/Sum: fold ``combine`` over any number of broadcast inputs in one body."""

    def handler(ctx: NodeContext) -> list[ir.Value]:
        _check_same_types(ctx)
        if not ctx.values():
            raise HandlerError(f"{ctx.op_type} needs at least one input")
        step = functools.partial(combine, unsigned=ctx.is_unsigned(0)) if signed_aware else combine
        return _same_type(ctx, lambda *xs: functools.reduce(step, xs))

    return handler


_register("Max", 6, _variadic(ew.maximum, signed_aware=True))
_register("Min", 6, _variadic(ew.minimum, signed_aware=True))
_register("Sum", 6, _variadic(ew.add))


@onnx_op("Mean", since=6)
def mean(ctx: NodeContext) -> list[ir.Value]:
    _check_same_types(ctx)
    inputs = ctx.values()
    if not inputs or not core.is_float(_element(inputs[0])):
        raise HandlerError("Mean needs one or more float inputs")

    def body(*xs: ir.Value) -> ir.Value:
        return arith.divf(functools.reduce(ew.add, xs), ew.like(len(xs), xs[0]))

    return _map(inputs, _element(inputs[0]), body)


# --- comparisons and logic ------------------------------------------------------------------

def _comparison(predicate: str) -> Handler:
    def handler(ctx: NodeContext) -> list[ir.Value]:
        _check_same_types(ctx)
        unsigned = ctx.is_unsigned(0)
        return _map(
            ctx.values(), ir.IntegerType.get_signless(1),
            lambda a, b: ew.compare(predicate, a, b, unsigned=unsigned),
        )

    return handler


_register("Equal", 7, _comparison("eq"))
_register("Greater", 7, _comparison("gt"))
_register("Less", 7, _comparison("lt"))
_register("GreaterOrEqual", 12, _comparison("ge"))
_register("LessOrEqual", 12, _comparison("le"))

# Boolean and bitwise ops are the same arith ops on i1 and on wider integers.
for _op_type, _since, _fn in (
    ("And", 7, arith.andi), ("Or", 7, arith.ori), ("Xor", 7, arith.xori),
    ("BitwiseAnd", 18, arith.andi), ("BitwiseOr", 18, arith.ori), ("BitwiseXor", 18, arith.xori),
):
    _register(_op_type, _since, _uniform(_fn))
_register("Not", 1, _uniform(ew.logical_not))
_register("BitwiseNot", 18, _uniform(ew.logical_not))


@onnx_op("BitShift", since=11)
def bit_shift(ctx: NodeContext) -> list[ir.Value]:
    """ONNX defines BitShift on unsigned integers; signed inputs shift like numpy
    (arithmetic right shift), as the reference implementation does."""
    _check_same_types(ctx)
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise HandlerError(f"direction={direction!r} is not LEFT or RIGHT")
    unsigned = ctx.is_unsigned(0)
    left = direction == "LEFT"
    return _same_type(ctx, lambda a, b: ew.shift(a, b, left=left, unsigned=unsigned))


@onnx_op("Where", since=9)
def where(ctx: NodeContext) -> list[ir.Value]:
    condition, x, y = ctx.value(0), ctx.value(1), ctx.value(2)
    return _map([condition, x, y], _element(x), arith.select)


# --- Clip -------------------------------------------------------------------------------------

Bound = "ir.Value | float | int | None"  # a 0-d tensor, a known value, or no bound


def _clip(ctx: NodeContext, low: Bound, high: Bound) -> list[ir.Value]:
    """Clamp input 0 between ``low`` and ``high``; tensor bounds become body inputs."""
    x = ctx.value(0)
    if low is None and high is None:
        return [x]
    tensors = [b for b in (low, high) if isinstance(b, ir.Value)]
    unsigned = ctx.is_unsigned(0)

    def body(v: ir.Value, *scalars: ir.Value) -> ir.Value:
        given = iter(scalars)
        lo, hi = (
            None if b is None else next(given) if isinstance(b, ir.Value) else ew.like(b, v)
            for b in (low, high)
        )
        return ew.clip(v, lo, hi, unsigned=unsigned)

    return _map([x, *tensors], _element(x), body)


@onnx_op("Clip", since=6, until=10)
def clip_attributes(ctx: NodeContext) -> list[ir.Value]:
    """Opsets 6-10: ``min``/``max`` are float attributes (absent: no bound)."""
    _require_float(ctx)
    low, high = (ctx.attr(name, None) for name in ("min", "max"))
    return _clip(ctx, low, high)


@onnx_op("Clip", since=11)
def clip_inputs(ctx: NodeContext) -> list[ir.Value]:
    """Opset 11+: optional scalar ``min``/``max`` inputs, possibly computed at run time."""
    bounds: list[Bound] = []
    for index in (1, 2):
        known = ctx.const(index)
        if not ctx.has_input(index):
            bounds.append(None)
        elif known is not None:  # an initializer: a constant in the body, no extra operand
            if known.size != 1:
                raise HandlerError(f"Clip bound (input {index}) must be a scalar, got {known.shape}")
            bounds.append(known.item())
        else:
            bound = ctx.value(index)
            if core.tensor_type(bound).rank != 0:
                raise HandlerError(f"Clip bound (input {index}) must be a scalar, got {bound.type}")
            bounds.append(bound)
    return _clip(ctx, *bounds)


# --- types: Cast, CastLike -----------------------------------------------------------------

def _cast_to(ctx: NodeContext, dtype: np.dtype) -> list[Output]:
    """Convert input 0 to ``dtype`` (C-style, see ``emit.elementwise.cast``).

    ``saturate`` (opset 19+, default 1) only concerns float8 targets: out-of-range values
    become the largest finite value instead of Inf/NaN.
    """
    saturate = bool(ctx.attr("saturate", 1))
    if ctx.const(0) is not None:  # a constant input: cast at import time, as ONNX's reference
        return [_cast_constant(ctx.const(0), dtype, saturate)]
    x = ctx.value(0)
    target = core.element_type(dtype)
    source = ctx.dtype(0)
    if source == dtype:
        return [x]
    return _map([x], target, lambda v: ew.cast_dtypes(v, source, dtype, target, saturate=saturate))


def _cast_constant(array: np.ndarray, dtype: np.dtype, saturate: bool) -> np.ndarray:
    code = next(code for code, known in ONNX_DTYPES.items() if known == dtype)
    return np.asarray(onnx_cast_to(array, code, saturate)).astype(dtype, copy=False)


def _onnx_dtype_name(code: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return str(code)


@onnx_op("Cast", since=6)
def cast(ctx: NodeContext) -> list[Output]:
    """Any pair of supported types, float8/float4/int4/int2/bfloat16 included; ``round_mode``
    only concerns FLOAT8E8M0, which is not supported."""
    to = int(ctx.attr("to"))
    if to not in ONNX_DTYPES:
        raise HandlerError(f"Cast to {_onnx_dtype_name(to)} is not supported")
    return _cast_to(ctx, ONNX_DTYPES[to])


@onnx_op("BitCast", since=26)
def bit_cast(ctx: NodeContext) -> list[Output]:
    """Reinterpret the bits as another type of the same width (bool as a byte)."""
    to = int(ctx.attr("to"))
    if to not in ONNX_DTYPES:
        raise HandlerError(f"BitCast to {_onnx_dtype_name(to)} is not supported")
    dtype = ONNX_DTYPES[to]
    source = ctx.dtype(0)
    if source.itemsize != dtype.itemsize or small_types.is_sub_byte(source) or small_types.is_sub_byte(dtype):
        raise HandlerError(f"BitCast from {source} to {dtype}: only types of one width are supported")
    if ctx.const(0) is not None:
        return [ctx.const(0).view(dtype)]
    x = ctx.value(0)
    target = core.element_type(dtype)
    if _element(x) == target:
        return [x]  # signless integers: int8 <-> uint8 and the like change only the dtype

    def body(v: ir.Value) -> ir.Value:
        if isinstance(v.type, ir.IntegerType) and v.type.width == 1:  # a bool is one byte
            return arith.extui(target, v)
        if isinstance(target, ir.IntegerType) and target.width == 1:
            return arith.cmpi(arith.CmpIPredicate.ne, v, ew.like(0, v))
        return arith.bitcast(target, v)

    return _map([x], target, body)


@onnx_op("CastLike", since=15)
def cast_like(ctx: NodeContext) -> list[Output]:
    target = ctx.const(1)
    if target is not None:
        dtype = target.dtype
    elif ctx.input_infos[1] is not None:
        dtype = np.dtype(ctx.input_infos[1].dtype)
    else:
        raise HandlerError("CastLike: the element type of input 1 is unknown")
    if dtype not in ONNX_DTYPES.values():
        raise HandlerError(f"CastLike to {dtype} is not supported")
    return _cast_to(ctx, dtype)


@onnx_op("Shrink", since=9)
def shrink(ctx: NodeContext) -> list[Output]:
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0. (ONNX's function
    body for it depends on the input type and comes out empty here.)"""
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    x = ctx.value(0)
    if not core.is_float(_element(x)):
        raise HandlerError(f"Shrink on {_element(x)} is not supported (float types only)")

    def body(v: ir.Value) -> ir.Value:
        low = arith.cmpf(arith.CmpFPredicate.OLT, v, ew.like(-lambd, v))
        high = arith.cmpf(arith.CmpFPredicate.OGT, v, ew.like(lambd, v))
        shifted_up, shifted_down = arith.addf(v, ew.like(bias, v)), arith.subf(v, ew.like(bias, v))
        return arith.select(low, shifted_up, arith.select(high, shifted_down, ew.like(0.0, v)))

    return _map([x], _element(x), body)


# --- values passed through -------------------------------------------------------------------

@onnx_op("Identity", since=1)
def identity(ctx: NodeContext) -> list[Output]:
    if not ctx.has_input(0):
        raise HandlerError("Identity needs an input")
    return [ctx.inputs[0]]


def _dropout(ctx: NodeContext, training: bool) -> list[Output]:
    """Inference: the output is the input; the optional mask keeps everything (all True;
    opsets 7-9 type the mask like the input, so there it is all ones)."""
    if training:
        raise HandlerError("training_mode=True (random dropout) is not supported")
    x = ctx.value(0)
    outputs: list[Output] = [x]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        mask_type = _element(x) if ctx.opset < 10 else ir.IntegerType.get_signless(1)
        outputs.append(core.filled(core.sizes(x), 1, mask_type))
    return outputs


@onnx_op("Dropout", since=7, until=11)
def dropout_attributes(ctx: NodeContext) -> list[Output]:
    """Opsets 7-11 have no training switch: the node is an identity at inference."""
    return _dropout(ctx, training=False)


@onnx_op("Dropout", since=12)
def dropout_inputs(ctx: NodeContext) -> list[Output]:
    """Opset 12+: ``training_mode`` (input 2) must be known at import time; True with a
    non-zero ratio would need random numbers."""
    if not ctx.has_input(2):
        return _dropout(ctx, training=False)
    ratio = ctx.const(1) if ctx.has_input(1) else np.array(0.5)
    if ratio is not None and float(ratio) == 0.0:
        return _dropout(ctx, training=False)  # nothing dropped, whatever training_mode is at run time
    training = bool(ctx.require_const(2, "training_mode").item())
    if training and ratio is None:
        raise HandlerError("training_mode=True with a ratio unknown at import time is not supported")
    return _dropout(ctx, training=training and float(ratio) != 0.0)


_CONSTANT_ATTRIBUTES: dict[str, np.dtype] = {
    "value_float": np.dtype(np.float32),
    "value_floats": np.dtype(np.float32),
    "value_int": np.dtype(np.int64),
    "value_ints": np.dtype(np.int64),
}


@onnx_op("Constant", since=1)
def constant(ctx: NodeContext) -> list[np.ndarray]:
    """The value as an array known at import time (the importer normally folds the node
    before it gets here)."""
    tensor = ctx.attr("value", None)
    if tensor is not None:
        array = np.asarray(tensor)
        if array.dtype not in ONNX_DTYPES.values():
            raise HandlerError(f"Constant of element type {array.dtype} is not supported")
        return [array]
    for name, dtype in _CONSTANT_ATTRIBUTES.items():
        value = ctx.attr(name, None)
        if value is not None:
            return [np.array(value, dtype)]
    present = [a.name for a in ctx.node.attribute]
    raise HandlerError(f"Constant with attribute(s) {present} is not supported")
