"""``torch.hash_tensor``: the XOR of the elements' 64-bit patterns over some dims (floats as
the bits of their float64 value, integers sign- or zero-extended to 64 bits, as eager's
``mode=0``). One ``linalg.generic`` reduction with an ``arith.xori`` combiner: ``reduction.py``'s
combiners are arithmetic (sum, prod, max, min); XOR is a bit operation only this op needs."""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, linalg

from . import core


def _bits(value: ir.Value, unsigned: bool) -> ir.Value:
    """The 64-bit pattern of one element: float64 bits, or the integer extended to 64."""
    i64 = ir.IntegerType.get_signless(64)
    if core.is_float(value.type):
        wide = value if isinstance(value.type, ir.F64Type) else arith.extf(ir.F64Type.get(), value)
        return arith.bitcast(i64, wide)
    width = ir.IntegerType(value.type).width
    if width == 64:
        return value
    return (arith.extui if unsigned or width == 1 else arith.extsi)(i64, value)


def xor_bits(x: ir.Value, axes: Sequence[int], *, unsigned: bool = False) -> ir.Value:
    """XOR over ``axes`` of ``x``'s 64-bit patterns: an ``i64`` tensor of the other dims
    (static shapes; no axes at all reduces nothing, so callers pass every axis for "all")."""
    rank = core.tensor_type(x).rank
    kept = [d for d in range(rank) if d not in axes]
    extents = core.sizes(x)
    i64 = ir.IntegerType.get_signless(64)
    init = core.filled([extents[d] for d in kept], 0, i64)
    maps = [ir.AffineMap.get_identity(rank),
            ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in kept])]
    iterators = [ir.Attribute.parse(f"#linalg.iterator_type<{'reduction' if d in axes else 'parallel'}>")
                 for d in range(rank)]
    op = linalg.GenericOp([init.type], [x], [init], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get(iterators))
    block = op.regions[0].blocks.append(core.tensor_type(x).element_type, i64)
    with ir.InsertionPoint(block):
        value, accumulated = block.arguments
        linalg.YieldOp([arith.xori(accumulated, _bits(value, unsigned))])
    return op.result
