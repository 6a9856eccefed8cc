"""Index arithmetic on extents: ``int`` where static, index-typed ``ir.Value`` where
dynamic (:data:`Extent`); static operands fold in Python, so static models get static IR.

Shared by the ONNX and PyTorch frontends; split from one shape module by topic."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, tensor

from . import core
from ..errors import OperandError

Extent = "int | ir.Value"  # a static extent or an index-typed SSA value

DYNAMIC = ir.ShapedType.get_dynamic_size


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
        raise OperandError("a shape tensor of dynamic length gives a result of unknown rank")
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
        raise OperandError("cannot infer an extent: the other extents have a zero product")
    if not dynamic_den and static_num % static_den == 0:
        return product([static_num // static_den, *dynamic_num])
    return floordiv(product([static_num, *dynamic_num]), product([static_den, *dynamic_den]))


def to_float(extent: int | ir.Value, element: ir.Type) -> ir.Value:
    """An extent or position (Python int or ``index``) as a scalar of float type ``element``."""
    if isinstance(extent, int):
        return arith.constant(element, float(extent))
    return arith.sitofp(element, arith.index_cast(ir.IntegerType.get_signless(64), extent))
