"""View-like ATen ops whose element selection is known at import time, and their scatters.

``diagonal``, ``unfold``, ``as_strided`` (and their ``_copy`` forms) pick input elements at
positions that depend only on static shapes and arguments. Rather than one emitter per
op, the importer runs the op itself in PyTorch on ``arange(numel).view(shape)``: the
result holds, per output element, the flat position it reads, and the IR is one gather
from the flattened input. PyTorch's own view semantics (negative offsets, empty
diagonals, overlapping windows) then come for free and cannot drift.

The ``*_scatter`` ops are the inverse: the same selection computed at import time says
which output positions take a ``src`` element (and which one); the rest keep the input.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith

from ....ir import (
    core,
    movement,
    reshapes,
)
from ..importer import OpContext
from . import table
from ....errors import OperandError


def _static_shape(ctx: OpContext, x: ir.Value) -> list[int]:
    shape = core.static_shape(x)
    if None in shape:
        raise OperandError(f"{ctx.node.target._opname} of a tensor with dynamic dims")
    return shape


def _positions(ctx: OpContext, shape: list[int], view: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
    """The flat input position each element of ``view(input)`` reads (int64 array)."""
    numel = int(np.prod(shape))
    try:
        selected = view(torch.arange(numel, dtype=torch.int64).reshape(shape))
    except RuntimeError as error:
        raise OperandError(str(error).splitlines()[0]) from None
    return selected.contiguous().numpy()


def _flat(x: ir.Value, shape: list[int]) -> ir.Value:
    return reshapes.reshape(x, [int(np.prod(shape))])


def _gather_positions(ctx: OpContext, x: Any, view: Callable[[torch.Tensor], torch.Tensor]) -> ir.Value:
    x = ctx.tensor(x)
    shape = _static_shape(ctx, x)
    positions = _positions(ctx, shape, view)
    if positions.size == 0:
        return core.filled(list(positions.shape), 0, core.tensor_type(x).element_type)
    return movement.gather(_flat(x, shape), ctx.tensor(positions), 0)


def _static(ctx: OpContext, *values: Any) -> None:
    if not all(isinstance(v, (int, float, bool, type(None), list, tuple)) for v in values):
        raise OperandError(f"{ctx.node.target._opname} with sizes known only at run time")


@table.aten("diagonal.default", "diagonal_copy.default")
def diagonal(ctx: OpContext, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    _static(ctx, offset, dim1, dim2)
    return _gather_positions(ctx, x, lambda t: torch.diagonal(t, offset, dim1, dim2))


@table.aten("unfold.default")
def unfold(ctx: OpContext, x: Any, dimension: int, size: int, step: int) -> ir.Value:
    _static(ctx, dimension, size, step)
    return _gather_positions(ctx, x, lambda t: t.unfold(dimension, size, step))


def _require_dense(ctx: OpContext) -> None:
    """``as_strided`` reads the input's storage: only a contiguous input at offset 0 has a
    storage that is its row-major flattening, which is what the IR holds."""
    meta = ctx.arg_meta(0)
    if not (isinstance(meta, torch.Tensor) and meta.is_contiguous() and meta.storage_offset() == 0):
        raise OperandError("as_strided of a non-contiguous tensor (its storage order is not "
                                  "its element order)")


def _permuted_storage(shape: list[int], size: Any, stride: Any, storage_offset: Any
                      ) -> tuple[list[int], list[int]] | None:
    """``(extents, permutation)`` when ``as_strided(x, size, stride, storage_offset)`` of a
    dense ``x`` of ``shape`` reads every element of ``x`` once, as a permutation of its
    storage: ``x`` reshaped to ``extents`` (the non-unit dims of ``size`` by decreasing
    stride), transposed by ``permutation``, then reshaped to ``size``. ``None`` otherwise.

    Why: the core ATen decompositions write layout round trips this way (``mean(keepdim)``
    of a channels-last result, ConvNeXt's head; window partitions): a transpose is a copy the
    schedules tile and vectorize, where the general path's gather reads one element per
    index it loads. Unit dims take no part (their stride is never used).
    """
    numel = int(np.prod(shape))
    if storage_offset not in (None, 0) or numel == 0 or int(np.prod(size)) != numel:
        return None
    moving = [d for d, extent in enumerate(size) if extent != 1]
    order = sorted(moving, key=lambda d: -stride[d])  # storage order, outermost first
    expected = 1
    for d in reversed(order):
        if stride[d] != expected:
            return None  # a gap, an overlap or a broadcast: not a permutation of the storage
        expected *= size[d]
    extents = [size[d] for d in order]
    return extents, [order.index(d) for d in moving]


@table.aten("as_strided.default", "as_strided_copy.default")
def as_strided(ctx: OpContext, x: Any, size: Any, stride: Any, storage_offset: Any = None) -> ir.Value:
    _static(ctx, size, stride, storage_offset)
    _require_dense(ctx)
    x = ctx.tensor(x)
    shape = _static_shape(ctx, x)
    permuted = _permuted_storage(shape, list(size), list(stride), storage_offset)
    if permuted is None:
        return _gather_positions(ctx, x, lambda t: torch.as_strided(t, size, stride, storage_offset))
    extents, permutation = permuted
    moved = core.transpose(reshapes.reshape(x, extents), permutation)
    return reshapes.reshape(moved, list(size))


def _scatter_positions(ctx: OpContext, x: Any, src: Any, view: Callable[[torch.Tensor], torch.Tensor]) -> ir.Value:
    """``x`` with the elements ``view`` selects replaced by ``src`` (row-major)."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    shape = _static_shape(ctx, x)
    positions = _positions(ctx, shape, view).reshape(-1)
    if len(np.unique(positions)) != positions.size:
        raise OperandError(f"{ctx.node.target._opname} onto overlapping positions")
    source = np.full(int(np.prod(shape)), -1, dtype=np.int64)
    source[positions] = np.arange(positions.size)
    taken = source >= 0
    if positions.size == 0:
        return x
    src = ctx.tensor(src, dtype)
    src_flat = _flat(src, _static_shape(ctx, src))
    picked = movement.gather(src_flat, ctx.tensor(np.where(taken, source, 0).reshape(shape)), 0)
    # the mask travels as bytes: a large bool constant trips the pipeline's i1 prefetch path
    mask = ctx.tensor(taken.reshape(shape).astype(np.int8))
    return core.elementwise([mask, picked, x], core.element_type(dtype), lambda m, a, b: arith.select(
        arith.cmpi(arith.CmpIPredicate.ne, m, arith.constant(m.type, 0)), a, b))


@table.aten("slice_scatter.default")
def slice_scatter(ctx: OpContext, x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None,
                  step: int = 1) -> ir.Value:
    _static(ctx, dim, start, end, step)
    return _scatter_positions(ctx, x, src, lambda t: torch.ops.aten.slice.Tensor(t, dim, start, end, step))


@table.aten("select_scatter.default")
def select_scatter(ctx: OpContext, x: Any, src: Any, dim: int, index: int) -> ir.Value:
    _static(ctx, dim, index)
    return _scatter_positions(ctx, x, src, lambda t: torch.select(t, dim, index))


@table.aten("diagonal_scatter.default")
def diagonal_scatter(ctx: OpContext, x: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    _static(ctx, offset, dim1, dim2)
    return _scatter_positions(ctx, x, src, lambda t: torch.diagonal(t, offset, dim1, dim2))


@table.aten("as_strided_scatter.default")
def as_strided_scatter(ctx: OpContext, x: Any, src: Any, size: Any, stride: Any,
                       storage_offset: Any = None) -> ir.Value:
    _static(ctx, size, stride, storage_offset)
    _require_dense(ctx)
    return _scatter_positions(ctx, x, src, lambda t: torch.as_strided(t, size, stride, storage_offset))
