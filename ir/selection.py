"""Order statistics along the last axis: the element at a run-time slot of a sorted row,
running extremes with their positions, the most frequent value, and the count of sorted
boundaries below each value (``searchsorted``).

Why everything works on the LAST axis: the pairwise forms below broadcast a row against
itself into an ``[..., n, n]`` square whose second ``n`` is the reduced (innermost) loop,
which the default CPU schedule vectorizes; a frontend moves its axis last and back.

Every emitter is sort-free or built on :func:`reduction.top_k`'s rank-based sort, so it is
a handful of structured ops that work for dynamic extents too; the cost is O(n^2) along
the axis, fine for the statistics rows models take medians and modes of.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, linalg

from ..errors import OperandError
from . import core, elementwise, movement, reduction

_I64 = lambda: ir.IntegerType.get_signless(64)  # noqa: E731  (a type needs a live context)


def _loop(dim: int) -> ir.Value:
    return arith.index_cast(_I64(), linalg.IndexOp(dim).result)


def _same(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a == b`` where NaN equals NaN."""
    if not core.is_float(a.type):
        return arith.cmpi(arith.CmpIPredicate.eq, a, b)
    return arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, a, b),
                     arith.andi(elementwise.is_nan(a), elementwise.is_nan(b)))


def _square(x: ir.Value) -> ir.Value:
    """``x`` ``[..., n]`` as ``[..., n, n]`` whose element ``[..., i, j]`` is ``x[..., j]``."""
    rank = core.tensor_type(x).rank
    extents = core.sizes(x)
    return movement.broadcast_to(reduction.expand_dims(x, [rank - 1]), [*extents[:-1], extents[-1], extents[-1]])


def pick(rows: ir.Value, slot: ir.Value) -> ir.Value:
    """``rows[..., slot[...]]``: the element of each row (last axis) at an int64 slot known
    at run time. A masked sum, not a gather: exactly one term is the element and the others
    are zero (-0.0 for floats, which leaves every value as it is, NaN and -0.0 included)."""
    rank = core.tensor_type(rows).rank
    element = core.tensor_type(rows).element_type
    neutral = core.scalar_constant(-0.0 if core.is_float(element) else 0, element)

    def body(value: ir.Value, wanted: ir.Value) -> ir.Value:
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, _loop(rank - 1), wanted), value, neutral)

    return reduction.reduce(rows, [rank - 1], "sum", body=body, extra=[reduction.expand_dims(slot, [rank - 1])])


def sort_last(x: ir.Value, *, unsigned: bool = False) -> tuple[ir.Value, ir.Value]:
    """Ascending values and int64 positions along the last axis (stable, NaN last)."""
    rank = core.tensor_type(x).rank
    return reduction.top_k(x, rank - 1, core.sizes(x)[rank - 1], largest=False, unsigned=unsigned)


def count_nan(x: ir.Value) -> ir.Value:
    """The int64 number of NaNs in each row (0 for integer rows)."""
    rank = core.tensor_type(x).rank
    if not core.is_float(core.tensor_type(x).element_type):
        return core.filled(core.sizes(x)[:-1], 0, _I64())
    one, zero = core.scalar_constant(1, _I64()), core.scalar_constant(0, _I64())
    return reduction.reduce(x, [rank - 1], "sum", result_element=_I64(),
                            body=lambda v: arith.select(elementwise.is_nan(v), one, zero))


def running_extreme(x: ir.Value, *, largest: bool, unsigned: bool = False) -> tuple[ir.Value, ir.Value]:
    """``cummax``/``cummin`` along the last axis: the extreme of ``x[..., :i+1]`` and the
    position where it was last reached (a NaN, once met, stays, at its first position)."""
    rank = core.tensor_type(x).rank
    element = core.tensor_type(x).element_type
    kind = "max" if largest else "min"
    square = _square(x)
    neutral = reduction.identity(kind, element, unsigned=unsigned)

    def seen(value: ir.Value) -> ir.Value:
        return arith.select(arith.cmpi(arith.CmpIPredicate.sle, _loop(rank), _loop(rank - 1)), value, neutral)

    values = reduction.reduce(square, [rank], kind, body=seen, unsigned=unsigned)
    is_float = core.is_float(element)
    none = reduction.identity("max", _I64())  # below every key, -j included

    def position(value: ir.Value, extreme: ir.Value) -> ir.Value:
        j = _loop(rank)
        hit = arith.andi(arith.cmpi(arith.CmpIPredicate.sle, j, _loop(rank - 1)), _same(value, extreme))
        # the last position reaching a number, the first NaN: max over j, or over -j
        key = arith.select(elementwise.is_nan(extreme), arith.subi(core.scalar_constant(0, _I64()), j), j) \
            if is_float else j
        return arith.select(hit, key, none)

    keys = reduction.reduce(square, [rank], "max", body=position, extra=[reduction.expand_dims(values, [rank])],
                            result_element=_I64())
    if not is_float:
        return values, keys
    indices = core.elementwise([keys, values], _I64(), lambda k, v: arith.select(
        elementwise.is_nan(v), arith.subi(core.scalar_constant(0, _I64()), k), k))
    return values, indices


