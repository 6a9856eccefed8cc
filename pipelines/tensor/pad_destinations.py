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

A source that something besides the pad reads (SqueezeNet's squeeze output: a 3x3 expand
reads it padded, a 1x1 expand whole; ResNet's block output: the next 3x3 conv padded, the
shortcut whole; an Inception concat: a 3x3 max pool padded, 1x1 convs whole) gets its padded
buffer built right after its producer, and those readers read ``tensor.extract_slice`` of the
interior instead. The producer writes into the interior either way; before, a kernel reading
the source whole got the strided interior copied into a buffer of its own at the call
boundary (SqueezeNet 1.1: 8 copies per call at one thread, the suite's resnet_basic: 7), and now it is a
slice that tilecraft-call-destinations passes as the larger tensor (call_destinations.py,
"call sources").

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
    producer = _shared_producer(pad, value)
    where = ir.InsertionPoint(pad) if producer is None else ir.InsertionPoint.after(producer)
    with where, pad.location:
        padded = tensor.EmptyOp(shape, result_type.element_type).result
        for dim in range(len(shape)):
            for start, size in ((0, low[dim]), (low[dim] + source_type.shape[dim], high[dim])):
                if size == 0:
                    continue
                offsets, sizes = slab(shape, dim, start, size)
                filled = linalg.fill(value, outs=[extract_static(padded, offsets, sizes)])
                padded = insert_static(filled, padded, offsets)
        inserted = insert_static(source, padded, low)
        if producer is not None:
            # The source's other readers read the padded buffer's interior (module docstring).
            interior = extract_static(inserted, low, source_type.shape)
            source.replace_all_uses_except(interior, defining_op(inserted))
    pad.results[0].replace_all_uses_with(inserted)
    pad.erase()
    return True


def _shared_producer(pad: ir.Operation, value: ir.Value) -> ir.Operation | None:
    """The op at function level that computes the pad's source, when something besides the
    pad reads the source and the padding value is defined before that op: the padded
    buffer is then built right after it, and its readers read the interior."""
    source = pad.operands[0]
    producer = defining_op(source)
    if producer is None or producer.block != pad.block:
        return None  # a function argument: inserting it is a copy, its readers keep it
    if not any(getattr(use.owner, "operation", use.owner) != pad for use in source.uses):
        return None
    defined = defining_op(value)
    if defined is not None and defined.block == pad.block and not defined.is_before_in_block(producer):
        return None
    return producer


@register_pass(
    PADS_AS_DESTINATIONS,
    "A function-level tensor.pad becomes border fills of a fresh tensor and the source "
    "inserted into it, so that the source's producer writes into the padded buffer",
)
def pads_as_destinations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for pad in ops_where(module, lambda op: op.name == "tensor.pad"):
        pad_as_destination(pad)
