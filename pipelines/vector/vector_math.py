"""Vector math that LLVM would otherwise lower to scalar code: ``exp`` and float sums.

``tilecraft-reassociate-reductions`` marks float ``vector.reduction <add>/<mul>`` ops
``fastmath<reassoc>``. Why: without the flag LLVM must add the lanes in order, one dependent
scalar add per lane (a 64-lane row sum of a layer norm or softmax cost ~256 cycles, 4 per
element); with it, a tree of vector adds. The schedule already reassociates these sums (it
tiles the reduction loop), so the result is as exact as before, in another order. The
llvm stage runs it again after ``convert-vector-to-llvm``, on LLVM's
``vector.reduce.fadd/fmul``: lowering a ``vector.contract`` that is a dot product (layer
norm's sum of squared deviations, which ``reduction_to_contract`` turns into one) creates
its reduction there, unflagged — the 128x768 layer norm spent most of its time in those
ordered sums (docs/performance.md).

``tilecraft-approximate-exp``: vector ``math.exp`` and ``math.tanh`` (tanh-approximated GELU)
on f32 as polynomials in arith ops, so they stay in vector registers.

Why this pass exists: LLVM has no vector ``exp`` instruction; ``llvm.intr.exp`` on a
``vector<64xf32>`` is scalarized into 64 calls of libm's ``expf``. A vectorized softmax
(BERT's 12x128x128 attention probabilities) then spent nearly all its time in ``expf``. MLIR's own polynomial approximation patterns are not exposed by the Python
bindings of MLIR 22, so this pass writes Cephes' ``expf`` (the approximation MLIR's
``populateMathPolynomialApproximationPatterns``, Eigen and XNNPACK use) with arith and math
ops that lower to AVX-512 instructions:

    n = roundeven(x * log2(e)),  r = x - n * ln(2)     (two FMAs: ln 2 split in two)
    exp(r) ~ 1 + r + r^2 * P(r)                        (|r| <= ln(2)/2, degree-5 P)
    exp(x) = exp(r) * 2^n                              (n added to exp(r)'s exponent bits)

Below ln(2^-126) the result would be a denormal and is flushed to 0 by a select, above
ln(FLT_MAX) it is +inf, and NaN stays NaN (three selects, no clamping: the integer steps'
garbage there is never selected). About 25 instructions per vector; the earlier form
(clamps with NaN-propagating min/max, two scaling factors) took a fifth longer on 1M
elements. Maximum relative error about 2 ulp. ``tanh`` is Cephes'
``tanhf`` on top of it. Scalar ops (loops the schedule left scalar) keep calling libm.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from ..ir_queries import defining_op, ops_where, replace_each, splat_float
from ..passes import register_pass

APPROXIMATE_EXP = "tilecraft-approximate-exp"
DIVIDE_BY_RECIPROCAL = "tilecraft-divide-by-reciprocal"
REASSOCIATE_REDUCTIONS = "tilecraft-reassociate-reductions"

_LOG2E = 1.44269504088896341
# ln(2) = _LN2_HI + _LN2_LO, _LN2_HI exact in f32 with trailing zero bits (Cephes).
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
# Cephes expf: P(r) coefficients, highest degree first.
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)
# Below _X_MIN = ln(2^-126) the result would be a denormal: it is flushed to 0. Why: on x86
# every instruction that produces or reads a denormal takes a microcode assist; a softmax
# over masked keys (x - max = -10000 or -inf) then ran several times slower in its exps and
# in the products with V that followed (docs/performance.md, round 10). |error| < 2^-126 there.
# _X_MAX: the largest f32 below ln(FLT_MAX); above, exp overflows to +inf.
_X_MIN, _X_MAX = -87.33654475, 88.72283172607421875
_F32_MANTISSA_BITS = 23


def _retyped(like: ir.Type, element: ir.Type) -> ir.Type:
    """``element``, as a vector of ``like``'s shape when ``like`` is a vector."""
    return ir.VectorType.get(ir.VectorType(like).shape, element) if isinstance(like, ir.VectorType) else element


def _splat(like: ir.Type, element: ir.Type, value: float | int) -> ir.Value:
    """A constant ``value`` of ``element`` shaped like ``like`` (a vector: a splat)."""
    shaped = _retyped(like, element)
    attr = (ir.FloatAttr.get(element, value) if isinstance(element, ir.F32Type)
            else ir.IntegerAttr.get(element, int(value)))
    if isinstance(shaped, ir.VectorType):
        attr = ir.DenseElementsAttr.get_splat(shaped, attr)
    return arith.constant(shaped, attr)


