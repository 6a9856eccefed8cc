"""A bufferized pad fills only its borders: ``tilecraft-fill-pad-borders``.

Why: bufferization turns ``tensor.pad`` into a fresh buffer filled whole with the padding
value, then the source copied into its interior. Every element of the interior is written
twice. Fusion groups pad their input per task (a band of rows plus a halo: schedule/group.py),
so MobileNetV2's depthwise layers filled about 15 MB per call only to overwrite nearly all of
it; the interior of a 29x113x96 band is 97% of the buffer.

The pass finds ``linalg.map``s that fill a whole ``memref.alloc`` with one value defined
outside the map, when the alloc's next use is a unit-stride ``memref.subview`` that a
``memref.copy`` (or ``linalg.copy``) then writes whole, and nothing reads the alloc before
that copy. The fill becomes one ``linalg.fill`` per side of each dim the subview does not
span: for dim ``d``, the slabs ``[0, offset_d)`` and ``[offset_d + size_d, extent_d)``, whole
in the other dims (the corners are filled twice; they are few). Offsets and sizes may be
dynamic (a task's band at the image's edge has a taller top pad).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, linalg, memref

from ..ir_queries import defining_op, ops_where, users
from ..passes import register_pass

FILL_PAD_BORDERS = "tilecraft-fill-pad-borders"


def _fill_value(op: ir.Operation) -> ir.Value | None:
    """The value a ``linalg.map`` with no inputs yields, when defined outside its body."""
    if op.name != "linalg.map" or len(op.operands) != 1:
        return None
    body = op.regions[0].blocks[0]
    operations = list(body.operations)
    if len(operations) != 1 or operations[0].operation.name != "linalg.yield":
        return None
    value = operations[0].operands[0]
    owner = defining_op(value)
    if owner is None:  # a block argument: the map's own element, or one from outside
        return None
    return value


def _interior_copy(alloc: ir.Operation, fill: ir.Operation
                   ) -> tuple[ir.Operation, ir.Operation] | None:
    """(subview, copy): the unit-stride subview of ``alloc`` that one copy writes whole after
    ``fill``, all three in one block, when no other use of ``alloc`` comes before that copy."""
    alloc_users = users(alloc.results[0])
    subviews = [user for user in alloc_users if user.name == "memref.subview"]
    if len(subviews) != 1:
        return None
    subview = subviews[0]
    if any(stride != 1 for stride in ir.DenseI64ArrayAttr(subview.attributes["static_strides"])):
        return None
    copies = users(subview.results[0])
    if len(copies) != 1 or copies[0].name not in ("memref.copy", "linalg.copy"):
        return None
    copy = copies[0]
    if copy.operands[len(copy.operands) - 1] != subview.results[0]:
        return None  # the subview is the copy's source, not its target
    block = fill.block
    if subview.block != block or copy.block != block:
        return None
    if not (fill.is_before_in_block(subview) and subview.is_before_in_block(copy)):
        return None
    for user in alloc_users:
        if user in (fill, subview):
            continue
        if user.block != block or user.is_before_in_block(copy):
            return None
    return subview, copy


def _mixed(static: list[int], dynamic: list[ir.Value]) -> list[int | ir.Value]:
    """Static values with the dynamic ones (``ShapedType`` markers) put back in place."""
    marker = ir.ShapedType.get_dynamic_size()
    values = iter(dynamic)
    return [next(values) if number == marker else number for number in static]


def _subview_box(subview: ir.Operation) -> tuple[list[int | ir.Value], list[int | ir.Value]]:
    """(offsets, sizes) of a subview, each an int or an index value."""
    view = subview.opview
    offsets = _mixed(list(ir.DenseI64ArrayAttr(subview.attributes["static_offsets"])), list(view.offsets))
    sizes = _mixed(list(ir.DenseI64ArrayAttr(subview.attributes["static_sizes"])), list(view.sizes))
    return offsets, sizes


def _index(value: int | ir.Value) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value) if isinstance(value, int) else value


def _slab(alloc: ir.Value, dim: int, start: int | ir.Value, size: int | ir.Value) -> ir.Value:
    """The subview of ``alloc`` (static shape, identity layout) that spans ``size`` from
    ``start`` along ``dim`` and everything along the other dims."""
    memref_type = ir.MemRefType(alloc.type)
    shape = list(memref_type.shape)
    offsets: list[int | ir.Value] = [0] * len(shape)
    sizes: list[int | ir.Value] = list(shape)
    offsets[dim], sizes[dim] = start, size
    strides, _offset = memref_type.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_size()
    offset = (sum(o * s for o, s in zip(offsets, strides)) if all(isinstance(o, int) for o in offsets)
              else ir.ShapedType.get_dynamic_stride_or_offset())
    result_type = ir.MemRefType.get(
        [s if isinstance(s, int) else dynamic for s in sizes], memref_type.element_type,
        layout=ir.StridedLayoutAttr.get(offset, strides))
    return memref.subview(alloc, offsets, sizes, [1] * len(shape), result_type=result_type)


def fill_borders(fill: ir.Operation) -> bool:
    """Replace the whole-buffer ``fill`` (a ``linalg.map``) by fills of the borders around
    the interior a copy writes; False when the pattern does not hold (nothing changed)."""
    value = _fill_value(fill)
    alloc = defining_op(fill.operands[0])
    if value is None or alloc is None or alloc.name != "memref.alloc":
        return False
    memref_type = ir.MemRefType(alloc.results[0].type)
    if not memref_type.has_static_shape or memref_type.layout != ir.AffineMapAttr.get(
            ir.AffineMap.get_identity(memref_type.rank)):
        return False
    found = _interior_copy(alloc, fill)
    if found is None:
        return False
    subview, copy = found
    offsets, sizes = _subview_box(subview)
    # At the copy: the subview's offsets and sizes are defined there, and nothing has read
    # the buffer yet (_interior_copy).
    with ir.InsertionPoint(copy), fill.location:
        for dim, extent in enumerate(memref_type.shape):
            offset, size = offsets[dim], sizes[dim]
            if offset == 0 and size == extent:
                continue
            if offset != 0:
                linalg.fill(value, outs=[_slab(alloc.results[0], dim, 0, offset)])
            if isinstance(offset, int) and isinstance(size, int):
                end: int | ir.Value = offset + size
                high: int | ir.Value = extent - end
            else:
                end = arith.addi(_index(offset), _index(size))
                high = arith.subi(_index(extent), end)
            if high != 0:
                linalg.fill(value, outs=[_slab(alloc.results[0], dim, end, high)])
    fill.erase()
    return True


@register_pass(
    FILL_PAD_BORDERS,
    "A buffer filled whole and then copied into except for its borders (a bufferized "
    "tensor.pad) fills only the borders",
)
def fill_pad_borders_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for fill in ops_where(module, lambda op: _fill_value(op) is not None):
        fill_borders(fill)
