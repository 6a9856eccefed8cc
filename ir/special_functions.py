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
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, math, scf

from . import core, elementwise
from ..errors import OperandError

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


# --- shared f64 helpers ------------------------------------------------------------------------

def _f64_unary(fn: Callable[[ir.Value], ir.Value]) -> Callable[[ir.Value], ir.Value]:
    """``fn`` (written for f64) on a scalar of any float type: widened once, rounded once."""

    def run(x: ir.Value) -> ir.Value:
        return _narrow(fn(_widen(x)), x)

    run.__doc__ = fn.__doc__
    run.__name__ = fn.__name__
    return run


def _lt(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.OLT, a, b)


def _eq(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.OEQ, a, b)


def _select(pairs: Sequence[tuple[ir.Value, ir.Value]], otherwise: ir.Value) -> ir.Value:
    """The value of the first true condition of ``pairs``, else ``otherwise``."""
    result = otherwise
    for condition, value in reversed(pairs):
        result = arith.select(condition, value, result)
    return result


def _power_series(t: ir.Value, ratios: Sequence[float], first: ir.Value | float = 1.0,
                  weights: Sequence[float] | None = None) -> ir.Value:
    """``sum_k w_k * c_k * t^k`` with ``c_0 = first`` and ``c_k = c_{k-1} * ratios[k-1]``
    (``w_k = 1`` without ``weights``): the series of the Bessel functions, term by term."""
    term = first if isinstance(first, ir.Value) else _f64(first)
    total = term if weights is None else arith.mulf(term, _f64(weights[0]))
    for k, ratio in enumerate(ratios, start=1):
        term = arith.mulf(term, arith.mulf(t, _f64(ratio)))
        total = arith.addf(total, term if weights is None else arith.mulf(term, _f64(weights[k])))
    return total


_EULER_GAMMA = 0.57721566490153286061
_SERIES_TERMS = 48  # (x/2)^2k / (k!)^2 < 1e-17 of the sum up to |x| = 15


def _harmonic(k: int) -> float:
    return sum(1.0 / j for j in range(1, k + 1))


def _bessel_series(x: ir.Value, order: int, alternating: bool) -> ir.Value:
    """``J_n`` (alternating) or ``I_n`` (n = 0, 1) by the ascending series in ``t = x^2 / 4``."""
    t = arith.mulf(arith.mulf(x, x), _f64(0.25))
    sign = -1.0 if alternating else 1.0
    ratios = [sign / (k * (k + order)) for k in range(1, _SERIES_TERMS)]
    first = _f64(1.0) if order == 0 else arith.mulf(x, _f64(0.5))
    return _power_series(t, ratios, first)


def _hankel_coefficients(order: int, terms: int) -> list[float]:
    """``a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)`` of the large-argument expansions."""
    coefficients = [1.0]
    for k in range(1, terms):
        coefficients.append(coefficients[-1] * (4 * order * order - (2 * k - 1) ** 2) / (k * 8))
    return coefficients


def _inverse_series(x: ir.Value, coefficients: Sequence[float], alternating: bool) -> ir.Value:
    """``sum_k (+-1)^k c_k / x^k`` by Horner's rule in ``1/x``."""
    inverse = arith.divf(_f64(1.0), x)
    total = _f64(coefficients[-1] * (-1.0 if alternating and (len(coefficients) - 1) % 2 else 1.0))
    for k in range(len(coefficients) - 2, -1, -1):
        c = coefficients[k] * (-1.0 if alternating and k % 2 else 1.0)
        total = arith.addf(arith.mulf(total, inverse), _f64(c))
    return total


# --- modified Bessel functions I0, I1, K0, K1 --------------------------------------------------
#
# Evaluated in f64: the ascending series below a switch point, the large-argument expansion
# (DLMF 10.40.1/10.40.2) above it. I: series up to |x| = 15 (no cancellation; 48 terms), then
# 30 expansion terms (smallest term ~exp(-2|x|) ~ 1e-13). K: its series cancels (K ~ e^-x
# from terms ~ e^x, relative error ~ e^{2x} * 1e-16, 5e-8 at x = 10), so the expansion takes
# over from x = 10 (20 terms, smallest ~ e^-20). Measured against scipy.special in
# tests/frontend/torch/test_special_functions.py.

_I_SWITCH = 15.0
_K_SWITCH = 10.0


