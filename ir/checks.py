"""Run-time checks the emitters put into the IR: index ranges of gathers and scatters, and
the operand extents their loops rely on.

Why in the emitters: only they know which operand holds data-dependent indices and which
extent those index, and which operand's extents a gather's or scatter's loop runs over
while it reads or writes another (indices larger than the data they address read, or
write, outside a buffer). The check is hoisted by construction: a min and a max reduction over
the whole index tensor, then one scalar comparison, before the gather's loop, which keeps
its clamped (in-bounds) reads and stays vectorizable. A failed check calls the report
function (runtime/checks.py), and the entry's caller raises ``IndexOutOfRangeError``.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, linalg, tensor

from ..runtime.checks import CHECK_FUNCTION, KIND_ATTRIBUTE, MESSAGE_ATTRIBUTE
from . import core
from .extent_math import as_index, scalar_to_index
from ..errors import OperandError


def _module_of(block: ir.Block) -> ir.Operation:
    op = block.owner
    while op.name != "builtin.module":
        op = op.parent
    return op


def _declare(module: ir.Operation) -> None:
    """``func.func private @tilecraft_runtime_check(i1, i64, i64)``, once per module."""
    body = module.regions[0].blocks[0]
    for op in body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == CHECK_FUNCTION:
            return
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        func.FuncOp(CHECK_FUNCTION, ([ir.IntegerType.get_signless(1), i64, i64], []), visibility="private")


def emit_check(ok: ir.Value, value: ir.Value, bound: ir.Value, kind: str, message: str) -> None:
    """A marker call: ``ok`` must hold; on failure the error reads ``message`` with ``{value}``
    and ``{bound}`` (``index`` or ``i64`` scalars) filled in, prefixed by the op's node."""
    i64 = ir.IntegerType.get_signless(64)

    def as_i64(v: ir.Value) -> ir.Value:
        return v if v.type == i64 else arith.index_cast(i64, v)

    _declare(_module_of(ir.InsertionPoint.current.block))
    call = func.CallOp([], ir.FlatSymbolRefAttr.get(CHECK_FUNCTION), [ok, as_i64(value), as_i64(bound)])
    call.operation.attributes[KIND_ATTRIBUTE] = ir.StringAttr.get(kind)
    call.operation.attributes[MESSAGE_ATTRIBUTE] = ir.StringAttr.get(message)


def check_extent(extent: "int | ir.Value", bound: "int | ir.Value", message: str, *, at_most: bool = False) -> None:
    """``extent`` must equal ``bound`` (with ``at_most``: be at most ``bound``), either known
    only at run time: a ``shape`` check, whose failure returns from the entry before any
    loop runs. ``message`` names ``{value}`` (the extent) and ``{bound}``. A static pair is
    decided here: a violation is a ``ValueError``, which the importers report naming the node.
    """
    if isinstance(extent, int) and isinstance(bound, int):
        if extent <= bound if at_most else extent == bound:
            return
        raise OperandError(message.format(value=extent, bound=bound))
    value, limit = as_index(extent), as_index(bound)
    predicate = arith.CmpIPredicate.sle if at_most else arith.CmpIPredicate.eq
    emit_check(arith.cmpi(predicate, value, limit), value, limit, "shape", message)


def check_broadcast(target: "int | ir.Value", extent: "int | ir.Value", message: str) -> None:
    """``target`` must equal ``extent`` or be 1 (ONNX's bidirectional broadcast, where the
    result keeps ``extent``), either known only at run time: a ``shape`` check like
    :func:`check_extent`'s. ``message`` names ``{value}`` (the target) and ``{bound}``. A
    static pair is decided here: a violation is a ``ValueError`` (an import error)."""
    if isinstance(target, int) and (target == 1 or (isinstance(extent, int) and target == extent)):
        return
    if isinstance(target, int) and isinstance(extent, int):
        raise OperandError(message.format(value=target, bound=extent))
    value, limit = as_index(target), as_index(extent)
    equal = arith.cmpi(arith.CmpIPredicate.eq, value, limit)
    one = arith.cmpi(arith.CmpIPredicate.eq, value, core.index(1))
    emit_check(arith.ori(equal, one), value, limit, "shape", message)


