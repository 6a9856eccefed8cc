"""Scatter ATen ops: ``scatter`` (``src``/``value``/``reduce``), ``scatter_add``,
``scatter_reduce``, ``index_reduce`` and ``index_put``, on the shared scatter emitters
(ir/scatter.py, the ONNX ScatterElements/ScatterND ones).

Writes happen in row-major order of the updates, so where indices repeat without a
reduction the last write wins, as on eager's CPU kernels. ``scatter_reduce``'s
``include_self=False`` and ``mean`` are built from a second scatter that counts the
writes per position: positions never written keep the input.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith

from ....ir import (
    core,
    elementwise,
    movement,
    reduction,
    reshapes,
    scatter,
)
from ..importer import OpContext
from . import table
from ....errors import OperandError

_REDUCTIONS = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min",
               "mean": "mean"}


def _scalar_like(value: Any, dtype: np.dtype, shape: Sequence[Any]) -> ir.Value:
    return core.filled(list(shape), value, core.element_type(dtype))


def _scatter_reduce(ctx: OpContext, x: ir.Value, axis: int, index: ir.Value, src: ir.Value, reduce: str,
                    include_self: bool, dtype: np.dtype) -> ir.Value:
    """``x`` with ``src`` scattered along ``axis`` at ``index``, combined by ``reduce``."""
    if reduce not in _REDUCTIONS:
        raise OperandError(f"scatter reduction {reduce!r}")
    kind = _REDUCTIONS[reduce]
    unsigned = table.unsigned(dtype)
    element = core.element_type(dtype)
    if table.rank(x) == 0:  # a 0-d scatter reads as one element
        x1 = reshapes.reshape(x, [1])
        result = _scatter_reduce(ctx, x1, 0, reshapes.reshape(index, [1]) if table.rank(index) == 0 else index,
                                 reshapes.reshape(src, [1]) if table.rank(src) == 0 else src, reduce,
                                 include_self, dtype)
        return reshapes.reshape(result, [])
    src = _fit(src, index)
    if kind != "mean" and include_self:
        return scatter.scatter_elements(x, index, src, axis, kind, unsigned=unsigned)
    counts = scatter.scatter_elements(_scalar_like(0, table.INT64, core.sizes(x)), index,
                                      _scalar_like(1, table.INT64, core.sizes(index)), axis, "add")
    if kind == "mean":
        base = x if include_self else core.elementwise([x], element, lambda v: elementwise.like(0, v))
        summed = scatter.scatter_elements(base, index, src, axis, "add", unsigned=unsigned)

        def average(total: ir.Value, count: ir.Value, original: ir.Value) -> ir.Value:
            n = arith.addi(count, arith.constant(count.type, 1)) if include_self else count
            written = arith.cmpi(arith.CmpIPredicate.sgt, count, arith.constant(count.type, 0))
            divisor = core.convert_scalar(n, total.type)
            if core.is_float(total.type):
                mean = arith.divf(total, divisor)
            else:  # eager floors an integer mean
                mean = elementwise.divide(total, divisor, unsigned=unsigned)
            return arith.select(written, mean, original)

        return core.elementwise([summed, counts, x], element, average)
    identity = reduction.identity({"add": "sum", "mul": "prod", "max": "max", "min": "min"}[kind], element,
                                  unsigned=unsigned)
    base = core.elementwise([counts, x], element, lambda c, v: arith.select(
        arith.cmpi(arith.CmpIPredicate.sgt, c, arith.constant(c.type, 0)), identity, v))
    return scatter.scatter_elements(base, index, src, axis, kind, unsigned=unsigned)


def _fit(src: ir.Value, index: ir.Value) -> ir.Value:
    """``src`` cut to ``index``'s extents (eager reads only that corner of a larger ``src``)."""
    src_extents, index_extents = core.static_shape(src), core.static_shape(index)
    if src_extents == index_extents:
        return src
    if None in src_extents or None in index_extents:
        raise OperandError("a scatter whose source and index extents differ dynamically")
    return movement.extract_slice(src, [0] * len(src_extents), index_extents, [1] * len(src_extents))


@table.aten("scatter.src", "scatter.value", "scatter.reduce", "scatter.value_reduce", "scatter_add.default")
def scatter_(ctx: OpContext, x: Any, dim: int, index: Any, src: Any, reduce: str | None = None) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    index = ctx.tensor(index, table.INT64)
    axis = table.dim(dim, table.rank(x))
    if isinstance(src, (int, float, bool)):
        src = _scalar_like(src, dtype, core.sizes(index))
    else:
        src = ctx.tensor(src, dtype)
    if ctx.node.target._opname == "scatter_add":
        reduce = "add"
    if table.rank(index) == 0 and table.rank(x) != 0:
        raise OperandError("a 0-d index into a tensor of rank > 0")
    if reduce:
        return _scatter_reduce(ctx, x, axis, index, src, reduce, True, dtype)
    return _plain(x, axis, index, src, dtype)


