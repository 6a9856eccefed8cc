"""A grouped convolution's elementwise consumer moved into its loop over groups.

``ir/conv.py`` (``_grouped_per_group``) builds a grouped 2-D convolution as bands of output
rows (``scf.forall``; a single band folds it away), in each a loop over the groups
(``scf.for``) of one ``linalg.conv_2d_nhwc_hwcf`` into the group's slice of the band's
result, zero-filled first. The batch norm, bias, residual add and ReLU after it (one
``linalg.generic`` once the simplify stage has fused them) read the whole result back:
a second pass over the image, after the fusion groups' register epilogue
(schedule/conv_kernels.py), which anchors on top-level convolutions, could not reach the
convolutions inside the loop.

Here that consumer is applied per group, on the group's slice right after its
convolution, as TVM and IREE fuse an epilogue into the anchor's tile:

    for g:  acc = fill(0, empty)                          (the conv's own accumulator)
            y_g = conv_2d_nhwc_hwcf(x_g, w_g, acc)
            z_g = epilogue(y_g, scale[g slice], residual[band, g slice], out[band, g slice])
            out = insert_slice z_g into out

The loop then holds a fusion group of its own (conv, fill, epilogue), which
``tilecraft-mark-groups`` tags (fusion.py) and the schedule computes with the epilogue on
the convolution's accumulators (schedule/group.py), like a plain convolution's. Only a
consumer that reads nothing but the loop's result whole (identity map), per-channel or
per-pixel operands through projected permutations, and writes a result of the loop's own
type, and does not read its position (``linalg.index``), is moved: anything else (a
reduction, a reshape, a slice, a second reader of the result) stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..ir_queries import defining_op, ops_where, users

_GROUP_CONV = "linalg.conv_2d_nhwc_hwcf"
_PARALLEL = "#linalg.iterator_type<parallel>"


@dataclass(frozen=True)
class GroupLoop:
    """A grouped convolution's loop nest as ``_grouped_per_group`` writes it.

    Attributes:
      outer: the top-level op: the ``scf.forall`` over bands, or the ``scf.for`` over
        groups when there is one band.
      groups: the ``scf.for`` over groups.
      conv: the group's ``linalg.conv_2d_nhwc_hwcf``.
      insert: the ``tensor.insert_slice`` of the group's result that the loop yields.
      band: the ``tensor.extract_slice`` of the band in the forall's shared result, or
        ``None`` without bands.
    """

    outer: ir.Operation
    groups: ir.Operation
    conv: ir.Operation
    insert: ir.Operation
    band: ir.Operation | None


def _body_ops(op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in op.regions[0].blocks[0].operations]


def _mixed_offsets(op: ir.Operation) -> list[int | ir.Value]:
    """A slice op's offsets, static ones as ints, dynamic ones as their values."""
    dynamic = iter(op.opview.offsets)
    marker = ir.ShapedType.get_dynamic_size()
    return [next(dynamic) if offset == marker else offset
            for offset in ir.DenseI64ArrayAttr(op.attributes["static_offsets"])]


def _same_offsets(a: ir.Operation, b: ir.Operation) -> bool:
    return all(x == y for x, y in zip(_mixed_offsets(a), _mixed_offsets(b)))


def _unit_strides(op: ir.Operation) -> bool:
    return all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"]))


def group_loop(op: ir.Operation) -> GroupLoop | None:
    """``op`` as a grouped convolution's loop nest (:class:`GroupLoop`), or ``None``."""
    band = None
    groups = op
    if op.name == "scf.forall":
        if len(op.results) != 1:
            return None
        loops = [o for o in _body_ops(op) if o.name == "scf.for"]
        if len(loops) != 1 or len(loops[0].results) != 1:
            return None
        groups = loops[0]
        band = defining_op(groups.operands[3])
        shared = op.regions[0].blocks[0].arguments[-1]
        if band is None or band.name != "tensor.extract_slice" or band.operands[0] != shared:
            return None
        terminator = _body_ops(op)[-1]
        inserts = _body_ops(terminator)
        if (len(inserts) != 1 or inserts[0].operands[0] != groups.results[0]
                or not _same_offsets(inserts[0], band)):
            return None
    elif op.name != "scf.for" or len(op.results) != 1:
        return None
    body = groups.regions[0].blocks[0]
    iter_arg = body.arguments[1]
    insert = defining_op(_body_ops(groups)[-1].operands[0])
    if insert is None or insert.name != "tensor.insert_slice" or insert.operands[1] != iter_arg:
        return None
    conv = defining_op(insert.operands[0])
    if conv is None or conv.name != _GROUP_CONV or len(users(conv.results[0])) != 1:
        return None
    fill = defining_op(conv.operands[2])
    if fill is None or fill.name != "linalg.fill" or len(users(fill.results[0])) != 1:
        return None
    destination = defining_op(fill.operands[1])
    if (destination is None or destination.name != "tensor.extract_slice"
            or destination.operands[0] != iter_arg or not _same_offsets(destination, insert)
            or not _unit_strides(insert)):
        return None
    return GroupLoop(op, groups, conv, insert, band)


