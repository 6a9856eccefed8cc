"""Sequential writes, scatter and compaction: ``scf.for`` loops threading a tensor through
``tensor.insert``, because ONNX defines colliding writes (scatter) and data-dependent counts
(nonzero) as sequential, which no parallel structured op expresses.

Shared by the ONNX and PyTorch frontends; split from one shape module by topic."""

from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

from . import core, extent_math
from .checks import check_extent, check_index_range, check_value_range
from .extent_math import as_index
from .movement import indexed_generic, source_index
from ..errors import OperandError

# --------------------------------------------------------------------------------------
# Sequential writes: scatter and compaction
# --------------------------------------------------------------------------------------

SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def loop_nest(
    extents: Sequence[int | ir.Value],
    carried: Sequence[ir.Value],
    body: Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]],
) -> list[ir.Value]:
    """An ``scf.for`` nest over ``extents`` (row-major order) threading ``carried`` values
    (tensors updated with ``tensor.insert``) through ``body(indices, carried) -> carried``.

    Why loops and not ``linalg``: a scatter's writes may collide and ONNX defines them as
    applied in order, which no parallel structured op expresses.
    """

    def level(depth: int, indices: list[ir.Value], values: list[ir.Value]) -> list[ir.Value]:
        if depth == len(extents):
            return body(indices, values)
        loop = scf.ForOp(core.index(0), as_index(extents[depth]), core.index(1), values)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(level(depth + 1, [*indices, loop.induction_variable], list(loop.inner_iter_args)))
        return list(loop.results)

    return level(0, [], list(carried))


def _combine(old: ir.Value, new: ir.Value, reduction: str, unsigned: bool) -> ir.Value:
    """``reduction`` of the element already there with the scattered one (bool: add/max is
    or, mul/min is and)."""
    if reduction == "none":
        return new
    element = old.type
    if isinstance(element, ir.IntegerType) and element.width == 1:
        return (arith.ori if reduction in ("add", "max") else arith.andi)(old, new)
    if core.is_float(element):
        op = {"add": arith.addf, "mul": arith.mulf, "max": arith.maximumf, "min": arith.minimumf}
    elif unsigned:
        op = {"add": arith.addi, "mul": arith.muli, "max": arith.maxui, "min": arith.minui}
    else:
        op = {"add": arith.addi, "mul": arith.muli, "max": arith.maxsi, "min": arith.minsi}
    return op[reduction](old, new)


def scatter(
    data: ir.Value,
    updates: ir.Value,
    target: Callable[[list[ir.Value]], list[ir.Value]],
    reduction: str = "none",
    *,
    unsigned: bool = False,
) -> ir.Value:
    """A copy of ``data`` where each element of ``updates`` (in row-major order) is written
    to ``target(its position)``, combined with what is there by ``reduction``."""
    if reduction not in SCATTER_REDUCTIONS:
        raise OperandError(f"unknown scatter reduction {reduction!r}; expected one of {SCATTER_REDUCTIONS}")

    def body(positions: list[ir.Value], carried: list[ir.Value]) -> list[ir.Value]:
        (result,) = carried
        where = target(positions)
        value = tensor.extract(updates, positions)
        if reduction != "none":
            value = _combine(tensor.extract(result, where), value, reduction, unsigned)
        return [tensor.insert(value, result, where)]

    (result,) = loop_nest(core.sizes(updates), [data], body)
    return result


def scatter_elements(data: ir.Value, indices: ir.Value, updates: ir.Value, axis: int,
                     reduction: str = "none", *, unsigned: bool = False) -> ir.Value:
    """The inverse of :func:`gather_elements`: ``out[p with p[axis] = indices[p]] = updates[p]``."""
    extent = core.sizes(data)[axis]

    def target(positions: list[ir.Value]) -> list[ir.Value]:
        where = list(positions)
        where[axis] = source_index(tensor.extract(indices, positions), extent)
        return where

    data_extents, index_extents, update_extents = core.sizes(data), core.sizes(indices), core.sizes(updates)
    if not len(data_extents) == len(index_extents) == len(update_extents):
        raise OperandError(f"data, indices and updates of ranks {len(data_extents)}, {len(index_extents)} and "
                         f"{len(update_extents)}: the ranks must be equal")
    # The loop runs over the updates' extents, reads the indices there and writes the data there.
    for d, (size, index_size) in enumerate(zip(update_extents, index_extents)):
        check_extent(size, index_size, f"the updates have size {{value}} along axis {d} where the indices have {{bound}}")
        if d != axis:
            check_extent(index_size, data_extents[d], f"the indices have size {{value}} along axis {d}, more "
                         f"than the data's {{bound}}", at_most=True)
    check_index_range(indices, [extent], [axis])
    return scatter(data, updates, target, reduction, unsigned=unsigned)


