"""A concatenation left outside every loop becomes the destination its parts are computed
into: ``tilecraft-concats-as-destinations``.

Why: branches that end in a concat (SqueezeNet's Fire modules, Inception's four branches,
DenseNet's growing feature lists, ShuffleNet's split halves) wrote each part into a buffer
of its own, and the bufferized ``tensor.concat`` then copied every part into the result:
SqueezeNet 1.1 copied 6.1 MB per call that way, on one thread, outside every kernel
(docs/performance.md, "SqueezeNet and depthwise on AVX2").

Here each ``tensor.concat`` at function level with a static result becomes

    %e = tensor.empty                        the result's shape
    %d = tensor.insert_slice %part_i into %d[... offset_i ...]    one per part, in order

and ``eliminate-empty-tensors`` (first pass of the bufferize stage, right after this one:
pipelines/stages.py) replaces the ``tensor.empty`` each part's producer writes into (a fusion
group's ``scf.forall`` shared output, a ``linalg`` op's init) with the slice of the result it
is inserted at, as it does for pads (pipelines/tensor/pad_destinations.py): the producer
stores straight into its channels of the concatenated buffer. A part with no such producer
(a function argument, a constant, a value another op also reads in a way that conflicts) is
one copy into its slice, as before. The parts tile the result exactly, so nothing is filled.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import tensor

from ..ir_queries import at_function_level, ops_where
from ..passes import register_pass
from .static_slices import insert_static, slab

CONCATS_AS_DESTINATIONS = "tilecraft-concats-as-destinations"


def concat_as_destination(concat: ir.Operation) -> bool:
    """Rewrite one ``tensor.concat`` (see the module docstring); False when it does not
    qualify: a dynamic shape, or inside a loop or a region."""
    if concat.name != "tensor.concat" or not at_function_level(concat):
        return False
    result_type = ir.RankedTensorType(concat.results[0].type)
    parts = list(concat.operands)
    if not result_type.has_static_shape or not all(ir.RankedTensorType(p.type).has_static_shape for p in parts):
        return False
    dim = ir.IntegerAttr(concat.attributes["dim"]).value
    shape = list(result_type.shape)
    with ir.InsertionPoint(concat), concat.location:
        result = tensor.EmptyOp(shape, result_type.element_type).result
        offset = 0
        for part in parts:
            size = ir.RankedTensorType(part.type).shape[dim]
            offsets, _sizes = slab(shape, dim, offset, size)
            result = insert_static(part, result, offsets)
            offset += size
    concat.results[0].replace_all_uses_with(result)
    concat.erase()
    return True


@register_pass(
    CONCATS_AS_DESTINATIONS,
    "A function-level tensor.concat becomes its parts inserted into a fresh tensor, so that "
    "each part's producer writes into its slice of the result",
)
def concats_as_destinations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for concat in ops_where(module, lambda op: op.name == "tensor.concat"):
        concat_as_destination(concat)