def _movable_epilogue(loop: GroupLoop) -> tuple[ir.Operation, int] | None:
    """The loop result's one consumer if it can run per group (module docstring), with the
    position of the loop's result among its inputs."""
    result = loop.outer.results[0]
    readers = users(result)
    if len(readers) != 1 or readers[0].name != "linalg.generic":
        return None
    epilogue = readers[0]
    generic = epilogue.opview
    inputs, outputs = list(generic.inputs), list(generic.outputs)
    if len(outputs) != 1 or len(epilogue.results) != 1 or epilogue.results[0].type != result.type:
        return None
    if any(str(kind) != _PARALLEL for kind in ir.ArrayAttr(epilogue.attributes["iterator_types"])):
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(epilogue.attributes["indexing_maps"])]
    rank = ir.RankedTensorType(result.type).rank
    identity = ir.AffineMap.get_identity(rank)
    if maps[-1] != identity:
        return None
    # A body that reads its position (linalg.index) would see the group's, not the image's.
    if ops_where(epilogue, lambda op: op.name == "linalg.index"):
        return None
    positions = [i for i, value in enumerate(inputs) if value == result]
    if len(positions) != 1 or maps[positions[0]] != identity:
        return None
    for value, affine_map in zip(inputs, maps):
        if not isinstance(value.type, ir.RankedTensorType) or not affine_map.is_projected_permutation:
            return None
        if not ir.RankedTensorType(value.type).has_static_shape:
            return None
    return epilogue, positions[0]


def _add(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    index = ir.IndexType.get()
    as_value = lambda v: v if isinstance(v, ir.Value) else arith.ConstantOp(index, v).result
    return arith.addi(as_value(a), as_value(b))


def _slice(value: ir.Value, offsets: list[int | ir.Value], sizes: list[int]) -> ir.Value:
    element = ir.RankedTensorType(value.type).element_type
    marker = ir.ShapedType.get_dynamic_size()
    dynamic = [o for o in offsets if isinstance(o, ir.Value)]
    static = [marker if isinstance(o, ir.Value) else o for o in offsets]
    return tensor.extract_slice(ir.RankedTensorType.get(sizes, element), value, dynamic, [], [],
                                static, sizes, [1] * len(sizes))


def sink_epilogue(loop: GroupLoop) -> bool:
    """Move the loop result's elementwise consumer into the loop over groups (module
    docstring); ``False`` (nothing changed) when it has none that can move."""
    found = _movable_epilogue(loop)
    if found is None:
        return False
    epilogue, position = found
    generic = epilogue.opview
    inputs = list(generic.inputs)
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(epilogue.attributes["indexing_maps"])]
    # Every operand of the epilogue is defined before it: with the loop just above it, each
    # dominates the loop's body.
    loop.outer.move_before(epilogue)
    insert, conv = loop.insert, loop.conv
    sizes = list(ir.RankedTensorType(insert.operands[0].type).shape)
    group_offsets = _mixed_offsets(insert)
    with epilogue.location:
        with ir.InsertionPoint(conv):
            fill = defining_op(conv.operands[2])
            destination = fill.operands[1]
            element = ir.RankedTensorType(destination.type).element_type
            # The convolution accumulates into its own zeroed tile; the epilogue writes
            # the group's slice of the result.
            conv.operands[2] = linalg.fill(fill.operands[0], outs=[tensor.EmptyOp(sizes, element).result])
            fill.erase()
        with ir.InsertionPoint(insert):
            offsets = group_offsets
            if loop.band is not None:
                offsets = [_add(b, g) for b, g in zip(_mixed_offsets(loop.band), group_offsets)]
            operands = []
            for index, (value, affine_map) in enumerate(zip(inputs, maps)):
                if index == position:
                    operands.append(conv.results[0])
                    continue
                dims = [ir.AffineDimExpr(expr).position for expr in affine_map.results]
                operands.append(_slice(value, [offsets[d] for d in dims], [sizes[d] for d in dims]))
            clone = epilogue.clone(ip=ir.InsertionPoint(insert))
            for index, value in enumerate([*operands, destination]):
                clone.operands[index] = value
            clone.results[0].set_type(destination.type)
    insert.operands[0] = clone.results[0]
    init = defining_op(epilogue.operands[len(inputs)])
    epilogue.results[0].replace_all_uses_with(loop.outer.results[0])
    epilogue.erase()
    if init is not None and init.name == "tensor.empty" and not users(init.results[0]):
        init.erase()
    return True


def sink_grouped_epilogues(func: ir.Operation) -> list[ir.Operation]:
    """Sink every movable epilogue of ``func``'s grouped convolutions into their group loop;
    returns those loops over groups (``scf.for``), whose bodies now hold a fusion group."""
    sunk = []
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        loop = group_loop(op)
        if loop is not None and sink_epilogue(loop):
            sunk.append(loop.groups)
    return sunk
