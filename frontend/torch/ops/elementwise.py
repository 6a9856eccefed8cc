"""Elementwise ATen ops: arithmetic, comparisons, activations, casts."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith, math

from ....ir import (
    core,
    elementwise,
    movement,
    special_functions,
)
from ..importer import Handler, OpContext
from . import table
from ....errors import OperandError, OperandTypeError


def _float_unary(fn: Callable[[ir.Value], ir.Value]) -> Handler:
    def handler(ctx: OpContext, x: Any) -> ir.Value:
        dtype = ctx.result_dtype()
        return table.map_(ctx, [x], dtype, fn)
    return handler


_UNARY: dict[str, Callable[[ir.Value], ir.Value]] = {
    "exp.default": math.exp,
    "log.default": math.log,
    "tanh.default": math.tanh,
    "sqrt.default": math.sqrt,
    "rsqrt.default": math.rsqrt,
    "sin.default": math.sin,
    "cos.default": math.cos,
    "floor.default": math.floor,
    "ceil.default": math.ceil,
    "round.default": math.roundeven,  # halves to even, like torch.round
    "erf.default": elementwise.erf,
    "log1p.default": elementwise.log1p,
    "expm1.default": elementwise.expm1,
    "sigmoid.default": elementwise.sigmoid,
    "reciprocal.default": elementwise.reciprocal,
    "silu.default": lambda x: arith.mulf(x, elementwise.sigmoid(x)),
    "hardswish.default": elementwise.hard_swish,
    "hardsigmoid.default": lambda x: elementwise.hard_sigmoid(x, 1 / 6, 0.5),
    "softplus.default": elementwise.softplus,
    "tan.default": math.tan,
    "asin.default": math.asin,
    "acos.default": math.acos,
    "atan.default": math.atan,
    "sinh.default": math.sinh,
    "cosh.default": math.cosh,
    "asinh.default": elementwise.asinh,
    "acosh.default": elementwise.acosh,
    "atanh.default": elementwise.atanh,
    "log2.default": math.log2,
    "log10.default": math.log10,
    "exp2.default": math.exp2,
    "trunc.default": math.trunc,
    "mish.default": elementwise.mish,
    "lgamma.default": special_functions.lgamma,
    "digamma.default": special_functions.digamma,
    "erfinv.default": special_functions.erfinv,
    "i0.default": special_functions.i0,
    "special_i0e.default": special_functions.i0e,
    "special_i1.default": special_functions.i1,
    "special_i1e.default": special_functions.i1e,
    "special_modified_bessel_i0.default": special_functions.i0,
    "special_modified_bessel_i1.default": special_functions.i1,
    "special_modified_bessel_k0.default": special_functions.k0,
    "special_modified_bessel_k1.default": special_functions.k1,
    "special_scaled_modified_bessel_k0.default": special_functions.k0e,
    "special_scaled_modified_bessel_k1.default": special_functions.k1e,
    "special_bessel_j0.default": special_functions.j0,
    "special_bessel_j1.default": special_functions.j1,
    "special_bessel_y0.default": special_functions.y0,
    "special_bessel_y1.default": special_functions.y1,
    "special_spherical_bessel_j0.default": special_functions.spherical_j0,
    "special_erfcx.default": special_functions.erfcx,
    "special_log_ndtr.default": special_functions.log_ndtr,
    "special_ndtri.default": special_functions.ndtri,
    "special_airy_ai.default": special_functions.airy_ai,
}
for _name, _fn in _UNARY.items():
    table.aten(_name)(_float_unary(_fn))


@table.aten("relu.default")
def relu(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return table.map_(ctx, [x], dtype, lambda v: elementwise.maximum(v, elementwise.like(0, v),
                                                               unsigned=table.unsigned(dtype)))


@table.aten("neg.default")
def neg(ctx: OpContext, x: Any) -> ir.Value:
    return table.map_(ctx, [x], ctx.result_dtype(), elementwise.negate)


@table.aten("abs.default")
def abs_(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return table.map_(ctx, [x], dtype, lambda v: elementwise.absolute(v, unsigned=table.unsigned(dtype)))


@table.aten("sign.default")
def sign(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return table.map_(ctx, [x], dtype, lambda v: elementwise.sign(v, unsigned=table.unsigned(dtype)))


@table.aten("gelu.default")
def gelu(ctx: OpContext, x: Any, approximate: str = "none") -> ir.Value:
    return table.map_(ctx, [x], ctx.result_dtype(), lambda v: elementwise.gelu(v, approximate))


@table.aten("leaky_relu.default")
def leaky_relu(ctx: OpContext, x: Any, negative_slope: float = 0.01) -> ir.Value:
    return table.map_(ctx, [x], ctx.result_dtype(), lambda v: elementwise.leaky_relu(v, negative_slope))


@table.aten("elu.default")
def elu(ctx: OpContext, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> ir.Value:
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))`` (selu and celu decompose to it)."""
    if scale == 1.0 and input_scale == 1.0:
        return table.map_(ctx, [x], ctx.result_dtype(), lambda v: elementwise.elu(v, alpha))

    def body(v: ir.Value) -> ir.Value:
        negative = arith.mulf(elementwise.like(alpha, v),
                              elementwise.expm1(arith.mulf(v, elementwise.like(input_scale, v))))
        positive = arith.cmpf(arith.CmpFPredicate.OGT, v, elementwise.like(0, v))
        return arith.mulf(arith.select(positive, v, negative), elementwise.like(scale, v))

    return table.map_(ctx, [x], ctx.result_dtype(), body)


