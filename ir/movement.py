"""Data movement: slices and concatenation, gathers (a ``linalg.generic`` over the *output*
reading its operands with ``tensor.extract``; affine maps with negative coefficients are avoided
on purpose: MLIR's tiling asserts on them), broadcast, tile, pad, channel/space re-layouts and
index-pattern generators.

Shared by the ONNX and PyTorch frontends; split from one shape module by topic."""

from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from . import core
from .extent_math import (
    DYNAMIC,
    add,
    as_index,
    floordiv,
    product,
    same_extent,
    scalar_to_index,
    sub,
)
from .reshapes import collapse, reshape
from .checks import check_extent, check_index_range
from ..errors import OperandError

# --------------------------------------------------------------------------------------
# Slices and concatenation
# --------------------------------------------------------------------------------------

def extract_slice(
    value: ir.Value,
    offsets: Sequence[int | ir.Value],
    sizes: Sequence[int | ir.Value],
    strides: Sequence[int | ir.Value] | None = None,
) -> ir.Value:
    """``tensor.extract_slice`` (positive strides; static parts stay static)."""
    strides = list(strides) if strides is not None else [1] * len(offsets)
    if all(isinstance(o, int) and o == 0 for o in offsets) and all(
        isinstance(s, int) and s == 1 for s in strides
    ) and all(same_extent(s, e) for s, e in zip(sizes, core.sizes(value))):
        return value

    def split(items):
        return [i for i in items if not isinstance(i, int)], [
            i if isinstance(i, int) else DYNAMIC() for i in items
        ]

    if any(isinstance(s, int) and s == 0 for s in sizes):
        # Nothing to read; the verifier rejects an offset at the end even for size 0.
        return core.empty(list(sizes), core.tensor_type(value).element_type)
    dyn_o, sta_o = split(offsets)
    dyn_s, sta_s = split(sizes)
    dyn_t, sta_t = split(strides)
    result_type = core.shape_type(sizes, core.tensor_type(value).element_type)
    return tensor.extract_slice(result_type, value, dyn_o, dyn_s, dyn_t, sta_o, sta_s, sta_t)


def slice_axis(
    value: ir.Value, axis: int, offset: int | ir.Value, size: int | ir.Value, stride: int | ir.Value = 1
) -> ir.Value:
    """Elements ``offset, offset + stride, ...`` (``size`` of them) along ``axis``."""
    extents = core.sizes(value)
    offsets = [0] * len(extents)
    strides = [1] * len(extents)
    offsets[axis], strides[axis] = offset, stride
    extents[axis] = size
    return extract_slice(value, offsets, extents, strides)


def select(value: ir.Value, axis: int, position: int | ir.Value) -> ir.Value:
    """The slice at ``position`` along ``axis``, with that axis dropped (a scalar gather)."""
    sliced = slice_axis(value, axis, position, 1)
    extents = core.sizes(sliced)
    del extents[axis]
    return reshape(sliced, extents)


def concat(values: Sequence[ir.Value], axis: int) -> ir.Value:
    """``tensor.concat`` along ``axis`` (inputs of equal rank and element type).

    Inputs statically empty along ``axis`` are dropped: bufferizing a concat with one
    creates a ``memref.subview`` at the end offset, which the verifier rejects.
    """
    nonempty = [v for v in values if core.static_shape(v)[axis] != 0]
    values = nonempty or list(values[:1])
    if len(values) == 1:
        return values[0]
    shapes = [core.static_shape(v) for v in values]
    result = []
    for d in range(len(shapes[0])):
        column = [s[d] for s in shapes]
        if d == axis:
            result.append(DYNAMIC() if None in column else sum(column))
        else:
            known = [c for c in column if c is not None]
            result.append(known[0] if known else DYNAMIC())
    result_type = ir.RankedTensorType.get(result, core.tensor_type(values[0]).element_type)
    return tensor.concat(result_type, axis, list(values))


# --------------------------------------------------------------------------------------
# linalg.generic over an output, reading its operands anywhere
# --------------------------------------------------------------------------------------