def _exp(x: ir.Value) -> ir.Value:
    """exp(``x``) for an f32 value (a vector, or a scalar for tilecraft-fast-math), emitted
    at the current insertion point."""
    vector_type = x.type
    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    int_type = _retyped(vector_type, i32)
    c = lambda value: _splat(vector_type, f32, value)  # noqa: E731
    n = math.roundeven(arith.mulf(x, c(_LOG2E)))
    r = math.fma(n, c(-_LN2_HI), x)
    r = math.fma(n, c(-_LN2_LO), r)
    poly = c(_POLY[0])
    for coefficient in _POLY[1:]:
        poly = math.fma(poly, r, c(coefficient))
    value = arith.addf(math.fma(poly, arith.mulf(r, r), r), c(1.0))
    # 2^n added to value's exponent field: normal for x in [_X_MIN, _X_MAX] (value >= 1
    # where n = -126, value < 1 where n = 128).
    shift = arith.shli(arith.fptosi(int_type, n), _splat(int_type, i32, _F32_MANTISSA_BITS))
    value = arith.bitcast(vector_type, arith.addi(arith.bitcast(int_type, value), shift))
    # Outside that range (and for NaN, where fptosi is poison) the selects decide.
    underflow = arith.cmpf(arith.CmpFPredicate.OLT, x, c(_X_MIN))
    value = arith.select(underflow, c(0.0), value)
    overflow = arith.cmpf(arith.CmpFPredicate.OGT, x, c(_X_MAX))
    value = arith.select(overflow, c(float("inf")), value)
    is_nan = arith.cmpf(arith.CmpFPredicate.UNO, x, x)
    return arith.select(is_nan, x, value)


# Cephes tanhf: below this |x|, x + x^3 P(x^2) (1 - 2 / (exp(2x) + 1) would cancel).
_TANH_SMALL = 0.625
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
              -3.33332819422e-1)


def _tanh(x: ir.Value) -> ir.Value:
    """tanh(``x``) for an f32 value (Cephes tanhf, about 2 ulp), via :func:`_exp`."""
    vector_type = x.type
    c = lambda value: _splat(vector_type, ir.F32Type.get(), value)  # noqa: E731
    magnitude = math.absf(x)
    # Large |x|: 1 - 2 / (exp(2|x|) + 1), the sign restored; exp overflows to inf, giving 1.
    large = arith.subf(c(1.0), arith.divf(c(2.0), arith.addf(_exp(arith.addf(magnitude, magnitude)), c(1.0))))
    large = math.copysign(large, x)
    z = arith.mulf(x, x)
    poly = c(_TANH_POLY[0])
    for coefficient in _TANH_POLY[1:]:
        poly = math.fma(poly, z, c(coefficient))
    small = math.fma(arith.mulf(poly, z), x, x)
    is_large = arith.cmpf(arith.CmpFPredicate.OGE, magnitude, c(_TANH_SMALL))
    return arith.select(is_large, large, small)


_EXPANSIONS = {"math.exp": _exp, "math.tanh": _tanh}


def _is_vector_f32_expansion(op: ir.Operation) -> bool:
    if op.name not in _EXPANSIONS:
        return False
    result = op.results[0].type
    return isinstance(result, ir.VectorType) and isinstance(ir.VectorType(result).element_type, ir.F32Type)


@register_pass(APPROXIMATE_EXP,
               "Vector f32 math.exp and math.tanh as polynomials in arith ops (LLVM "
               "scalarizes them into expf / tanhf calls)")
def approximate_exp_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    replace_each(module, _is_vector_f32_expansion, lambda op: _EXPANSIONS[op.name](op.operands[0]))


_REASSOCIABLE_KINDS = ("add", "mul")
# Float sums and products in the LLVM dialect, with the attribute holding their flags.
_LLVM_REDUCTIONS = ("llvm.intr.vector.reduce.fadd", "llvm.intr.vector.reduce.fmul")


def _is_ordered_float_reduction(op: ir.Operation) -> bool:
    if op.name in _LLVM_REDUCTIONS:
        return True
    if op.name != "vector.reduction" or not isinstance(op.results[0].type, ir.FloatType):
        return False
    kind = str(op.attributes["kind"])
    return any(f"<{k}>" in kind for k in _REASSOCIABLE_KINDS)


@register_pass(REASSOCIATE_REDUCTIONS,
               "Mark float vector.reduction <add>/<mul> (and LLVM's vector.reduce.fadd/fmul) "
               "fastmath<reassoc> (LLVM adds lanes one by one otherwise)")
