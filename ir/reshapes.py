"""Reshapes as ``tensor.collapse_shape`` / ``tensor.expand_shape`` where the row-major
grouping allows (they fold into producers and consumers and bufferize to views; ``tensor.reshape``
is an opaque copy and only the fallback), and shapes as data.

Shared by the ONNX and PyTorch frontends; split from one shape module by topic."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from mlir import ir
from mlir.dialects import arith, tensor

from . import core
from .extent_math import DYNAMIC, dim_source

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
        result.append(DYNAMIC() if any(m is None for m in members) else math.prod(members))
    result_type = ir.RankedTensorType.get(result, core.tensor_type(value).element_type)
    return tensor.collapse_shape(result_type, value, _reassociation_attr(groups))


def expand(value: ir.Value, groups: Sequence[Sequence[int]], extents: Sequence[int | ir.Value]) -> ir.Value:
    """``tensor.expand_shape`` splitting dim ``i`` into ``extents[groups[i]]``.

    A group with more than one dynamic extent (``?`` into ``?x?``: a (batch, tokens) model
    exported with both axes dynamic) becomes ``tensor.reshape`` instead: the op verifies,
    but expand-strided-metadata's memref lowering asserts on it and aborts the process.
    """
    if any(sum(not isinstance(extents[d], int) for d in group) > 1 for group in groups):
        return reshape_by_shape_tensor(value, extents)
    result_type = core.shape_type(extents, core.tensor_type(value).element_type)
    dynamic = [e for e in extents if not isinstance(e, int)]
    static = [e if isinstance(e, int) else DYNAMIC() for e in extents]
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

def reshape(value: ir.Value, extents: Sequence[int | ir.Value]) -> ir.Value:
    """Row-major reshape to ``extents`` (ints or index values; the element count must match).

    Emits ``tensor.collapse_shape`` / ``tensor.expand_shape`` when the dims group in row-major
    order (see ``reshape_by_groups``): unlike ``tensor.reshape`` they fold into their
    producers and consumers and bufferize to views. ``tensor.reshape`` is the fallback.
    """
    grouped = reshape_by_groups(value, extents)
    if grouped is not None:
        return grouped
    return reshape_by_shape_tensor(value, extents)


def reshape_by_shape_tensor(value: ir.Value, extents: Sequence[int | ir.Value]) -> ir.Value:
    """``tensor.reshape`` to ``extents`` (ints or index values) from a shape tensor: the form
    for any row-major reshape, a view of an identity-layout buffer after bufferization."""
    i64 = ir.IntegerType.get_signless(64)
    target = [
        e if isinstance(e, int) else arith.index_cast(i64, e) for e in extents
    ]
    shape_values = [arith.constant(i64, e) if isinstance(e, int) else e for e in target]
    shape = tensor.from_elements(ir.RankedTensorType.get([len(extents)], i64), shape_values)
    result_type = core.shape_type(extents, core.tensor_type(value).element_type)
    return tensor.reshape(result_type, value, shape)
