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
from mlir.dialects import arith, tensor

from . import core, movement, reduction
from .contraction import einsum


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
    """Per bin the sum of ``weights`` (or the count) of the elements of 1-D ``flat`` that
    :func:`bin_positions` places in it."""
    return counts_by_edges_nd([flat], [edges], weights)


def density(counts: ir.Value, edges: ir.Value) -> ir.Value:
    """``counts / sum(counts) / bin widths``: the histogram as a probability density."""
    return density_nd(counts, [edges])


def bin_positions(values: ir.Value, edges: ir.Value) -> ir.Value:
    """The bin (``i64``) of each element of 1-D ``values`` among ``edges``, -1 for none,
    exactly as eager's histogram kernel finds it, unsorted edges included: none outside
    ``[edges[0], edges[-1]]`` (NaN too), else ``std::upper_bound(edges, value) - 1`` (its
    binary search unrolled, ``ceil(log2(bins + 2))`` steps), the top edge in the last bin."""
    count = core.static_shape(edges)[0]
    bins = count - 1
    index = ir.IndexType.get()
    i64 = ir.IntegerType.get_signless(64)
    identity = ir.AffineMap.get_identity(1)

    def position(_: list[ir.Value], scalars: list[ir.Value]) -> ir.Value:
        (value,) = scalars
        at = lambda i: tensor.extract(edges, [i])  # noqa: E731
        c = lambda v: arith.constant(index, v)  # noqa: E731
        first, remaining = c(0), c(count)
        for _ in range(max(1, count).bit_length() + 1):
            step = arith.divui(remaining, c(2))
            middle = arith.addi(first, step)
            going_on = arith.cmpi(arith.CmpIPredicate.ugt, remaining, c(0))
            safe = arith.select(going_on, middle, c(0))
            right = arith.andi(going_on, arith.cmpf(arith.CmpFPredicate.UGE, value, at(safe)))  # !(value < e)
            first = arith.select(right, arith.addi(middle, c(1)), first)
            remaining = arith.select(going_on, arith.select(right, arith.subi(arith.subi(remaining, step), c(1)), step),
                                     remaining)
        found = arith.subi(arith.index_cast(i64, first), arith.constant(i64, 1))
        found = arith.select(arith.cmpi(arith.CmpIPredicate.eq, found, arith.constant(i64, bins)),
                             arith.constant(i64, bins - 1), found)
        inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, value, at(c(0))),
                            arith.cmpf(arith.CmpFPredicate.OLE, value, at(c(bins))))
        return arith.select(inside, found, arith.constant(i64, -1))

    return movement.indexed_generic(core.sizes(values), i64, position, [values], [identity])


def membership(positions: ir.Value, bins: int, element: ir.Type) -> ir.Value:
    """``[bins, n]``: 1 where ``positions[i] == b`` (:func:`bin_positions`), else 0."""
    i64 = ir.IntegerType.get_signless(64)
    by_value = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])

    def hit(indices: list[ir.Value], scalars: list[ir.Value]) -> ir.Value:
        same = arith.cmpi(arith.CmpIPredicate.eq, scalars[0], arith.index_cast(i64, indices[0]))
        return arith.select(same, core.scalar_constant(1, element), core.scalar_constant(0, element))

    return movement.indexed_generic([bins, core.sizes(positions)[0]], element, hit, [positions], [by_value])


def counts_by_edges_nd(columns: Sequence[ir.Value], edges: Sequence[ir.Value],
                       weights: ir.Value | None = None) -> ir.Value:
    """``[bins_0, ..., bins_{D-1}]``: per cell the sum of ``weights`` (or the count) of the
    points whose coordinate ``d`` (``columns[d]``, 1-D of n) :func:`bin_positions` places in
    bin ``b_d`` of ``edges[d]``: one contraction over the points of the dims' 0/1 membership
    matrices."""
    labels = "abcdefghijklm"[:len(columns)]
    element = core.tensor_type(columns[0]).element_type
    operands = [membership(bin_positions(c, e), core.static_shape(e)[0] - 1, element)
                for c, e in zip(columns, edges)]
    terms = [f"{label}z" for label in labels]
    if weights is not None:
        operands.append(weights)
        terms.append("z")
    return einsum(f"{','.join(terms)}->{labels}", operands)


def density_nd(counts: ir.Value, edges: Sequence[ir.Value]) -> ir.Value:
    """``counts / sum(counts)``, then divided by each dim's bin widths in turn (eager's order)."""
    element = core.tensor_type(counts).element_type
    rank = len(edges)
    total = reduction.reduce(counts, list(range(rank)), "sum")
    result = core.elementwise([counts, total], element, arith.divf)
    for d, edge in enumerate(edges):
        bins = core.static_shape(edge)[0] - 1
        widths = core.elementwise([movement.slice_axis(edge, 0, 1, bins), movement.slice_axis(edge, 0, 0, bins)],
                                  element, arith.subf)
        shaped = reduction.expand_dims(widths, [p for p in range(rank) if p != d])
        result = core.elementwise([result, shaped], element, arith.divf)
    return result
