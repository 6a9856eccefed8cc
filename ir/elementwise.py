"""Scalar bodies of elementwise operators, shared by every frontend.

Each function here builds arith/math ops on *scalar* ``ir.Value`` s at the current insertion
point, which is inside a ``linalg.generic`` body made by :func:`core.elementwise`:

    core.elementwise([a, b], element, lambda x, y: divide(x, y, unsigned=False))

They encode the semantics frameworks agree on and that MLIR leaves to the frontend:
integer signedness (MLIR integers are signless, so callers say which operand was unsigned),
C-style truncating division, Python-style floored remainder, out-of-range shifts,
float<->int conversions without LLVM poison, and formulas for the functions whose math
dialect op the CPU pipeline cannot lower (``math.erf``, ``math.asinh``, ``math.acosh``,
``math.atanh``, ``math.ipowi``, ``math.fpowi``: they reach LLVM translation unconverted)
or lowers inaccurately (``math.log1p``, ``math.expm1``: ``log(1 + x)``, ``exp(x) - 1``).

Where LLVM would give poison or trap (integer division by zero, ``INT_MIN / -1``, shifts by
the bit width or more), the bodies guard the operands and return numpy's answer instead, so
a model never crashes the process on bad data.
"""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from . import core, small_types
from ..errors import InternalError, OperandError

ScalarFn = Callable[[ir.Value], ir.Value]
# The attribute tilecraft-fast-math (pipelines/vector/fast_math.py, FUNCTION_ATTR) finds an
# expanded function by: on the op whose result is the function's value.
FAST_MATH_FUNCTION = "tilecraft.fast_math"


# --- small helpers ------------------------------------------------------------------------

def is_bool(element: ir.Type) -> bool:
    return isinstance(element, ir.IntegerType) and element.width == 1


def like(value: float | int | bool, scalar: ir.Value) -> ir.Value:
    """A constant of ``scalar``'s type. Integers are wrapped to the type's width (so an
    unsigned 255 becomes the i8 bit pattern -1: MLIR integers are signless)."""
    element = scalar.type
    if isinstance(element, ir.IntegerType) and element.width > 1:
        half = 1 << (element.width - 1)
        value = (int(value) + half) % (1 << element.width) - half
    return core.scalar_constant(value, element)


def _is_f16(element: ir.Type) -> bool:
    """16-bit floats (f16 and bf16), which the formulas here run in f32."""
    return isinstance(element, (ir.F16Type, ir.BF16Type))


def widened(fn: ScalarFn) -> ScalarFn:
    """Run ``fn`` in f32 when its argument is f16 or bf16.

    Why: the formulas below square their argument or use f32/f64 polynomial tables; in f16
    ``x * x`` overflows from 256 on and the tables have no f16 version.
    """

    def run(x: ir.Value) -> ir.Value:
        if not _is_f16(x.type):
            return fn(x)
        return arith.truncf(x.type, fn(arith.extf(ir.F32Type.get(), x)))

    return run


def _horner(coefficients: Sequence[float], x: ir.Value) -> ir.Value:
    """``sum(c[k] * x**k)`` by Horner's rule."""
    result = like(coefficients[-1], x)
    for c in reversed(coefficients[:-1]):
        result = arith.addf(arith.mulf(result, x), like(c, x))
    return result


def _fma_horner(coefficients: Sequence[float], x: ir.Value) -> ir.Value:
    """:func:`_horner` with one fused multiply-add per step: half the instructions, one
    rounding per step instead of two."""
    result = like(coefficients[-1], x)
    for c in reversed(coefficients[:-1]):
        result = math.fma(result, x, like(c, x))
    return result


def _clamp_float(x: ir.Value, low: float, high: float) -> ir.Value:
    return arith.minimumf(arith.maximumf(x, like(low, x)), like(high, x))


# --- comparisons, extremes, selection -----------------------------------------------------

