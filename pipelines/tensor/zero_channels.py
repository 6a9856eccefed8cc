"""A convolution's input widened by channels up to a multiple, for the dot-product kernels.

Why: the dot-product kernels consume input channels in groups inside one filter tap: two for
bf16's ``vdpbf16ps`` (graph/even_channels.py), four for int8's ``vpdpbusd``
(tensor/int8_matmul.py's window kernel). A convolution of another channel count (a network's
first layer on RGB images: 3) takes its kernel once its input has up to ``multiple - 1`` more
channels and its filter zero weights for them: every sum is what it was. Both kernels widen
an input here, so the two agree on where the new channels go and what they hold.
"""

from __future__ import annotations

import math

from mlir import ir

from ...ir import core
from ..ir_queries import defining_op


def widened_channels(image: ir.Value, multiple: int) -> ir.Value:
    """``image`` (NHWC, static channel count) with channels added after its last, up to a
    multiple of ``multiple`` (2 for bf16's ``vdpbf16ps``, 4 for int8's ``vpdpbusd``), built at
    the insertion point. The caller gives the new channels zero weights, so what they hold
    never reaches a sum, as long as it is finite (``0 * inf`` is NaN).

    Where ``image`` is a ``tensor.pad`` of static amounts yielding a finite constant (the
    importer pads a convolution's input so: zero for floats, the zero point for 8-bit
    values), the new channels join that pad and hold its value: one copy, not two (the caller
    erases the old pad once nothing reads it). Elsewhere a new pad of zeros copies ``image``
    once."""
    extra = -ir.RankedTensorType(image.type).shape[3] % multiple
    pad = defining_op(image)
    fill = constant_pad_value(pad) if pad is not None and pad.name == "tensor.pad" else None
    if fill is not None and math.isfinite(fill):
        low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
        return core.pad_constant(pad.operands[0], low, [*high[:3], high[3] + extra], fill)
    return core.pad_constant(image, [0, 0, 0, 0], [0, 0, 0, extra], 0)


def constant_pad_value(pad: ir.Operation) -> int | float | None:
    """The number a ``tensor.pad`` of static amounts (no SSA low/high operands) yields
    everywhere, else ``None``."""
    if len(pad.operands) != 1:
        return None
    yielded = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
    constant = defining_op(yielded)
    if constant is None or constant.name != "arith.constant":
        return None
    value = constant.attributes["value"]
    if isinstance(value, ir.IntegerAttr):
        return ir.IntegerAttr(value).value
    return ir.FloatAttr(value).value if isinstance(value, ir.FloatAttr) else None