def mode(x: ir.Value, *, unsigned: bool = False) -> tuple[ir.Value, ir.Value]:
    """The most frequent value of each row (the smallest among equally frequent ones) and
    the last position holding it, as eager's ``torch.mode``."""
    rank = core.tensor_type(x).rank
    one, zero = core.scalar_constant(1, _I64()), core.scalar_constant(0, _I64())
    counts = reduction.reduce(_square(x), [rank], "sum", result_element=_I64(),
                              extra=[reduction.expand_dims(x, [rank])],
                              body=lambda other, mine: arith.select(_same(other, mine), one, zero))
    most = reduction.reduce(counts, [rank - 1], "max", keepdims=True)
    element = core.tensor_type(x).element_type
    largest = reduction.identity("min", element, unsigned=unsigned)
    values = reduction.reduce(x, [rank - 1], "min", unsigned=unsigned, extra=[counts, most],
                              body=lambda v, c, m: arith.select(arith.cmpi(arith.CmpIPredicate.eq, c, m), v, largest))
    none = core.scalar_constant(-1, _I64())
    indices = reduction.reduce(x, [rank - 1], "max", result_element=_I64(),
                               extra=[reduction.expand_dims(values, [rank - 1])],
                               body=lambda v, m: arith.select(_same(v, m), _loop(rank - 1), none))
    return values, indices


def count_below(boundaries: ir.Value, values: ir.Value, *, right: bool, unsigned: bool = False) -> ir.Value:
    """For each value, how many of the sorted ``boundaries`` (last axis) lie below it
    (``<``; ``<=`` when ``right``), in int64: ``searchsorted``'s insertion point. The
    boundaries are either 1-D (shared by every value) or ``[..., n]`` with the values'
    leading dims ``[..., m]``."""
    b_rank, v_rank = core.tensor_type(boundaries).rank, core.tensor_type(values).rank
    v_extents = core.sizes(values)
    n = core.sizes(boundaries)[-1]
    if b_rank == 1:
        shaped = reduction.expand_dims(boundaries, list(range(v_rank)))
    elif b_rank == v_rank:
        shaped = reduction.expand_dims(boundaries, [v_rank - 1])
    else:
        raise OperandError(f"boundaries of rank {b_rank} for values of rank {v_rank}")
    square = movement.broadcast_to(shaped, [*v_extents, n])
    predicate = "le" if right else "lt"
    one, zero = core.scalar_constant(1, _I64()), core.scalar_constant(0, _I64())

    def below(boundary: ir.Value, value: ir.Value) -> ir.Value:
        return arith.select(elementwise.compare(predicate, boundary, value, unsigned=unsigned), one, zero)

    return reduction.reduce(square, [v_rank], "sum", body=below, extra=[reduction.expand_dims(values, [v_rank])],
                            result_element=_I64())


def along_last(x: ir.Value, axis: int) -> ir.Value:
    """``x`` with ``axis`` moved last (the layout every emitter here takes)."""
    rank = core.tensor_type(x).rank
    if axis == rank - 1:
        return x
    return core.transpose(x, [d for d in range(rank) if d != axis] + [axis])


def back_from_last(x: ir.Value, axis: int) -> ir.Value:
    """Inverse of :func:`along_last` for a result that kept the axis."""
    rank = core.tensor_type(x).rank
    if axis == rank - 1:
        return x
    order = [d for d in range(rank) if d != axis] + [axis]
    return core.transpose(x, [order.index(d) for d in range(rank)])


__all__: Sequence[str] = ("along_last", "back_from_last", "count_below", "count_nan", "histogram", "mode", "pick", "segments",
                          "running_extreme", "sort_last")


def histogram(flat: ir.Value, bins: int, low: ir.Value, high: ir.Value) -> ir.Value:
    """Counts of the 1-D float ``flat`` in ``bins`` equal bins over ``[low, high]`` (0-d
    tensors): element ``v`` falls in bin ``int((v - low) * bins / (high - low))``, the top
    edge in the last bin, values outside (and NaN) in none, as eager's ``histc``. Counts
    are in ``flat``'s element type; one pass of ``bins x n`` compares, vectorized along n."""
    element = core.tensor_type(flat).element_type
    n = core.sizes(flat)[0]
    square = movement.broadcast_to(reduction.expand_dims(flat, [0]), [bins, n])
    edges = [reduction.expand_dims(edge, [0, 1]) for edge in (low, high)]
    one, zero = core.scalar_constant(1, element), core.scalar_constant(0, element)
    last = core.scalar_constant(bins - 1, _I64())

    def count(value: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
        inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, value, lo), arith.cmpf(arith.CmpFPredicate.OLE, value, hi))
        scaled = arith.divf(arith.mulf(arith.subf(value, lo), core.scalar_constant(float(bins), element)),
                            arith.subf(hi, lo))
        # outside values give any integer here; the select below drops them
        position = arith.minsi(arith.fptosi(_I64(), arith.select(inside, scaled, core.scalar_constant(0, element))),
                               last)
        hit = arith.andi(inside, arith.cmpi(arith.CmpIPredicate.eq, position, _loop(0)))
        return arith.select(hit, one, zero)

    return reduction.reduce(square, [1], "sum", extra=edges, body=count)


def segments(rows: ir.Value, starts: ir.Value, ends: ir.Value, kind: str) -> ir.Value:
    """``rows [..., n]`` reduced by ``kind`` over each segment ``[starts[s], ends[s])`` of
    the last axis (1-D int64 bounds known at run time) -> ``[..., segments]``; an empty
    segment gives the reduction's identity."""
    rank = core.tensor_type(rows).rank
    extents = core.sizes(rows)
    count = core.sizes(starts)[0]
    square = movement.broadcast_to(reduction.expand_dims(rows, [rank - 1]), [*extents[:-1], count, extents[-1]])
    element = core.tensor_type(rows).element_type
    neutral = reduction.identity(kind, element)
    bounds = [reduction.expand_dims(b, [1]) for b in (starts, ends)]

    def masked(value: ir.Value, start: ir.Value, end: ir.Value) -> ir.Value:
        position = _loop(rank)
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sle, start, position),
                            arith.cmpi(arith.CmpIPredicate.slt, position, end))
        return arith.select(inside, value, neutral)

    return reduction.reduce(square, [rank], kind, extra=bounds, body=masked)
