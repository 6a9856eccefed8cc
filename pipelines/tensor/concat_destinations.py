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

A concat whose part is an earlier concat (DenseNet's growing feature list, each layer's input
the concat of all before it) builds that earlier concat in its slice: the block's concats
become one buffer, the last one's, whose channel prefixes the layers read, and nothing is
copied from one concat into the next (DenseNet-121's first two blocks copied 18 MB per call).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import tensor

from ..ir_queries import at_function_level, defining_op, ops_where
from ..passes import register_pass
from .static_slices import extract_static, insert_static, slab

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
        empty = tensor.EmptyOp(shape, result_type.element_type)
        result = empty.result
        offset = 0
        earlier = []
        for part in parts:
            size = ir.RankedTensorType(part.type).shape[dim]
            offsets, sizes = slab(shape, dim, offset, size)
            result = insert_static(part, result, offsets)
            if (base := _concat_destination(part)) is not None:
                earlier.append((base, offsets, sizes))
            offset += size
    concat.results[0].replace_all_uses_with(result)
    concat.erase()
    if len(earlier) == 1:
        # A concat of an earlier concat (DenseNet's growing feature list): the earlier one is
        # built in its slice of this one, so that a dense block's concats are one buffer whose
        # channel prefixes are its layers' inputs, with nothing copied from one to the next.
        # eliminate-empty-tensors would do the same, but it rewrites the inserts in program
        # order, so the second concat's result took the first one's slice while the first
        # kept its own buffer, and so on every other layer. Here each concat, rewritten in
        # order, moves its empty tensor before the earlier one's and replaces that one by a
        # slice of it: the chain ends as slices of the block's last concat. (Replacing a
        # tensor.empty, whose contents are undefined, by any tensor keeps every value.)
        base, offsets, sizes = earlier[0]
        empty.operation.move_before(base)
        with ir.InsertionPoint(base), base.location:
            view = extract_static(empty.result, offsets, sizes)
        base.results[0].replace_all_uses_with(view)
        base.erase()
    return True


def _concat_destination(value: ir.Value) -> ir.Operation | None:
    """The ``tensor.empty`` a rewritten concat's parts are inserted into, when ``value`` is
    such a concat's result (a chain of ``tensor.insert_slice`` down to it) and nothing else
    uses that empty tensor but the chain and the slices an earlier concat of the chain was
    made of (one shared with other ops stays theirs)."""
    op = defining_op(value)
    while op is not None and op.name == "tensor.insert_slice":
        op = defining_op(op.operands[1])
    if op is None or op.name != "tensor.empty" or not at_function_level(op):
        return None
    users = [getattr(use.owner, "operation", use.owner).name for use in op.results[0].uses]
    chained = users.count("tensor.insert_slice") == 1 and all(
        name in ("tensor.insert_slice", "tensor.extract_slice") for name in users)
    return op if chained else None


@register_pass(
    CONCATS_AS_DESTINATIONS,
    "A function-level tensor.concat becomes its parts inserted into a fresh tensor, so that "
    "each part's producer writes into its slice of the result",
)
def concats_as_destinations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for concat in ops_where(module, lambda op: op.name == "tensor.concat"):
        concat_as_destination(concat)