def _modified_bessel_i(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    magnitude = math.absf(x)
    series = _bessel_series(magnitude, order, alternating=False)
    if scaled:
        series = arith.mulf(series, math.exp(arith.negf(magnitude)))
    # e^x / sqrt(2 pi x) * sum (-1)^k a_k / x^k, with e^x dropped when scaled
    large = arith.maximumf(magnitude, _f64(_I_SWITCH))
    expansion = arith.divf(_inverse_series(large, _hankel_coefficients(order, 30), alternating=True),
                           math.sqrt(arith.mulf(large, _f64(2 * pymath.pi))))
    if not scaled:
        # e^x overflows f64 from 709.8: split it so the product stays finite while it can
        half = math.exp(arith.mulf(large, _f64(0.5)))
        expansion = arith.mulf(arith.mulf(expansion, half), half)
    result = arith.select(_lt(magnitude, _f64(_I_SWITCH)), series, expansion)
    if order == 1:
        result = math.copysign(result, x)
    return result


def _i0(x: ir.Value) -> ir.Value:
    """The modified Bessel function of the first kind, order 0 (``torch.i0``)."""
    return _modified_bessel_i(x, 0, scaled=False)


def _i0e(x: ir.Value) -> ir.Value:
    """``exp(-|x|) * I0(x)`` (``torch.special.i0e``), without overflow for large x."""
    return _modified_bessel_i(x, 0, scaled=True)


def _i1(x: ir.Value) -> ir.Value:
    """The modified Bessel function of the first kind, order 1 (odd)."""
    return _modified_bessel_i(x, 1, scaled=False)


def _i1e(x: ir.Value) -> ir.Value:
    """``exp(-|x|) * I1(x)`` (``torch.special.i1e``)."""
    return _modified_bessel_i(x, 1, scaled=True)


i0 = _f64_unary(_i0)
i0e = _f64_unary(_i0e)
i1 = _f64_unary(_i1)
i1e = _f64_unary(_i1e)


def _modified_bessel_k(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    small = arith.minimumf(x, _f64(_K_SWITCH))
    t = arith.mulf(arith.mulf(small, small), _f64(0.25))
    log_half = math.log(arith.mulf(small, _f64(0.5)))
    if order == 0:
        # K0 = -(ln(x/2) + gamma) I0(x) + sum_k H_k t^k / (k!)^2    (DLMF 10.31.2)
        i0_small = _bessel_series(small, 0, alternating=False)
        ratios = [1.0 / (k * k) for k in range(1, _SERIES_TERMS)]
        tail = _power_series(t, ratios, weights=[_harmonic(k) for k in range(_SERIES_TERMS)])
        series = arith.subf(tail, arith.mulf(arith.addf(log_half, _f64(_EULER_GAMMA)), i0_small))
    else:
        # K1 = 1/x + ln(x/2) I1(x) - x/4 sum_k (psi(k+1) + psi(k+2)) t^k / (k! (k+1)!)
        i1_small = _bessel_series(small, 1, alternating=False)
        ratios = [1.0 / (k * (k + 1)) for k in range(1, _SERIES_TERMS)]
        psi = [2 * -_EULER_GAMMA + _harmonic(k) + _harmonic(k + 1) for k in range(_SERIES_TERMS)]
        tail = _power_series(t, ratios, weights=psi)
        series = arith.subf(arith.addf(arith.divf(_f64(1.0), small), arith.mulf(log_half, i1_small)),
                            arith.mulf(arith.mulf(small, _f64(0.25)), tail))
    if scaled:
        series = arith.mulf(series, math.exp(small))
    # sqrt(pi / 2x) e^-x sum a_k / x^k, e^-x dropped when scaled
    large = arith.maximumf(x, _f64(_K_SWITCH))
    expansion = arith.mulf(_inverse_series(large, _hankel_coefficients(order, 20), alternating=False),
                           math.sqrt(arith.divf(_f64(pymath.pi / 2), large)))
    if not scaled:
        expansion = arith.mulf(expansion, math.exp(arith.negf(large)))
    result = arith.select(_lt(x, _f64(_K_SWITCH)), series, expansion)
    # K(0) = inf, K(x < 0) = NaN (a complex value), as in PyTorch
    return _select([(_eq(x, _f64(0.0)), _f64(pymath.inf)), (_lt(x, _f64(0.0)), _f64(pymath.nan))], result)


def _k0(x: ir.Value) -> ir.Value:
    """The modified Bessel function of the second kind, order 0."""
    return _modified_bessel_k(x, 0, scaled=False)


def _k0e(x: ir.Value) -> ir.Value:
    """``exp(x) * K0(x)`` (``torch.special.scaled_modified_bessel_k0``)."""
    return _modified_bessel_k(x, 0, scaled=True)


def _k1(x: ir.Value) -> ir.Value:
    """The modified Bessel function of the second kind, order 1."""
    return _modified_bessel_k(x, 1, scaled=False)


def _k1e(x: ir.Value) -> ir.Value:
    """``exp(x) * K1(x)`` (``torch.special.scaled_modified_bessel_k1``)."""
    return _modified_bessel_k(x, 1, scaled=True)


k0 = _f64_unary(_k0)
k0e = _f64_unary(_k0e)
k1 = _f64_unary(_k1)
k1e = _f64_unary(_k1e)


# --- Bessel functions J0, J1, Y0, Y1 -----------------------------------------------------------
#
# The ascending series up to |x| = 12 (alternating: absolute error ~ I0(12) * 1e-16 ~ 2e-12),
# Hankel's expansion above (DLMF 10.17.3/10.17.4, 24 terms: smallest ~ e^-24).

_J_SWITCH = 12.0


def _hankel(x: ir.Value, order: int) -> tuple[ir.Value, ir.Value]:
    """(J_n(x), Y_n(x)) for x >= _J_SWITCH."""
    a = _hankel_coefficients(order, 24)
    inverse_square = arith.divf(_f64(1.0), arith.mulf(x, x))
    even = [a[k] * (-1.0) ** (k // 2) for k in range(0, len(a), 2)]
    odd = [a[k] * (-1.0) ** (k // 2) for k in range(1, len(a), 2)]
    p = elementwise.horner(even, inverse_square)
    q = arith.divf(elementwise.horner(odd, inverse_square), x)
    omega = arith.subf(x, _f64((2 * order + 1) * pymath.pi / 4))
    cosine, sine = math.cos(omega), math.sin(omega)
    scale = math.sqrt(arith.divf(_f64(2 / pymath.pi), x))
    j = arith.mulf(scale, arith.subf(arith.mulf(p, cosine), arith.mulf(q, sine)))
    y = arith.mulf(scale, arith.addf(arith.mulf(p, sine), arith.mulf(q, cosine)))
    return j, y


def _bessel_j(x: ir.Value, order: int) -> ir.Value:
    magnitude = math.absf(x)
    small = arith.minimumf(magnitude, _f64(_J_SWITCH))
    series = _bessel_series(small, order, alternating=True)
    expansion, _ = _hankel(arith.maximumf(magnitude, _f64(_J_SWITCH)), order)
    result = arith.select(_lt(magnitude, _f64(_J_SWITCH)), series, expansion)
    # J0 is even, J1 odd; at +-inf cos/sin give NaN, as PyTorch returns
    return arith.select(_lt(x, _f64(0.0)), arith.negf(result), result) if order == 1 else result


def _bessel_y(x: ir.Value, order: int) -> ir.Value:
    small = arith.minimumf(x, _f64(_J_SWITCH))
    t = arith.mulf(arith.mulf(small, small), _f64(0.25))
    log_half = math.log(arith.mulf(small, _f64(0.5)))
    if order == 0:
        # Y0 = 2/pi (ln(x/2) + gamma) J0(x) - 2/pi sum_k H_k (-t)^k / (k!)^2    (DLMF 10.8.2)
        ratios = [-1.0 / (k * k) for k in range(1, _SERIES_TERMS)]
        tail = _power_series(t, ratios, weights=[_harmonic(k) for k in range(_SERIES_TERMS)])
        j0 = _bessel_series(small, 0, alternating=True)
        series = arith.mulf(_f64(2 / pymath.pi),
                            arith.subf(arith.mulf(arith.addf(log_half, _f64(_EULER_GAMMA)), j0), tail))
    else:
        # Y1 = -2/(pi x) + 2/pi ln(x/2) J1(x) - x/(2 pi) sum_k (psi(k+1) + psi(k+2)) (-t)^k / (k!(k+1)!)
        ratios = [-1.0 / (k * (k + 1)) for k in range(1, _SERIES_TERMS)]
        psi = [2 * -_EULER_GAMMA + _harmonic(k) + _harmonic(k + 1) for k in range(_SERIES_TERMS)]
        tail = _power_series(t, ratios, weights=psi)
        j1 = _bessel_series(small, 1, alternating=True)
        series = arith.subf(
            arith.subf(arith.mulf(_f64(2 / pymath.pi), arith.mulf(log_half, j1)),
                       arith.divf(_f64(2 / pymath.pi), small)),
            arith.mulf(arith.mulf(small, _f64(0.5 / pymath.pi)), tail))
    _, expansion = _hankel(arith.maximumf(x, _f64(_J_SWITCH)), order)
    result = arith.select(_lt(x, _f64(_J_SWITCH)), series, expansion)
    return _select([(_eq(x, _f64(0.0)), _f64(-pymath.inf)), (_lt(x, _f64(0.0)), _f64(pymath.nan))], result)


def _j0(x: ir.Value) -> ir.Value:
    """The Bessel function of the first kind, order 0."""
    return _bessel_j(x, 0)


def _j1(x: ir.Value) -> ir.Value:
    """The Bessel function of the first kind, order 1."""
    return _bessel_j(x, 1)


def _y0(x: ir.Value) -> ir.Value:
    """The Bessel function of the second kind, order 0 (NaN below 0, -inf at 0)."""
    return _bessel_y(x, 0)


def _y1(x: ir.Value) -> ir.Value:
    """The Bessel function of the second kind, order 1 (NaN below 0, -inf at 0)."""
    return _bessel_y(x, 1)


def _spherical_j0(x: ir.Value) -> ir.Value:
    """``sin(x) / x`` (1 at 0; a Taylor form below |x| = 1e-4 where the quotient rounds)."""
    tiny = _lt(math.absf(x), _f64(1e-4))
    taylor = arith.subf(_f64(1.0), arith.divf(arith.mulf(x, x), _f64(6.0)))
    quotient = arith.divf(math.sin(x), x)
    infinite = _eq(math.absf(x), _f64(pymath.inf))
    return _select([(tiny, taylor), (infinite, _f64(0.0))], quotient)


j0 = _f64_unary(_j0)
j1 = _f64_unary(_j1)
y0 = _f64_unary(_y0)
y1 = _f64_unary(_y1)
spherical_j0 = _f64_unary(_spherical_j0)


# --- the normal distribution: erfcx, erfinv, ndtri, log_ndtr ----------------------------------

def _erfcx_nonnegative(z: ir.Value) -> ir.Value:
    """``exp(z^2) erfc(z)`` for z >= 0: ``exp(z^2) (1 - erf(z))`` below 1.5 (erfc >= 0.03 there,
    no cancellation), the erf table's tail fit on [1.5, 6], the asymptotic series
    ``1/(z sqrt(pi)) sum (-1)^k (2k-1)!! / (2z^2)^k`` above 6 (15 terms, last ~1e-12)."""
    low = arith.minimumf(z, _f64(1.5))
    direct = arith.mulf(math.exp(arith.mulf(low, low)), arith.subf(_f64(1.0), elementwise.erf(low)))
    fit = elementwise.erfcx_mid(z)
    high = arith.maximumf(z, _f64(6.0))
    inverse_twice_square = arith.divf(_f64(0.5), arith.mulf(high, high))
    coefficients = [1.0]
    for k in range(1, 15):
        coefficients.append(-coefficients[-1] * (2 * k - 1))
    asymptotic = arith.divf(elementwise.horner(coefficients, inverse_twice_square),
                            arith.mulf(high, _f64(pymath.sqrt(pymath.pi))))
    return _select([(_lt(z, _f64(1.5)), direct), (_lt(z, _f64(6.0)), fit)], asymptotic)


def _erfc_nonnegative(z: ir.Value) -> ir.Value:
    """``erfc(z)`` for z >= 0 with full relative accuracy in the tail."""
    return arith.mulf(math.exp(arith.negf(arith.mulf(z, z))), _erfcx_nonnegative(z))


def _erfcx(x: ir.Value) -> ir.Value:
    """The scaled complementary error function ``exp(x^2) erfc(x)``; below 0 through
    ``erfcx(x) = 2 exp(x^2) - erfcx(-x)`` (+inf once exp(x^2) overflows)."""
    magnitude = math.absf(x)
    positive = _erfcx_nonnegative(magnitude)
    negative = arith.subf(arith.mulf(_f64(2.0), math.exp(arith.mulf(x, x))), positive)
    result = arith.select(_lt(x, _f64(0.0)), negative, positive)
    return arith.select(_eq(x, _f64(pymath.inf)), _f64(0.0), result)


def _normal_cdf_lower(y: ir.Value) -> ir.Value:
    """``ndtr(y)`` for y <= 0 with full relative accuracy: ``erfc(-y / sqrt 2) / 2``."""
    return arith.mulf(_f64(0.5), _erfc_nonnegative(arith.mulf(y, _f64(-pymath.sqrt(0.5)))))


def _log_ndtr(x: ir.Value) -> ir.Value:
    """``log(ndtr(x))``: ``log1p(-erfc(x/sqrt 2)/2)`` above 0 (the tail of 1 - ndtr is tiny);
    ``log(erfcx(-x/sqrt 2)/2) - x^2/2`` below (no underflow of ndtr itself)."""
    z = arith.mulf(math.absf(x), _f64(pymath.sqrt(0.5)))
    upper = elementwise.log1p(arith.mulf(_f64(-0.5), _erfc_nonnegative(z)))
    lower = arith.subf(math.log(arith.mulf(_f64(0.5), _erfcx_nonnegative(z))), arith.mulf(z, z))
    return arith.select(_lt(x, _f64(0.0)), lower, upper)


def _erfinv(x: ir.Value) -> ir.Value:
    """The inverse error function: Giles' single-precision approximation ("Approximating the
    erfinv function", GPU Computing Gems, 2011) as the start, then three Newton steps on
    ``erf(y) - x`` in f64. +-1 give +-inf, |x| > 1 NaN."""
    w = arith.negf(math.log(arith.mulf(arith.subf(_f64(1.0), x), arith.addf(_f64(1.0), x))))
    central = elementwise.horner(
        (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087, -4.39150654e-06,
         -3.5233877e-06, 3.43273939e-07, 2.81022636e-08), arith.subf(w, _f64(2.5)))
    tail = elementwise.horner(
        (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844,
         0.00134934322, 0.000100950558, -0.000200214257), arith.subf(math.sqrt(w), _f64(3.0)))
    y = arith.mulf(arith.select(_lt(w, _f64(5.0)), central, tail), x)
    for _ in range(3):
        slope = arith.mulf(_f64(2 / pymath.sqrt(pymath.pi)), math.exp(arith.negf(arith.mulf(y, y))))
        y = arith.subf(y, arith.divf(arith.subf(elementwise.erf(y), x), slope))
    magnitude = math.absf(x)
    return _select([(_eq(magnitude, _f64(1.0)), math.copysign(_f64(pymath.inf), x)),
                    (arith.cmpf(arith.CmpFPredicate.UGT, magnitude, _f64(1.0)), _f64(pymath.nan))], y)


def _ndtri(p: ir.Value) -> ir.Value:
    """The inverse of the normal CDF: Abramowitz & Stegun 26.2.23 on the lower tail
    ``q = min(p, 1 - p)`` (error < 4.5e-4) as the start, then four Newton steps on
    ``ndtr(y) - q`` with the tail-accurate ndtr above. 0 and 1 give -+inf, outside NaN."""
    upper = _lt(_f64(0.5), p)
    q = arith.select(upper, arith.subf(_f64(1.0), p), p)
    t = math.sqrt(arith.mulf(_f64(-2.0), math.log(q)))
    numerator = elementwise.horner((2.515517, 0.802853, 0.010328), t)
    denominator = elementwise.horner((1.0, 1.432788, 0.189269, 0.001308), t)
    y = arith.subf(arith.divf(numerator, denominator), t)
    for _ in range(4):
        density = arith.mulf(_f64(1 / pymath.sqrt(2 * pymath.pi)),
                             math.exp(arith.mulf(_f64(-0.5), arith.mulf(y, y))))
        y = arith.subf(y, arith.divf(arith.subf(_normal_cdf_lower(y), q), density))
    result = arith.select(upper, arith.negf(y), y)
    return _select([(_eq(p, _f64(0.0)), _f64(-pymath.inf)), (_eq(p, _f64(1.0)), _f64(pymath.inf)),
                    (arith.cmpf(arith.CmpFPredicate.ULT, p, _f64(0.0)), _f64(pymath.nan)),
                    (arith.cmpf(arith.CmpFPredicate.UGT, p, _f64(1.0)), _f64(pymath.nan))], result)


erfcx = _f64_unary(_erfcx)
log_ndtr = _f64_unary(_log_ndtr)
erfinv = _f64_unary(_erfinv)
ndtri = _f64_unary(_ndtri)


# --- loops with a data-dependent trip count: Hurwitz zeta, polygamma, orthogonal polynomials ----

def _count(value: ir.Value, low: float, high: float) -> ir.Value:
    """``value`` (f64, already integral) clamped to [low, high] as an ``index`` (NaN -> low), so
    that a NaN, an infinity or a huge value never reaches ``fptosi`` (poison) or runs away."""
    low_value = _f64(low)
    clamped = arith.select(arith.cmpf(arith.CmpFPredicate.OGE, value, low_value), value, low_value)
    clamped = arith.select(_lt(clamped, _f64(high)), clamped, _f64(high))
    return arith.index_cast(ir.IndexType.get(), arith.fptosi(ir.IntegerType.get_signless(64), clamped))


def _index_as_f64(index: ir.Value) -> ir.Value:
    return arith.sitofp(ir.F64Type.get(), arith.index_cast(ir.IntegerType.get_signless(64), index))


def _loop(start: int, stop: ir.Value, carried: Sequence[ir.Value],
          step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """``for k in range(start, stop): carried = step(k as f64, carried)`` as an ``scf.for``."""
    index = ir.IndexType.get()
    loop = scf.ForOp(arith.constant(index, start), stop, arith.constant(index, 1), list(carried))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(step(_index_as_f64(loop.induction_variable), list(loop.inner_iter_args)))
    return list(loop.results)


# (2k)! / B_2k, k = 1..12: the Euler-Maclaurin correction terms of Cephes' zeta
_ZETA_EULER_MACLAURIN = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                         7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                         -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
# Direct terms are capped here (q below -2^24 with an integer x): PyTorch's loop would run
# for as many terms as |q|.
_ZETA_MAX_TERMS = float(2**24)


def _hurwitz_zeta(x: ir.Value, q: ir.Value) -> ir.Value:
    """``zeta(x, q) = sum_k (q + k)^-x`` as Cephes (and PyTorch) compute it: the direct sum up to
    ``q + N > 9`` (N >= 9 terms), then 12 Euler-Maclaurin corrections; inf at x = 1 and at
    q a non-positive integer, NaN for x < 1 and for q < 0 with a non-integer x."""
    minus_x = arith.negf(x)
    # N = max(9, floor(9 - q) + 1): the first a = q + N above 9
    terms = _count(arith.addf(math.floor(arith.subf(_f64(9.0), q)), _f64(1.0)), 9.0, _ZETA_MAX_TERMS)

    def add_term(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        return [arith.addf(carried[0], math.powf(arith.addf(q, k), minus_x))]

    one = arith.constant(ir.IndexType.get(), 1)
    (total,) = _loop(0, arith.addi(terms, one), [_f64(0.0)], add_term)
    w = arith.addf(q, _index_as_f64(terms))
    b = math.powf(w, minus_x)
    total = arith.addf(total, arith.divf(arith.mulf(b, w), arith.subf(x, _f64(1.0))))
    total = arith.subf(total, arith.mulf(_f64(0.5), b))
    a = _f64(1.0)
    k = 0.0
    for coefficient in _ZETA_EULER_MACLAURIN:
        a = arith.mulf(a, arith.addf(x, _f64(k)))
        b = arith.divf(b, w)
        total = arith.addf(total, arith.divf(arith.mulf(a, b), _f64(coefficient)))
        a = arith.mulf(a, arith.addf(x, _f64(k + 1)))
        b = arith.divf(b, w)
        k += 2
    non_positive = arith.cmpf(arith.CmpFPredicate.OLE, q, _f64(0.0))
    integral_q = _eq(math.floor(q), q)
    fractional_x = arith.cmpf(arith.CmpFPredicate.UNE, math.floor(x), x)
    return _select([(_eq(x, _f64(1.0)), _f64(pymath.inf)), (_lt(x, _f64(1.0)), _f64(pymath.nan)),
                    (arith.andi(non_positive, integral_q), _f64(pymath.inf)),
                    (arith.andi(non_positive, fractional_x), _f64(pymath.nan))], total)


def zeta(x: ir.Value, q: ir.Value) -> ir.Value:
    """The Hurwitz zeta function ``zeta(x, q)`` (``torch.special.zeta``), in f64."""
    return _narrow(_hurwitz_zeta(_widen(x), _widen(q)), x)


def polygamma(order: int, x: ir.Value) -> ir.Value:
    """``psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x)`` for n >= 1 (n = 0 is :func:`digamma`)."""
    if order < 1:
        raise OperandError(f"polygamma of order {order}: the zeta form needs order >= 1")
    v = _widen(x)
    scale = (1.0 if order % 2 else -1.0) * pymath.factorial(order)
    result = arith.mulf(_f64(scale), _hurwitz_zeta(_f64(float(order + 1)), v))
    if order == 1:  # PyTorch's trigamma is a separate series: 0 at +inf (zeta's sum gives 0 * inf)
        result = arith.select(_eq(v, _f64(pymath.inf)), _f64(0.0), result)
    return _narrow(result, x)


# Orthogonal polynomials of a tensor degree n (truncated to an integer, as PyTorch does): the
# three-term recurrence from (P_0, P_1), n - 1 steps in an scf.for; n < 0 gives 0. Degrees
# are capped at 2^24 steps (a larger n with |x| > 1 has long overflowed to inf or NaN).
_MAX_DEGREE = float(2**24)


def _recurrence(x: ir.Value, n: ir.Value, first: ir.Value, second: ir.Value,
                step: Callable[[ir.Value, ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """P_n from P_0 = ``first``, P_1 = ``second`` and ``P_{k+1} = step(k, P_k, P_{k-1})``."""
    def advance(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        previous, current = carried
        return [current, step(k, current, previous)]

    _, last = _loop(1, _count(n, 1.0, _MAX_DEGREE), [first, second], advance)
    return _select([(_lt(n, _f64(0.0)), _f64(0.0)), (_eq(n, _f64(0.0)), first)], last)


def _two_x_step(y: ir.Value) -> Callable[[ir.Value, ir.Value, ir.Value], ir.Value]:
    return lambda k, current, previous: arith.subf(arith.mulf(arith.addf(y, y), current), previous)


def _chebyshev(kind: str, y: ir.Value, n: ir.Value) -> ir.Value:
    """Chebyshev T/U/V/W of ``y`` by the recurrence ``P_{k+1} = 2y P_k - P_{k-1}``."""
    one = _f64(1.0)
    second = {"t": y, "u": arith.addf(y, y), "v": arith.subf(arith.addf(y, y), one),
              "w": arith.addf(arith.addf(y, y), one)}[kind]
    return _recurrence(y, n, one, second, _two_x_step(y))


def _degree(n: ir.Value) -> ir.Value:
    return math.trunc(_widen(n))


def _polynomial(kind: str, shifted: bool = False) -> Callable[[ir.Value, ir.Value], ir.Value]:
    def run(x: ir.Value, n: ir.Value) -> ir.Value:
        v = _widen(x)
        y = arith.subf(arith.addf(v, v), _f64(1.0)) if shifted else v
        return _narrow(_chebyshev(kind, y, _degree(n)), x)

    run.__name__ = f"{'shifted_' if shifted else ''}chebyshev_{kind}"
    run.__doc__ = f"The {'shifted ' if shifted else ''}Chebyshev polynomial {kind.upper()}_n(x)."
    return run


chebyshev_t, chebyshev_u, chebyshev_v, chebyshev_w = (_polynomial(k) for k in "tuvw")
shifted_chebyshev_t, shifted_chebyshev_u, shifted_chebyshev_v, shifted_chebyshev_w = (
    _polynomial(k, shifted=True) for k in "tuvw")


def hermite_h(x: ir.Value, n: ir.Value) -> ir.Value:
    """The physicists' Hermite polynomial: ``H_{k+1} = 2x H_k - 2k H_{k-1}``."""
    v = _widen(x)
    two_x = arith.addf(v, v)
    step = lambda k, current, previous: arith.subf(arith.mulf(two_x, current),  # noqa: E731
                                                    arith.mulf(arith.addf(k, k), previous))
    return _narrow(_recurrence(v, _degree(n), _f64(1.0), two_x, step), x)


def hermite_he(x: ir.Value, n: ir.Value) -> ir.Value:
    """The probabilists' Hermite polynomial: ``He_{k+1} = x He_k - k He_{k-1}``."""
    v = _widen(x)
    step = lambda k, current, previous: arith.subf(arith.mulf(v, current), arith.mulf(k, previous))  # noqa: E731
    return _narrow(_recurrence(v, _degree(n), _f64(1.0), v, step), x)


def laguerre_l(x: ir.Value, n: ir.Value) -> ir.Value:
    """The Laguerre polynomial: ``L_{k+1} = ((2k + 1 - x) L_k - k L_{k-1}) / (k + 1)``."""
    v = _widen(x)
    one_minus_x = arith.subf(_f64(1.0), v)

    def step(k: ir.Value, current: ir.Value, previous: ir.Value) -> ir.Value:
        weighted = arith.subf(arith.mulf(arith.addf(arith.addf(k, k), one_minus_x), current), arith.mulf(k, previous))
        return arith.divf(weighted, arith.addf(k, _f64(1.0)))

    return _narrow(_recurrence(v, _degree(n), _f64(1.0), one_minus_x, step), x)


def legendre_p(x: ir.Value, n: ir.Value) -> ir.Value:
    """The Legendre polynomial: ``P_{k+1} = ((2k + 1) x P_k - k P_{k-1}) / (k + 1)``."""
    v = _widen(x)

    def step(k: ir.Value, current: ir.Value, previous: ir.Value) -> ir.Value:
        weighted = arith.subf(arith.mulf(arith.mulf(arith.addf(arith.addf(k, k), _f64(1.0)), v), current),
                              arith.mulf(k, previous))
        return arith.divf(weighted, arith.addf(k, _f64(1.0)))

    return _narrow(_recurrence(v, _degree(n), _f64(1.0), v, step), x)


# --- the Airy function Ai ----------------------------------------------------------------------
#
# Maclaurin series (DLMF 9.4.1) on [-7, 5] (30 terms; at 5 the sums ~1e3 cancel to Ai ~1e-4,
# about 1e-9 relative), the large-argument expansions (DLMF 9.7.5 above 5, 9.7.9 below -7)
# in zeta = 2/3 |x|^{3/2} outside.

_AIRY_LOW, _AIRY_HIGH = -7.0, 5.0
_AIRY_AI0 = 0.355028053887817239  # Ai(0)
_AIRY_AIP0 = -0.258819403792806798  # Ai'(0)


def _airy_coefficients(terms: int) -> list[float]:
    """u_k of the expansions: ``u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_{k-1}``."""
    u = [1.0]
    for k in range(1, terms):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    return u


def _airy_ai(x: ir.Value) -> ir.Value:
    """The Airy function Ai(x) (``torch.special.airy_ai``)."""
    small = arith.maximumf(arith.minimumf(x, _f64(_AIRY_HIGH)), _f64(_AIRY_LOW))
    cube = arith.mulf(arith.mulf(small, small), small)
    f = _power_series(cube, [1.0 / ((3 * k) * (3 * k - 1)) for k in range(1, 30)])
    g = _power_series(cube, [1.0 / ((3 * k + 1) * (3 * k)) for k in range(1, 30)], first=small)
    series = arith.addf(arith.mulf(_f64(_AIRY_AI0), f), arith.mulf(_f64(_AIRY_AIP0), g))

    magnitude = arith.maximumf(math.absf(x), _f64(_AIRY_HIGH))
    zeta = arith.mulf(_f64(2.0 / 3.0), arith.mulf(magnitude, math.sqrt(magnitude)))
    fourth_root = math.sqrt(math.sqrt(magnitude))
    u = _airy_coefficients(16)
    decaying = arith.divf(arith.mulf(math.exp(arith.negf(zeta)), _inverse_series(zeta, u[:12], alternating=True)),
                          arith.mulf(_f64(2 * pymath.sqrt(pymath.pi)), fourth_root))
    inverse_square = arith.divf(_f64(1.0), arith.mulf(zeta, zeta))
    even = elementwise.horner([u[k] * (-1.0) ** (k // 2) for k in range(0, 16, 2)], inverse_square)
    odd = arith.divf(elementwise.horner([u[k] * (-1.0) ** (k // 2) for k in range(1, 16, 2)], inverse_square), zeta)
    phase = arith.addf(zeta, _f64(pymath.pi / 4))
    oscillating = arith.divf(arith.subf(arith.mulf(math.sin(phase), even), arith.mulf(math.cos(phase), odd)),
                             arith.mulf(_f64(pymath.sqrt(pymath.pi)), fourth_root))
    # +inf gives NaN, as PyTorch's Cephes port does
    return _select([(_lt(x, _f64(_AIRY_LOW)), oscillating), (_eq(x, _f64(pymath.inf)), _f64(pymath.nan)),
                    (_lt(_f64(_AIRY_HIGH), x), decaying)], series)


airy_ai = _f64_unary(_airy_ai)
