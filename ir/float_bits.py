"""Scalar emitters that read a float's IEEE-754 fields: ``frexp`` (mantissa and exponent)
and ``nextafter`` (the adjacent representable value), for f16, f32 and f64.

Why through the bits: both are exact by definition, and ``log2``/``exp2`` round; a bitcast,
an integer add and a field mask give the exact answer, subnormals included.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

from ..errors import OperandTypeError
from . import core, elementwise

# element width -> (mantissa bits, exponent bias)
_FORMATS = {16: (10, 15), 32: (23, 127), 64: (52, 1023)}


def _layout(x: ir.Value) -> tuple[ir.IntegerType, int, int, int]:
    width = x.type.width
    if width not in _FORMATS or isinstance(x.type, ir.BF16Type):
        raise OperandTypeError(f"float bits of {x.type}: expected f16, f32 or f64")
    mantissa_bits, bias = _FORMATS[width]
    return ir.IntegerType.get_signless(width), width, mantissa_bits, bias


def frexp(x: ir.Value, exponent_type: ir.Type) -> tuple[ir.Value, ir.Value]:
    """``(m, e)`` with ``x = m * 2**e`` and ``0.5 <= |m| < 1``; zeros, infinities and NaN
    give ``(x, 0)`` as C's ``frexp``. A subnormal is first scaled by ``2**(mantissa bits
    + 2)`` (exact) so that its exponent field is set."""
    bits_type, width, mantissa_bits, bias = _layout(x)
    shift = mantissa_bits + 2
    field_mask = (1 << (width - 1 - mantissa_bits)) - 1

    def int_(value: int) -> ir.Value:  # a bit pattern, as the signed value MLIR takes
        value &= (1 << width) - 1
        return arith.constant(bits_type, value - (1 << width) if value >> (width - 1) else value)

    tiny = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), core.scalar_constant(2.0 ** (1 - bias), x.type))
    scaled = arith.select(tiny, arith.mulf(x, core.scalar_constant(float(2 ** shift), x.type)), x)
    bits = arith.bitcast(bits_type, scaled)
    field = arith.andi(arith.shrui(bits, int_(mantissa_bits)), int_(field_mask))
    exponent = arith.subi(arith.subi(field, int_(bias - 1)), arith.select(tiny, int_(shift), int_(0)))
    cleared = arith.andi(bits, int_(~(field_mask << mantissa_bits)))
    mantissa = arith.bitcast(x.type, arith.ori(cleared, int_((bias - 1) << mantissa_bits)))
    special = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, x, elementwise.like(0, x)),
                        arith.ori(elementwise.is_inf(x), elementwise.is_nan(x)))
    mantissa = arith.select(special, x, mantissa)
    exponent = arith.select(special, int_(0), exponent)
    return mantissa, core.convert_scalar(exponent, exponent_type)


def nextafter(x: ir.Value, toward: ir.Value) -> ir.Value:
    """The representable value after ``x`` in the direction of ``toward`` (``toward``
    itself when equal; NaN when either is; the smallest subnormal, signed, from zero)."""
    bits_type, _, _, _ = _layout(x)
    bits = arith.bitcast(bits_type, x)
    one = arith.constant(bits_type, 1)
    # away from zero (|x| grows) when x and the direction have the same sign
    up = arith.cmpf(arith.CmpFPredicate.OLT, x, toward)
    positive = arith.cmpf(arith.CmpFPredicate.OGT, x, elementwise.like(0, x))
    stepped = arith.bitcast(x.type, arith.select(arith.cmpi(arith.CmpIPredicate.eq, arith.extui(
        ir.IntegerType.get_signless(8), up), arith.extui(ir.IntegerType.get_signless(8), positive)),
        arith.addi(bits, one), arith.subi(bits, one)))
    smallest = arith.bitcast(x.type, one)
    from_zero = arith.select(up, smallest, arith.negf(smallest))
    zero = arith.cmpf(arith.CmpFPredicate.OEQ, x, elementwise.like(0, x))
    result = arith.select(zero, from_zero, stepped)
    result = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, toward), toward, result)
    either_nan = arith.ori(elementwise.is_nan(x), elementwise.is_nan(toward))
    return arith.select(either_nan, arith.addf(x, toward), result)