def _plain(x: ir.Value, axis: int, index: ir.Value, src: ir.Value, dtype: np.dtype) -> ir.Value:
    if table.rank(x) == 0:
        result = scatter.scatter_elements(reshapes.reshape(x, [1]), reshapes.reshape(index, [1]),
                                          reshapes.reshape(_fit(src, index) if table.rank(src) else src, [1]), 0)
        return reshapes.reshape(result, [])
    return scatter.scatter_elements(x, index, _fit(src, index), axis, unsigned=table.unsigned(dtype))


@table.aten("scatter_reduce.two")
def scatter_reduce(ctx: OpContext, x: Any, dim: int, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    return _scatter_reduce(ctx, x, table.dim(dim, table.rank(x)), ctx.tensor(index, table.INT64),
                           ctx.tensor(src, dtype), reduce, include_self, dtype)


@table.aten("index_reduce.default")
def index_reduce(ctx: OpContext, x: Any, dim: int, index: Any, source: Any, reduce: str, *,
                 include_self: bool = True) -> ir.Value:
    """``scatter_reduce`` with the 1-D ``index`` broadcast over ``source``'s other dims."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    source = ctx.tensor(source, dtype)
    rank = table.rank(x)
    if rank == 0:
        return _scatter_reduce(ctx, x, 0, ctx.tensor(index, table.INT64), source, reduce, include_self, dtype)
    axis = table.dim(dim, rank)
    index = ctx.tensor(index, table.INT64)
    if table.rank(index) == 0:
        index = reshapes.reshape(index, [1])
    shaped = reduction.expand_dims(index, [d for d in range(rank) if d != axis])
    full = movement.broadcast_to(shaped, core.sizes(source))
    return _scatter_reduce(ctx, x, axis, full, source, reduce, include_self, dtype)


@table.aten("index_put.default", "_unsafe_index_put.default")
def index_put(ctx: OpContext, x: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> ir.Value:
    """``x[indices] = values`` (``+=`` with ``accumulate``) for integer index tensors: the
    indexed dims are moved to the front, the broadcast indices stacked into ScatterND's
    ``[..., k]`` form, and the result moved back."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    rank = table.rank(x)
    positions = [p for p, i in enumerate(indices) if i is not None]
    if not positions:
        raise OperandError("index_put without index tensors")
    masks = [p for p in positions if ctx.node.args[1][p].meta["val"].dtype == torch.bool]
    if masks:
        return _masked_put(ctx, x, indices, values, accumulate, dtype)
    tensors = []
    for p in positions:
        tensors.append(ctx.tensor(indices[p], table.INT64))
    extents = core.broadcast_extents(tensors)
    stacked = movement.concat([reduction.expand_dims(movement.broadcast_to(t, extents), [len(extents)])
                               for t in tensors], len(extents))
    rest = [d for d in range(rank) if d not in positions]
    order = positions + rest
    moved = core.transpose(x, order) if order != list(range(rank)) else x
    rest_extents = [core.sizes(x)[d] for d in rest]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    first = positions[0] if adjacent else 0
    # eager's value layout: index dims in place of adjacent indexed dims, else in front
    value_extents = rest_extents[:first] + list(extents) + rest_extents[first:]
    values = movement.broadcast_to(ctx.tensor(values, dtype), value_extents)
    index_rank = len(extents)
    if first:
        values = core.transpose(values, list(range(first, first + index_rank)) + list(range(first))
                                + list(range(first + index_rank, len(value_extents))))
    result = scatter.scatter_nd(moved, stacked, values, "add" if accumulate else "none",
                                unsigned=table.unsigned(dtype))
    if order == list(range(rank)):
        return result
    inverse = [order.index(d) for d in range(rank)]
    return core.transpose(result, inverse)


def _masked_put(ctx: OpContext, x: ir.Value, indices: Sequence[Any], values: Any, accumulate: bool,
                dtype: np.dtype) -> ir.Value:
    """``x[mask] = v`` for one leading boolean mask and one value: a select, no data-dependent
    count. More values than one would be matched to the True positions in order: refused."""
    if len(indices) != 1 or indices[0] is None:
        raise OperandError("index_put with a boolean mask among other indices")
    value_meta = ctx.arg_meta(2)
    mask_rank = ctx.node.args[1][0].meta["val"].dim()
    # one value, or values that broadcast over the dims the mask leaves (a row for each
    # selected row): the same for every True position, so a select
    per_row = isinstance(value_meta, torch.Tensor) and all(
        extent == 1 for position, extent in enumerate(value_meta.shape)
        if table.rank(x) - value_meta.dim() + position < mask_rank)
    if not isinstance(value_meta, torch.Tensor) or (value_meta.numel() != 1 and not per_row):
        raise OperandError("index_put of several values through a boolean mask (which value goes "
                                  "where depends on the data)")
    mask = ctx.tensor(indices[0], np.dtype(np.bool_))
    mask = reduction.expand_dims(mask, list(range(table.rank(mask), table.rank(x))))
    value = ctx.tensor(values, dtype)
    if value_meta.numel() == 1:
        value = reshapes.reshape(value, [])
    value = movement.broadcast_to(value, core.sizes(x))

    def body(m: ir.Value, v: ir.Value, original: ir.Value) -> ir.Value:
        return arith.select(m, elementwise.add(original, v) if accumulate else v, original)

    return core.elementwise([mask, value, x], core.element_type(dtype), body)
