"""Scalar bodies of the regularized incomplete gamma functions ``P(a, x)`` (``torch.igamma``,
``special.gammainc``) and ``Q(a, x) = 1 - P(a, x)`` (``igammac``, ``special.gammaincc``).

Evaluated in f64 whatever the element type and rounded once (the ir/special_functions.py
convention), with Cephes' two expansions, which PyTorch's CPU kernel also uses:

- the series ``P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))`` where
  ``x <= 1`` or ``x <= a`` (its terms shrink from the first);
- the continued fraction of ``Q`` (Legendre's, by the Cephes recurrence with rescaling)
  where ``x > 1`` and ``x > a``.

The other function is ``1 -`` the one computed: in f64 that loses nothing a float32 result
can see unless the complement is below ~1e-12 (``Q`` for ``a`` < 1e-11). Each expansion is an
``scf.while`` that stops when a term changes the sum by less than f64's epsilon, capped at
:data:`MAX_TERMS` terms; both need about ``9 sqrt(a)`` terms when ``x`` is near a large
``a``, so the cap is reached only for ``a`` beyond ~1e8 (where PyTorch switches to Temme's
asymptotic series, not built here). Special values are PyTorch's: NaN for a negative
argument, ``P(0, x > 0) = 1``, ``P(a, 0) = 0``, ``P(inf, x) = 0``, ``P(a, inf) = 1``, NaN for
both infinite or both 0.
"""

from __future__ import annotations

import math as pymath
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, math, scf

from . import core
from .special_functions import lgamma

MAX_TERMS = 100_000
_EPSILON = 1.11022302462515654042e-16  # Cephes' MACHEP: 2^-53
_MAX_LOG = 709.782712893383996843      # log(DBL_MAX)
_BIG = 4.503599627370496e15            # 2^52: the continued fraction's rescaling threshold
_BIG_INVERSE = 2.22044604925031308085e-16


def _f64(value: float) -> ir.Value:
    return core.scalar_constant(value, ir.F64Type.get())


