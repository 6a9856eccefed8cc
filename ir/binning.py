"""Histograms over bin edges (``torch.histogram``): the edges of equal bins as
``torch.linspace`` computes them, and weighted counts per bin by comparison with the edges.

Why edges and not ``selection.histogram``'s interpolation (``histc``): eager's
``histogram`` places a value by the edges it returns (an interpolated guess, then a search
among the neighbouring edges), so a value within a rounding error of an edge lands where
the edges say; comparing with the same edges, computed the same way, gives the same bin.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, linalg

from . import core, movement, reduction


def linspace_edges(low: ir.Value, high: ir.Value, bins: int) -> ir.Value:
    """``torch.linspace(low, high, bins + 1)`` of 0-d float tensors, in their element type:
    ``low + step * i`` for the first half, ``high - step * (bins - i)`` for the rest, with
    ``step = (high - low) / bins`` (torch's CPU kernel, so the edges are eager's)."""
    element = core.tensor_type(low).element_type
    i64 = ir.IntegerType.get_signless(64)
    half = (bins + 1) // 2
    scalar_map = ir.AffineMap.get(1, 0, [])

    def edge(indices: list[ir.Value], scalars: list[ir.Value]) -> ir.Value:
        start, end = scalars
        step = arith.divf(arith.subf(end, start), core.scalar_constant(float(bins), element))
        i = arith.index_cast(i64, indices[0])
        from_start = arith.addf(start, arith.mulf(step, arith.sitofp(element, i)))
        from_end = arith.subf(end, arith.mulf(step, arith.sitofp(element, arith.subi(
            arith.constant(i64, bins), i))))
        first_half = arith.cmpi(arith.CmpIPredicate.slt, i, arith.constant(i64, half))
        return arith.select(first_half, from_start, from_end)

    return movement.indexed_generic([bins + 1], element, edge, [low, high], [scalar_map, scalar_map])


def counts_by_edges(flat: ir.Value, edges: ir.Value, weights: ir.Value | None = None) -> ir.Value:
    """Per bin ``b`` the sum of ``weights`` (or the count) of the elements of 1-D ``flat`` in
    ``[edges[b], edges[b + 1])``, the last bin closed on the right; values outside the
    edges and NaN count nowhere. One pass of ``bins x n`` compares (static ``bins``)."""
    element = core.tensor_type(flat).element_type
    n = core.sizes(flat)[0]
    bins = core.static_shape(edges)[0] - 1
    square = movement.broadcast_to(reduction.expand_dims(flat, [0]), [bins, n])
    lower = reduction.expand_dims(movement.slice_axis(edges, 0, 0, bins), [1])
    upper = reduction.expand_dims(movement.slice_axis(edges, 0, 1, bins), [1])
    extra: Sequence[ir.Value] = [lower, upper] + ([] if weights is None else [reduction.expand_dims(weights, [0])])
    index = ir.IndexType.get()
    zero = core.scalar_constant(0, element)

    def count(value: ir.Value, lo: ir.Value, hi: ir.Value, *weight: ir.Value) -> ir.Value:
        last = arith.cmpi(arith.CmpIPredicate.eq, linalg.IndexOp(0).result, arith.constant(index, bins - 1))
        below_top = arith.select(last, arith.cmpf(arith.CmpFPredicate.OLE, value, hi),
                                 arith.cmpf(arith.CmpFPredicate.OLT, value, hi))
        inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, value, lo), below_top)
        return arith.select(inside, weight[0] if weight else core.scalar_constant(1, element), zero)

    return reduction.reduce(square, [1], "sum", extra=extra, body=count)


def density(counts: ir.Value, edges: ir.Value) -> ir.Value:
    """``counts / sum(counts) / bin widths``: the histogram as a probability density (two
    divisions, in eager's order)."""
    element = core.tensor_type(counts).element_type
    bins = core.static_shape(counts)[0]
    total = reduction.reduce(counts, [0], "sum")
    widths = core.elementwise([movement.slice_axis(edges, 0, 1, bins), movement.slice_axis(edges, 0, 0, bins)],
                              element, arith.subf)
    return core.elementwise([counts, widths, total], element,
                            lambda c, w, t: arith.divf(arith.divf(c, t), w))
