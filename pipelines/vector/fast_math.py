"""``tilecraft-fast-math``: f32 ``tanh``, ``exp``, ``erf``, ``sigmoid`` and ``gelu`` as short
polynomial / rational approximations (``CompileOptions(fast_math=True)``, ``--fast-math``),
as TVM's ``FastMath`` pass does.

What each becomes (scalar or vector f32; other types are left alone):

- ``math.tanh``: Eigen's rational approximation (odd degree-13 numerator over even
  degree-6 denominator, input clamped to +-7.9053, ``x`` itself below |x| = 0.0004): 11
  FMAs and one division, no ``exp``.
- ``math.erf`` and the erf the frontends expand (``ir/elementwise.py`` tags
  its result ``tilecraft.fast_math = "erf"``; the exact form has two branches, an ``exp``,
  two polynomials and a division): Eigen's rational erf (degree 13 over degree 8, input
  clamped to +-4). GELU's exact form ``0.5 x (1 + erf(x / sqrt 2))`` takes it, the tanh
  form takes the tanh above.
- ``math.exp``: Cephes' ``expf`` (pipelines/vector/vector_math.py), also on the scalars the
  default pipeline leaves to libm. Sigmoid, ``1 / (1 + exp(-x))`` as the frontends and TE
  write it, takes it. Why not ``0.5 + 0.5 tanh(x / 2)`` with the rational tanh: measured,
  it was slower than the exp form (docs/performance.md), whose vector exp the default
  pipeline already approximates, and its relative error in the negative tail reached 8%.

The maximum errors over float32, measured against float64 references on every float32 in
the ranges where the functions are not constant (tests/test_fast_math.py checks them, and
docs/performance.md lists them), are in :data:`MAX_ABS_ERROR`.

Why not MLIR's own: ``populateMathPolynomialApproximationPatterns`` is reachable only through
a test pass that neither ``mlir-opt`` nor the Python bindings of MLIR 22 (xtc builds) carry;
``math-expand-ops``, which they do carry, rewrites ``tanh`` through ``exp`` (no cheaper) and
leaves ``erf`` alone. The approximations here are the ones those patterns and Eigen use
(Cephes' exp, Eigen's rational tanh and erf).

Why at the start of the schedule stage: the graph and simplify stages match ops by their
bodies (softmax's ``exp`` for the fused attention kernel, sigmoids and GELUs for fusion);
the schedule then vectorizes the approximations' arith ops with the rest of each body.
"""

from __future__ import annotations

from typing import Callable, Mapping

from mlir import ir
from mlir.dialects import arith, math

from ...ir.elementwise import FAST_MATH_FUNCTION
from ..ir_queries import ops_where, replace_each
from ..passes import register_pass
from .vector_math import _exp, _splat

FAST_MATH = "tilecraft-fast-math"
# The attribute a frontend's expansion of a function puts on the op whose result is the
# function's value (its operand 1 is the argument): how the pass finds an erf made of
# arith ops.
FUNCTION_ATTR = FAST_MATH_FUNCTION

# Maximum errors over float32 (fast_math=True), measured against float64 references on a
# dense grid of [-10, 10] (2^21 points) plus magnitudes from 1e-38 to 3e38 (beyond +-10 each
# function is within 2^-22 relative of its limit), rounded up; tests/test_fast_math.py
# holds the compiled code to them. Absolute errors; exp's is relative (its values span
# 1e-38..3e38). Without fast_math: tanh 7.7e-8, erf 2.0e-7, GELU 4.5e-7 (tanh form 4.4e-7).
MAX_ABS_ERROR = {"tanh": 3.0e-7, "erf": 3.5e-7, "sigmoid": 1.0e-7, "gelu": 1.6e-6, "gelu_tanh": 9.0e-7}
MAX_REL_ERROR = {"exp": 1.0e-7}

# Eigen's generic_fast_tanh_float: tanh(x) ~ x P(x^2) / Q(x^2) on [-_TANH_CLAMP, _TANH_CLAMP].
_TANH_CLAMP = 7.90531110763549805
_TANH_TINY = 0.0004
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
           1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
