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

A concat inserted whole into a larger tensor, a pad's interior (pad_destinations.py runs
first), is built in that tensor: its parts are inserted at the interior's offsets and its
other readers read ``tensor.extract_slice`` of the interior. Inception's concats are padded
for a 3x3 max pool and read whole by 1x1 convs: eliminate-empty-tensors put the concat in
the padded buffer only when its first part's producer had not already taken another buffer,
and the kernels reading the concat got the strided interior copied out for them (9 copies per
call at two threads, 15 at one: 28x28x256 to 7x7x832). The larger tensor's ops (the pad's
empty tensor and border fills) are moved before the concat, which keeps every value: they are
pure and read nothing the concat computes.

A part that is a reshape of a producer's result (a transpose's 5-D result collapsed to the
channels: ShuffleNet's pass-through half, a shuffle of the channels it keeps after
pipelines/graph/channel_shuffles.py; a flatten before a detection head's concat) is written in
its slice too: the producer's fresh destination (a ``tensor.empty`` of its result's shape that
only it reads) becomes the inverse reshape of the part's slice of the concat's tensor, and
that part is inserted first (bufferization then sees the slice the producer writes and the
one inserted as the same; inserted later, into the tensor holding the earlier parts, it was
copied). eliminate-empty-tensors does not do this itself: it does not follow reshapes, so the
producer wrote a buffer of its own that was then copied into the concat (ShuffleNet: half the
channels of every unit). A kernel call writing such a part takes the whole concat
(call_destinations.py). One reshaped part per concat; others are copied as before.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import tensor

from ...ir import reshapes
from ..ir_queries import at_function_level, defining_op, ops_where, reassociation_groups
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
    enclosing = _enclosing_insert(concat)
    with ir.InsertionPoint(concat), concat.location:
        if enclosing is not None:
            # Built where it is inserted whole (a pad's interior): the parts go straight into
            # the larger tensor, and the concat's other readers read that interior as a view.
            destination, origin = enclosing.operands[1], _offsets(enclosing)
            empty = None
        else:
            empty = tensor.EmptyOp(shape, result_type.element_type)
            destination, origin = empty.result, [0] * len(shape)
        result = destination
        slabs = []
        offset = 0
        for part in parts:
            size = ir.RankedTensorType(part.type).shape[dim]
            offsets, sizes = slab(shape, dim, offset, size)
            slabs.append((part, [o + base for o, base in zip(offsets, origin)], sizes))
            offset += size
        if empty is not None:
            # A reshaped part in its slice (module docstring), inserted first: bufferization
            # then sees the slice it writes and the one inserted into the fresh tensor as one.
            # Only one: a second would be a slice of the tensor before the first's insert.
            reshaped = next((i for i, (part, offsets, _) in enumerate(slabs)
                             if _reshaped_part_destination(part, empty.operation, offsets)), None)
            if reshaped is not None:
                slabs.insert(0, slabs.pop(reshaped))
        earlier = []
        for part, offsets, sizes in slabs:
            result = insert_static(part, result, offsets)
            if (base := _concat_destination(part)) is not None:
                earlier.append((base, offsets, sizes))
        others = enclosing is not None and len(list(concat.results[0].uses)) > 1
        view = extract_static(result, origin, shape) if others else result
    if enclosing is not None:
        enclosing.results[0].replace_all_uses_with(result)
        enclosing.erase()
    concat.results[0].replace_all_uses_with(view)
    concat.erase()
    if len(earlier) == 1:
        # A concat of an earlier concat (DenseNet's growing feature list): the earlier one is
        # built in its slice of this one, so that a dense block's concats are one buffer whose
        # channel prefixes are its layers' inputs, with nothing copied from one to the next.
        # eliminate-empty-tensors would do the same, but it rewrites the inserts in program
        # order, so the second concat's result took the first one's slice while the first
        # kept its own buffer, and so on every other layer. Here each concat, rewritten in
        # order, moves its destination before the earlier one's and replaces that one by a
        # slice of it: the chain ends as slices of the block's last concat. (Replacing a
        # tensor.empty, whose contents are undefined, by any tensor keeps every value.)
        base, offsets, sizes = earlier[0]
        if empty is not None and not empty.operation.is_before_in_block(base):
            # (Already before it when a reshaped part's destination moved it up.)
            empty.operation.move_before(base)
        if empty is not None or _hoist_before(destination, base):
            with ir.InsertionPoint(base), base.location:
                slice_ = extract_static(destination, offsets, sizes)
            base.results[0].replace_all_uses_with(slice_)
            base.erase()
    return True