def indexed_generic(
    extents: Sequence[int | ir.Value],
    element: ir.Type,
    body: Callable[[list[ir.Value], list[ir.Value]], ir.Value],
    inputs: Sequence[ir.Value] = (),
    input_maps: Sequence[ir.AffineMap] = (),
) -> ir.Value:
    """A parallel ``linalg.generic`` producing a tensor of ``extents``.

    ``body(indices, scalars)`` gets the output position (``linalg.index`` values) and one
    scalar per input (read through ``input_maps``), and returns the element; it may read
    any tensor with ``tensor.extract``. This is the one construct behind every gather-like
    op: the source position is computed, not an affine function of the output's.
    """
    rank = len(extents)
    init = core.empty(extents, element)
    if 0 in [e for e in extents if isinstance(e, int)]:
        return init  # nothing to compute (and tiling an empty loop asserts in MLIR)
    maps = [*input_maps, ir.AffineMap.get_identity(rank)]
    op = linalg.GenericOp(
        [init.type],
        list(inputs),
        [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
    )
    block = op.regions[0].blocks.append(*[core.tensor_type(v).element_type for v in inputs], element)
    with ir.InsertionPoint(block):
        indices = [linalg.IndexOp(d) for d in range(rank)]
        linalg.YieldOp([body([i.result for i in indices], list(block.arguments[: len(inputs)]))])
    for index_op in indices:  # keep the IR readable: only the positions the body reads
        if not list(index_op.result.uses):
            index_op.operation.erase()
    return op.result


def projection(rank: int, dims: Sequence[int]) -> ir.AffineMap:
    """The affine map ``(d0..d{rank-1}) -> (d{dims[0]}, ...)``."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in dims])


def _positive_mod(a: ir.Value, n: ir.Value) -> ir.Value:
    r = arith.remsi(a, n)
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, r, core.index(0)), arith.addi(r, n), r)


def source_index(raw: ir.Value, extent: int | ir.Value) -> ir.Value:
    """A gather index scalar as an in-bounds ``index``: negative counts from the end.

    Out-of-range indices are invalid in every framework; they are clamped so that a bad
    input reads a wrong element instead of memory outside the buffer.
    """
    i = scalar_to_index(raw)
    n = as_index(extent)
    i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, core.index(0)), arith.addi(i, n), i)
    return arith.minsi(arith.maxsi(i, core.index(0)), arith.subi(n, core.index(1)))


def reverse(value: ir.Value, axes: Sequence[int]) -> ir.Value:
    """``value`` with the order of elements along ``axes`` reversed."""
    if not axes:
        return value
    extents = core.sizes(value)
    last = {a: as_index(sub(extents[a], 1)) for a in axes}

    def body(indices, _):
        position = [arith.subi(last[d], i) if d in last else i for d, i in enumerate(indices)]
        return tensor.extract(value, position)

    return indexed_generic(extents, core.tensor_type(value).element_type, body)


def gather(data: ir.Value, indices: ir.Value, axis: int) -> ir.Value:
    """``take(data, indices, axis)``: result dims are ``data[:axis] + indices + data[axis+1:]``."""
    extents = core.sizes(data)
    index_rank = core.tensor_type(indices).rank
    out = extents[:axis] + core.sizes(indices) + extents[axis + 1:]

    def body(positions, scalars):
        source = source_index(scalars[0], extents[axis])
        where = positions[:axis] + [source] + positions[axis + index_rank:]
        return tensor.extract(data, where)

    check_index_range(indices, [extents[axis]], [axis])
    index_map = projection(len(out), range(axis, axis + index_rank))
    return indexed_generic(out, core.tensor_type(data).element_type, body, [indices], [index_map])


def gather_elements(data: ir.Value, indices: ir.Value, axis: int) -> ir.Value:
    """``out[p] = data[p with p[axis] = indices[p]]`` (``take_along_axis``)."""
    extents = core.sizes(data)
    out = core.sizes(indices)
    rank = len(out)

    def body(positions, scalars):
        where = list(positions)
        where[axis] = source_index(scalars[0], extents[axis])
        return tensor.extract(data, where)

    if rank != len(extents):
        raise OperandError(f"indices of rank {rank} for data of rank {len(extents)}: the ranks must be equal")
    for d in range(rank):  # the loop runs over the indices' extents and reads data there
        if d != axis:
            check_extent(out[d], extents[d], f"the indices have size {{value}} along axis {d}, more than "
                         f"the data's {{bound}}", at_most=True)
    check_index_range(indices, [extents[axis]], [axis])
    return indexed_generic(
        out, core.tensor_type(data).element_type, body, [indices], [ir.AffineMap.get_identity(rank)]
    )


def gather_nd(data: ir.Value, indices: ir.Value, batch_dims: int = 0) -> ir.Value:
    """ONNX/TF ``gather_nd``: the last dim of ``indices`` (static, ``k``) addresses the dims
    ``batch_dims .. batch_dims + k`` of ``data``; leading ``batch_dims`` dims are shared."""
    data_extents = core.sizes(data)
    index_extents = core.sizes(indices)
    k = index_extents[-1]
    if not isinstance(k, int):
        raise OperandError("gather_nd needs the last dim of indices to be static")
    if batch_dims + k > len(data_extents) or batch_dims > len(index_extents) - 1:
        raise OperandError(f"indices of shape [..., {k}] with {batch_dims} batch dims address more axes than "
                         f"the {len(data_extents)} of the data")
    out = index_extents[:-1] + data_extents[batch_dims + k:]
    lead = len(index_extents) - 1

    def body(positions, _):
        prefix = positions[:lead]
        where = list(positions[:batch_dims])
        for j in range(k):
            raw = tensor.extract(indices, prefix + [core.index(j)])
            where.append(source_index(raw, data_extents[batch_dims + j]))
        return tensor.extract(data, where + positions[lead:])

    for d in range(batch_dims):  # batch positions index the data too
        check_extent(index_extents[d], data_extents[d], f"the indices have size {{value}} along batch axis {d} "
                     f"where the data has {{bound}}")
    check_index_range(indices, data_extents[batch_dims:batch_dims + k], list(range(batch_dims, batch_dims + k)))
    return indexed_generic(out, core.tensor_type(data).element_type, body)


# --------------------------------------------------------------------------------------
# Broadcast, tile, pad
# --------------------------------------------------------------------------------------

def broadcast_to(value: ir.Value, extents: Sequence[int | ir.Value]) -> ir.Value:
    """``value`` broadcast (numpy rules) to ``extents``."""
    element = core.tensor_type(value).element_type
    if 0 in [e for e in extents if isinstance(e, int)]:
        return core.empty(list(extents), element)
    return core.elementwise([value], element, lambda v: v, extents=extents)


def tile(value: ir.Value, repeats: Sequence[int]) -> ir.Value:
    """``numpy.tile``: a broadcast to ``[r0, n0, r1, n1, ...]`` collapsed pairwise, so the
    copy is one affine ``linalg.generic`` and the collapse is free."""
    if all(r == 1 for r in repeats):
        return value
    extents = core.sizes(value)
    interleaved = [e for r, n in zip(repeats, extents) for e in (r, n)]
    rank = len(interleaved)
    element = core.tensor_type(value).element_type
    spread = indexed_generic(
        interleaved, element, lambda _, scalars: scalars[0], [value],
        [projection(rank, range(1, rank, 2))],
    )
    return collapse(spread, [[2 * d, 2 * d + 1] for d in range(len(extents))])


def tile_to(value: ir.Value, extents: Sequence[int | ir.Value]) -> ir.Value:
    """``value`` repeated periodically to fill ``extents`` (each a multiple of the input's):
    the tile for repeats known only at run time, as a gather reading ``i mod n``."""
    sources = core.sizes(value)

    def body(indices, _):
        return tensor.extract(value, [arith.remsi(i, as_index(n)) for i, n in zip(indices, sources)])

    return indexed_generic(extents, core.tensor_type(value).element_type, body)


PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad(
    value: ir.Value,
    low: Sequence[int | ir.Value],
    high: Sequence[int | ir.Value],
    mode: str = "constant",
    fill: float | int | bool | ir.Value = 0,
) -> ir.Value:
    """numpy-style padding: ``constant`` (``fill``), ``reflect`` (mirror without repeating the
    edge), ``edge`` (repeat the edge), ``wrap`` (periodic). Negative static pads crop."""
    if mode not in PAD_MODES:
        raise OperandError(f"unknown pad mode {mode!r}; expected one of {PAD_MODES}")
    static = all(isinstance(p, int) for p in [*low, *high])
    if static:
        value, low, high = _crop_negative_pads(value, low, high)
        if not any([*low, *high]):
            return value
        if mode == "constant":
            return _pad_constant(value, low, high, fill)
    return _pad_by_gather(value, low, high, mode, fill)


def _pad_by_gather(
    value: ir.Value,
    low: Sequence[int | ir.Value],
    high: Sequence[int | ir.Value],
    mode: str,
    fill: float | int | bool | ir.Value,
) -> ir.Value:
    """Padding as a gather: each output element reads the input position its mode maps it
    to. Handles every mode, and pads known only at run time (of either sign) too."""
    extents = core.sizes(value)
    element = core.tensor_type(value).element_type
    out = [add(add(n, lo), hi) for n, lo, hi in zip(extents, low, high)]
    padded_axes = [d for d in range(len(extents)) if not (
        isinstance(low[d], int) and low[d] == 0 and isinstance(high[d], int) and high[d] == 0)]
    sizes_ix = {d: as_index(extents[d]) for d in padded_axes}
    lows_ix = {d: as_index(low[d]) for d in padded_axes}

    def source(i: ir.Value, d: int) -> ir.Value:
        shifted, n = arith.subi(i, lows_ix[d]), sizes_ix[d]
        if mode in ("edge", "constant"):  # constant: any in-bounds read, then masked
            return arith.minsi(arith.maxsi(shifted, core.index(0)), arith.subi(n, core.index(1)))
        if mode == "wrap":
            return _positive_mod(shifted, n)
        # reflect: period 2(n-1) (n == 1 has period 1: every position reads element 0)
        period = arith.maxsi(arith.muli(arith.subi(n, core.index(1)), core.index(2)), core.index(1))
        m = _positive_mod(shifted, period)
        return arith.minsi(m, arith.subi(period, m))

    if mode == "constant":
        fill_value = fill if isinstance(fill, ir.Value) else core.scalar_constant(fill, element)

    def body(indices, _):
        where = [source(i, d) if d in sizes_ix else i for d, i in enumerate(indices)]
        sample = tensor.extract(value, where)
        if mode != "constant":
            return sample
        inside = None
        for d, i in enumerate(indices):
            if d not in sizes_ix:
                continue
            shifted = arith.subi(i, lows_ix[d])
            ok = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, shifted, core.index(0)),
                            arith.cmpi(arith.CmpIPredicate.slt, shifted, sizes_ix[d]))
            inside = ok if inside is None else arith.andi(inside, ok)
        return arith.select(inside, sample, fill_value)

    return indexed_generic(out, element, body)


def _crop_negative_pads(value, low, high):
    """Negative static pads remove elements: slice them off and pad with zero there."""
    if not any(isinstance(p, int) and p < 0 for p in [*low, *high]):
        return value, list(low), list(high)
    extents = core.sizes(value)
    offsets, sizes = [], []
    for n, lo, hi in zip(extents, low, high):
        cut_lo = -lo if isinstance(lo, int) and lo < 0 else 0
        cut_hi = -hi if isinstance(hi, int) and hi < 0 else 0
        offsets.append(cut_lo)
        sizes.append(sub(sub(n, cut_lo), cut_hi))
    cropped = extract_slice(value, offsets, sizes)
    keep = lambda pads: [p if not isinstance(p, int) or p > 0 else 0 for p in pads]  # noqa: E731
    return cropped, keep(low), keep(high)


def _pad_constant(value, low, high, fill) -> ir.Value:
    if not isinstance(fill, ir.Value) and all(isinstance(p, int) for p in [*low, *high]):
        return core.pad_constant(value, list(low), list(high), fill)
    element = core.tensor_type(value).element_type
    extents = core.sizes(value)
    result = [add(add(n, lo), hi) for n, lo, hi in zip(extents, low, high)]
    result_type = core.shape_type(result, element)
    dyn_low = [p for p in low if not isinstance(p, int)]
    dyn_high = [p for p in high if not isinstance(p, int)]
    static_low = [p if isinstance(p, int) else DYNAMIC() for p in low]
    static_high = [p if isinstance(p, int) else DYNAMIC() for p in high]
    op = tensor.PadOp(result_type, value, dyn_low, dyn_high, static_low, static_high)
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * len(extents))
    with ir.InsertionPoint(block):
        tensor.YieldOp(fill if isinstance(fill, ir.Value) else core.scalar_constant(fill, element))
    return op.result


# --------------------------------------------------------------------------------------
# Channel/space re-layouts
# --------------------------------------------------------------------------------------

def depth_to_space(value: ir.Value, block: int, channel_major: bool = False) -> ir.Value:
    """NCHW ``[n, c, h, w] -> [n, c/b^2, h*b, w*b]``.

    ``channel_major=False`` is the DCR order (depth-column-row: the block offsets are the
    *outer* part of the channel index, TensorFlow's); ``True`` is CRD (PyTorch's
    ``pixel_shuffle``: channel outer, block inner).
    """
    n, c, h, w = core.sizes(value)
    depth = floordiv(c, block * block)
    if channel_major:
        split = reshape(value, [n, depth, block, block, h, w])
        moved = core.transpose(split, [0, 1, 4, 2, 5, 3])
    else:
        split = reshape(value, [n, block, block, depth, h, w])
        moved = core.transpose(split, [0, 3, 4, 1, 5, 2])
    return _merge_dims(moved, [[0], [1], [2, 3], [4, 5]])


def space_to_depth(value: ir.Value, block: int, channel_major: bool = False) -> ir.Value:
    """NCHW ``[n, c, h, w] -> [n, c*b^2, h/b, w/b]``, the inverse of :func:`depth_to_space`
    with the same ``channel_major`` (False: DCR, block offsets outer; True: CRD)."""
    n, c, h, w = core.sizes(value)
    hb, wb = floordiv(h, block), floordiv(w, block)
    split = reshape(value, [n, c, hb, block, wb, block])
    moved = core.transpose(split, [0, 1, 3, 5, 2, 4] if channel_major else [0, 3, 5, 1, 2, 4])
    return _merge_dims(moved, [[0], [1, 2, 3], [4], [5]])


def _merge_dims(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """Reshape merging each group of consecutive dims, with extents read from ``value``
    itself (so the reshape is provably a collapse, also for dynamic dims)."""
    extents = core.sizes(value)
    return reshape(value, [product([extents[d] for d in group]) for group in groups])


# --------------------------------------------------------------------------------------
# Index-pattern generators
# --------------------------------------------------------------------------------------

def triangular(value: ir.Value, upper: bool, k: int | ir.Value = 0) -> ir.Value:
    """Keep the upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the last two
    dims, zero elsewhere."""
    extents = core.sizes(value)
    element = core.tensor_type(value).element_type
    k_ix = as_index(k)
    zero = core.scalar_constant(0, element)
    rank = len(extents)
    predicate = arith.CmpIPredicate.sge if upper else arith.CmpIPredicate.sle

    def body(indices, scalars):
        diagonal = arith.subi(indices[-1], indices[-2])
        keep = arith.cmpi(predicate, diagonal, k_ix)
        return arith.select(keep, scalars[0], zero)

    return indexed_generic(extents, element, body, [value], [ir.AffineMap.get_identity(rank)])


def eye(extents: Sequence[int | ir.Value], element: ir.Type, k: int = 0) -> ir.Value:
    """A 2-D tensor with ones on diagonal ``k`` (``j - i == k``) and zeros elsewhere."""
    one, zero = core.scalar_constant(1, element), core.scalar_constant(0, element)
    k_ix = core.index(k)

    def body(indices, _):
        on = arith.cmpi(arith.CmpIPredicate.eq, arith.subi(indices[1], indices[0]), k_ix)
        return arith.select(on, one, zero)

    return indexed_generic(extents, element, body)


def arange(start: ir.Value, delta: ir.Value, count: int | ir.Value) -> ir.Value:
    """``[start + i * delta for i in range(count)]`` for scalar ``start`` / ``delta``."""
    element = start.type

    def body(indices, _):
        i = indices[0]
        if core.is_float(element):
            step = arith.sitofp(element, arith.index_cast(ir.IntegerType.get_signless(64), i))
            return arith.addf(start, arith.mulf(step, delta))
        return arith.addi(start, arith.muli(arith.index_cast(element, i), delta))

    return indexed_generic([count], element, body)


def one_hot(
    indices: ir.Value, depth: int | ir.Value, axis: int, off: ir.Value, on: ir.Value
) -> ir.Value:
    """``on`` where ``indices`` (negative counts from ``depth``) equals the position along the
    new ``axis``, ``off`` elsewhere; out-of-range indices give an all-``off`` row."""
    extents = core.sizes(indices)
    rank = len(extents) + 1
    out = extents[:axis] + [depth] + extents[axis:]
    depth_ix = as_index(depth)
    index_map = projection(rank, [d for d in range(rank) if d != axis])

    def body(positions, scalars):
        raw = scalars[0]
        if core.is_float(raw.type):
            raw = arith.fptosi(ir.IntegerType.get_signless(64), raw)
        i = scalar_to_index(raw)
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, core.index(0)), arith.addi(i, depth_ix), i)
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, i, positions[axis]), on, off)

    return indexed_generic(out, on.type, body, [indices], [index_map])


