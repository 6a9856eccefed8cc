"""``tilecraft-fold-integer-round-trips``: a float that is already a clamped integer, converted
to a narrow integer and straight back to float, is the float itself.

Why: a QDQ model quantizes a tensor and dequantizes it at once wherever an int8 value feeds
a float op (a convolution's output into the residual ``Add`` of a ResNet block, an ``Add``
into the next block's convolutions). Fused into one elementwise body (an int8 kernel's
epilogue, pipelines/tensor/int8_matmul.py) that is

    y = min(max(roundeven(x / s) + zp, 0), 255)        QuantizeLinear's value, in f32
    q = trunci(fptosi(y)) : i8                          its u8 element
    z = (uitofp(q) - zp) * s                            DequantizeLinear

and ``uitofp(trunci(fptosi(y)))`` is ``y`` whenever ``y`` is an integer the narrow type holds:
four conversions per vector (``vcvttps2dq``, ``vpmovdb``, ``vpmovzxbd``, ``vcvtdq2ps``) of the
~40 an int8 ResNet's residual epilogue spends per 16 outputs, in kernels whose epilogue costs
as much as their dot products (K = 64: docs/performance.md). LLVM does not fold it: it cannot
see that ``y`` is integral.

Which ``y`` qualifies: a ``minimumf``/``maximumf`` clamp (either order) to integral constant
bounds inside the narrow type's range (``[0, 2^w - 1]`` for ``uitofp``, ``[-2^(w-1),
2^(w-1) - 1]`` for ``sitofp``) of a value that is integral by construction (``roundeven``,
``round``, ``floor``, ``ceil``, ``trunc``, or one of those plus or minus an integral constant).
The fold is exact, with two edge cases that cannot change an integer result: a NaN ``x``
(where ``fptosi`` is poison) stays NaN, and a ``-0.0`` (a signed range's clamp keeps it) stays
``-0.0`` instead of becoming ``+0.0``.
"""

from __future__ import annotations

import math
from typing import Mapping

from mlir import ir

from ..ir_queries import defining_op, replace_each, splat_float
from ..passes import register_pass

FOLD_INTEGER_ROUND_TRIPS = "tilecraft-fold-integer-round-trips"

_ROUNDINGS = frozenset({"math.roundeven", "math.round", "math.floor", "math.ceil", "math.trunc"})
_MAXIMA = frozenset({"arith.maximumf", "arith.maxnumf"})
_MINIMA = frozenset({"arith.minimumf", "arith.minnumf"})


def _element(value_type: ir.Type) -> ir.Type:
    return ir.ShapedType(value_type).element_type if isinstance(value_type, ir.ShapedType) else value_type


def _integral_constant(value: ir.Value) -> float | None:
    number = splat_float(value)
    return number if number is not None and math.isfinite(number) and number == int(number) else None


def _is_integral(value: ir.Value) -> bool:
    """``value`` is an integer (or +-inf, NaN) by construction: a rounding, or a rounding
    plus or minus an integral constant (a sum of integers rounds to an integer)."""
    op = defining_op(value)
    if op is None:
        return False
    if op.name in _ROUNDINGS:
        return True
    if op.name in ("arith.addf", "arith.subf"):
        left, right = op.operands
        return (_is_integral(left) and _integral_constant(right) is not None) or \
            (op.name == "arith.addf" and _is_integral(right) and _integral_constant(left) is not None)
    return False


def _clamp_bounds(value: ir.Value) -> tuple[float, float] | None:
    """(low, high) of ``value`` = a clamp of an integral value to integral constants."""
    outer = defining_op(value)
    if outer is None or outer.name not in _MAXIMA | _MINIMA:
        return None
    inner = defining_op(outer.operands[0])
    if inner is None or inner.name not in (_MINIMA if outer.name in _MAXIMA else _MAXIMA):
        return None
    bounds = {}
    for op in (outer, inner):
        bound = _integral_constant(op.operands[1])
        if bound is None:
            return None
        bounds["low" if op.name in _MAXIMA else "high"] = bound
    if not _is_integral(inner.operands[0]) or bounds["low"] > bounds["high"]:
        return None
    return bounds["low"], bounds["high"]


def round_trip_source(op: ir.Operation) -> ir.Value | None:
    """``y`` when ``op`` is ``uitofp``/``sitofp(trunci(fptosi(y)))`` (or without the
    ``trunci``) of a ``y`` of ``op``'s type that the integer type holds exactly; ``None``
    otherwise."""
    if op.name not in ("arith.uitofp", "arith.sitofp"):
        return None
    narrow = defining_op(op.operands[0])
    if narrow is not None and narrow.name == "arith.trunci":
        narrow = defining_op(narrow.operands[0])
    if narrow is None or narrow.name != "arith.fptosi":
        return None
    source = narrow.operands[0]
    if source.type != op.results[0].type:
        return None
    width = ir.IntegerType(_element(op.operands[0].type)).width
    bounds = _clamp_bounds(source)
    if bounds is None:
        return None
    if op.name == "arith.uitofp":
        held = (0, 2 ** width - 1)
    else:
        held = (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    return source if held[0] <= bounds[0] and bounds[1] <= held[1] else None


@register_pass(FOLD_INTEGER_ROUND_TRIPS,
               "A clamped integral float converted to a narrow integer and back to float is "
               "the float itself (a QuantizeLinear + DequantizeLinear pair in one body)")
def fold_integer_round_trips_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """The conversions left without users go with canonicalization (or stay, if another
    op reads the integer: QuantizeLinear's stored result)."""
    replace_each(module, lambda op: round_trip_source(op) is not None, round_trip_source)