def _reshaped_part_destination(part: ir.Value, empty: ir.Operation, offsets: list[int]) -> bool:
    """Put a part that is a static reshape of a producer's result in its slice of the
    concat's fresh tensor ``empty`` at ``offsets`` (module docstring): the producer's one
    ``tensor.empty`` of its result's type that nothing else reads becomes the inverse reshape
    of that slice, and ``empty`` moves before it (it reads nothing). False, with nothing
    changed, when ``part`` is no such reshape, something else reads the producer's result, or
    the producer has no such destination or several."""
    reshape = defining_op(part)
    if reshape is None or reshape.name not in ("tensor.collapse_shape", "tensor.expand_shape") \
            or len(reshape.operands) != 1:
        return False
    inner = reshape.operands[0]
    producer = defining_op(inner)
    if producer is None or len(list(inner.uses)) != 1 or producer.block != empty.block:
        return False
    if not all(ir.RankedTensorType(v.type).has_static_shape for v in (inner, part)):
        return False
    inits = [operand for operand in producer.operands
             if (op := defining_op(operand)) is not None and op.name == "tensor.empty"
             and operand.type == inner.type and len(list(operand.uses)) == 1]
    if len(inits) != 1 or defining_op(inits[0]).block != empty.block:
        return False
    old = defining_op(inits[0])
    groups = reassociation_groups(reshape)
    empty.move_before(old)
    with ir.InsertionPoint(old), old.location:
        part_slice = extract_static(empty.results[0], offsets, ir.RankedTensorType(part.type).shape)
        if reshape.name == "tensor.collapse_shape":
            destination = reshapes.expand(part_slice, groups, list(ir.RankedTensorType(inner.type).shape))
        else:
            destination = reshapes.collapse(part_slice, groups)
    old.results[0].replace_all_uses_with(destination)
    old.erase()
    return True


# What a concat's enclosing destination may be built of: a pad's fresh tensor and its border
# fills (pad_destinations.py). Each is pure, so moving it earlier keeps every value.
_MOVABLE = ("tensor.empty", "tensor.extract_slice", "tensor.insert_slice", "linalg.fill", "arith.constant")


def _offsets(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))


def _enclosing_insert(concat: ir.Operation) -> ir.Operation | None:
    """The ``tensor.insert_slice`` that puts all of ``concat``'s result into a larger tensor
    (a pad's interior, after pad_destinations.py), when that larger tensor can be defined
    before the concat (``_hoist_before``, which then moves it there); else None.

    Why: Inception's concats are padded for a 3x3 max pool and read whole by 1x1 convs. Built
    in a buffer of its own, the concat was copied into the padded buffer, or, once
    eliminate-empty-tensors had put it in the padded buffer's interior, that strided interior
    was copied out again for the kernels that read it (9 copies per call). Built in the padded
    tensor, one buffer serves both."""
    result = concat.results[0]
    for use in result.uses:
        owner = getattr(use.owner, "operation", use.owner)
        if (owner.name == "tensor.insert_slice" and use.operand_number == 0
                and len(owner.operands) == 2 and owner.block == concat.block
                and all(stride == 1 for stride in ir.DenseI64ArrayAttr(owner.attributes["static_strides"]))
                and list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
                == list(ir.RankedTensorType(result.type).shape)
                and _hoist_before(owner.operands[1], concat)):
            return owner
    return None


def _hoist_before(value: ir.Value, anchor: ir.Operation) -> bool:
    """Make ``value`` defined before ``anchor`` by moving the ops of its block that compute it
    (only the pure ones of ``_MOVABLE``) ahead of ``anchor``, in their order; False, with
    nothing moved, when an op it needs is of another kind or in another block."""
    block = anchor.block
    needed: list[ir.Operation] = []
    pending = [value]
    seen = set()
    while pending:
        op = defining_op(pending.pop())
        # A block argument, or defined before anchor or in an enclosing block: in place.
        if op is None or op.block != block or op.is_before_in_block(anchor) or op in seen:
            continue
        if op == anchor or op.name not in _MOVABLE:
            return False
        seen.add(op)
        needed.append(op)
        pending.extend(op.operands)
    for op in sorted(needed, key=_position(block)):
        op.move_before(anchor)
    return True


def _position(block: ir.Block):
    order = {op.operation: index for index, op in enumerate(block.operations)}
    return lambda op: order[op]


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
