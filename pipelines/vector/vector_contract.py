"""``tilecraft-canonicalize-unit-contractions``: a ``vector.contract`` that reduces over
several dims, each of extent 1, becomes a plain ``(M, K=1) x (K=1, N)`` outer product.

Why: a contraction whose reduction runs over several dims of its operands (a GRU's input
projection reading both directions of the LSTM before it as ``[dir, hidden]``; a classifier
reading ``[C, H, W]`` through a fused flatten) is vectorized one reduction step at a time, so
its ``vector.contract`` has two or more reduction dims, each of extent 1, often beside unit
parallel dims. LLVM's lowering of contractions (``vector-contract-lowering=outerproduct``)
turns a 2-D matrix product into vector FMAs, but this form fell back to one scalar
multiply-add per output element: the speech model of ``benchmarks/recurrent.py`` spent
about half its time in such an 80x64x72 GEMM.

Dims of extent 1 carry no data, so the rewrite is exact: the operands and accumulator drop
them with ``vector.shape_cast`` (which only removes unit dims), one reduction dim is kept,
and the result is cast back. Contractions with a single reduction dim are left as they are:
that is the form the default schedule's matmul tiles already have, and it lowers well.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import vector

from ...ir.maps import indexing_maps
from ..ir_queries import replace_each
from ..passes import register_pass

CANONICALIZE_UNIT_CONTRACTIONS = "tilecraft-canonicalize-unit-contractions"


def _iterator_kinds(op: ir.Operation) -> list[str]:
    return ["reduction" if "reduction" in str(attr) else "parallel"
            for attr in ir.ArrayAttr(op.attributes["iterator_types"])]


def _extents(op: ir.Operation) -> dict[int, int]:
    """Iteration dim -> extent, read from the operands and accumulator that index it."""
    extents: dict[int, int] = {}
    for operand, affine_map in zip(op.operands, indexing_maps(op)):
        shape = ir.VectorType(operand.type).shape
        for position, expr in enumerate(affine_map.results):
            extents[ir.AffineDimExpr(expr).position] = shape[position]
    return extents


def _has_several_unit_reductions(op: ir.Operation) -> bool:
    if op.name != "vector.contract" or len(op.operands) != 3:  # masked contractions: left alone
        return False
    if not all(isinstance(v.type, ir.VectorType) for v in op.operands):  # a scalar accumulator
        return False
    if not all(isinstance(e, ir.AffineDimExpr) for m in indexing_maps(op) for e in m.results):
        return False
    kinds, extents = _iterator_kinds(op), _extents(op)
    reductions = [d for d, kind in enumerate(kinds) if kind == "reduction"]
    return len(reductions) >= 2 and all(extents.get(d) == 1 for d in reductions)


def _shape_cast(value: ir.Value, shape: list[int]) -> ir.Value:
    source = ir.VectorType(value.type)
    if list(source.shape) == shape:
        return value
    return vector.shape_cast(ir.VectorType.get(shape, source.element_type), value)


def _canonical(op: ir.Operation) -> ir.Value:
    """``op`` without its extent-1 dims except one reduction dim (and one parallel dim when
    every parallel dim has extent 1), its result cast back to the original type."""
    kinds, maps, extents = _iterator_kinds(op), indexing_maps(op), _extents(op)
    reductions = [d for d, kind in enumerate(kinds) if kind == "reduction"]
    parallel = [d for d, kind in enumerate(kinds) if kind == "parallel"]
    kept = sorted(([d for d in parallel if extents[d] != 1] or parallel[-1:]) + reductions[:1])
    renumber = {old: new for new, old in enumerate(kept)}
    operands, new_maps = [], []
    for operand, affine_map in zip(op.operands, maps):
        dims = [ir.AffineDimExpr(e).position for e in affine_map.results]
        positions = [p for p, d in enumerate(dims) if d in renumber]
        new_maps.append(ir.AffineMap.get(len(kept), 0, [ir.AffineDimExpr.get(renumber[dims[p]]) for p in positions]))
        operands.append(_shape_cast(operand, [ir.VectorType(operand.type).shape[p] for p in positions]))
    iterator_types = ir.ArrayAttr.get([ir.Attribute.parse(f"#vector.iterator_type<{kinds[d]}>") for d in kept])
    merged = vector.ContractionOp(operands[2].type, operands[0], operands[1], operands[2],
                                  ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps]),
                                  iterator_types, kind=op.attributes["kind"])
    return _shape_cast(merged.result, list(ir.VectorType(op.results[0].type).shape))


@register_pass(CANONICALIZE_UNIT_CONTRACTIONS,
               "vector.contract reducing over several extent-1 dims as a 2-D outer product "
               "(LLVM's contraction lowering turned that form into scalar code)")
def canonicalize_unit_contractions_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    replace_each(module, _has_several_unit_reductions, _canonical)
