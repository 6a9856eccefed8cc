"""Shapes and data movement, tensor creation, symbolic sizes."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir

from ....ir import (
    core,
    extent_math,
    movement,
    reduction,
    reshapes,
)
from ..importer import OpContext
from . import table
from ....errors import OperandError


def _extents(x: ir.Value, requested: Sequence[Any]) -> list[Any]:
    """A PyTorch size list (ints, symbolic sizes as index values, one ``-1``) as extents."""
    requested = [extent_math.scalar_to_index(e) if isinstance(e, ir.Value) and not isinstance(e.type, ir.IndexType)
                 else e for e in requested]
    if sum(1 for e in requested if isinstance(e, int) and e == -1) > 1:
        raise OperandError(f"size {requested} has more than one -1")
    known = [e for e in requested if not (isinstance(e, int) and e == -1)]
    if len(known) == len(requested):
        return list(requested)
    missing = extent_math.infer_extent(core.sizes(x), known)
    return [missing if isinstance(e, int) and e == -1 else e for e in requested]


@table.aten("view.default", "_unsafe_view.default", "reshape.default")
def view(ctx: OpContext, x: Any, size: Sequence[Any]) -> ir.Value:
    x = ctx.tensor(x)
    return reshapes.reshape(x, _extents(x, size))


def _transpose(x: ir.Value, permutation: Sequence[int]) -> ir.Value:
    """``core.transpose``, composed with a ``linalg.transpose`` that produced ``x``: the
    decompositions of attention permute heads back and forth, and two copies where one (or
    none, for inverse permutations) does would each cost a pass over the tensor."""
    owner = x.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "linalg.transpose":
        inner = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
        return core.transpose(owner.operands[0], [inner[p] for p in permutation])
    return core.transpose(x, permutation)


@table.aten("permute.default")
def permute(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    return _transpose(x, [table.dim(d, table.rank(x)) for d in dims])


@table.aten("t.default", "transpose.int")
def transpose(ctx: OpContext, x: Any, dim0: int = 0, dim1: int = 1) -> ir.Value:
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank < 2:
        return x
    order = list(range(rank))
    a, b = table.dim(dim0, rank), table.dim(dim1, rank)
    order[a], order[b] = order[b], order[a]
    return _transpose(x, order)


@table.aten("expand.default")
def expand(ctx: OpContext, x: Any, size: Sequence[Any], *, implicit: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    current = core.sizes(x)
    offset = len(size) - len(current)
    extents = [current[i - offset] if isinstance(e, int) and e == -1 else e for i, e in enumerate(size)]
    if all(isinstance(e, int) for e in extents) and core.static_shape(x) == extents:
        return x
    return movement.broadcast_to(x, _extents(x, extents))


@table.aten("unsqueeze.default")
def unsqueeze(ctx: OpContext, x: Any, dim: int) -> ir.Value:
    x = ctx.tensor(x)
    return reduction.expand_dims(x, [table.dim(dim, table.rank(x) + 1)])


@table.aten("squeeze.dims", "squeeze.dim", "squeeze.default")
def squeeze(ctx: OpContext, x: Any, dims: Any = None) -> ir.Value:
    x = ctx.tensor(x)
    if isinstance(dims, (list, tuple)) and not dims:  # squeeze(x, dim=()): nothing to squeeze
        return x
    candidates = table.dims(dims, table.rank(x))
    extents = core.static_shape(x)
    unit = [d for d in candidates if extents[d] == 1]
    if any(extents[d] is None for d in candidates):
        raise OperandError("squeeze of a dynamic dim (it may or may not be 1)")
    return reduction.drop_unit_dims(x, unit)


@table.aten("cat.default")
def cat(ctx: OpContext, tensors: Sequence[Any], dim: int = 0) -> ir.Value:
    dtype = ctx.result_dtype()
    values = [ctx.tensor(t, dtype) for t in tensors]
    # torch.cat skips 1-D empty tensors whatever the other ranks are (legacy behaviour)
    values = [v for v in values if not (table.rank(v) == 1 and core.static_shape(v) == [0])] or values[:1]
    rank = table.rank(values[0])
    return movement.concat(values, table.dim(dim, rank))


def _clamped(index: Any, extent: Any) -> Any:
    """A slice bound as torch reads it: negative counts from the end, then clamped to [0, extent]."""
    if isinstance(index, int) and isinstance(extent, int):
        if index < 0:
            index += extent
        return min(max(index, 0), extent)
    if isinstance(index, int) and index >= 0 and index >= 2**62:
        return extent
    return extent_math.clamp(extent_math.normalize_index(index, extent), 0, extent)


@table.aten("slice.Tensor")
def slice_(ctx: OpContext, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> ir.Value:
    x = ctx.tensor(x)
    axis = table.dim(dim, table.rank(x))
    extent = core.sizes(x)[axis]
    start = _clamped(0 if start is None else start, extent)
    end = _clamped(extent if end is None else end, extent)
    if not isinstance(step, int) or step < 1:
        raise OperandError(f"slice step {step!r} (only positive static steps)")
    length = extent_math.maximum(extent_math.ceildiv(extent_math.sub(end, start), step), 0)
    if isinstance(start, int) and start == 0 and step == 1 and extent_math.same_extent(length, extent):
        return x
    return movement.slice_axis(x, axis, start, length, step)


@table.aten("split_with_sizes.default", "split.Tensor")
def split(ctx: OpContext, x: Any, sizes: Any, dim: int = 0) -> list[ir.Value]:
    x = ctx.tensor(x)
    axis = table.dim(dim, table.rank(x))
    lengths = [m.shape[axis] for m in ctx.meta]
    if not all(isinstance(n, int) for n in lengths):
        raise OperandError("split into symbolic sizes")
    pieces, offset = [], 0
    for length in lengths:
        pieces.append(movement.slice_axis(x, axis, offset, length))
        offset += length
    return pieces


@table.aten("unbind.int")
def unbind(ctx: OpContext, x: Any, dim: int = 0) -> list[ir.Value]:
    x = ctx.tensor(x)
    axis = table.dim(dim, table.rank(x))
    extent = core.static_shape(x)[axis]
    if extent is None:
        raise OperandError("unbind along a dynamic dim")
    return [movement.select(x, axis, i) for i in range(extent)]


@table.aten("select.int")
def select(ctx: OpContext, x: Any, dim: int, index: Any) -> ir.Value:
    x = ctx.tensor(x)
    axis = table.dim(dim, table.rank(x))
    return movement.select(x, axis, extent_math.normalize_index(index, core.sizes(x)[axis]))


# An index_select by an import-time index made of at most this many runs of consecutive
# positions is imported as slices and a concat (torch.roll's core ATen decomposition is an
# index_select by ``(arange(n) - shift) % n``: two runs). Past that, a gather.
_MAX_SLICE_RUNS = 4


def _consecutive_runs(index: Any, extent: int | None) -> list[tuple[int, int]] | None:
    """``[(start, length), ...]``: the runs of consecutive positions a 1-D import-time
    ``index`` is made of, when they are at most ``_MAX_SLICE_RUNS`` and all inside
    ``[0, extent)``; ``None`` otherwise (a run-time or out-of-range index keeps the gather,
    whose run-time check reports the bad position)."""
    if not isinstance(index, np.ndarray) or index.ndim != 1 or index.size == 0 or extent is None:
        return None
    if not np.issubdtype(index.dtype, np.integer) or index.min() < 0 or index.max() >= extent:
        return None
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    if len(breaks) + 1 > _MAX_SLICE_RUNS:
        return None
    starts, ends = [0, *breaks.tolist()], [*breaks.tolist(), index.size]
    return [(int(index[s]), e - s) for s, e in zip(starts, ends)]


@table.aten("index_select.default")
def index_select(ctx: OpContext, x: Any, dim: int, index: Any) -> ir.Value:
    """``x`` at ``index`` along ``dim``. An import-time index of a few runs of consecutive
    positions (``torch.roll``, a rotation in window attention) is slices and a concat: the
    ONNX exporter's form of ``roll``, copies the schedules move in vector blocks, where a
    gather loads one element per index and checks each at run time."""
    x = ctx.tensor(x)
    if table.rank(x) > 0:
        axis = table.dim(dim, table.rank(x))
        runs = _consecutive_runs(index, core.static_shape(x)[axis])
        if runs is not None:
            return movement.concat([movement.slice_axis(x, axis, start, length) for start, length in runs], axis)
    indices = ctx.tensor(index, table.INT64)
    if table.rank(x) == 0:  # a 0-d tensor reads as one element; the result has the index's shape
        table.dim(dim, 0)
        picked = movement.gather(reshapes.reshape(x, [1]), reshapes.reshape(indices, [1]), 0)
        return reshapes.reshape(picked, list(ctx.meta.shape))
    if table.rank(indices) == 0:
        indices = reshapes.reshape(indices, [1])
    return movement.gather(x, indices, table.dim(dim, table.rank(x)))


@table.aten("gather.default")
def gather(ctx: OpContext, x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    return movement.gather_elements(x, ctx.tensor(index, table.INT64), table.dim(dim, table.rank(x)))


@table.aten("embedding.default")
def embedding(ctx: OpContext, weight: Any, indices: Any, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    return movement.gather(ctx.tensor(weight), ctx.tensor(indices, table.INT64), 0)


@table.aten("index.Tensor")
def index(ctx: OpContext, x: Any, indices: Sequence[Any]) -> ir.Value:
    """Advanced indexing with adjacent index tensors (``x[:, i]``, ``x[i, j]``); the result
    dims of the indices replace the indexed dims in place, as PyTorch does for adjacent ones."""
    x = ctx.tensor(x)
    rank = table.rank(x)
    positions = [p for p, i in enumerate(indices) if i is not None]
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise OperandError("index with non-adjacent index tensors")
    tensors = []
    for p in positions:
        t = ctx.tensor(indices[p])
        if core.tensor_type(t).element_type == ir.IntegerType.get_signless(1):
            raise OperandError("boolean mask indexing (its result size depends on the data)")
        tensors.append(ctx.tensor(indices[p], table.INT64))
    first = positions[0]
    if len(tensors) == 1:
        return movement.gather(x, tensors[0], first)
    extents = core.broadcast_extents(tensors)
    stacked = movement.concat([reduction.expand_dims(movement.broadcast_to(t, extents), [len(extents)])
                            for t in tensors], len(extents))
    order = positions + [d for d in range(rank) if d not in positions]
    gathered = movement.gather_nd(core.transpose(x, order), stacked)
    # gathered: index dims, then the dims not indexed; move the index dims to `first`
    index_rank = len(extents)
    rest = rank - len(positions)
    result_order = (list(range(index_rank, index_rank + first)) + list(range(index_rank))
                    + list(range(index_rank + first, index_rank + rest)))
    return core.transpose(gathered, result_order)


@table.aten("constant_pad_nd.default")
def constant_pad(ctx: OpContext, x: Any, pad: Sequence[int], value: float = 0) -> ir.Value:
    x = ctx.tensor(x)
    rank = table.rank(x)
    low, high = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        low[rank - 1 - i], high[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return movement.pad(x, low, high, "constant", value)


@table.aten("flip.default")
def flip(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    return movement.reverse(x, [table.dim(d, table.rank(x)) for d in dims])


@table.aten("repeat.default")
def repeat(ctx: OpContext, x: Any, repeats: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    extra = len(repeats) - table.rank(x)
    if extra < 0:
        raise OperandError(f"repeat {list(repeats)} has fewer entries than the rank {table.rank(x)}")
    x = reduction.expand_dims(x, list(range(extra)))
    return movement.tile(x, list(repeats))


@table.aten("tril.default", "triu.default")
def triangle(ctx: OpContext, x: Any, diagonal: int = 0) -> ir.Value:
    return movement.triangular(ctx.tensor(x), ctx.node.target._opname == "triu", diagonal)


def _size_list(size: Sequence[Any]) -> list[Any]:
    return [extent_math.scalar_to_index(e) if isinstance(e, ir.Value) and not isinstance(e.type, ir.IndexType)
            else e for e in size]


@table.aten("full.default", "zeros.default", "ones.default", "empty.memory_format", "new_full.default",
      "new_zeros.default", "new_ones.default", "new_empty.default", "empty_permuted.default",
      "empty_strided.default", "new_empty_strided.default")
def full(ctx: OpContext, *args: Any, **_: Any) -> ir.Value:
    """A filled tensor; the ``empty`` forms (values unspecified) are zeros, whatever their
    memory layout (``empty_permuted``'s physical order, ``empty_strided``'s strides)."""
    name = ctx.node.target._opname
    if name.startswith("new_"):
        args = args[1:]
        name = name[4:]
    size = args[0]
    fill = 0 if name.startswith("empty") else {"zeros": 0, "ones": 1}.get(name, args[1] if len(args) > 1 else 0)
    return core.filled(_size_list(size), fill, ctx.result_element())


@table.aten("full_like.default", "zeros_like.default", "ones_like.default", "empty_like.default")
def full_like(ctx: OpContext, x: Any, fill: Any = 0, **_: Any) -> ir.Value:
    name = ctx.node.target._opname
    fill = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, fill)
    return core.filled(core.sizes(ctx.tensor(x)), fill, ctx.result_element())


@table.aten("scalar_tensor.default")
def scalar_tensor(ctx: OpContext, value: Any, **_: Any) -> ir.Value:
    return core.filled([], value, ctx.result_element())


@table.aten("arange.start_step", "arange.default", "arange.start")
def arange(ctx: OpContext, *args: Any, **_: Any) -> ir.Value:
    start, end, step = {1: (0, args[0] if args else None, 1), 2: (*args, 1), 3: args}[len(args)]
    dtype = ctx.result_dtype()
    count = ctx.meta.shape[0]
    if not isinstance(count, int):
        if not all(isinstance(v, int) for v in (start, step)) or step != 1:
            raise OperandError("arange with a symbolic length needs integer start and step 1")
        count = extent_math.sub(extent_math.scalar_to_index(end) if not isinstance(end.type, ir.IndexType) else end, start)
    element = core.element_type(dtype)
    return movement.arange(core.scalar_constant(start, element), core.scalar_constant(step, element), count)


@table.aten("sym_size.int")
def sym_size(ctx: OpContext, x: Any, dim: int) -> Any:
    x = ctx.tensor(x)
    return core.sizes(x)[table.dim(dim, table.rank(x))]


_SIZE_ARITHMETIC = {"operator.mul": extent_math.mul, "operator.add": extent_math.add, "operator.sub": extent_math.sub,
                    "operator.floordiv": extent_math.floordiv}

for _name, _fn in _SIZE_ARITHMETIC.items():
    table.aten(_name)(lambda ctx, a, b, _fn=_fn: _fn(a, b))

table.aten("operator.getitem")(lambda ctx, container, position: container[position])


@table.aten("narrow.default", "narrow_copy.default")
def narrow(ctx: OpContext, x: Any, dim: int, start: Any, length: Any) -> ir.Value:
    x = ctx.tensor(x)
    axis = table.dim(dim, table.rank(x))
    return movement.slice_axis(x, axis, extent_math.normalize_index(start, core.sizes(x)[axis]), length)


# The *_copy forms (what functionalization leaves of a view) compute what the view does.
for _copy, _handler in (("view_copy.default", view), ("permute_copy.default", permute),
                        ("unbind_copy.int", unbind), ("expand_copy.default", expand),
                        ("transpose_copy.int", transpose), ("t_copy.default", transpose),
                        ("unsqueeze_copy.default", unsqueeze), ("select_copy.int", select),
                        ("slice_copy.Tensor", slice_), ("split_with_sizes_copy.default", split),
                        ("split_copy.Tensor", split), ("alias_copy.default", table.identity)):
    table.aten(_copy)(_handler)
