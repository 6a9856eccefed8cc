"""Scalar bodies of the gamma-family special functions: ``lgamma`` and ``digamma``.

Both are evaluated in f64 whatever the element type (an f32 Lanczos sum loses several
digits to cancellation near the poles) and rounded back once. Formulas:

- ``lgamma``: Lanczos (g = 7, 9 coefficients, about 1e-15 relative in f64) for x >= 0.5;
  below, the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` (so log|Gamma|, +inf at the
  poles 0, -1, -2, ...).
- ``digamma``: for x >= 0.5, ``psi(x) = psi(x + 6) - sum_{k<6} 1/(x + k)`` and the asymptotic
  series at ``x + 6`` through the B10 term (about 1e-12); below, the reflection
  ``psi(1 - x) - pi / tan(pi x)``. At 0 it is -inf and at negative integers NaN, as in PyTorch.
"""

from __future__ import annotations

import math as pymath

from mlir import ir
from mlir.dialects import arith, math

from . import core

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
# Bernoulli terms of the digamma asymptotic series: B_{2k} / (2k), k = 1..5
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132)


def _f64(value: float) -> ir.Value:
    return core.scalar_constant(value, ir.F64Type.get())


def _widen(x: ir.Value) -> ir.Value:
    return x if isinstance(x.type, ir.F64Type) else arith.extf(ir.F64Type.get(), x)


def _narrow(y: ir.Value, like: ir.Value) -> ir.Value:
    return y if y.type == like.type else arith.truncf(like.type, y)


def _lgamma_positive(x: ir.Value) -> ir.Value:
    """Lanczos for x >= 0.5 (f64)."""
    z = arith.subf(x, _f64(1.0))
    total = _f64(_LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        total = arith.addf(total, arith.divf(_f64(c), arith.addf(z, _f64(float(i)))))
    t = arith.addf(z, _f64(_LANCZOS_G + 0.5))
    half_log_2pi = _f64(0.5 * pymath.log(2 * pymath.pi))
    return arith.addf(arith.addf(half_log_2pi, arith.mulf(arith.addf(z, _f64(0.5)), math.log(t))),
                      arith.subf(math.log(total), t))


def lgamma(x: ir.Value) -> ir.Value:
    """``log |Gamma(x)|`` of a float scalar (see the module doc)."""
    v = _widen(x)
    reflect = arith.cmpf(arith.CmpFPredicate.OLT, v, _f64(0.5))
    mirrored = arith.select(reflect, arith.subf(_f64(1.0), v), v)
    direct = _lgamma_positive(mirrored)
    sine = math.absf(math.sin(arith.mulf(_f64(pymath.pi), v)))
    reflected = arith.subf(math.log(arith.divf(_f64(pymath.pi), sine)), direct)
    # sin(pi x) of an integer x is ~1e-16, not 0, in f64: the poles are set exactly
    pole = arith.andi(arith.cmpf(arith.CmpFPredicate.OLE, v, _f64(0.0)),
                      arith.cmpf(arith.CmpFPredicate.OEQ, math.floor(v), v))
    result = arith.select(pole, _f64(pymath.inf), arith.select(reflect, reflected, direct))
    # lgamma(+-inf) = +inf
    infinite = arith.cmpf(arith.CmpFPredicate.OEQ, math.absf(v), _f64(pymath.inf))
    return _narrow(arith.select(infinite, _f64(pymath.inf), result), x)


def _digamma_positive(x: ir.Value) -> ir.Value:
    """psi for x >= 0.5 (f64): six recurrence steps, then the asymptotic series."""
    correction = _f64(0.0)
    for k in range(6):
        correction = arith.addf(correction, arith.divf(_f64(1.0), arith.addf(x, _f64(float(k)))))
    y = arith.addf(x, _f64(6.0))
    inverse_square = arith.divf(_f64(1.0), arith.mulf(y, y))
    series = _f64(0.0)
    for coefficient in reversed(_DIGAMMA_SERIES):
        series = arith.mulf(arith.addf(series, _f64(coefficient)), inverse_square)
    asymptotic = arith.subf(arith.subf(math.log(y), arith.divf(_f64(0.5), y)), series)
    return arith.subf(asymptotic, correction)


def digamma(x: ir.Value) -> ir.Value:
    """``psi(x)``, the derivative of ``lgamma`` (see the module doc)."""
    v = _widen(x)
    reflect = arith.cmpf(arith.CmpFPredicate.OLT, v, _f64(0.5))
    mirrored = arith.select(reflect, arith.subf(_f64(1.0), v), v)
    direct = _digamma_positive(mirrored)
    reflected = arith.subf(direct, arith.divf(_f64(pymath.pi), math.tan(arith.mulf(_f64(pymath.pi), v))))
    result = arith.select(reflect, reflected, direct)
    zero = arith.cmpf(arith.CmpFPredicate.OEQ, v, _f64(0.0))
    negative_integer = arith.andi(arith.cmpf(arith.CmpFPredicate.OLT, v, _f64(0.0)),
                                  arith.cmpf(arith.CmpFPredicate.OEQ, math.floor(v), v))
    result = arith.select(negative_integer, _f64(pymath.nan), arith.select(zero, _f64(-pymath.inf), result))
    return _narrow(result, x)
