"""``frexp`` and ``nextafter`` (torch's prims, which the core decompositions leave), on the
exact bit-level emitters of ir/float_bits.py."""

from __future__ import annotations

from typing import Any

from mlir import ir

from ....errors import OperandError
from ....ir import core, float_bits
from ..importer import OpContext
from . import table


@table.aten("prims.frexp.default", "frexp.Tensor")
def frexp(ctx: OpContext, x: Any) -> tuple[ir.Value, ir.Value]:
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"frexp of a {dtype} tensor (floating point only)")
    x = ctx.tensor(x, dtype)
    exponent = ctx.result_element(1)
    mantissa = core.elementwise([x], ctx.result_element(0), lambda v: float_bits.frexp(v, exponent)[0])
    exponents = core.elementwise([x], exponent, lambda v: float_bits.frexp(v, exponent)[1])
    return mantissa, exponents


@table.aten("prims.nextafter.default", "nextafter.default")
def nextafter(ctx: OpContext, x: Any, other: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype.kind != "f":
        raise OperandError(f"nextafter of a {dtype} tensor (floating point only)")
    return table.map_(ctx, [x, other], dtype, float_bits.nextafter)
