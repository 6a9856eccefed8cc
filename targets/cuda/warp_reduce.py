"""Block-per-row reductions combined with warp shuffles instead of one thread.

The GPU schedule's block-per-row reduction (``schedule.py``, ``tile_reduction_using_forall``)
leaves, after mapping, this in each kernel::

    every thread:         partials[0.., tid] = reduce(its chunk of the row)
    gpu.barrier
    scf.if tid < 1:       linalg.reduce partials -> out     (one thread, blockDim steps)

With the ``warp-reduce=1`` schedule option the schedule annotates that ``linalg.reduce``
(:data:`WARP_COMBINE`), and :func:`combine_with_warp_shuffles` (run by ``tilecraft-gpu-map``
after mapping) replaces it by::

    every thread:         total = gpu.all_reduce(partials[0.., tid]) uniform {combiner}
    scf.if tid < 1:       out = combiner(total, out)

``convert-gpu-to-nvvm`` lowers ``gpu.all_reduce`` to ``shfl.sync.bfly`` butterflies within
each warp, one value per warp through a 32-element workgroup buffer, and a second butterfly
in the first warp: log2(32) shuffle steps twice instead of ``blockDim.x`` serial reads of
shared memory by one thread while the others wait. The combiner is the reduce's own body,
cloned, so any reduction kind (sum, max, a user's generic) keeps its meaning; only the order
in which partials are combined changes (a tree instead of a chain), which for floating-point
sums changes the last bits.

What is rewritten, and only that (anything else keeps the one-thread combination):
the annotated reduce is the only op of an ``scf.if`` directly in a ``gpu.launch`` body (so
every thread reaches the ``gpu.all_reduce``, which must be uniform), the launch has a
constant 1-D block whose size is the partials' length, the partials are a workgroup buffer
reduced along its last dimension (all others 1) into a single element, and the element type
is a 32-bit float or integer (what ``gpu.shuffle`` lowers for NVVM).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, memref

from ...pipelines.ir_queries import ops_where

# Discardable attribute the schedule puts on a block-per-row combination to ask for shuffles.
WARP_COMBINE = "tilecraft.warp_combine"
_WORKGROUP = "#gpu.address_space<workgroup>"


def _constant_index(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _block_dims(launch: ir.Operation) -> tuple[int | None, ...]:
    """The launch's block size (x, y, z), ``None`` where it is not a constant."""
    segments = [int(v) for v in ir.DenseI32ArrayAttr(launch.attributes["operandSegmentSizes"])]
    first = segments[0] + 3  # async dependencies, then grid x/y/z, then block x/y/z
    return tuple(_constant_index(launch.operands[first + i]) for i in range(3))


def _is_32_bit(element: ir.Type) -> bool:
    return isinstance(element, ir.F32Type) or (isinstance(element, ir.IntegerType)
                                                 and element.width == 32)


def _matches(reduce: ir.Operation) -> bool:
    """Whether ``reduce`` has the shape the rewrite handles (module docstring)."""
    guard = reduce.parent
    if guard is None or guard.name != "scf.if" or len(guard.results) != 0:
        return False
    then_ops = list(guard.regions[0].blocks[0].operations)
    if len(then_ops) != 2 or then_ops[0].operation != reduce.operation:
        return False
    if len(guard.regions[1].blocks) and len(list(guard.regions[1].blocks[0].operations)) > 1:
        return False
    launch = guard.parent
    if launch is None or launch.name != "gpu.launch":
        return False
    if len(reduce.operands) != 2 or len(reduce.results) != 0:
        return False
    partials_type = ir.MemRefType(reduce.operands[0].type)
    out_type = ir.MemRefType(reduce.operands[1].type)
    shape = list(partials_type.shape)
    dims = [int(d) for d in ir.DenseI64ArrayAttr(reduce.attributes["dimensions"])]
    if (partials_type.memory_space is None or str(partials_type.memory_space) != _WORKGROUP
            or dims != [len(shape) - 1] or any(d != 1 for d in shape[:-1])
            or any(d != 1 for d in out_type.shape)
            or not _is_32_bit(partials_type.element_type)):
        return False
    body = reduce.regions[0].blocks[0]
    if len(body.arguments) != 2 or any(len(op.regions) for op in body.operations):
        return False
    return _block_dims(launch) == (shape[-1], 1, 1)


def _clone_combiner(body: ir.Block, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """The reduce's body applied to (``lhs`` as its input, ``rhs`` as its accumulator) at the
    current insertion point; returns the yielded value."""
    mapping = {body.arguments[0]: lhs, body.arguments[1]: rhs}
    operations = list(body.operations)
    for op in operations[:-1]:
        clone = op.clone()
        for i, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[i] = mapping[operand]
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    yielded = operations[-1].operands[0]
    return mapping.get(yielded, yielded)


def _rewrite(reduce: ir.Operation) -> None:
    guard = reduce.parent
    partials, out = reduce.operands[0], reduce.operands[1]
    body = reduce.regions[0].blocks[0]
    element = ir.MemRefType(partials.type).element_type
    index = ir.IndexType.get()
    with ir.InsertionPoint(guard), reduce.location:
        zero = arith.ConstantOp(index, 0).result
        thread = gpu.ThreadIdOp(ir.Attribute.parse("#gpu<dim x>")).result
        rank = len(ir.MemRefType(partials.type).shape)
        own = memref.load(partials, [zero] * (rank - 1) + [thread])
        all_reduce = gpu.AllReduceOp(own, uniform=True)
        combiner = all_reduce.operation.regions[0].blocks.append(element, element)
        with ir.InsertionPoint(combiner):
            gpu.YieldOp([_clone_combiner(body, combiner.arguments[0], combiner.arguments[1])])
    with ir.InsertionPoint(reduce), reduce.location:
        indices = [zero] * len(ir.MemRefType(out.type).shape)
        previous = memref.load(out, indices)
        memref.store(_clone_combiner(body, all_reduce.result, previous), out, indices)
    reduce.erase()


def combine_with_warp_shuffles(module: ir.Operation) -> int:
    """Rewrite every annotated block-per-row combination that has the handled shape; drop
    the annotation from the others (they keep the one-thread combination). Returns how many
    were rewritten."""
    rewritten = 0
    for reduce in ops_where(module, lambda op: WARP_COMBINE in op.attributes):
        del reduce.attributes[WARP_COMBINE]
        if reduce.name == "linalg.reduce" and _matches(reduce):
            _rewrite(reduce)
            rewritten += 1
    return rewritten
