"""A pad left outside every loop becomes the destination its source is computed into:
``tilecraft-pads-as-destinations``.

Why: a convolution or pooling window reads its input zero-padded. Fused into the consumer's
fusion group (schedule/group.py), the pad copied each task's band of input rows into a
scratch buffer: MobileNetV2's stride-2 depthwise layer read 4.8 MB and wrote 5 MB per call to
do 3.6 MFLOP of work, and ResNet-50's stem max pool copied 10 MB. Left outside as a
``tensor.pad``, bufferization allocated the padded buffer, filled it and copied the source in.

Here each ``tensor.pad`` at function level (static padded shape, one padding value from
outside its body) becomes

    %e = tensor.empty                       the padded shape
    %b = linalg.fill of each border slab    [0, low_d) and [low_d + n_d, extent_d) per dim d
    %p = tensor.insert_slice %source into %b[low...]

and ``eliminate-empty-tensors`` (first pass of the bufferize stage, pipelines/stages.py)
replaces the ``tensor.empty`` that the source's producer writes into (a fusion group's
``scf.forall`` shared output, a ``linalg`` op's init) with the slice of ``%b`` it is inserted
at: the producer stores its results straight into the padded buffer's interior and the
consumer reads the padded buffer with no copy. When the source has no such producer (a
function argument, a constant) the insert is one copy into the interior, as before.

Only the borders are filled (the corners twice: they are few), so no element is written
twice. Fusion groups leave pads out (schedule/group.py), and this pass runs after the
schedule, so every pad it meets is at function level.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import linalg, tensor

from ..ir_queries import at_function_level, defining_op, ops_where
from ..passes import register_pass
from .static_slices import extract_static, insert_static, slab

PADS_AS_DESTINATIONS = "tilecraft-pads-as-destinations"


def _padding_value(pad: ir.Operation) -> ir.Value | None:
    """The value every padded element gets, when it is defined outside the pad's body."""
    body = pad.regions[0].blocks[0]
    operations = list(body.operations)
    if len(operations) != 1 or operations[0].operation.name != "tensor.yield":
        return None
    value = operations[0].operands[0]
    # The yield is the body's only op, so a value defined by an op comes from outside; a
    # block argument is the body's own index, or a scalar from an enclosing block.
    if defining_op(value) is None and value.owner == body:
        return None
    return value


def _static_amounts(pad: ir.Operation, name: str) -> list[int] | None:
    amounts = list(ir.DenseI64ArrayAttr(pad.attributes[name]))
    if any(ir.ShapedType.is_dynamic_size(amount) for amount in amounts):
        return None
    return amounts


def pad_as_destination(pad: ir.Operation) -> bool:
    """Rewrite one ``tensor.pad`` (see the module docstring); False when it does not qualify:
    dynamic shapes or amounts, a computed padding value, or inside a loop or a region."""
    if pad.name != "tensor.pad" or not at_function_level(pad):
        return False
    result_type = ir.RankedTensorType(pad.results[0].type)
    source = pad.operands[0]
    source_type = ir.RankedTensorType(source.type)
    if not result_type.has_static_shape or not source_type.has_static_shape:
        return False
    low, high = _static_amounts(pad, "static_low"), _static_amounts(pad, "static_high")
    value = _padding_value(pad)
    if low is None or high is None or value is None:
        return False
    if any(amount < 0 for amount in (*low, *high)):
        return False  # a negative pad crops: not a destination
    shape = list(result_type.shape)
    with ir.InsertionPoint(pad), pad.location:
        padded = tensor.EmptyOp(shape, result_type.element_type).result
        for dim in range(len(shape)):
            for start, size in ((0, low[dim]), (low[dim] + source_type.shape[dim], high[dim])):
                if size == 0:
                    continue
                offsets, sizes = slab(shape, dim, start, size)
                filled = linalg.fill(value, outs=[extract_static(padded, offsets, sizes)])
                padded = insert_static(filled, padded, offsets)
        inserted = insert_static(source, padded, low)
    pad.results[0].replace_all_uses_with(inserted)
    pad.erase()
    return True


@register_pass(
    PADS_AS_DESTINATIONS,
    "A function-level tensor.pad becomes border fills of a fresh tensor and the source "
    "inserted into it, so that the source's producer writes into the padded buffer",
)
def pads_as_destinations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for pad in ops_where(module, lambda op: op.name == "tensor.pad"):
        pad_as_destination(pad)