def _cmp(predicate: arith.CmpFPredicate, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.cmpf(predicate, a, b)


def _iterate(carried: Sequence[ir.Value], going_on: Callable[[list[ir.Value]], ir.Value],
             step: Callable[[list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """``while going_on(carried) and n < MAX_TERMS: carried = step(carried)`` (an ``scf.while``
    carrying a term count beside ``carried``)."""
    i64 = ir.IntegerType.get_signless(64)
    types = [v.type for v in carried] + [i64]
    loop = scf.WhileOp(types, [*carried, arith.constant(i64, 0)])
    before = loop.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        *values, count = list(before.arguments)
        below_cap = arith.cmpi(arith.CmpIPredicate.slt, count, arith.constant(i64, MAX_TERMS))
        scf.ConditionOp(arith.andi(going_on(values), below_cap), list(before.arguments))
    after = loop.after.blocks.append(*types)
    with ir.InsertionPoint(after):
        *values, count = list(after.arguments)
        scf.YieldOp([*step(values), arith.addi(count, arith.constant(i64, 1))])
    return list(loop.results)[:-1]


def _prefactor(a: ir.Value, x: ir.Value) -> ir.Value:
    """``x^a e^-x / Gamma(a)``, through logs (0 when it underflows)."""
    log_value = arith.subf(arith.subf(arith.mulf(a, math.log(x)), x), lgamma(a))
    underflow = _cmp(arith.CmpFPredicate.OLT, log_value, _f64(-_MAX_LOG))
    return arith.select(underflow, _f64(0.0), math.exp(log_value))


def _lower_series(a: ir.Value, x: ir.Value) -> ir.Value:
    """``P(a, x)`` by its power series (Cephes ``igam``)."""

    def going_on(values: list[ir.Value]) -> ir.Value:
        _, term, total = values
        return _cmp(arith.CmpFPredicate.OGT, arith.divf(term, total), _f64(_EPSILON))

    def step(values: list[ir.Value]) -> list[ir.Value]:
        r, term, total = values
        r = arith.addf(r, _f64(1.0))
        term = arith.mulf(term, arith.divf(x, r))
        return [r, term, arith.addf(total, term)]

    _, _, total = _iterate([a, _f64(1.0), _f64(1.0)], going_on, step)
    return arith.divf(arith.mulf(total, _prefactor(a, x)), a)


def _upper_fraction(a: ir.Value, x: ir.Value) -> ir.Value:
    """``Q(a, x)`` by its continued fraction (Cephes ``igamc``), for x > 1 and x > a."""
    y = arith.subf(_f64(1.0), a)
    z = arith.addf(arith.addf(x, y), _f64(1.0))
    p_previous, q_previous = _f64(1.0), x
    p_last, q_last = arith.addf(x, _f64(1.0)), arith.mulf(z, x)
    answer = arith.divf(p_last, q_last)

    def going_on(values: list[ir.Value]) -> ir.Value:
        return _cmp(arith.CmpFPredicate.OGT, values[-1], _f64(_EPSILON))

    def step(values: list[ir.Value]) -> list[ir.Value]:
        c, y, z, p2, q2, p1, q1, answer, _ = values
        c, y, z = arith.addf(c, _f64(1.0)), arith.addf(y, _f64(1.0)), arith.addf(z, _f64(2.0))
        yc = arith.mulf(y, c)
        pk = arith.subf(arith.mulf(p1, z), arith.mulf(p2, yc))
        qk = arith.subf(arith.mulf(q1, z), arith.mulf(q2, yc))
        nonzero = _cmp(arith.CmpFPredicate.ONE, qk, _f64(0.0))
        ratio = arith.divf(pk, arith.select(nonzero, qk, _f64(1.0)))
        change = math.absf(arith.divf(arith.subf(answer, ratio), ratio))
        answer = arith.select(nonzero, ratio, answer)
        change = arith.select(nonzero, change, _f64(1.0))
        # rescale the convergents before they overflow (their ratio is what counts)
        large = _cmp(arith.CmpFPredicate.OGT, math.absf(pk), _f64(_BIG))
        scale = arith.select(large, _f64(_BIG_INVERSE), _f64(1.0))
        p2, q2 = arith.mulf(p1, scale), arith.mulf(q1, scale)
        p1, q1 = arith.mulf(pk, scale), arith.mulf(qk, scale)
        return [c, y, z, p2, q2, p1, q1, answer, change]

    *_, answer, _ = _iterate([_f64(0.0), y, z, p_previous, q_previous, p_last, q_last, answer, _f64(1.0)],
                             going_on, step)
    return arith.mulf(answer, _prefactor(a, x))


def _regularized(a: ir.Value, x: ir.Value, upper: bool) -> ir.Value:
    """``Q(a, x)`` if ``upper`` else ``P(a, x)``, in f64, PyTorch's special values included."""
    f64 = ir.F64Type.get()
    use_fraction = arith.andi(_cmp(arith.CmpFPredicate.OGT, x, _f64(1.0)),
                              _cmp(arith.CmpFPredicate.OGT, x, a))
    # the expansions only run on ordinary arguments (a special value would not converge)
    ordinary = arith.andi(arith.andi(_cmp(arith.CmpFPredicate.OGT, a, _f64(0.0)),
                                     _cmp(arith.CmpFPredicate.OGT, x, _f64(0.0))),
                          arith.andi(_cmp(arith.CmpFPredicate.OLT, a, _f64(pymath.inf)),
                                     _cmp(arith.CmpFPredicate.OLT, x, _f64(pymath.inf))))
    outer = scf.IfOp(ordinary, [f64], has_else=True)
    with ir.InsertionPoint(outer.then_block):
        branch = scf.IfOp(use_fraction, [f64], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            q = _upper_fraction(a, x)
            scf.YieldOp([q if upper else arith.subf(_f64(1.0), q)])
        with ir.InsertionPoint(branch.else_block):
            p = _lower_series(a, x)
            scf.YieldOp([arith.subf(_f64(1.0), p) if upper else p])
        scf.YieldOp([branch.results[0]])
    with ir.InsertionPoint(outer.else_block):
        scf.YieldOp([_f64(pymath.nan)])
    value = outer.results[0]
    low, high = (_f64(1.0), _f64(0.0)) if upper else (_f64(0.0), _f64(1.0))
    zero, infinite, nan = _f64(0.0), _f64(pymath.inf), _f64(pymath.nan)
    x_positive = _cmp(arith.CmpFPredicate.OGT, x, zero)
    # PyTorch's order of special cases (calc_igamma / calc_igammac); NaN arguments stay NaN
    cases = [
        (arith.ori(_cmp(arith.CmpFPredicate.OLT, x, zero), _cmp(arith.CmpFPredicate.OLT, a, zero)), nan),
        (_cmp(arith.CmpFPredicate.OEQ, a, zero), arith.select(x_positive, high, nan)),
        (_cmp(arith.CmpFPredicate.OEQ, x, zero), low),
        (_cmp(arith.CmpFPredicate.OEQ, a, infinite),
         arith.select(_cmp(arith.CmpFPredicate.OEQ, x, infinite), nan, low)),
        (_cmp(arith.CmpFPredicate.OEQ, x, infinite), high),
    ]
    for condition, special in reversed(cases):
        value = arith.select(condition, special, value)
    return value


def _widened(fn: Callable[[ir.Value, ir.Value], ir.Value]) -> Callable[[ir.Value, ir.Value], ir.Value]:
    def run(a: ir.Value, x: ir.Value) -> ir.Value:
        f64 = ir.F64Type.get()
        wide = [v if isinstance(v.type, ir.F64Type) else arith.extf(f64, v) for v in (a, x)]
        result = fn(*wide)
        return result if result.type == a.type else arith.truncf(a.type, result)

    run.__doc__ = fn.__doc__
    return run


@_widened
def igamma(a: ir.Value, x: ir.Value) -> ir.Value:
    """The regularized lower incomplete gamma function ``P(a, x)`` of two float scalars."""
    return _regularized(a, x, upper=False)


@_widened
def igammac(a: ir.Value, x: ir.Value) -> ir.Value:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return _regularized(a, x, upper=True)