# Eigen's generic_fast_erf_float: erf(x) ~ x P(x^2) / Q(x^2) on [-4, 4].
_ERF_CLAMP = 4.0
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


def _is_f32(value_type: ir.Type) -> bool:
    element = ir.VectorType(value_type).element_type if isinstance(value_type, ir.VectorType) else value_type
    return isinstance(element, ir.F32Type)


def _constant(x: ir.Value, value: float) -> ir.Value:
    return _splat(x.type, ir.F32Type.get(), value)


def _polynomial(coefficients: tuple[float, ...], z: ir.Value) -> ir.Value:
    """``sum(c[k] z^(n-k))`` by Horner's rule with FMAs, highest degree first."""
    result = _constant(z, coefficients[0])
    for coefficient in coefficients[1:]:
        result = math.fma(result, z, _constant(z, coefficient))
    return result


def _odd_rational(x: ir.Value, clamp: float, numerator: tuple[float, ...], denominator: tuple[float, ...]) -> ir.Value:
    """``x P(x^2) / Q(x^2)`` for |x| < clamp, +-1 beyond (NaN stays NaN: maximumf and
    minimumf propagate it). Why +-1 exactly: the rational is 1 - 1e-7 or so at the clamp,
    and ``1 + tanh(x)`` (GELU's tanh form) must be 0, not 1e-7, for very negative x (the
    product with x reached 4e31 at x = -3.4e38)."""
    clamped = arith.minimumf(arith.maximumf(x, _constant(x, -clamp)), _constant(x, clamp))
    square = arith.mulf(clamped, clamped)
    rational = arith.divf(arith.mulf(clamped, _polynomial(numerator, square)), _polynomial(denominator, square))
    saturated = arith.cmpf(arith.CmpFPredicate.OGE, math.absf(x), _constant(x, clamp))
    return arith.select(saturated, math.copysign(_constant(x, 1.0), x), rational)


def fast_tanh(x: ir.Value) -> ir.Value:
    """Eigen's rational tanh (module docstring); ``x`` itself where |x| < 0.0004."""
    rational = _odd_rational(x, _TANH_CLAMP, _TANH_P, _TANH_Q)
    tiny = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), _constant(x, _TANH_TINY))
    return arith.select(tiny, x, rational)


def fast_erf(x: ir.Value) -> ir.Value:
    """Eigen's rational erf (module docstring)."""
    return _odd_rational(x, _ERF_CLAMP, _ERF_P, _ERF_Q)


def _tagged(function: str) -> Callable[[ir.Operation], bool]:
    def matches(op: ir.Operation) -> bool:
        return (FUNCTION_ATTR in op.attributes and ir.StringAttr(op.attributes[FUNCTION_ATTR]).value == function
                and _is_f32(op.results[0].type))
    return matches


def _f32_op(name: str) -> Callable[[ir.Operation], bool]:
    return lambda op: op.name == name and _is_f32(op.results[0].type)


def _erase_dead(root: ir.Operation) -> None:
    """Erase the arith/math ops whose results are no longer used (what a replaced
    expansion left), so the schedule does not vectorize them."""
    while True:
        dead = ops_where(root, lambda op: op.name.split(".")[0] in ("arith", "math") and len(op.results) > 0
                         and all(not list(r.uses) for r in op.results))
        if not dead:
            return
        for op in dead:
            op.erase()


@register_pass(FAST_MATH,
               "f32 tanh, exp, erf (so sigmoid and GELU) as polynomial/rational "
               "approximations (errors: pipelines/vector/fast_math.py)")
def fast_math_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    replace_each(module, _tagged("erf"), lambda op: fast_erf(op.operands[1]))
    _erase_dead(module)
    replace_each(module, _f32_op("math.erf"), lambda op: fast_erf(op.operands[0]))
    replace_each(module, _f32_op("math.tanh"), lambda op: fast_tanh(op.operands[0]))
    replace_each(module, _f32_op("math.exp"), lambda op: _exp(op.operands[0]))
