"""Conversions to and from float8, float4, int4 and int2 values, as integer bit manipulation.

Storage: float8 tensors have MLIR's f8 element types (one byte each, as ml_dtypes arrays).
The sub-byte types (int4, uint4, int2, uint2, float4_e2m1fn) are carried as ``i8``: LLVM
packs vectors of ``i4`` (eight in 32 bits) while memory holds one per byte, so vectorized
code over ``i4`` buffers would read the wrong bytes; ml_dtypes also keeps one value per byte,
in the low bits. An ``i8`` holds the *value* (int4: -8..7, sign-extended; uint4: 0..15) or,
for float4, the 4-bit code; :func:`normalize` makes an input's upper bits agree.

Why not ``arith.extf``/``arith.truncf``: MLIR's LLVM lowering turns these types into plain
``i8``/``i4`` (LLVM has no float8/float4), and ``arith.extf``/``truncf`` on them do not
lower to anything the x86 backend can select. So a conversion goes through ``f32``: decode
the bits (sign, exponent, mantissa, with the format's bias and NaN/Inf encodings) into an
``f32``, or encode an ``f32`` by rounding to nearest even at the format's precision, then
saturating (ONNX ``saturate=1``: out-of-range values and infinities become the largest
finite value) or overflowing to the format's Inf/NaN (``saturate=0``). Everything here is
scalar code for a linalg body; the numpy references are ml_dtypes' conversions, which these
reproduce bit for bit (tests/frontend/test_onnx_small_types.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, math


@dataclass(frozen=True)
class FloatFormat:
    """A small binary float format.

    ``nan``: the code of NaN (positive), None if the format has none; ``inf``: the code of
    +Inf or None; ``unsigned_zero``: FNUZ formats, where the negative-zero code is NaN.
    """

    width: int
    mantissa: int
    bias: int
    max_code: int
    nan: int | None
    inf: int | None
    unsigned_zero: bool = False

    @property
    def min_exponent(self) -> int:
        return 1 - self.bias


FORMATS: dict[str, FloatFormat] = {
    "f8E4M3FN": FloatFormat(8, 3, 7, 0x7E, nan=0x7F, inf=None),
    "f8E4M3FNUZ": FloatFormat(8, 3, 8, 0x7F, nan=0x80, inf=None, unsigned_zero=True),
    "f8E5M2": FloatFormat(8, 2, 15, 0x7B, nan=0x7E, inf=0x7C),
    "f8E5M2FNUZ": FloatFormat(8, 2, 16, 0x7F, nan=0x80, inf=None, unsigned_zero=True),
    "f4E2M1FN": FloatFormat(4, 1, 1, 0x7, nan=None, inf=None),
}


# numpy (ml_dtypes) names of the types carried as i8: (bits, signed); float4 is a float.
SUB_BYTE_INTEGERS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
FLOAT4 = "float4_e2m1fn"
SUB_BYTE = (*SUB_BYTE_INTEGERS, FLOAT4)


def small_format(element: ir.Type) -> FloatFormat | None:
    """The format of a float8 element type, None for any other type."""
    return FORMATS.get(str(element)) if str(element) != "f4E2M1FN" else None


def is_sub_byte(dtype: np.dtype) -> bool:
    """A type carried as ``i8`` (see the module docstring)."""
    return np.dtype(dtype).name in SUB_BYTE


def normalize(value: ir.Value, dtype: np.dtype) -> ir.Value:
    """An ``i8`` scalar whose low bits hold a sub-byte ``dtype``, with the upper bits made
    what this module's code assumes: the value sign- or zero-extended, float4's code alone."""
    name = np.dtype(dtype).name
    bits, signed = SUB_BYTE_INTEGERS.get(name, (4, False))
    shift = arith.constant(value.type, 8 - bits)
    if signed:
        return arith.shrsi(arith.shli(value, shift), shift)
    return arith.andi(value, arith.constant(value.type, (1 << bits) - 1))


def _i32(value: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), value)


def _f32_of_bits(bits: ir.Value) -> ir.Value:
    return arith.bitcast(ir.F32Type.get(), bits)


def decode(value: ir.Value, fmt: FloatFormat | None = None) -> ir.Value:
    """The ``f32`` equal to a float8 scalar, or to the float4 code in an ``i8``
    (exact: every such value is an f32)."""
    fmt = fmt or small_format(value.type)
    i32 = ir.IntegerType.get_signless(32)
    if isinstance(value.type, ir.FloatType):
        value = arith.bitcast(ir.IntegerType.get_signless(fmt.width), value)
    bits = arith.andi(arith.extui(i32, value), _i32((1 << fmt.width) - 1))
    sign = arith.shrui(bits, _i32(fmt.width - 1))
    magnitude = arith.andi(bits, _i32((1 << (fmt.width - 1)) - 1))
    exponent = arith.shrui(magnitude, _i32(fmt.mantissa))
    mantissa = arith.andi(magnitude, _i32((1 << fmt.mantissa) - 1))
    # Normal: rebias the exponent and left-align the mantissa in f32's 23 bits.
    normal = arith.ori(
        arith.shli(arith.addi(exponent, _i32(127 - fmt.bias)), _i32(23)),
        arith.shli(mantissa, _i32(23 - fmt.mantissa)),
    )
    # Subnormal (exponent field 0): mantissa * 2^(min_exponent - mantissa bits), exact in f32.
    scale = arith.constant(ir.F32Type.get(), float(2.0 ** (fmt.min_exponent - fmt.mantissa)))
    subnormal = arith.bitcast(i32, arith.mulf(arith.uitofp(ir.F32Type.get(), mantissa), scale))
    is_subnormal = arith.cmpi(arith.CmpIPredicate.eq, exponent, _i32(0))
    result = arith.ori(arith.select(is_subnormal, subnormal, normal), arith.shli(sign, _i32(31)))
    if fmt.inf is not None:  # IEEE-style: exponent all ones is Inf (mantissa 0) or NaN
        top = arith.cmpi(arith.CmpIPredicate.eq, exponent, _i32((1 << (fmt.width - 1 - fmt.mantissa)) - 1))
        special = arith.select(
            arith.cmpi(arith.CmpIPredicate.eq, mantissa, _i32(0)), _i32(0x7F800000), _i32(0x7FC00000)
        )
        result = arith.select(top, arith.ori(special, arith.shli(sign, _i32(31))), result)
    elif fmt.nan is not None:
        is_nan = (arith.cmpi(arith.CmpIPredicate.eq, bits, _i32(fmt.nan)) if fmt.unsigned_zero
                  else arith.cmpi(arith.CmpIPredicate.eq, magnitude, _i32(fmt.nan)))
        result = arith.select(is_nan, _i32(0x7FC00000), result)
    return _f32_of_bits(result)


def encode(value: ir.Value, to: ir.Type, *, saturate: bool) -> ir.Value:
    """An ``f32`` scalar rounded into float8 type ``to`` (see :func:`encode_code`)."""
    code = encode_code(value, small_format(to), saturate=saturate)
    return arith.bitcast(to, arith.trunci(ir.IntegerType.get_signless(8), code))


def encode_code(value: ir.Value, fmt: FloatFormat, *, saturate: bool) -> ir.Value:
    """The code (an ``i32``) of an ``f32`` scalar rounded to nearest, ties to even.

    Out of range (after rounding) and +-Inf: the largest finite value with ``saturate``,
    else the format's Inf (E5M2) or NaN; float4 has neither and always saturates. NaN stays
    NaN (float4: ml_dtypes' code, the negative zero 0x8).
    """
    f32 = ir.F32Type.get()
    i32 = ir.IntegerType.get_signless(32)
    bits = arith.bitcast(i32, value)
    sign = arith.shrui(bits, _i32(31))
    abs_bits = arith.andi(bits, _i32(0x7FFFFFFF))
    is_nan = arith.cmpi(arith.CmpIPredicate.ugt, abs_bits, _i32(0x7F800000))
    is_inf = arith.cmpi(arith.CmpIPredicate.eq, abs_bits, _i32(0x7F800000))
    exponent = arith.subi(arith.shrui(abs_bits, _i32(23)), _i32(127))
    # The binade's exponent, no lower than the smallest normal one: below it the quantum is
    # that of the subnormals.
    binade = arith.maxsi(exponent, _i32(fmt.min_exponent))
    quantum = arith.subi(binade, _i32(fmt.mantissa))
    inverse_quantum = _f32_of_bits(arith.shli(arith.subi(_i32(127), quantum), _i32(23)))
    steps = math.roundeven(arith.mulf(_f32_of_bits(abs_bits), inverse_quantum))
    # code = (binade - min_exponent) * 2^m + steps: rounding up to 2^(m+1) steps carries
    # into the exponent field, and a subnormal's code is its step count.
    code = arith.addi(
        arith.shli(arith.subi(binade, _i32(fmt.min_exponent)), _i32(fmt.mantissa)),
        arith.fptoui(i32, arith.minimumf(steps, arith.constant(f32, float(1 << (fmt.mantissa + 2))))),
    )
    too_big = arith.ori(is_inf, arith.cmpi(arith.CmpIPredicate.ugt, code, _i32(fmt.max_code)))
    saturating = saturate or (fmt.nan is None and fmt.inf is None)
    overflow = fmt.max_code if saturating else (fmt.inf if fmt.inf is not None else fmt.nan)
    code = arith.select(too_big, _i32(overflow), code)
    sign_bit = arith.shli(sign, _i32(fmt.width - 1))
    if fmt.unsigned_zero:  # no negative zero (its code is NaN), and NaN carries no sign
        nonzero = arith.cmpi(arith.CmpIPredicate.ne, code, _i32(0))
        positive_nan = arith.cmpi(arith.CmpIPredicate.eq, code, _i32(fmt.nan))
        keep_sign = arith.andi(nonzero, arith.xori(positive_nan, arith.constant(ir.IntegerType.get_signless(1), 1)))
        code = arith.select(keep_sign, arith.ori(code, sign_bit), code)
    else:
        code = arith.ori(code, sign_bit)
    nan_code = fmt.nan if fmt.nan is not None else 1 << (fmt.width - 1)
    return arith.select(is_nan, _i32(nan_code), code)