def _extreme(indices: ir.Value, axes: list[int], kind: str) -> ir.Value:
    """The min or max of ``indices`` over ``axes`` (the last dim kept when not reduced): a
    reduction ``linalg.generic`` from a filled init, as ir/reduction.py makes them (which
    imports movement, which imports this module)."""
    element = core.tensor_type(indices).element_type
    extents = core.sizes(indices)
    rank = len(extents)
    kept = [a for a in range(rank) if a not in axes]
    order = kept + axes  # loop d iterates dim order[d]: kept dims outermost
    width = element.width
    start = -(1 << (width - 1)) if kind == "max" else (1 << (width - 1)) - 1
    init = linalg.fill(arith.constant(element, start), outs=[core.empty([extents[a] for a in kept], element)])
    input_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(order.index(a)) for a in range(rank)])
    output_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in range(len(kept))])
    iterators = ["#linalg.iterator_type<parallel>"] * len(kept) + ["#linalg.iterator_type<reduction>"] * len(axes)
    op = linalg.GenericOp([init.type], [indices], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(input_map), ir.AffineMapAttr.get(output_map)]),
                          ir.ArrayAttr.get([ir.Attribute.parse(k) for k in iterators]))
    block = op.regions[0].blocks.append(element, element)
    with ir.InsertionPoint(block):
        combine = arith.maxsi if kind == "max" else arith.minsi
        linalg.YieldOp([combine(block.arguments[1], block.arguments[0])])
    return op.result


def check_index_range(indices: ir.Value, extents: "list[int | ir.Value]", axis_names: "list[int]") -> None:
    """Every index must lie in ``[-extent, extent)`` (ONNX: negative counts from the end).

    ``indices`` is an integer tensor; with one extent its elements all index that extent,
    with ``k`` extents its last dim (static ``k``) holds one coordinate per extent (GatherND,
    ScatterND). ``axis_names`` are the data axes the extents belong to, for the message.
    """
    shape = core.static_shape(indices)
    if 0 in [s for s in shape if s is not None]:
        return
    rank = len(shape)
    columns = len(extents)
    axes = list(range(rank)) if columns == 1 else list(range(rank - 1))
    low, high = _extreme(indices, axes, "min"), _extreme(indices, axes, "max")
    for j, (extent, axis) in enumerate(zip(extents, axis_names)):
        where = [] if columns == 1 else [core.index(j)]
        smallest = scalar_to_index(tensor.extract(low, where))
        largest = scalar_to_index(tensor.extract(high, where))
        n = as_index(extent)
        negative_n = arith.subi(core.index(0), n)
        too_small = arith.cmpi(arith.CmpIPredicate.slt, smallest, negative_n)
        too_large = arith.cmpi(arith.CmpIPredicate.sge, largest, n)
        ok = arith.xori(arith.ori(too_small, too_large), arith.constant(ir.IntegerType.get_signless(1), 1))
        bad = arith.select(too_small, smallest, largest)
        emit_check(ok, bad, n, "index", f"index {{value}} out of range for axis {axis} of size {{bound}}")


def check_value_range(values: ir.Value, low: "int | ir.Value", high: "int | ir.Value", message: str) -> None:
    """Every element of the integer tensor ``values`` must lie in ``[low, high]``: a run-time
    ``index`` check on the tensor's min and max, before the loops that use the values as
    positions. ``message`` names ``{value}`` (the offending extreme) and ``{bound}``."""
    shape = core.static_shape(values)
    if 0 in [s for s in shape if s is not None]:
        return
    axes = list(range(len(shape)))
    smallest = scalar_to_index(tensor.extract(_extreme(values, axes, "min"), []))
    largest = scalar_to_index(tensor.extract(_extreme(values, axes, "max"), []))
    lower, upper = as_index(low), as_index(high)
    too_small = arith.cmpi(arith.CmpIPredicate.slt, smallest, lower)
    too_large = arith.cmpi(arith.CmpIPredicate.sgt, largest, upper)
    ok = arith.xori(arith.ori(too_small, too_large), arith.constant(ir.IntegerType.get_signless(1), 1))
    emit_check(ok, arith.select(too_small, smallest, largest), arith.select(too_small, lower, upper), "index", message)