# predicate -> (float predicate, signed int predicate, unsigned int predicate). Float
# predicates are ordered (false when either side is NaN) except "ne", as in C and numpy.
_PREDICATES = {
    "eq": (arith.CmpFPredicate.OEQ, arith.CmpIPredicate.eq, arith.CmpIPredicate.eq),
    "ne": (arith.CmpFPredicate.UNE, arith.CmpIPredicate.ne, arith.CmpIPredicate.ne),
    "lt": (arith.CmpFPredicate.OLT, arith.CmpIPredicate.slt, arith.CmpIPredicate.ult),
    "le": (arith.CmpFPredicate.OLE, arith.CmpIPredicate.sle, arith.CmpIPredicate.ule),
    "gt": (arith.CmpFPredicate.OGT, arith.CmpIPredicate.sgt, arith.CmpIPredicate.ugt),
    "ge": (arith.CmpFPredicate.OGE, arith.CmpIPredicate.sge, arith.CmpIPredicate.uge),
}
PREDICATES = tuple(_PREDICATES)


def compare(predicate: str, a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``a <predicate> b`` as i1; ``predicate`` is one of :data:`PREDICATES`.

    Booleans compare as unsigned (true > false), as numpy does.
    """
    float_pred, signed_pred, unsigned_pred = _PREDICATES[predicate]
    if core.is_float(a.type):
        return arith.cmpf(float_pred, a, b)
    return arith.cmpi(unsigned_pred if unsigned or is_bool(a.type) else signed_pred, a, b)


def maximum(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """numpy ``maximum``: NaN-propagating for floats."""
    if core.is_float(a.type):
        return arith.maximumf(a, b)
    return arith.maxui(a, b) if unsigned or is_bool(a.type) else arith.maxsi(a, b)


def minimum(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """numpy ``minimum``: NaN-propagating for floats."""
    if core.is_float(a.type):
        return arith.minimumf(a, b)
    return arith.minui(a, b) if unsigned or is_bool(a.type) else arith.minsi(a, b)


def clip(
    x: ir.Value, low: ir.Value | None, high: ir.Value | None, *, unsigned: bool = False
) -> ir.Value:
    """numpy ``clip``: ``min(max(x, low), high)``, so ``high`` wins when ``low > high``."""
    if low is not None:
        x = maximum(x, low, unsigned=unsigned)
    if high is not None:
        x = minimum(x, high, unsigned=unsigned)
    return x


def is_nan(x: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.UNO, x, x)


def is_inf(x: ir.Value, *, positive: bool = True, negative: bool = True) -> ir.Value:
    """Whether ``x`` is +inf (``positive``) or -inf (``negative``)."""
    checks = [
        arith.cmpf(arith.CmpFPredicate.OEQ, x, like(value, x))
        for value, wanted in ((pymath.inf, positive), (-pymath.inf, negative))
        if wanted
    ]
    if not checks:
        return core.scalar_constant(False, ir.IntegerType.get_signless(1))
    return checks[0] if len(checks) == 1 else arith.ori(*checks)


# --- arithmetic ---------------------------------------------------------------------------

def add(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.addf(a, b) if core.is_float(a.type) else arith.addi(a, b)


def subtract(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.subf(a, b) if core.is_float(a.type) else arith.subi(a, b)


def multiply(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.mulf(a, b) if core.is_float(a.type) else arith.muli(a, b)


def negate(x: ir.Value) -> ir.Value:
    """``-x``; integers wrap (``-INT_MIN == INT_MIN``)."""
    return arith.negf(x) if core.is_float(x.type) else arith.subi(like(0, x), x)


def absolute(x: ir.Value, *, unsigned: bool = False) -> ir.Value:
    if core.is_float(x.type):
        return math.absf(x)
    return x if unsigned else math.absi(x)


def sign(x: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """-1, 0 or 1 in ``x``'s type; NaN stays NaN (numpy ``sign``)."""
    if core.is_float(x.type):
        zero = like(0, x)
        signed_one = math.copysign(like(1, x), x)
        # x == 0 or NaN: return x itself (keeps 0 and NaN).
        return arith.select(arith.cmpf(arith.CmpFPredicate.ONE, x, zero), signed_one, x)
    zero = like(0, x)
    positive = arith.extui(x.type, compare("gt", x, zero, unsigned=unsigned))
    if unsigned:
        return positive
    negative = arith.extui(x.type, compare("lt", x, zero))
    return arith.subi(positive, negative)


def reciprocal(x: ir.Value) -> ir.Value:
    return arith.divf(like(1, x), x)


@dataclass(frozen=True)
class _SafeDivisor:
    """An integer divisor with the values LLVM cannot divide by replaced by 1.

    ``zero``: where the divisor was 0 (LLVM: undefined behaviour; x86 traps).
    ``minus_one``: where a signed divisor was -1 (``INT_MIN / -1`` overflows and traps).
    """

    value: ir.Value
    zero: ir.Value
    minus_one: ir.Value | None


def _safe_divisor(b: ir.Value, *, unsigned: bool) -> _SafeDivisor:
    one = like(1, b)
    zero = arith.cmpi(arith.CmpIPredicate.eq, b, like(0, b))
    minus_one = None if unsigned else arith.cmpi(arith.CmpIPredicate.eq, b, like(-1, b))
    risky = zero if minus_one is None else arith.ori(zero, minus_one)
    return _SafeDivisor(arith.select(risky, one, b), zero, minus_one)


def divide(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``a / b``: IEEE for floats; integers truncate toward zero (C, ONNX), unsigned
    integers divide as unsigned. Integer division by zero gives 0 (as numpy does) instead of
    trapping; ``INT_MIN / -1`` wraps to ``INT_MIN``."""
    if core.is_float(a.type):
        return arith.divf(a, b)
    divisor = _safe_divisor(b, unsigned=unsigned)
    if unsigned:
        quotient = arith.divui(a, divisor.value)
    else:
        quotient = arith.divsi(a, divisor.value)
        quotient = arith.select(divisor.minus_one, negate(a), quotient)
    return arith.select(divisor.zero, like(0, a), quotient)


def remainder(a: ir.Value, b: ir.Value, *, floored: bool, unsigned: bool = False) -> ir.Value:
    """``a mod b``.

    ``floored=False``: C ``fmod``, the result has the sign of ``a`` (numpy ``fmod``).
    ``floored=True``: Python ``%``, the result has the sign of ``b`` (numpy ``mod``).
    Integer remainder by zero gives 0 (numpy's answer) instead of trapping.
    """
    if core.is_float(a.type):
        result = arith.remf(a, b)
    else:
        divisor = _safe_divisor(b, unsigned=unsigned)
        result = (arith.remui if unsigned else arith.remsi)(a, divisor.value)
        result = arith.select(divisor.zero, like(0, a), result)
    if not floored or unsigned:
        return result
    zero = like(0, a)
    nonzero = compare("ne", result, zero)
    signs_differ = arith.xori(compare("lt", result, zero), compare("lt", b, zero))
    return arith.select(arith.andi(nonzero, signs_differ), add(result, b), result)


def _integer_power(base: ir.Value, exponent: ir.Value, *, exponent_unsigned: bool) -> ir.Value:
    """``base ** exponent`` for integers, wrapping like numpy (square-and-multiply over
    every bit of the exponent, unrolled: a linalg body has no loops).

    A negative exponent gives what truncating the real result gives: 1 for base 1,
    +-1 for base -1, 0 otherwise (numpy refuses; ONNX leaves it undefined).
    """
    one = like(1, base)
    width = exponent.type.width
    result, square, bits = one, base, exponent
    for position in range(width):
        bit = arith.trunci(ir.IntegerType.get_signless(1), bits)
        result = arith.select(bit, arith.muli(result, square), result)
        if position + 1 < width:
            square = arith.muli(square, square)
            bits = arith.shrui(bits, like(1, bits))
    if exponent_unsigned:
        return result
    negative = arith.cmpi(arith.CmpIPredicate.slt, exponent, like(0, exponent))
    base_is_one = arith.cmpi(arith.CmpIPredicate.eq, base, one)
    base_is_minus_one = arith.cmpi(arith.CmpIPredicate.eq, base, like(-1, base))
    odd = arith.trunci(ir.IntegerType.get_signless(1), exponent)
    minus_one_power = arith.select(odd, like(-1, base), one)
    fraction = arith.select(
        base_is_one, one, arith.select(base_is_minus_one, minus_one_power, like(0, base))
    )
    return arith.select(negative, fraction, result)


# Constant exponents whose power is cheaper as multiplications than as ``math.powf``.
SMALL_INTEGER_EXPONENTS = (1, 2, 3, 4)


def small_integer_exponent(exponent: "np.ndarray | float | int") -> int | None:
    """The exponent as an int when it is one value (any shape holding one element) in
    :data:`SMALL_INTEGER_EXPONENTS`, else None."""
    values = np.asarray(exponent)
    if values.size != 1 or values.dtype.kind not in "iuf":
        return None
    value = values.reshape(-1)[0].item()
    if not pymath.isfinite(value) or value != int(value) or int(value) not in SMALL_INTEGER_EXPONENTS:
        return None
    return int(value)


def float_power_by_multiplication(base: ir.Value, exponent: int) -> ir.Value:
    """``base ** exponent`` for a float ``base`` and one of :data:`SMALL_INTEGER_EXPONENTS`,
    by multiplications (``x * x * x``; 4 as a squared square).

    Why: ``math.powf`` has no vector instruction. LLVM scalarizes a vector ``powf`` into one
    libm ``powf`` call per lane, so the tanh-GELU of GPT-2 and ALBERT (``0.5 x (1 + tanh(c (x
    + 0.044715 x**3)))``, exported as ONNX ``Pow(x, 3)``) made the GEMM kernel it was fused
    into 3.8x as slow as the same-size GEMM without it (docs/performance.md, round 27).
    onnxruntime's Pow and MLIR's algebraic simplification patterns make the same rewrite.
    The results agree with ``powf`` to within 2 ulp (two roundings instead of one);
    infinities, NaNs and signed zeros come out as ``powf`` gives them. f16/bf16 multiply in
    f32 and round once.
    """
    if exponent not in SMALL_INTEGER_EXPONENTS:
        raise InternalError(f"no multiplication form for the exponent {exponent!r}")

    def multiply(x: ir.Value) -> ir.Value:
        if exponent == 1:
            return x
        square = arith.mulf(x, x)
        if exponent == 2:
            return square
        return arith.mulf(square, x) if exponent == 3 else arith.mulf(square, square)

    return widened(multiply)(base)


def power(
    base: ir.Value,
    exponent: ir.Value,
    *,
    base_unsigned: bool = False,
    exponent_unsigned: bool = False,
) -> ir.Value:
    """``base ** exponent`` in ``base``'s type, for any mix of float and integer operands.

    float ** float: ``math.powf``. float ** int: the exponent is converted to the base's
    type (exact for the exponents that do not overflow anyway). int ** int: exact,
    wrapping. int ** float: computed in f64 and truncated toward zero (numpy's
    ``power(...).astype(int)``).
    """
    if core.is_float(base.type):
        if not core.is_float(exponent.type):
            exponent = cast(exponent, base.type, source_unsigned=exponent_unsigned)
        elif exponent.type != base.type:
            exponent = cast(exponent, base.type)
        return math.powf(base, exponent)
    if core.is_float(exponent.type):
        f64 = ir.F64Type.get()
        real = math.powf(cast(base, f64, source_unsigned=base_unsigned), cast(exponent, f64))
        return cast(real, base.type, target_unsigned=base_unsigned)
    # Square-and-multiply in the wider type: wrapping then truncating equals wrapping in
    # the narrow type, and every bit of a wide exponent counts.
    if exponent.type.width > base.type.width:
        wide = cast(base, exponent.type, source_unsigned=base_unsigned)
        result = _integer_power(wide, exponent, exponent_unsigned=exponent_unsigned)
        return arith.trunci(base.type, result)
    if exponent.type != base.type:
        exponent = cast(exponent, base.type, source_unsigned=exponent_unsigned)
    return _integer_power(base, exponent, exponent_unsigned=exponent_unsigned)


# --- bits and logic -----------------------------------------------------------------------

def logical_not(x: ir.Value) -> ir.Value:
    """Bitwise complement (``not`` for i1, ``~`` for integers)."""
    return arith.xori(x, like(-1, x) if not is_bool(x.type) else like(True, x))


def shift(a: ir.Value, b: ir.Value, *, left: bool, unsigned: bool = True) -> ir.Value:
    """``a << b`` or ``a >> b`` (logical if ``unsigned``, arithmetic otherwise).

    Shifting by the bit width or more (or by a negative amount) is poison in LLVM; here
    it shifts every bit out, as numpy's reference does: 0, or -1/0 for a signed right shift.
    """
    width = a.type.width
    in_range = arith.cmpi(arith.CmpIPredicate.ult, b, like(width, b))
    if not left and not unsigned:
        return arith.shrsi(a, arith.select(in_range, b, like(width - 1, b)))
    safe = arith.select(in_range, b, like(0, b))
    shifted = arith.shli(a, safe) if left else arith.shrui(a, safe)
    return arith.select(in_range, shifted, like(0, a))


# --- conversions --------------------------------------------------------------------------

def cast(
    value: ir.Value,
    to: ir.Type,
    *,
    source_unsigned: bool = False,
    target_unsigned: bool = False,
    saturate: bool = True,
) -> ir.Value:
    """C-style conversion of one scalar, without LLVM poison for float -> narrow int.

    float8/float4 on either side go through ``f32`` (ir/small_types.py; ``saturate``
    says what an out-of-range value becomes), and bf16 <-> f16 too (neither is narrower).

    Float -> integer truncates toward zero. LLVM's ``fptosi``/``fptoui`` are poison when the
    value does not fit the *target*, e.g. 200.0 -> u8 through a signed i8; so narrow
    targets convert through i32 and then wrap, unsigned 32-bit through i64, and unsigned
    64-bit with ``fptoui``: the bit patterns x86 (and numpy's ``astype``) produce for
    in-range values of the wider type. Everything else is :func:`core.convert_scalar`.
    """
    source = value.type
    if source == to:
        return value
    f32 = ir.F32Type.get()
    if small_types.small_format(source) is not None:
        value = small_types.decode(value)
        return value if to == f32 else cast(value, to, target_unsigned=target_unsigned, saturate=saturate)
    if small_types.small_format(to) is not None:
        wide = cast(value, f32, source_unsigned=source_unsigned)
        return small_types.encode(wide, to, saturate=saturate)
    if core.is_float(source) and core.is_float(to) and source.width == to.width:  # bf16 <-> f16
        return core.convert_scalar(core.convert_scalar(value, f32), to)
    if not (core.is_float(source) and isinstance(to, ir.IntegerType) and to.width > 1):
        return core.convert_scalar(value, to, unsigned=source_unsigned)
    if to.width == 64:
        return arith.fptoui(to, value) if target_unsigned else arith.fptosi(to, value)
    wide = ir.IntegerType.get_signless(64 if target_unsigned and to.width == 32 else 32)
    converted = arith.fptosi(wide, value)
    return converted if wide == to else arith.trunci(to, converted)


def cast_dtypes(value: ir.Value, source: np.dtype, target: np.dtype, to: ir.Type, *, saturate: bool) -> ir.Value:
    """Convert a scalar of numpy type ``source`` to ``target`` (MLIR element type ``to``),
    either of them possibly a sub-byte type carried as ``i8`` (see ir/small_types.py);
    others go to :func:`cast`.

    Integer targets wrap (as numpy's ``astype`` and ONNX's reference do): the value is
    converted to ``i32`` first, then its low bits are kept and sign- or zero-extended.
    """
    source, target = np.dtype(source), np.dtype(target)
    f32 = ir.F32Type.get()
    i8 = ir.IntegerType.get_signless(8)
    source_unsigned = source.kind == "u" or source.name in ("uint4", "uint2")
    if source.name == small_types.FLOAT4:
        value, source_unsigned = small_types.decode(value, small_types.FORMATS["f4E2M1FN"]), False
    if target.name == small_types.FLOAT4:
        wide = cast(value, f32, source_unsigned=source_unsigned)
        return arith.trunci(i8, small_types.encode_code(wide, small_types.FORMATS["f4E2M1FN"], saturate=True))
    if target.name in small_types.SUB_BYTE_INTEGERS:
        i32 = ir.IntegerType.get_signless(32)
        wide = cast(value, i32, source_unsigned=source_unsigned)
        return small_types.normalize(arith.trunci(i8, wide), target)
    return cast(value, to, source_unsigned=source_unsigned, target_unsigned=target.kind == "u",
                saturate=saturate)


# --- transcendental functions the pipeline cannot lower (accurately) as math ops ---------

@widened
def log1p(x: ir.Value) -> ir.Value:
    """``log(1 + x)``, accurate for tiny ``x``.

    Why not ``math.log1p``: MLIR lowers it to LLVM as ``log(1 + x)`` (there is no LLVM
    intrinsic), which returns 0 for |x| below half an ulp of 1 and loses digits above.
    Goldberg's correction ``log(u) * x / (u - 1)`` with ``u = 1 + x`` cancels the rounding
    of ``1 + x``; ``u == 1`` means ``x`` itself is the answer, ``u == inf`` stays inf.
    """
    u = arith.addf(like(1, x), x)
    u_minus_one = arith.subf(u, like(1, x))
    corrected = arith.mulf(math.log(u), arith.divf(x, u_minus_one))
    corrected = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, u, like(pymath.inf, x)), u, corrected)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, u_minus_one, like(0, x)), x, corrected)


@widened
def expm1(x: ir.Value) -> ir.Value:
    """``exp(x) - 1``, accurate for tiny ``x`` (``math.expm1`` lowers to ``exp(x) - 1``).

    Kahan's correction ``(u - 1) * x / log(u)`` with ``u = exp(x)``; ``u == 1`` gives
    ``x``, ``u - 1 == -1`` gives -1 and ``u == inf`` stays inf.
    """
    u = math.exp(x)
    u_minus_one = arith.subf(u, like(1, x))
    corrected = arith.mulf(u_minus_one, arith.divf(x, math.log(u)))
    for condition, value in (
        (arith.cmpf(arith.CmpFPredicate.OEQ, u, like(pymath.inf, x)), u),
        (arith.cmpf(arith.CmpFPredicate.OEQ, u_minus_one, like(-1, x)), like(-1, x)),
        (arith.cmpf(arith.CmpFPredicate.OEQ, u, like(1, x)), x),
    ):
        corrected = arith.select(condition, value, corrected)
    return corrected


@dataclass(frozen=True)
class _ErfTable:
    """erf(x) = x * P(x^2) for |x| < split; above it ``1 - erfc``, with |x| clamped to
    ``limit`` (where erf rounds to 1) and erfc either ``exp(-x^2) * Q(1/|x| - center)`` or,
    with ``tail_in_x``, ``Q(|x| - center)`` itself. Least-squares fits on Chebyshev nodes
    against Python's ``math.erf``/``math.erfc`` (the f32 tail: minimax by Lawson-reweighted
    least squares against scipy's ``erfc``). Max error, f32 evaluation: 2.0e-7 relative below
    the split, 6.7e-8 absolute above it; f64: 7.0e-15 relative over [-7, 7] and [1e-30, 1].

    Why the f32 tail is a polynomial in |x| (degree 11) and not the exp form: a vector
    computes both branches, and the tail's exp (a ~25-instruction polynomial with range
    selects) and division were most of a GELU's time; an MLP's GELU ran at 1.5-1.8x
    onnxruntime's (docs/performance.md, "ConvNeXt and Swin outside attention"). The f64 tail
    keeps the exp form, which :func:`erfcx_mid` reuses."""

    split: float
    limit: float
    center: float
    small: tuple[float, ...]
    large: tuple[float, ...]
    tail_in_x: bool = False


_ERF_F32 = _ErfTable(
    split=1.5, limit=4.0, center=2.75, tail_in_x=True,
    small=(1.1283791663736291, -0.3761263363085395, 0.11283728184812152, -0.026863214615725245,
           0.005217035523474551, -0.000845572297952017, 0.00011315401681330095,
           -1.1344466268418261e-05, 6.22313400269528e-07),
    large=(1.0059487011191802e-04, -5.86093225338276e-04, 1.6135212978223327e-03, -2.7632943109924036e-03,
           3.2487507670745756e-03, -2.7424001079218844e-03, 1.6823533756232757e-03, -6.731000727354922e-04,
           5.977759706341109e-05, 9.83350788658577e-05, -4.078200307140343e-05, 2.433997760505546e-06),
)
_ERF_F64 = _ErfTable(
    split=1.5, limit=6.0, center=0.41666666666666663,
    small=(1.128379167095508, -0.3761263890318135, 0.11283791670947291, -0.026866170644636065,
           0.005223977621702646, -0.0008548326855826753, 0.00012055328385026803,
           -1.4925567032347534e-05, 1.6461066074777708e-06, -1.6356447927208968e-07,
           1.4746547911604622e-08, -1.2009470907217696e-09, 8.50130758857028e-11,
           -4.638163980738985e-12, 1.41041855655244e-13),
    large=(0.21849873453703306, 0.4584109899902537, -0.18799628662600842,
           -0.005491348994224165, 0.1076290238419354, -0.1186100545995374,
           0.056285312287987575, 0.044107483375783046, -0.13497975810925159,
           0.16699804907363378, -0.10469979023830536, -0.05548624451468154,
           0.269443140593087, -0.44096590124046, 0.4501543130357875,
           -0.18103452100016068, -0.5825802298175625, 1.7715544591051675,
           -1.7457992577851473),
)


@widened
def erf(x: ir.Value) -> ir.Value:
    """The error function (``math.erf`` does not lower to LLVM). NaN propagates (the clamp
    keeps it), +-inf give +-1. Errors: :class:`_ErfTable`; in f32 no exp and no division."""
    table = _ERF_F64 if isinstance(x.type, ir.F64Type) else _ERF_F32
    # f32 with FMAs (every vector ISA here has them; f64's stay two-step: a soft-float fma on
    # small cross targets would cost more than it saves).
    horner_ = _fma_horner if table.tail_in_x else _horner
    magnitude = math.absf(x)
    small = arith.mulf(magnitude, horner_(table.small, arith.mulf(x, x)))
    clamped = _clamp_float(magnitude, table.split, table.limit)
    if table.tail_in_x:
        tail = horner_(table.large, arith.subf(clamped, like(table.center, x)))
        large = arith.minimumf(arith.subf(like(1, x), tail), like(1, x))  # never above 1
    else:
        tail = arith.mulf(
            math.exp(negate(arith.mulf(clamped, clamped))),
            _horner(table.large, arith.subf(reciprocal(clamped), like(table.center, x))),
        )
        large = arith.subf(like(1, x), tail)
    is_small = arith.cmpf(arith.CmpFPredicate.OLT, magnitude, like(table.split, x))
    result = math.copysign(arith.select(is_small, small, large), x)
    # Names the value erf(operand 1) for tilecraft-fast-math (pipelines/vector/fast_math.py).
    result.owner.attributes[FAST_MATH_FUNCTION] = ir.StringAttr.get("erf")
    return result


# Above this magnitude asinh/acosh use log(2|x|): x*x would lose the +-1 (and later overflow).
_HUGE = 2.0**28


@widened
def asinh(x: ir.Value) -> ir.Value:
    """``sign(x) * log1p(|x| + x^2 / (1 + sqrt(x^2 + 1)))``: accurate near 0 (log1p) and
    free of overflow for huge |x| (log(2|x|))."""
    magnitude = math.absf(x)
    square = arith.mulf(magnitude, magnitude)
    root = math.sqrt(arith.addf(square, like(1, x)))
    moderate = log1p(arith.addf(magnitude, arith.divf(square, arith.addf(root, like(1, x)))))
    huge = arith.addf(math.log(magnitude), like(pymath.log(2.0), x))
    is_huge = arith.cmpf(arith.CmpFPredicate.OGT, magnitude, like(_HUGE, x))
    return math.copysign(arith.select(is_huge, huge, moderate), x)


@widened
def acosh(x: ir.Value) -> ir.Value:
    """``log1p((x - 1) + sqrt((x - 1) * (x + 1)))``: accurate near 1; NaN below 1."""
    below = arith.subf(x, like(1, x))
    root = math.sqrt(arith.mulf(below, arith.addf(x, like(1, x))))
    moderate = log1p(arith.addf(below, root))
    huge = arith.addf(math.log(x), like(pymath.log(2.0), x))
    is_huge = arith.cmpf(arith.CmpFPredicate.OGT, x, like(_HUGE, x))
    return arith.select(is_huge, huge, moderate)


@widened
def atanh(x: ir.Value) -> ir.Value:
    """``sign(x) * 0.5 * log1p(2|x| / (1 - |x|))``: +-inf at +-1, NaN beyond."""
    magnitude = math.absf(x)
    ratio = arith.divf(arith.mulf(like(2, x), magnitude), arith.subf(like(1, x), magnitude))
    return math.copysign(arith.mulf(like(0.5, x), log1p(ratio)), x)


# --- activations ----------------------------------------------------------------------------

def relu(x: ir.Value) -> ir.Value:
    return maximum(x, like(0, x))


def sigmoid(x: ir.Value) -> ir.Value:
    """``1 / (1 + exp(-x))``: exp overflowing to inf gives the right limit 0."""
    return reciprocal(arith.addf(like(1, x), math.exp(negate(x))))


@widened
def softplus(x: ir.Value) -> ir.Value:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: no overflow for large x,
    no lost digits for very negative x."""
    return arith.addf(
        arith.maximumf(x, like(0, x)), log1p(math.exp(negate(math.absf(x))))
    )


def softsign(x: ir.Value) -> ir.Value:
    return arith.divf(x, arith.addf(like(1, x), math.absf(x)))


@widened
def mish(x: ir.Value) -> ir.Value:
    return arith.mulf(x, math.tanh(softplus(x)))


def leaky_relu(x: ir.Value, alpha: float) -> ir.Value:
    negative = compare("lt", x, like(0, x))
    return arith.select(negative, multiply(x, like(alpha, x)), x)


def prelu(x: ir.Value, slope: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``x`` where ``x >= 0``, ``slope * x`` elsewhere (``slope`` is a scalar value)."""
    if unsigned:
        return x
    return arith.select(compare("lt", x, like(0, x)), multiply(x, slope), x)


def elu(x: ir.Value, alpha: float) -> ir.Value:
    """``alpha * (exp(x) - 1)`` for x < 0 (``expm1``: accurate near 0), else ``x``."""
    negative = compare("lt", x, like(0, x))
    return arith.select(negative, arith.mulf(like(alpha, x), expm1(x)), x)


def selu(x: ir.Value, alpha: float, gamma: float) -> ir.Value:
    return arith.mulf(like(gamma, x), elu(x, alpha))


def celu(x: ir.Value, alpha: float) -> ir.Value:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    scaled = arith.mulf(like(alpha, x), expm1(arith.divf(x, like(alpha, x))))
    return arith.addf(arith.maximumf(x, like(0, x)), arith.minimumf(scaled, like(0, x)))


def hard_sigmoid(x: ir.Value, alpha: float, beta: float) -> ir.Value:
    """``clamp(alpha * x + beta, 0, 1)``."""
    return _clamp_float(arith.addf(arith.mulf(like(alpha, x), x), like(beta, x)), 0.0, 1.0)


def hard_swish(x: ir.Value) -> ir.Value:
    return arith.mulf(x, hard_sigmoid(x, 1.0 / 6.0, 0.5))


def thresholded_relu(x: ir.Value, alpha: float) -> ir.Value:
    return arith.select(compare("gt", x, like(alpha, x)), x, like(0, x))


GELU_APPROXIMATIONS = ("none", "tanh")


@widened
def _gelu_exact(x: ir.Value) -> ir.Value:
    inner = erf(arith.mulf(x, like(pymath.sqrt(0.5), x)))
    return arith.mulf(arith.mulf(like(0.5, x), x), arith.addf(like(1, x), inner))


@widened
def _gelu_tanh(x: ir.Value) -> ir.Value:
    cube = arith.mulf(arith.mulf(x, x), x)
    inner = arith.mulf(
        like(pymath.sqrt(2.0 / pymath.pi), x), arith.addf(x, arith.mulf(like(0.044715, x), cube))
    )
    return arith.mulf(arith.mulf(like(0.5, x), x), arith.addf(like(1, x), math.tanh(inner)))


def gelu(x: ir.Value, approximate: str = "none") -> ir.Value:
    """``x * Phi(x)`` exactly (erf) or with the tanh approximation; ``approximate`` is one of
    :data:`GELU_APPROXIMATIONS` (``ValueError`` otherwise)."""
    if approximate not in GELU_APPROXIMATIONS:
        raise OperandError(f"gelu approximation {approximate!r} is not one of {GELU_APPROXIMATIONS}")
    return (_gelu_tanh if approximate == "tanh" else _gelu_exact)(x)


def erfcx_mid(x: ir.Value) -> ir.Value:
    """``exp(x^2) * erfc(x)`` for f64 ``x`` in [1.5, 6] from the erf table's tail fit (relative
    error about 1e-14 there). Why separate: ``1 - erf(x)`` loses every digit of erfc as x
    grows, while the fit holds the scaled tail itself. Outside [1.5, 6] the argument is clamped;
    ``special_functions.erfcx`` covers the whole line."""
    if not isinstance(x.type, ir.F64Type):
        raise InternalError(f"erfcx_mid takes f64, got {x.type}")
    table = _ERF_F64
    clamped = _clamp_float(x, table.split, table.limit)
    return _horner(table.large, arith.subf(reciprocal(clamped), like(table.center, x)))


def horner(coefficients: Sequence[float], x: ir.Value) -> ir.Value:
    """``sum(c[k] * x**k)`` by Horner's rule, for the series of other scalar-body modules."""
    return _horner(coefficients, x)
