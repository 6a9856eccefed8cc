"""``nn.functional.embedding_bag`` (``aten._embedding_bag_forward_only`` / ``_embedding_bag``):
the rows of ``weight`` picked by ``indices``, reduced per bag (sum, mean or max), bag ``b``
covering ``indices[offsets[b]:offsets[b + 1]]`` (the last bag to the end unless
``include_last_offset``). The picked rows are one gather; each bag is a masked reduction
over all of them (``selection.segments``: bounds known at run time, static shapes).
Rows at ``padding_idx`` count nowhere (not in a mean's divisor either); an empty bag is 0
in every mode, as in eager. Only the first result (the bags) may be used: the others are
the backward's bookkeeping."""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from ....errors import OperandError
from ....ir import core, movement, reduction, reshapes, selection
from ..importer import OpContext
from . import table

MODES = {0: "sum", 1: "mean", 2: "max"}


@table.aten("_embedding_bag_forward_only.default", "_embedding_bag.default")
def embedding_bag(ctx: OpContext, weight: Any, indices: Any, offsets: Any, scale_grad_by_freq: bool = False,
                  mode: int = 0, sparse: bool = False, per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: int = -1) -> tuple[ir.Value, None, None, None]:
    if mode not in MODES:
        raise OperandError(f"embedding_bag: unknown mode {mode!r} (0 sum, 1 mean, 2 max)")
    if any(getattr(user, "args", (None, 0))[1] != 0 for user in ctx.node.users):
        raise OperandError("embedding_bag: only the bags (result 0) can be used; offset2bag, bag_size "
                           "and max_indices are the backward's")
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"embedding_bag of a {dtype} weight (floating point only)")
    table_ = ctx.tensor(weight, dtype)
    index_values = ctx.tensor(indices, table.INT64)
    bounds = ctx.tensor(offsets, table.INT64)
    if table.rank(table_) != 2 or table.rank(index_values) != 1 or table.rank(bounds) != 1:
        raise OperandError("embedding_bag: a 2-D weight, 1-D indices and 1-D offsets")
    n = core.static_shape(index_values)[0]
    count = core.static_shape(bounds)[0]
    if n is None or count is None:
        raise OperandError("embedding_bag with a dynamic number of indices or bags")
    element = core.element_type(dtype)
    i64 = core.element_type(table.INT64)
    if include_last_offset:
        if count < 1:
            raise OperandError("embedding_bag: include_last_offset needs at least one offset")
        starts = movement.slice_axis(bounds, 0, 0, count - 1)
        ends = movement.slice_axis(bounds, 0, 1, count - 1)
    else:
        starts = bounds
        ends = movement.concat([movement.slice_axis(bounds, 0, 1, count - 1),
                                ctx.tensor(np.array([n], np.int64))], 0)
    rows = movement.gather(table_, index_values, 0)  # [n, dim]
    counted = core.elementwise([index_values], element, lambda i: arith.select(
        arith.cmpi(arith.CmpIPredicate.eq, i, arith.constant(i64, padding_idx)),
        core.scalar_constant(0, element), core.scalar_constant(1, element)))  # [n]: 0 at padding_idx
    kind = MODES[mode]
    if per_sample_weights is not None:
        if kind != "sum":
            raise OperandError("embedding_bag: per_sample_weights only in mode 'sum'")
        weights = ctx.tensor(per_sample_weights, dtype)
        rows = core.elementwise([rows, reduction.expand_dims(weights, [1])], element, arith.mulf)
    skipped = reduction.identity("max" if kind == "max" else "sum", element)
    rows = core.elementwise([rows, reduction.expand_dims(counted, [1])], element, lambda r, c: arith.select(
        arith.cmpf(arith.CmpFPredicate.OEQ, c, core.scalar_constant(0, element)), skipped, r))
    bags = selection.segments(core.transpose(rows, [1, 0]), starts, ends, "max" if kind == "max" else "sum")
    sizes = selection.segments(reduction.expand_dims(counted, [0]), starts, ends, "sum")  # [1, bags]

    def finish(value: ir.Value, size: ir.Value) -> ir.Value:
        empty = arith.cmpf(arith.CmpFPredicate.OEQ, size, core.scalar_constant(0, element))
        if kind == "mean":
            value = arith.divf(value, arith.select(empty, core.scalar_constant(1, element), size))
        return arith.select(empty, core.scalar_constant(0, element), value)

    return core.transpose(core.elementwise([bags, sizes], element, finish), [1, 0]), None, None, None


@table.aten("embedding_renorm.default")
def embedding_renorm(ctx: OpContext, weight: Any, indices: Any, max_norm: float, norm_type: float) -> ir.Value:
    """``max_norm`` of ``embedding``/``embedding_bag``: eager rescales in place each row of
    ``weight`` that ``indices`` name and whose ``norm_type``-norm exceeds ``max_norm`` by
    ``max_norm / (norm + 1e-7)`` (computed in double, as eager); here the rescaled weight is
    the node's value, which the program returns as the write into the caller's weight."""
    from .reduction import vector_norm  # the one vector-norm emitter (every ord)

    dtype = ctx.result_dtype()
    if dtype.kind != "f":
        raise OperandError(f"embedding_renorm of a {dtype} weight (floating point only)")
    table_ = ctx.tensor(weight, dtype)
    index_values = ctx.tensor(indices, table.INT64)
    shape, index_shape = core.static_shape(table_), core.static_shape(index_values)
    if len(shape) != 2 or None in shape or None in index_shape:
        raise OperandError("embedding_renorm: a static 2-D weight and static indices")
    flat = reshapes.reshape(index_values, [int(np.prod(index_shape))])
    norms = vector_norm(ctx, table_, float(norm_type), [1])  # [rows]
    element = core.element_type(dtype)
    i64 = core.element_type(table.INT64)
    square = movement.broadcast_to(reduction.expand_dims(flat, [0]), [shape[0], core.static_shape(flat)[0]])
    named = reduction.reduce(square, [1], "max", body=lambda i: arith.extui(i64, arith.cmpi(
        arith.CmpIPredicate.eq, i, arith.index_cast(i64, linalg.IndexOp(0).result))))  # [rows]: 1 if named
    f64 = ir.F64Type.get()

    def scale(norm: ir.Value, used: ir.Value) -> ir.Value:
        wide = arith.extf(f64, norm) if norm.type != f64 else norm
        limit = core.scalar_constant(float(max_norm), f64)
        factor = arith.divf(limit, arith.addf(wide, core.scalar_constant(1e-7, f64)))
        factor = factor if element == f64 else arith.truncf(element, factor)
        over = arith.andi(arith.cmpi(arith.CmpIPredicate.ne, used, arith.constant(i64, 0)),
                          arith.cmpf(arith.CmpFPredicate.OGT, wide, limit))
        return arith.select(over, factor, core.scalar_constant(1, element))

    factors = core.elementwise([norms, named], element, scale)
    return core.elementwise([table_, reduction.expand_dims(factors, [1])], element, arith.mulf)