def scatter_nd(data: ir.Value, indices: ir.Value, updates: ir.Value,
               reduction: str = "none", *, unsigned: bool = False) -> ir.Value:
    """The inverse of :func:`gather_nd` (no batch dims): the last dim of ``indices`` (``k``,
    static) addresses the leading ``k`` dims of ``data``."""
    data_extents = core.sizes(data)
    k = core.static_shape(indices)[-1]
    if k is None:
        raise OperandError("scatter_nd needs the last dim of indices to be static")
    lead = core.tensor_type(indices).rank - 1
    if k > len(data_extents):
        raise OperandError(f"indices of shape [..., {k}] address {k} axes of data of rank {len(data_extents)}")

    def target(positions: list[ir.Value]) -> list[ir.Value]:
        prefix = positions[:lead]
        where = [
            source_index(tensor.extract(indices, [*prefix, core.index(j)]), data_extents[j])
            for j in range(k)
        ]
        return where + positions[lead:]

    # The loop runs over the updates' extents: indices[:-1] + data[k:] (ONNX), read and written there.
    expected = core.sizes(indices)[:lead] + data_extents[k:]
    update_extents = core.sizes(updates)
    if len(update_extents) != len(expected):
        raise OperandError(f"updates of rank {len(update_extents)}; indices of shape [..., {k}] into data of rank "
                         f"{len(data_extents)} need rank {len(expected)}")
    for d, (size, wanted) in enumerate(zip(update_extents, expected)):
        check_extent(size, wanted, f"the updates have size {{value}} along axis {d} where the indices and the "
                     f"data need {{bound}}")
    check_index_range(indices, data_extents[:k], list(range(k)))
    return scatter(data, updates, target, reduction, unsigned=unsigned)


def nonzero(value: ir.Value) -> ir.Value:
    """``numpy.nonzero`` stacked: an i64 ``[rank, count]`` tensor of the coordinates of the
    non-zero elements in row-major order. The count is data dependent: a first loop counts,
    a second one writes."""
    i64 = ir.IntegerType.get_signless(64)
    extents = core.sizes(value)
    element = core.tensor_type(value).element_type
    zero = core.scalar_constant(0, element)

    def is_set(positions: list[ir.Value]) -> ir.Value:
        x = tensor.extract(value, positions)
        if core.is_float(element):
            return arith.cmpf(arith.CmpFPredicate.UNE, x, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, x, zero)

    def count(positions, carried):
        (n,) = carried
        return [arith.select(is_set(positions), arith.addi(n, core.index(1)), n)]

    (total,) = loop_nest(extents, [core.index(0)], count)
    result = core.empty([len(extents), total], i64)

    def write(positions, carried):
        out, n = carried
        hit = is_set(positions)
        branch = scf.IfOp(hit, [out.type], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            filled = out
            for d, p in enumerate(positions):
                filled = tensor.insert(arith.index_cast(i64, p), filled, [core.index(d), n])
            scf.YieldOp([filled])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([out])
        return [branch.results[0], arith.select(hit, arith.addi(n, core.index(1)), n)]

    result, _ = loop_nest(extents, [result, core.index(0)], write)
    return result


# --------------------------------------------------------------------------------------
# TensorScatter: a window written into a cache
# --------------------------------------------------------------------------------------

TENSOR_SCATTER_MODES = ("linear", "circular")


def tensor_scatter(cache: ir.Value, update: ir.Value, write_indices: ir.Value | None, axis: int,
                   mode: str) -> ir.Value:
    """ONNX TensorScatter (a KV-cache update): ``cache`` with ``update`` written along
    ``axis`` from ``write_indices[b]`` on, for each batch entry ``b`` (dim 0), wrapping
    around in ``circular`` mode.

    Written as a gather, not as the sequential writes above: the windows of different
    entries never overlap, so each output element reads ``update`` at ``s - w`` when that
    lies in the window and ``cache`` otherwise, one parallel pass. In linear mode every
    write index must keep the window inside the cache (a run-time check); ``update`` is read
    only where the window is."""
    if mode not in TENSOR_SCATTER_MODES:
        raise OperandError(f"unsupported TensorScatter mode {mode!r}; expected one of {TENSOR_SCATTER_MODES}")
    dims, update_dims = core.sizes(cache), core.sizes(update)
    rank = len(dims)
    if len(update_dims) != rank or not 0 < axis < rank:
        raise OperandError(f"TensorScatter: the cache (rank {rank}) and the update (rank {len(update_dims)}) need one "
                         f"rank and a sequence axis after the batch dim (axis {axis})")
    for d in range(rank):
        if d != axis:
            check_extent(update_dims[d], dims[d], f"TensorScatter: dim {d} of the update is {{value}}, of the cache {{bound}}")
    length, window = dims[axis], update_dims[axis]
    check_extent(window, length, "TensorScatter: an update of {value} positions into a cache of {bound}", at_most=True)
    if write_indices is not None:
        check_extent(core.sizes(write_indices)[0], dims[0], "TensorScatter: {value} write indices for a batch of {bound}")
        if mode == "linear":
            check_value_range(write_indices, 0, extent_math.sub(length, window),
                              "TensorScatter: write index {value} puts the update past the cache's end (at most {bound})")
    element = core.tensor_type(cache).element_type
    identity = ir.AffineMap.get_identity(rank)

    def body(positions: list[ir.Value], values: list[ir.Value]) -> ir.Value:
        start = core.index(0)
        if write_indices is not None:
            start = extent_math.scalar_to_index(tensor.extract(write_indices, [positions[0]]))
        offset = arith.subi(positions[axis], start)
        if mode == "circular":  # Python's modulo: non-negative (a cache of 0 positions has no elements)
            size = as_index(length)
            offset = arith.remsi(offset, size)
            offset = arith.select(arith.cmpi(arith.CmpIPredicate.slt, offset, core.index(0)),
                                  arith.addi(offset, size), offset)
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, offset, core.index(0)),
                            arith.cmpi(arith.CmpIPredicate.slt, offset, as_index(window)))
        choice = scf.IfOp(inside, [element], has_else=True)
        with ir.InsertionPoint(choice.then_block):
            at = list(positions)
            at[axis] = offset
            scf.YieldOp([tensor.extract(update, at)])
        with ir.InsertionPoint(choice.else_block):
            scf.YieldOp([values[0]])
        return choice.results[0]

    return indexed_generic(dims, element, body, [cache], [identity])
