"""``put`` (below) and ``masked_scatter``: ``x`` with the positions where ``mask`` holds taken, in row-major
order, from the leading elements of ``source``.

Which element of ``source`` lands where depends on the data, but not the result's shape:
the k-th True position (an exclusive running count of the mask) reads ``source.flat[k]``,
a gather with a static shape. More True positions than ``source`` has elements is caught
by the gather's run-time index check, as eager raises.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ....errors import OperandError
from ....ir import core, movement, reduction, reshapes, scatter
from ..importer import OpContext
from . import table


@table.aten("masked_scatter.default")
def masked_scatter(ctx: OpContext, x: Any, mask: Any, source: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    if None in shape:
        raise OperandError("masked_scatter with dynamic dims")
    count = int(np.prod(shape))
    flags = movement.broadcast_to(ctx.tensor(mask, np.dtype(np.bool_)), core.sizes(x))
    i64 = core.element_type(table.INT64)
    flat_flags = reshapes.reshape(core.elementwise([flags], i64, lambda f: arith.extui(i64, f)), [count])
    slots = reduction.cumulative(flat_flags, 0, "sum", exclusive=True)
    # positions not taken read element 0 (always in range), which the select below drops
    slots = core.elementwise([slots, flat_flags], i64, lambda s, f: arith.select(
        arith.cmpi(arith.CmpIPredicate.ne, f, arith.constant(i64, 0)), s, arith.constant(i64, 0)))
    source = ctx.tensor(source, dtype)
    source_count = int(np.prod(core.static_shape(source)))
    taken = movement.gather(reshapes.reshape(source, [source_count]), slots, 0)
    merged = core.elementwise([reshapes.reshape(flags, [count]), taken, reshapes.reshape(x, [count])],
                              core.element_type(dtype), lambda f, s, v: arith.select(f, s, v))
    return reshapes.reshape(merged, list(shape))


@table.aten("put.default")
def put(ctx: OpContext, x: Any, index: Any, source: Any, accumulate: bool = False) -> ir.Value:
    """``x.flatten()[index] = source`` (``+=`` with ``accumulate``), negative positions from
    the end: one scatter on the flattened tensor (the last write wins on repeats, as eager's
    CPU kernel)."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    index_shape = core.static_shape(ctx.tensor(index))
    if None in shape or None in index_shape:
        raise OperandError("put with dynamic dims")
    count, positions = int(np.prod(shape)), int(np.prod(index_shape))
    if positions != int(np.prod(core.static_shape(ctx.tensor(source)))):
        raise OperandError("put: index and source must have the same number of elements")
    flat = reshapes.reshape(x, [count])
    index = reshapes.reshape(ctx.tensor(index, table.INT64), [positions])
    values = reshapes.reshape(ctx.tensor(source, dtype), [positions])
    result = scatter.scatter_elements(flat, index, values, 0, "add" if accumulate else "none",
                                      unsigned=table.unsigned(dtype))
    return reshapes.reshape(result, list(shape))
