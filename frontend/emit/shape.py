"""Shared shape and data-movement emitters (used by the ONNX and PyTorch frontends).

Everything here moves or selects elements: reshapes, slices, concatenation, gathers and
scatters, broadcasts, padding, resizing (whose only arithmetic is interpolation). Extents are
``int`` where static and index-typed ``ir.Value`` s where dynamic (:data:`Extent`); the
small index arithmetic helpers fold static operands in Python so static models get static IR.

Three choices shape the IR:

* Pure re-layouts (reshape, squeeze, flatten, depth-to-space) become
  ``tensor.collapse_shape`` / ``tensor.expand_shape`` where the row-major grouping allows it:
  those fold into producers and consumers, while ``tensor.reshape`` is an opaque copy.
* Data-dependent or non-affine addressing (gather, reflect padding, resize, reversal) is a
  ``linalg.generic`` over the *output* whose body computes source indices from
  ``linalg.index`` and reads with ``tensor.extract``. Affine maps with negative
  coefficients are avoided on purpose: MLIR's tiling asserts on them.
* Writes that may collide (scatter) or whose count depends on the data (nonzero) are
  ``scf.for`` loops threading a tensor through ``tensor.insert``: ONNX defines them as
  sequential, which no parallel structured op expresses.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor
from mlir.dialects import math as mmath

from . import core

Extent = "int | ir.Value"  # a static extent or an index-typed SSA value

_DYNAMIC = ir.ShapedType.get_dynamic_size


# --------------------------------------------------------------------------------------
# Index arithmetic on extents (static operands fold in Python)
# --------------------------------------------------------------------------------------

def as_index(extent: int | ir.Value) -> ir.Value:
    """An index-typed SSA value for ``extent``."""
    return core.index(extent) if isinstance(extent, int) else extent


def _fold(a, b, static: Callable[[int, int], int], dynamic: Callable[[ir.Value, ir.Value], ir.Value]):
    if isinstance(a, int) and isinstance(b, int):
        return static(a, b)
    return dynamic(as_index(a), as_index(b))


def add(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return _fold(a, b, lambda x, y: x + y, arith.addi)


def sub(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(b, int) and b == 0:
        return a
    return _fold(a, b, lambda x, y: x - y, arith.subi)


def mul(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(b, int) and b == 1:
        return a
    if isinstance(a, int) and a == 1:
        return b
    return _fold(a, b, lambda x, y: x * y, arith.muli)


def floordiv(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    """Division rounding toward minus infinity (Python's ``//``)."""
    if isinstance(b, int) and b == 1:
        return a
    return _fold(a, b, lambda x, y: x // y, arith.floordivsi)


def ceildiv(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(b, int) and b == 1:
        return a
    return _fold(a, b, lambda x, y: -(-x // y), arith.ceildivsi)


def minimum(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    return _fold(a, b, min, arith.minsi)


def maximum(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    return _fold(a, b, max, arith.maxsi)


def product(extents: Sequence[int | ir.Value]) -> int | ir.Value:
    """The product of ``extents``, static factors multiplied first."""
    static = math.prod(e for e in extents if isinstance(e, int))
    result: int | ir.Value = static
    for e in extents:
        if not isinstance(e, int):
            result = mul(result, e)
    return result


def normalize_index(i: int | ir.Value, extent: int | ir.Value) -> int | ir.Value:
    """``i`` if non-negative, else ``i + extent`` (Python-style negative indexing)."""
    if isinstance(i, int) and isinstance(extent, int):
        return i + extent if i < 0 else i
    i = as_index(i)
    negative = arith.cmpi(arith.CmpIPredicate.slt, i, core.index(0))
    return arith.select(negative, as_index(add(i, extent)), i)


def clamp(value: int | ir.Value, low: int | ir.Value, high: int | ir.Value) -> int | ir.Value:
    return minimum(maximum(value, low), high)


def scalar_to_index(value: ir.Value) -> ir.Value:
    """An integer scalar (any width, signed) as an ``index``."""
    if isinstance(value.type, ir.IndexType):
        return value
    return arith.index_cast(ir.IndexType.get(), value)


def element_extent(values: ir.Value, position: Sequence[int]) -> ir.Value:
    """Element ``position`` of a runtime integer tensor (a shape, a start) as an index."""
    return scalar_to_index(tensor.extract(values, [core.index(p) for p in position]))


def extents_from_tensor(shape: ir.Value) -> list[ir.Value]:
    """The extents a runtime 1-D integer shape tensor holds (its length must be static)."""
    (length,) = core.static_shape(shape)
    if length is None:
        raise ValueError("a shape tensor of dynamic length gives a result of unknown rank")
    return [element_extent(shape, [i]) for i in range(length)]


def dim_source(extent: int | ir.Value) -> tuple[ir.Value, int] | None:
    """``(tensor, axis)`` if ``extent`` is ``tensor.dim tensor, <constant axis>``."""
    if isinstance(extent, int):
        return None
    owner = extent.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.name != "tensor.dim":
        return None
    axis_owner = owner.operands[1].owner
    if not isinstance(axis_owner, (ir.Operation, ir.OpView)) or axis_owner.name != "arith.constant":
        return None
    return owner.operands[0], ir.IntegerAttr(axis_owner.attributes["value"]).value


def same_extent(a: int | ir.Value, b: int | ir.Value) -> bool:
    """Whether ``a`` and ``b`` are provably equal (equal ints, one SSA value, or the same
    ``tensor.dim``)."""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    if a == b:
        return True
    da, db = dim_source(a), dim_source(b)
    return da is not None and db is not None and da[0] == db[0] and da[1] == db[1]


def infer_extent(total: Sequence[int | ir.Value], known: Sequence[int | ir.Value]) -> int | ir.Value:
    """``product(total) / product(known)``, cancelling equal dynamic factors first.

    Why: reshaping ``?x3x4`` to ``[d0, -1]`` must give the static 12, not a runtime division,
    so the result type stays as static as the model allows.
    """
    numerator = list(total)
    denominator: list[int | ir.Value] = []
    for k in known:
        if isinstance(k, int):
            denominator.append(k)
            continue
        match = next((i for i, n in enumerate(numerator) if same_extent(n, k)), None)
        if match is None:
            denominator.append(k)
        else:
            numerator.pop(match)
    static_num = math.prod(n for n in numerator if isinstance(n, int))
    static_den = math.prod(d for d in denominator if isinstance(d, int))
    dynamic_num = [n for n in numerator if not isinstance(n, int)]
    dynamic_den = [d for d in denominator if not isinstance(d, int)]
    if static_den == 0:
        raise ValueError("cannot infer an extent: the other extents have a zero product")
    if not dynamic_den and static_num % static_den == 0:
        return product([static_num // static_den, *dynamic_num])
    return floordiv(product([static_num, *dynamic_num]), product([static_den, *dynamic_den]))


# --------------------------------------------------------------------------------------
# Reshape as collapse/expand
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Factor:
    """A product of extents: a static part times a multiset of dynamic extents (by key)."""

    static: int
    symbols: tuple

    def times(self, other: "_Factor") -> "_Factor":
        return _Factor(self.static * other.static, tuple(sorted(self.symbols + other.symbols)))

    def strictly_divides(self, other: "_Factor") -> bool:
        """Whether ``other`` is ``self`` times more factors (so ``self`` must grow)."""
        mine, theirs = Counter(self.symbols), Counter(other.symbols)
        if mine - theirs:
            return False
        if mine == theirs:
            return self.static < other.static
        return True


def _factors(extents: Sequence[int | ir.Value]) -> list[_Factor] | None:
    """Factors of ``extents``; dynamic extents are keyed by the ``tensor.dim`` they read.
    ``None`` if an extent is an opaque runtime value (grouping cannot reason about it)."""
    result = []
    for e in extents:
        if isinstance(e, int):
            result.append(_Factor(e, ()))
            continue
        dim = dim_source(e)
        if dim is None:
            return None
        result.append(_Factor(1, ((_key(dim[0]), dim[1]),)))
    return result


def _key(value: ir.Value) -> int:
    """A stable key for an SSA value (its hash is that of the underlying C++ value)."""
    return hash(value)


def _greedy_groups(
    source: list[_Factor], target: list[_Factor]
) -> list[tuple[list[int], list[int]]] | None:
    """Group source and target dims into runs with equal products, in row-major order."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(source) and j < len(target):
        gs, gt = [i], [j]
        ps, pt = source[i], target[j]
        i, j = i + 1, j + 1
        while ps != pt:
            if ps.strictly_divides(pt) and i < len(source):
                ps, i = ps.times(source[i]), i + 1
                gs.append(i - 1)
            elif pt.strictly_divides(ps) and j < len(target):
                pt, j = pt.times(target[j]), j + 1
                gt.append(j - 1)
            else:
                return None
        groups.append((gs, gt))
    leftovers_ok = all(f == _Factor(1, ()) for f in source[i:] + target[j:])
    if not leftovers_ok:
        return None
    if groups:
        groups[-1][0].extend(range(i, len(source)))
        groups[-1][1].extend(range(j, len(target)))
    return groups


def reassociation(
    source: Sequence[int | ir.Value], target: Sequence[int | ir.Value]
) -> list[tuple[list[int], list[int]]] | None:
    """Row-major groups ``(source dims, target dims)`` with equal products, or ``None``.

    Dynamic extents match when they are the same ``tensor.dim``. A target may also hold one
    opaque runtime extent (e.g. ``d0 * 3`` from a flatten): a reshape keeps the element
    count, so it stands for the source product divided by the other target extents.
    """
    src = _factors(source)
    if src is None:
        return None
    opaque = [k for k, e in enumerate(target) if not isinstance(e, int) and dim_source(e) is None]
    if len(opaque) > 1:
        return None
    known = _factors([e for k, e in enumerate(target) if k not in opaque])
    if known is None:
        return None
    if opaque:
        rest = _quotient(_product(src), _product(known))
        if rest is None:
            return None
        known.insert(opaque[0], rest)
    return _greedy_groups(src, known)


def _product(factors: Sequence[_Factor]) -> _Factor:
    result = _Factor(1, ())
    for f in factors:
        result = result.times(f)
    return result


def _quotient(total: _Factor, divisor: _Factor) -> _Factor | None:
    """``total / divisor`` if it is a product of ``total``'s own factors."""
    remaining = Counter(total.symbols)
    remaining.subtract(Counter(divisor.symbols))
    if any(count < 0 for count in remaining.values()) or divisor.static == 0 or total.static % divisor.static:
        return None
    return _Factor(total.static // divisor.static, tuple(sorted(remaining.elements())))


def collapse(value: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """``tensor.collapse_shape`` merging each group of consecutive dims into one."""
    extents = core.static_shape(value)
    result = []
    for group in groups:
        members = [extents[d] for d in group]
        result.append(_DYNAMIC() if any(m is None for m in members) else math.prod(members))
    result_type = ir.RankedTensorType.get(result, core.tensor_type(value).element_type)
    return tensor.collapse_shape(result_type, value, _reassociation_attr(groups))


def expand(value: ir.Value, groups: Sequence[Sequence[int]], extents: Sequence[int | ir.Value]) -> ir.Value:
    """``tensor.expand_shape`` splitting dim ``i`` into ``extents[groups[i]]``.

    Each group may hold at most one dynamic extent (the memref lowering asserts otherwise).
    """
    result_type = core.shape_type(extents, core.tensor_type(value).element_type)
    dynamic = [e for e in extents if not isinstance(e, int)]
    static = [e if isinstance(e, int) else _DYNAMIC() for e in extents]
    return tensor.expand_shape(result_type, value, _reassociation_attr(groups), dynamic, static)


def _reassociation_attr(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in group]) for group in groups]
    )


def reshape_by_groups(value: ir.Value, extents: Sequence[int | ir.Value]) -> ir.Value | None:
    """The reshape as a collapse then an expand, or ``None`` if no row-major grouping is
    provable (the caller then emits ``tensor.reshape``)."""
    source = core.sizes(value)
    groups = reassociation(source, extents)
    if groups is None:
        return None
    for _, gt in groups:
        if len(gt) > 1 and sum(not isinstance(extents[t], int) for t in gt) > 1:
            return None
    result = value
    if any(len(gs) != 1 for gs, _ in groups) or len(groups) != len(source):
        result = collapse(result, [gs for gs, _ in groups])
    if any(len(gt) != 1 for _, gt in groups) or len(groups) != len(extents):
        result = expand(result, [gt for _, gt in groups], extents)
    wanted = core.shape_type(extents, core.tensor_type(value).element_type)
    if result.type != wanted:  # e.g. a dynamic dim the caller knows to be static
        result = tensor.cast(wanted, result)
    return result


# --------------------------------------------------------------------------------------
# Shapes as data
# --------------------------------------------------------------------------------------

def shape_of(value: ir.Value, start: int = 0, end: int | None = None) -> ir.Value:
    """The extents ``start:end`` of ``value`` as a 1-D i64 tensor (dynamic ones read at run
    time with ``tensor.dim``)."""
    i64 = ir.IntegerType.get_signless(64)
    extents = core.sizes(value)[start:end]
    elements = [
        arith.constant(i64, e) if isinstance(e, int) else arith.index_cast(i64, e) for e in extents
    ]
    return tensor.from_elements(ir.RankedTensorType.get([len(elements)], i64), elements)


def known_elements(value: ir.Value) -> list[int | None] | None:
    """The elements of a 1-D ``tensor.from_elements`` of integers: ints where they are
    constants, ``None`` where computed (``None`` overall for any other tensor). Lets the
    frontend fold the static part of a partly dynamic :func:`shape_of`."""
    owner = value.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.name != "tensor.from_elements":
        return None
    if core.tensor_type(value).rank != 1:
        return None
    elements = []
    for operand in owner.operands:
        producer = operand.owner
        if isinstance(producer, (ir.Operation, ir.OpView)) and producer.name == "arith.constant" and isinstance(operand.type, ir.IntegerType):
            elements.append(ir.IntegerAttr(producer.attributes["value"]).value)
        else:
            elements.append(None)
    return elements


def scalar_tensor(value: ir.Value) -> ir.Value:
    """A scalar as a 0-d tensor."""
    return tensor.from_elements(ir.RankedTensorType.get([], value.type), [value])


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
            i if isinstance(i, int) else _DYNAMIC() for i in items
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
    return core.reshape(sliced, extents)


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
            result.append(_DYNAMIC() if None in column else sum(column))
        else:
            known = [c for c in column if c is not None]
            result.append(known[0] if known else _DYNAMIC())
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


def _source_index(raw: ir.Value, extent: int | ir.Value) -> ir.Value:
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
        source = _source_index(scalars[0], extents[axis])
        where = positions[:axis] + [source] + positions[axis + index_rank:]
        return tensor.extract(data, where)

    index_map = projection(len(out), range(axis, axis + index_rank))
    return indexed_generic(out, core.tensor_type(data).element_type, body, [indices], [index_map])


def gather_elements(data: ir.Value, indices: ir.Value, axis: int) -> ir.Value:
    """``out[p] = data[p with p[axis] = indices[p]]`` (``take_along_axis``)."""
    extents = core.sizes(data)
    out = core.sizes(indices)
    rank = len(out)

    def body(positions, scalars):
        where = list(positions)
        where[axis] = _source_index(scalars[0], extents[axis])
        return tensor.extract(data, where)

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
        raise ValueError("gather_nd needs the last dim of indices to be static")
    out = index_extents[:-1] + data_extents[batch_dims + k:]
    lead = len(index_extents) - 1

    def body(positions, _):
        prefix = positions[:lead]
        where = list(positions[:batch_dims])
        for j in range(k):
            raw = tensor.extract(indices, prefix + [core.index(j)])
            where.append(_source_index(raw, data_extents[batch_dims + j]))
        return tensor.extract(data, where + positions[lead:])

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
        raise ValueError(f"unknown pad mode {mode!r}; expected one of {PAD_MODES}")
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
    static_low = [p if isinstance(p, int) else _DYNAMIC() for p in low]
    static_high = [p if isinstance(p, int) else _DYNAMIC() for p in high]
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
        split = core.reshape(value, [n, depth, block, block, h, w])
        moved = core.transpose(split, [0, 1, 4, 2, 5, 3])
    else:
        split = core.reshape(value, [n, block, block, depth, h, w])
        moved = core.transpose(split, [0, 3, 4, 1, 5, 2])
    return _merge_dims(moved, [[0], [1], [2, 3], [4, 5]])


def space_to_depth(value: ir.Value, block: int, channel_major: bool = False) -> ir.Value:
    """NCHW ``[n, c, h, w] -> [n, c*b^2, h/b, w/b]``, the inverse of :func:`depth_to_space`
    with the same ``channel_major`` (False: DCR, block offsets outer; True: CRD)."""
    n, c, h, w = core.sizes(value)
    hb, wb = floordiv(h, block), floordiv(w, block)
    split = core.reshape(value, [n, c, hb, block, wb, block])
    moved = core.transpose(split, [0, 1, 3, 5, 2, 4] if channel_major else [0, 3, 5, 1, 2, 4])
    return _merge_dims(moved, [[0], [1, 2, 3], [4], [5]])


def _merge_dims(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """Reshape merging each group of consecutive dims, with extents read from ``value``
    itself (so the reshape is provably a collapse, also for dynamic dims)."""
    extents = core.sizes(value)
    return core.reshape(value, [product([extents[d] for d in group]) for group in groups])


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


# --------------------------------------------------------------------------------------
# Resize (nearest / linear / cubic interpolation)
# --------------------------------------------------------------------------------------

COORDINATE_MODES = (
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RESIZE_MODES = ("nearest", "linear", "cubic")

@dataclass(frozen=True)
class ResizeMethod:
    """The interpolation, in the vocabulary ONNX and PyTorch's ``interpolate`` share.

    ``coordinate_mode`` maps an output position to an input coordinate; ``nearest_mode``
    rounds it (nearest); linear/cubic weigh 2/4 neighbours, more when ``antialias`` widens
    the kernel of a downsample; ``exclude_outside`` drops neighbours past the edge instead
    of repeating the edge element.
    """

    mode: str = "nearest"
    coordinate_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False

    def __post_init__(self) -> None:
        for value, allowed in ((self.mode, RESIZE_MODES), (self.coordinate_mode, COORDINATE_MODES),
                               (self.nearest_mode, NEAREST_MODES)):
            if value not in allowed:
                raise ValueError(f"unsupported resize option {value!r}; expected one of {allowed}")


@dataclass(frozen=True)
class ResizeAxis:
    """One resized axis: the output extent, the scale (output / input, as given: it may
    differ from the ratio of the integer extents) and, for crop-and-resize, the region of
    interest in normalized input coordinates."""

    size: int | ir.Value
    scale: float | ir.Value
    roi: tuple[float | ir.Value, float | ir.Value] = (0.0, 1.0)
    min_scale: float | None = None  # a lower bound on a runtime scale (sizes the kernel)


def as_f64(x: float | int | ir.Value) -> ir.Value:
    """An f64 scalar for a Python number, an index or integer value, or a float value."""
    f64 = ir.F64Type.get()
    if not isinstance(x, ir.Value):
        return arith.constant(f64, float(x))
    if isinstance(x.type, ir.IndexType):
        x = arith.index_cast(ir.IntegerType.get_signless(64), x)
    if isinstance(x.type, ir.IntegerType):
        return arith.sitofp(f64, x)
    return x if x.type == f64 else arith.extf(f64, x)


def _tap_count(method: ResizeMethod, axis: ResizeAxis) -> int:
    """Neighbours per output position: 2 for nearest (then one is chosen), 2 for linear, 4
    for cubic, and for an antialiased downsample the kernel's footprint at this scale.

    A runtime scale uses the footprint at its lower bound ``min_scale``, the widest
    possible: the taps beyond the actual footprint get weight exactly 0.
    """
    if method.mode == "nearest":
        return 2
    support = 1 if method.mode == "linear" else 2
    if not method.antialias:
        return 2 * support
    scale = axis.scale
    if isinstance(scale, ir.Value):
        if not axis.min_scale:
            raise ValueError("an antialiased resize needs its scale, or a bound on it, at import time")
        scale = axis.min_scale
    start = int(np.floor(-support / min(scale, 1.0)) + 1)
    return 2 - 2 * start


def _axis_coordinate(y: ir.Value, n: ir.Value, out: ir.Value, scale: ir.Value, axis: ResizeAxis,
                     mode: str) -> ir.Value:
    """The input coordinate of output position ``y`` (f64 throughout, operations in the
    order of ONNX's reference so that ties round the same way)."""
    one, half = as_f64(1.0), as_f64(0.5)
    width = arith.mulf(scale, n)  # the output extent as a real number
    is_single = arith.cmpf(arith.CmpFPredicate.OEQ, width, one)
    half_pixel = arith.subf(arith.divf(arith.addf(y, half), scale), half)
    n_minus_1 = arith.subf(n, one)
    if mode == "half_pixel":
        return half_pixel
    if mode == "pytorch_half_pixel":
        return arith.select(is_single, as_f64(-0.5), half_pixel)
    if mode == "asymmetric":
        return arith.divf(y, scale)
    if mode == "align_corners":
        stretched = arith.divf(arith.mulf(y, n_minus_1), arith.subf(width, one))
        return arith.select(is_single, as_f64(0.0), stretched)
    if mode == "half_pixel_symmetric":
        offset = arith.mulf(arith.divf(n, as_f64(2.0)), arith.subf(one, arith.divf(out, width)))
        return arith.subf(arith.addf(offset, arith.divf(arith.addf(y, half), scale)), half)
    low, high = as_f64(axis.roi[0]), as_f64(axis.roi[1])
    span = arith.subf(high, low)
    single = arith.divf(arith.mulf(span, n_minus_1), as_f64(2.0))
    stretched = arith.divf(arith.mulf(arith.mulf(y, span), n_minus_1), arith.subf(width, one))
    return arith.addf(arith.select(is_single, single, stretched), arith.mulf(low, n_minus_1))


def _kernel_weights(method: ResizeMethod, ratio: ir.Value, scale: ir.Value, taps: int) -> list[ir.Value]:
    """The ``taps`` weights of the neighbours of a coordinate ``ratio`` past its floor."""
    one = as_f64(1.0)
    if method.mode == "nearest":
        predicate = {
            "round_prefer_floor": arith.CmpFPredicate.OGT, "round_prefer_ceil": arith.CmpFPredicate.OGE,
        }.get(method.nearest_mode)
        if predicate is not None:
            right = arith.cmpf(predicate, ratio, as_f64(0.5))
        else:
            right = core.scalar_constant(method.nearest_mode == "ceil", ir.IntegerType.get_signless(1))
        exact = arith.cmpf(arith.CmpFPredicate.OEQ, ratio, one)  # an exact coordinate reads itself
        right = arith.ori(right, exact)
        return [arith.select(right, as_f64(0.0), one), arith.select(right, one, as_f64(0.0))]
    a = as_f64(method.cubic_a)
    if not method.antialias:
        if method.mode == "linear":
            return [arith.subf(one, ratio), ratio]
        return [_cubic(arith.addf(ratio, one), a), _cubic(ratio, a),
                _cubic(arith.subf(one, ratio), a), _cubic(arith.subf(as_f64(2.0), ratio), a)]
    shrink = arith.minimumf(scale, one)
    first = -(taps // 2) + 1
    weights = []
    for k in range(taps):
        x = arith.mulf(arith.subf(as_f64(float(first + k)), ratio), shrink)
        if method.mode == "linear":
            w = arith.maximumf(arith.subf(one, mmath.absf(x)), as_f64(0.0))
        else:
            w = _cubic(x, a)
        weights.append(w)
    return _normalized(weights)


def _cubic(x: ir.Value, a: ir.Value) -> ir.Value:
    """Keys' cubic convolution kernel with parameter ``a`` (zero beyond |x| >= 2)."""
    x = mmath.absf(x)
    one, two = as_f64(1.0), as_f64(2.0)
    x2 = arith.mulf(x, x)
    x3 = arith.mulf(x2, x)
    # |x| <= 1: (a + 2)|x|^3 - (a + 3)|x|^2 + 1
    near = arith.addf(arith.subf(arith.mulf(arith.addf(a, two), x3), arith.mulf(arith.addf(a, as_f64(3.0)), x2)), one)
    # 1 < |x| < 2: a|x|^3 - 5a|x|^2 + 8a|x| - 4a
    far = arith.subf(
        arith.addf(arith.subf(arith.mulf(a, x3), arith.mulf(arith.mulf(as_f64(5.0), a), x2)),
                   arith.mulf(arith.mulf(as_f64(8.0), a), x)),
        arith.mulf(as_f64(4.0), a),
    )
    inner = arith.cmpf(arith.CmpFPredicate.OLE, x, one)
    within = arith.cmpf(arith.CmpFPredicate.OLT, x, two)
    return arith.select(inner, near, arith.select(within, far, as_f64(0.0)))


def _normalized(weights: list[ir.Value]) -> list[ir.Value]:
    total = weights[0]
    for w in weights[1:]:
        total = arith.addf(total, w)
    zero = arith.cmpf(arith.CmpFPredicate.OEQ, total, as_f64(0.0))
    total = arith.select(zero, as_f64(1.0), total)
    return [arith.divf(w, total) for w in weights]


@dataclass
class _AxisTaps:
    indices: list[ir.Value]  # index values, clamped into the input
    weights: list[ir.Value] | None  # f64; None for nearest (one tap, weight 1)
    outside: ir.Value | None  # i1: the coordinate fell outside (crop-and-resize)


def _axis_taps(position: ir.Value, n_in: int | ir.Value, axis: ResizeAxis, method: ResizeMethod) -> _AxisTaps:
    """Neighbours and weights for one output position along one axis (built in a body)."""
    taps = _tap_count(method, axis)
    y = as_f64(position)
    n = as_f64(n_in)
    scale = as_f64(axis.scale)
    x = _axis_coordinate(y, n, as_f64(axis.size), scale, axis, method.coordinate_mode)
    floor = mmath.floor(x)
    exact = arith.cmpf(arith.CmpFPredicate.OEQ, x, floor)
    ratio = arith.select(exact, as_f64(1.0), arith.subf(x, floor))
    weights = _kernel_weights(method, ratio, scale, taps)
    # The window of `taps` neighbours nearest to x, ties going to the lower ones.
    pad = -(-taps // 2)
    padded = arith.addf(x, as_f64(float(pad)))
    base = mmath.floor(padded)
    frac = arith.subf(padded, base)
    if taps % 2 == 0:
        tie = arith.cmpf(arith.CmpFPredicate.OEQ, frac, as_f64(0.0))
        low = -(taps // 2)
    else:
        tie = arith.cmpf(arith.CmpFPredicate.OLE, frac, as_f64(0.5))
        low = -((taps - 1) // 2)
    offset = arith.select(tie, core.index(low - pad), core.index(low + 1 - pad))
    start = arith.addi(arith.index_cast(ir.IndexType.get(), arith.fptosi(ir.IntegerType.get_signless(64), base)), offset)
    raw = [arith.addi(start, core.index(k)) for k in range(taps)]
    last = as_index(sub(n_in, 1))
    if method.exclude_outside and weights is not None and method.mode != "nearest":
        inside = [
            arith.andi(arith.cmpi(arith.CmpIPredicate.sge, i, core.index(0)),
                       arith.cmpi(arith.CmpIPredicate.sle, i, last))
            for i in raw
        ]
        weights = _normalized([arith.select(ok, w, as_f64(0.0)) for ok, w in zip(inside, weights)])
    indices = [arith.minsi(arith.maxsi(i, core.index(0)), last) for i in raw]
    outside = None
    if method.coordinate_mode == "tf_crop_and_resize":
        below = arith.cmpf(arith.CmpFPredicate.OLT, x, as_f64(0.0))
        above = arith.cmpf(arith.CmpFPredicate.OGT, x, arith.subf(n, as_f64(1.0)))
        outside = arith.ori(below, above)
    if method.mode == "nearest":
        right = arith.cmpf(arith.CmpFPredicate.OGT, weights[1], as_f64(0.5))
        return _AxisTaps([arith.select(right, indices[1], indices[0])], None, outside)
    return _AxisTaps(indices, weights, outside)


# One fused pass reads the product of every axis' taps per output element; beyond this
# many the resize runs one pass per axis (as ONNX's reference does), each reading few.
_MAX_FUSED_TAPS = 16


def resize(
    value: ir.Value,
    axes: dict[int, ResizeAxis],
    method: ResizeMethod,
    *,
    fill: float = 0.0,
    unsigned: bool = False,
) -> ir.Value:
    """Resize ``value`` along ``axes`` (the others are kept).

    Coordinates, neighbours and weights are computed in f64 in the loop body from the output
    position, so runtime scales work the same as constant ones (constants fold). The
    weighted sum is formed in f64 and converted once at the end; integer results are
    rounded half to even and saturated (``unsigned``: MLIR integers are signless), and a
    crop-and-resize position outside the input is ``fill``.

    Integer results are interpolated one axis at a time, as ONNX's reference does: rounding
    to an integer exposes the order of the sums whenever a value lands on a half.
    """
    if not axes:
        return value
    taps = math.prod(1 if method.mode == "nearest" else _tap_count(method, a) for a in axes.values())
    element = core.tensor_type(value).element_type
    if taps == 1 or (taps <= _MAX_FUSED_TAPS and core.is_float(element)):
        return _resize_pass(value, axes, method, element, fill, unsigned)
    ordered = list(axes)  # in the order given (ONNX: the order of the axes attribute)
    for k, axis in enumerate(ordered):  # separable: f64 in between, converted at the end
        last = k == len(ordered) - 1
        result = element if last else ir.F64Type.get()
        value = _resize_pass(value, {axis: axes[axis]}, method, result, fill, unsigned)
    return value


def _resize_pass(value: ir.Value, axes: dict[int, ResizeAxis], method: ResizeMethod,
                 result: ir.Type, fill: float, unsigned: bool) -> ir.Value:
    extents = core.sizes(value)
    out = [axes[d].size if d in axes else e for d, e in enumerate(extents)]
    source = core.tensor_type(value).element_type
    f64 = ir.F64Type.get()

    def body(positions, _):
        ordered = sorted(axes)
        per_axis = {d: _axis_taps(positions[d], extents[d], axes[d], method) for d in ordered}
        total = None
        counts = [len(per_axis[d].indices) for d in ordered]
        for combo in np.ndindex(*counts):
            where = list(positions)
            weight = None
            for d, k in zip(ordered, combo):
                where[d] = per_axis[d].indices[k]
                if per_axis[d].weights is not None:
                    w = per_axis[d].weights[k]
                    weight = w if weight is None else arith.mulf(weight, w)
            sample = tensor.extract(value, where)
            if weight is None:  # nearest: a pure gather, exact for every type
                total = sample
                continue
            term = arith.mulf(weight, core.convert_scalar(sample, f64, unsigned=unsigned))
            total = term if total is None else arith.addf(total, term)
        if total.type != result:
            total = _from_f64(total, result, unsigned)
        for d in ordered:
            if per_axis[d].outside is not None:
                total = arith.select(per_axis[d].outside, core.scalar_constant(fill, result), total)
        return total

    if source != result and method.mode == "nearest":
        raise ValueError("a nearest resize keeps the element type")
    return indexed_generic(out, result, body)


def _from_f64(value: ir.Value, element: ir.Type, unsigned: bool) -> ir.Value:
    """An f64 sum back to the element type; integers are rounded half to even and
    saturated to the type's range, as ONNX's reference does."""
    if core.is_float(element):
        return core.convert_scalar(value, element)
    width = element.width
    low, high = (0, 2**width - 1) if unsigned else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    rounded = mmath.roundeven(value)
    clamped = arith.minimumf(arith.maximumf(rounded, as_f64(float(low))), as_f64(float(high)))
    return arith.fptoui(element, clamped) if unsigned else arith.fptosi(element, clamped)


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
    from mlir.dialects import scf

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
        raise ValueError(f"unknown scatter reduction {reduction!r}; expected one of {SCATTER_REDUCTIONS}")

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
        where[axis] = _source_index(tensor.extract(indices, positions), extent)
        return where

    return scatter(data, updates, target, reduction, unsigned=unsigned)


def scatter_nd(data: ir.Value, indices: ir.Value, updates: ir.Value,
               reduction: str = "none", *, unsigned: bool = False) -> ir.Value:
    """The inverse of :func:`gather_nd` (no batch dims): the last dim of ``indices`` (``k``,
    static) addresses the leading ``k`` dims of ``data``."""
    data_extents = core.sizes(data)
    k = core.static_shape(indices)[-1]
    if k is None:
        raise ValueError("scatter_nd needs the last dim of indices to be static")
    lead = core.tensor_type(indices).rank - 1

    def target(positions: list[ir.Value]) -> list[ir.Value]:
        prefix = positions[:lead]
        where = [
            _source_index(tensor.extract(indices, [*prefix, core.index(j)]), data_extents[j])
            for j in range(k)
        ]
        return where + positions[lead:]

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
        from mlir.dialects import scf

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