def reassociate_reductions_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for op in ops_where(module, _is_ordered_float_reduction):
        dialect, name = ("llvm", "fastmathFlags") if op.name in _LLVM_REDUCTIONS else ("arith", "fastmath")
        prefix = f"#{dialect}.fastmath<"
        text = str(op.attributes[name]) if name in op.attributes else f"{prefix}none>"
        flags = {f.strip() for f in text[len(prefix):-1].split(",")} - {"", "none"}
        if flags & {"reassoc", "fast"}:
            continue
        op.attributes[name] = ir.Attribute.parse(f"{prefix}{','.join(sorted(flags | {'reassoc'}))}>")


# ---- division by a constant ---------------------------------------------------------------

_NUMPY_FLOATS = {"f32": np.float32, "f64": np.float64}


def _reciprocal_of_constant(op: ir.Operation) -> tuple[np.ndarray, np.ndarray] | None:
    """(divisor, its correctly rounded reciprocal) of an ``arith.divf`` whose divisor is a
    constant (scalar or splat vector) of f32 / f64, when the division can be computed from
    the reciprocal exactly: divisor and reciprocal finite and normal. ``None`` otherwise,
    and for a power of two (LLVM already multiplies by its exact reciprocal)."""
    if op.name != "arith.divf":
        return None
    element = op.results[0].type
    if isinstance(element, ir.VectorType):
        element = ir.VectorType(element).element_type
    dtype = _NUMPY_FLOATS.get(str(element))
    value = splat_float(op.operands[1])
    if dtype is None or value is None:
        return None
    divisor = dtype(value)
    with np.errstate(all="ignore"):
        reciprocal = dtype(1) / divisor
    info = np.finfo(dtype)
    normal = [np.isfinite(v) and abs(v) >= info.tiny for v in (divisor, reciprocal)]
    mantissa, _ = np.frexp(divisor)
    if not all(normal) or abs(mantissa) == 0.5:
        return None
    return divisor, reciprocal


def _divide_by_reciprocal(op: ir.Operation) -> ir.Value:
    """``x / d`` for a constant ``d``, from ``r = RN(1/d)``: ``q = x * r``, its exact
    remainder ``x - q * d`` (one FMA) and the corrected ``q + remainder * r`` (another).
    By Markstein's theorem (r within half an ulp of 1/d, q within an ulp of x/d) the
    corrected quotient is x / d correctly rounded, bit for bit what ``divf`` gives, as long
    as the remainder does not underflow: for |x| >= 2^(emin + 2p) (about 1e-29 in f32,
    1e-276 in f64) and |x / d| below the largest finite value; below, it may differ from
    divf's quotient by an ulp, and within an ulp of overflow ``q`` may be infinite. ``q``
    stays where the remainder is zero (x = +-0, whose sign the correction would lose, or
    an exact quotient) or where the correction is NaN (x or q infinite, x NaN)."""
    x, d = op.operands
    divisor, reciprocal = _reciprocal_of_constant(op)
    result_type = op.results[0].type

    def constant(value: np.floating) -> ir.Value:
        element = ir.VectorType(result_type).element_type if isinstance(result_type, ir.VectorType) else result_type
        attr = ir.FloatAttr.get(element, float(value))
        if isinstance(result_type, ir.VectorType):
            attr = ir.DenseElementsAttr.get_splat(result_type, attr)
        return arith.constant(result_type, attr)

    r = constant(reciprocal)
    q = arith.mulf(x, r)
    remainder = math.fma(arith.negf(q), d, x)
    corrected = math.fma(remainder, r, q)
    corrects = arith.andi(arith.cmpf(arith.CmpFPredicate.ONE, remainder, constant(0.0)),
                          arith.cmpf(arith.CmpFPredicate.ORD, corrected, corrected))
    return arith.select(corrects, corrected, q)


@register_pass(DIVIDE_BY_RECIPROCAL,
               "Float division by a constant as a multiplication by its reciprocal and two "
               "FMAs that make the quotient exactly divf's (a vector divide is far slower)")
def divide_by_reciprocal_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: QuantizeLinear divides by its scale, a constant; on AVX-512 a 16-lane ``vdivps``
    takes about 10 cycles against 0.5 for a multiply or an FMA, and a requantizing epilogue
    (three divisions per element in a ResNet residual block) spent most of its time there."""
    replace_each(module, lambda op: _reciprocal_of_constant(op) is not None, _divide_by_reciprocal)