@table.aten("clamp.default", "hardtanh.default", "clamp_min.default", "clamp_max.default")
def clamp(ctx: OpContext, x: Any, low: Any = None, high: Any = None) -> ir.Value:
    name = ctx.node.target._opname
    if name == "clamp_max":
        low, high = None, low
    dtype = ctx.result_dtype()
    if name == "hardtanh":
        low = -1.0 if low is None else low
        high = 1.0 if high is None else high
    unsigned = table.unsigned(dtype)

    def body(v: ir.Value) -> ir.Value:
        if low is not None:
            v = elementwise.maximum(v, elementwise.like(low, v), unsigned=unsigned)
        if high is not None:
            v = elementwise.minimum(v, elementwise.like(high, v), unsigned=unsigned)
        return v

    return table.map_(ctx, [x], dtype, body)


@table.aten("logical_not.default")
def logical_not(ctx: OpContext, x: Any) -> ir.Value:
    return table.map_(ctx, [x], np.dtype(np.bool_), elementwise.logical_not)


@table.aten("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "rsub.Tensor")
def add_sub(ctx: OpContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    name = ctx.node.target._opname
    dtype = ctx.result_dtype()
    if name == "rsub":
        a, b = b, a
    subtract = name in ("sub", "rsub")

    def body(x: ir.Value, y: ir.Value) -> ir.Value:
        if alpha != 1:
            y = elementwise.multiply(y, elementwise.like(alpha, y))
        return elementwise.subtract(x, y) if subtract else elementwise.add(x, y)

    return table.map_(ctx, [a, b], dtype, body)


@table.aten("mul.Tensor", "mul.Scalar")
def mul(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype == np.bool_:
        return table.map_(ctx, [a, b], dtype, arith.andi)
    return table.map_(ctx, [a, b], dtype, elementwise.multiply)


@table.aten("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode")
def div(ctx: OpContext, a: Any, b: Any, *, rounding_mode: str | None = None) -> ir.Value:
    dtype = ctx.result_dtype()
    unsigned = table.unsigned(dtype)
    if rounding_mode is None or dtype.kind == "f":
        def body(x: ir.Value, y: ir.Value) -> ir.Value:
            q = elementwise.divide(x, y, unsigned=unsigned)
            if rounding_mode == "floor":
                return math.floor(q)
            if rounding_mode == "trunc":
                return math.trunc(q)
            return q
        return table.map_(ctx, [a, b], dtype, body)
    if rounding_mode == "trunc":
        return table.map_(ctx, [a, b], dtype, lambda x, y: elementwise.divide(x, y, unsigned=unsigned))
    # Integer floor division: truncating quotient, minus one where the signs differ and
    # the division is inexact (numpy's floor_divide).
    def floor_body(x: ir.Value, y: ir.Value) -> ir.Value:
        q = elementwise.divide(x, y, unsigned=unsigned)
        if unsigned:
            return q
        r = elementwise.remainder(x, y, floored=False)
        inexact = arith.cmpi(arith.CmpIPredicate.ne, r, elementwise.like(0, r))
        signs_differ = arith.cmpi(arith.CmpIPredicate.slt, arith.xori(r, y), elementwise.like(0, r))
        fix = arith.andi(inexact, signs_differ)
        return arith.select(fix, arith.subi(q, elementwise.like(1, q)), q)
    return table.map_(ctx, [a, b], dtype, floor_body)


@table.aten("remainder.Tensor", "remainder.Scalar", "fmod.Tensor", "fmod.Scalar")
def remainder(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    floored = ctx.node.target._opname == "remainder"
    return table.map_(ctx, [a, b], dtype,
                lambda x, y: elementwise.remainder(x, y, floored=floored, unsigned=table.unsigned(dtype)))


@table.aten("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def pow_(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    small = elementwise.small_integer_exponent(b) if isinstance(b, (int, float)) else None
    if small is not None and dtype.kind == "f":
        return table.map_(ctx, [a], dtype, lambda x: elementwise.float_power_by_multiplication(x, small))
    if isinstance(b, (int, float)) and float(b) == 0.5 and dtype.kind == "f":
        return table.map_(ctx, [a], dtype, math.sqrt)
    return table.map_(ctx, [a, b], dtype, lambda x, y: elementwise.power(x, y))


@table.aten("maximum.default", "minimum.default")
def extremum(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    fn = elementwise.maximum if ctx.node.target._opname == "maximum" else elementwise.minimum
    return table.map_(ctx, [a, b], dtype, lambda x, y: fn(x, y, unsigned=table.unsigned(dtype)))


_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _compare(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    compute = table.promoted(ctx, 0, 1)
    predicate = _COMPARISONS[ctx.node.target._opname]
    return table.map_(ctx, [a, b], compute,
                lambda x, y: elementwise.compare(predicate, x, y, unsigned=table.unsigned(compute)))


for _name in _COMPARISONS:
    table.aten(f"{_name}.Tensor", f"{_name}.Scalar")(_compare)


_LOGICAL = {"logical_and": arith.andi, "logical_or": arith.ori, "logical_xor": arith.xori,
            "bitwise_and": arith.andi, "bitwise_or": arith.ori, "bitwise_xor": arith.xori}


def _logical(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    name = ctx.node.target._opname
    dtype = np.dtype(np.bool_) if name.startswith("logical") else ctx.result_dtype()
    if dtype.kind == "f":
        raise OperandTypeError(f"{name} of floating-point tensors")
    return table.map_(ctx, [a, b], dtype, _LOGICAL[name])


for _name in _LOGICAL:
    table.aten(f"{_name}.default" if _name.startswith("logical") else f"{_name}.Tensor")(_logical)


@table.aten("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar")
def where(ctx: OpContext, condition: Any, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    c = ctx.tensor(condition, np.dtype(np.bool_))
    values = [ctx.tensor(v, dtype) for v in (a, b)]
    return core.elementwise([c, *values], core.element_type(dtype), arith.select)


@table.aten("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(ctx: OpContext, x: Any, mask: Any, value: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    operands = [ctx.tensor(mask, np.dtype(np.bool_)), ctx.tensor(value, dtype), ctx.tensor(x, dtype)]
    return core.elementwise(operands, core.element_type(dtype), arith.select)


@table.aten("_to_copy.default", "to.dtype", "_to_copy.dtype")
def to_copy(ctx: OpContext, x: Any, *_: Any, **__: Any) -> ir.Value:
    return ctx.tensor(x, ctx.result_dtype())


for _name in ("_conj.default", "_conj_physical.default", "conj_physical.default", "resolve_conj.default",
              "resolve_neg.default", "positive.default"):
    table.aten(_name)(table.identity)  # real tensors only reach the importer (complex has no dtype here)

for _name in ("clone.default", "alias.default", "detach.default", "lift_fresh_copy.default",
              "contiguous.default", "dropout.default"):
    table.aten(_name)(table.identity)

for _name in ("_assert_tensor_metadata.default", "_assert_scalar.default",
              "sym_constrain_range_for_size.default", "sym_constrain_range.default"):
    table.aten(_name)(table.nothing)


@table.aten("isnan.default", "isinf.default", "isposinf.default", "isneginf.default", "isfinite.default")
def float_class(ctx: OpContext, x: Any) -> ir.Value:
    """NaN/infinity tests; integer and bool tensors hold neither (isfinite: all true)."""
    name = ctx.node.target._opname
    source = ctx.arg_meta(0).dtype
    boolean = np.dtype(np.bool_)
    if not source.is_floating_point:
        return core.filled(core.sizes(ctx.tensor(x)), name == "isfinite", core.element_type(boolean))
    tests = {
        "isnan": elementwise.is_nan,
        "isinf": elementwise.is_inf,
        "isposinf": lambda v: elementwise.is_inf(v, negative=False),
        "isneginf": lambda v: elementwise.is_inf(v, positive=False),
        "isfinite": lambda v: elementwise.logical_not(arith.ori(elementwise.is_nan(v), elementwise.is_inf(v))),
    }
    return core.elementwise([ctx.tensor(x)], core.element_type(boolean), tests[name])


@table.aten("bitwise_not.default")
def bitwise_not(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype.kind == "f":
        raise OperandTypeError("bitwise_not of a floating-point tensor")
    return table.map_(ctx, [x], dtype, elementwise.logical_not)


@table.aten("clamp.Tensor", "clamp_min.Tensor", "clamp_max.Tensor")
def clamp_tensor(ctx: OpContext, x: Any, low: Any = None, high: Any = None) -> ir.Value:
    """Bounds as tensors (broadcast); a NaN bound or input gives NaN, as in eager."""
    if ctx.node.target._opname == "clamp_max":
        low, high = None, low
    dtype = ctx.result_dtype()
    unsigned = table.unsigned(dtype)
    operands = [x] + [b for b in (low, high) if b is not None]

    def body(v: ir.Value, *bounds: ir.Value) -> ir.Value:
        rest = list(bounds)
        if low is not None:
            v = elementwise.maximum(v, rest.pop(0), unsigned=unsigned)
        if high is not None:
            v = elementwise.minimum(v, rest.pop(0), unsigned=unsigned)
        return v

    return table.map_(ctx, operands, dtype, body)


@table.aten("atan2.default")
def atan2(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    return table.map_(ctx, [a, b], ctx.result_dtype(), math.atan2)


@table.aten("sgn.default")
def sgn(ctx: OpContext, x: Any) -> ir.Value:
    return sign(ctx, x)


@table.aten("bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor", "__lshift__.Tensor",
            "__rshift__.Tensor")
def shift(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype.kind == "f":
        raise OperandTypeError("a bit shift of floating-point tensors")
    left = "left" in ctx.node.target._opname or "lshift" in ctx.node.target._opname
    return table.map_(ctx, [a, b], dtype,
                      lambda x, y: elementwise.shift(x, y, left=left, unsigned=table.unsigned(dtype)))


@table.aten("copy.default", "_copy_from.default")
def copy(ctx: OpContext, x: Any, src: Any, non_blocking: bool = False) -> ir.Value:
    """``x.copy_(src)`` made functional: ``src`` broadcast to ``x``'s shape, in ``x``'s dtype."""
    dtype = ctx.result_dtype()
    target = ctx.tensor(x, dtype)
    return movement.broadcast_to(ctx.tensor(src, dtype), core.sizes(target))


@table.aten("round.decimals")
def round_decimals(ctx: OpContext, x: Any, *, decimals: int = 0) -> ir.Value:
    """Eager's formula: ``nearbyint(x * 10^d) / 10^d``, or ``nearbyint(x / 10^-d) * 10^-d``."""
    dtype = ctx.result_dtype()
    scale = 10.0 ** abs(decimals)

    def body(v: ir.Value) -> ir.Value:
        factor = elementwise.like(scale, v)
        if decimals >= 0:
            return arith.divf(math.roundeven(arith.mulf(v, factor)), factor)
        return arith.mulf(math.roundeven(arith.divf(v, factor)), factor)

    return table.map_(ctx, [x], dtype, body)


@table.aten("erfc.default")
def erfc(ctx: OpContext, x: Any) -> ir.Value:
    return table.map_(ctx, [x], ctx.result_dtype(), lambda v: arith.subf(elementwise.like(1, v), elementwise.erf(v)))


@table.aten("fmax.default", "fmin.default")
def fmax(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    """NaN-ignoring maximum/minimum (a NaN only where both are NaN)."""
    dtype = ctx.result_dtype()
    larger = ctx.node.target._opname == "fmax"
    if dtype.kind != "f":
        return extremum_of(ctx, a, b, larger)
    return table.map_(ctx, [a, b], dtype, arith.maxnumf if larger else arith.minnumf)


def extremum_of(ctx: OpContext, a: Any, b: Any, larger: bool) -> ir.Value:
    dtype = ctx.result_dtype()
    fn = elementwise.maximum if larger else elementwise.minimum
    return table.map_(ctx, [a, b], dtype, lambda x, y: fn(x, y, unsigned=table.unsigned(dtype)))


@table.aten("hypot.default")
def hypot(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    return table.map_(ctx, [a, b], ctx.result_dtype(),
                      lambda x, y: math.sqrt(arith.addf(arith.mulf(x, x), arith.mulf(y, y))))


@table.aten("copysign.Tensor", "copysign.Scalar")
def copysign(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    return table.map_(ctx, [a, b], ctx.result_dtype(), math.copysign)


@table.aten("logit.default")
def logit(ctx: OpContext, x: Any, eps: float | None = None) -> ir.Value:
    def body(v: ir.Value) -> ir.Value:
        if eps is not None:
            v = elementwise.minimum(elementwise.maximum(v, elementwise.like(eps, v)), elementwise.like(1 - eps, v))
        return math.log(arith.divf(v, arith.subf(elementwise.like(1, v), v)))
    return table.map_(ctx, [x], ctx.result_dtype(), body)


@table.aten("signbit.default")
def signbit(ctx: OpContext, x: Any) -> ir.Value:
    """The sign bit: true for -0.0 and negative NaNs too (``copysign(1, x) < 0``)."""
    source = ctx.arg_meta(0).dtype
    x = ctx.tensor(x)
    boolean = core.element_type(np.dtype(np.bool_))
    if not source.is_floating_point:
        if source == torch.bool or not source.is_signed:
            return core.filled(core.sizes(x), False, boolean)
        return core.elementwise([x], boolean, lambda v: arith.cmpi(arith.CmpIPredicate.slt, v, elementwise.like(0, v)))
    return core.elementwise([x], boolean, lambda v: arith.cmpf(
        arith.CmpFPredicate.OLT, math.copysign(elementwise.like(1, v), v), elementwise.like(0, v)))


@table.aten("ldexp.Tensor")
def ldexp(ctx: OpContext, x: Any, exponent: Any) -> ir.Value:
    return table.map_(ctx, [x, exponent], ctx.result_dtype(), lambda v, e: arith.mulf(v, math.exp2(e)))


@table.aten("polygamma.default")
def polygamma(ctx: OpContext, n: int, x: Any) -> ir.Value:
    if n < 0:
        raise OperandError(f"polygamma of a negative order ({n})")
    if n == 0:
        return table.map_(ctx, [x], ctx.result_dtype(), special_functions.digamma)
    return table.map_(ctx, [x], ctx.result_dtype(), lambda v: special_functions.polygamma(n, v))


@table.aten("special_zeta.default", "special_zeta.self_scalar", "special_zeta.other_scalar")
def zeta(ctx: OpContext, x: Any, q: Any) -> ir.Value:
    return table.map_(ctx, [x, q], ctx.result_dtype(), special_functions.zeta)


# Orthogonal polynomials P_n(x) of a tensor (or scalar) degree n: x's float type, like eager.
_POLYNOMIALS = {
    "chebyshev_polynomial_t": special_functions.chebyshev_t,
    "chebyshev_polynomial_u": special_functions.chebyshev_u,
    "chebyshev_polynomial_v": special_functions.chebyshev_v,
    "chebyshev_polynomial_w": special_functions.chebyshev_w,
    "shifted_chebyshev_polynomial_t": special_functions.shifted_chebyshev_t,
    "shifted_chebyshev_polynomial_u": special_functions.shifted_chebyshev_u,
    "shifted_chebyshev_polynomial_v": special_functions.shifted_chebyshev_v,
    "shifted_chebyshev_polynomial_w": special_functions.shifted_chebyshev_w,
    "hermite_polynomial_h": special_functions.hermite_h,
    "hermite_polynomial_he": special_functions.hermite_he,
    "laguerre_polynomial_l": special_functions.laguerre_l,
    "legendre_polynomial_p": special_functions.legendre_p,
}


def _polynomial(fn: Callable[[ir.Value, ir.Value], ir.Value]) -> Handler:
    def handler(ctx: OpContext, x: Any, n: Any) -> ir.Value:
        return table.map_(ctx, [x, n], ctx.result_dtype(), fn)
    return handler


for _name, _fn in _POLYNOMIALS.items():
    table.aten(*(f"special_{_name}.{overload}" for overload in ("default", "x_scalar", "n_scalar")))(_polynomial(_fn))


@table.aten("angle.default")
def angle(ctx: OpContext, x: Any) -> ir.Value:
    """The argument of a real number: pi below 0, else 0; NaN stays NaN (eager's rule)."""
    def body(v: ir.Value) -> ir.Value:
        zero = elementwise.like(0, v)
        result = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, v, zero), elementwise.like(np.pi, v), zero)
        return arith.select(elementwise.is_nan(v), v, result)

    return table.map_(ctx, [x], ctx.result_dtype(), body)
