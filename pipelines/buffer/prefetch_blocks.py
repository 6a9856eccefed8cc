"""The next block of a block-major constant prefetched while the current one is read:
``tilecraft-prefetch-next-blocks``.

Why: a convolution's filter and a matmul's weights are stored block-major
(blocked_constants.py, graph/weight_panels.py): ``W'[b, ..., V]``, where block ``b`` holds
the ``V`` output channels (columns) of one register tile. The default schedules keep the
output channels outermost in each task (schedule/plan.py ``channels_outer``), so a task reads
block ``b`` once from memory, rereads it from L2 for its other pixel tiles (rows), then moves
on to block ``b + 1``. In a model, no weight is still cached from the previous call (ResNet-50
holds 100 MB of them), so every first pass over a block waits on memory: the hardware
prefetchers follow the stream but stop at each 4 KB page and run only a few lines ahead.
The hot loop then starves on exactly the layers whose blocks are large and reused by few
pixels (ResNet-50's 7x7 and 14x14 stages: 295-590 KB per block, 7-28 pixel tiles each),
which ran behind onnxruntime's kernels in the same rounds (docs/performance.md, round 11).

Here such a read also prefetches the same position of block ``b + 1`` (clamped to the last
block), one ``memref.prefetch`` per cache line it reads, with locality 2 (``prefetcht1`` on
x86: into L2, where the task's later passes reread the block from). Only on the first pass
over a block: the loops around the read whose induction variable it does not use (a
convolution's pixel rows and pixel tiles) reread the block, so the nest under the innermost
of them is versioned (``scf.if`` they are all at
their first iteration: a copy with the prefetches; else the nest as it was). A prefetch that
hits L2 still takes a load slot and a fill buffer: prefetching on every pass cost time on
layers that reread each block 112 times, and a guard inside the hot loop cost more
(docs/performance.md, round 11, with a C model of the 7x7x512 layer's loop).

Matmuls too: a weight matrix stored as column panels (graph/weight_panels.py,
``W'[panel, k, V]``) is read one k row at a time, and each row tile of a task cycles through
the task's panels. The loop that rereads is then outside the one that changes the block, and
the nest versioned is the one under it: the first row tile, which reads the panels from
memory, prefetches the next panel's row as it reads one (BERT's 2-layer encoder: 1.05x;
a chain of four 768 -> 3072 -> 768 FFN layers: 1.06x; docs/performance.md, round 12). The
56x56 convolutions' tasks, which cycle through every filter block per pixel tile, get the
same: a prefetching copy of the first pixel tile's cycle.

Which reads: ``vector.transfer_read`` of a ``memref.get_global`` constant (or a kernel's
weight argument, schedule/repeated_kernels.py) of rank >= 3 whose
leading dim (the blocks) is > 1, with a minor-identity map over whole rows of the last dim
(index 0, vector width = the dim; a vector that also spans the block dim, as a matmul
register tile over three panels does, reads that row of each block it spans, and the
same row of as many blocks after them is prefetched),
in bounds, inside an ``scf.for`` in which its block index does not change (the reduction
loop of one register tile), needing at most ``_MAX_PREFETCHES_PER_READ`` lines. Runs after
bufferization, before parallel loops are outlined (each task still an ``scf.forall`` body).
"""

from __future__ import annotations

import itertools
from typing import Mapping

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..ir_queries import WEIGHT_ARGUMENT, defined_functions, defining_op, ops_where
from ..loop_nest import element_bits
from ..passes import register_pass

PREFETCH_NEXT_BLOCKS = "tilecraft-prefetch-next-blocks"

# Bytes of a cache line: one prefetch per line of the read.
_LINE_BYTES = 64
# At most this many prefetches per read: a larger read (a whole panel row of a matmul
# read at once) already keeps the prefetchers busy, and its code would grow.
_MAX_PREFETCHES_PER_READ = 16
# Locality hint 2: into L2 (x86 prefetcht1). The block is reread from L2 by the task's
# other tiles; L1 holds the current block's lines.
_LOCALITY = 2
# Which block is prefetched: the next one.
_BLOCKS_AHEAD = 1


def _weight_argument(value: ir.Value) -> bool:
    """An argument of a kernel function that every call passes a weight in
    (schedule/repeated_kernels.py marks them): a constant, as ``memref.get_global`` is."""
    if not isinstance(value, ir.BlockArgument):
        return False
    function = value.owner.owner
    function = getattr(function, "operation", function)
    if function is None or function.name != "func.func" or "arg_attrs" not in function.attributes:
        return False
    attrs = ir.ArrayAttr(function.attributes["arg_attrs"])
    return value.arg_number < len(attrs) and WEIGHT_ARGUMENT in ir.DictAttr(attrs[value.arg_number])


def _global_constant(value: ir.Value) -> bool:
    op = defining_op(value)
    if (op is None or op.name != "memref.get_global") and not _weight_argument(value):
        return False
    memref_type = ir.MemRefType(value.type)
    return memref_type.rank >= 3 and memref_type.has_static_shape and memref_type.shape[0] > 1


def _invariant_in(value: ir.Value, loop: ir.Operation, depth: int = 0) -> bool:
    """Whether ``value`` does not change across ``loop``'s iterations: defined outside it, or
    a side-effect-free arith/affine op inside it on such values."""
    op = defining_op(value)
    if op is None:
        owner = ir.BlockArgument(value).owner.owner
        owner = owner.operation if hasattr(owner, "operation") else owner
        return not _inside(owner, loop)
    if not _inside(op, loop):
        return True
    if depth > 8 or not (op.name.startswith("arith.") or op.name == "affine.apply"):
        return False
    return all(_invariant_in(operand, loop, depth + 1) for operand in op.operands)


def _parent(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    return parent.operation if parent is not None and hasattr(parent, "operation") else parent


def _inside(op: ir.Operation, loop: ir.Operation) -> bool:
    """Whether ``op`` is ``loop`` or nested in it."""
    while op is not None:
        if op == loop:
            return True
        op = _parent(op)
    return False


def _enclosing_for(op: ir.Operation) -> ir.Operation | None:
    """The innermost ``scf.for`` around ``op`` within its task (None past a parallel loop)."""
    parent = _parent(op)
    while parent is not None:
        if parent.name == "scf.for":
            return parent
        if parent.name in ("func.func", "scf.forall", "scf.parallel"):
            return None
        parent = _parent(parent)
    return None


def _blocked_read(op: ir.Operation) -> bool:
    """A whole-row, in-bounds read of a block-major constant whose block index is invariant in
    its innermost ``scf.for`` (see the module docstring)."""
    if op.name != "vector.transfer_read" or not _global_constant(op.operands[0]):
        return False
    memref_type = ir.MemRefType(op.operands[0].type)
    rank = memref_type.rank
    if len(op.operands) != rank + 2:  # source, indices, padding: no mask
        return False
    vector_type = ir.VectorType(op.results[0].type)
    permutation = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    if (str(permutation) != str(ir.AffineMap.get_minor_identity(rank, vector_type.rank))
            or vector_type.rank > rank or vector_type.shape[-1] != memref_type.shape[-1]):
        return False
    if not all(ir.BoolAttr(flag).value for flag in ir.ArrayAttr(op.attributes["in_bounds"])):
        return False
    last = defining_op(op.operands[rank])
    if last is None or last.name != "arith.constant" or ir.IntegerAttr(last.attributes["value"]).value != 0:
        return False
    loop = _enclosing_for(op)
    return loop is not None and _invariant_in(op.operands[1], loop)


def _row_shape(read: ir.Operation) -> tuple[int, int, list[int]]:
    """(the first memref dim the vector spans past the block dim, the blocks it spans, the
    vector's shape over the dims from there). A vector that also spans the block dim
    (``vector<3x1x16>`` of a matmul register tile over three panels) reads the same row of
    each of its blocks; one that does not reads one block."""
    shape = ir.VectorType(read.results[0].type).shape
    covered = ir.MemRefType(read.operands[0].type).rank - len(shape)
    if covered == 0:
        return 1, shape[0], shape[1:]
    return covered, 1, shape


def _line_offsets(read: ir.Operation) -> list[tuple[int, ...]]:
    """Offsets (the block within the read's, then one per vector dim past the block dim) of
    the first element of each cache line ``read`` covers; rows of the last dim are
    contiguous, so a row takes ``ceil(bytes / line)`` lines."""
    _covered, blocks, (*rows, width) = _row_shape(read)
    per_line = max(_LINE_BYTES * 8 // element_bits(read.operands[0].type), 1)
    columns = range(0, width, per_line)
    return [(block, *row, column) for block in range(blocks)
            for row in itertools.product(*(range(n) for n in rows)) for column in columns]


def _uses(value: ir.Value, argument: ir.Value, depth: int = 0) -> bool:
    """Whether ``value`` is computed from ``argument`` (through arith/affine ops)."""
    if value == argument:
        return True
    op = defining_op(value)
    if op is None or depth > 8:
        return False
    return any(_uses(operand, argument, depth + 1) for operand in op.operands)


def _first_pass_loops(read: ir.Operation) -> list[ir.Operation]:
    """The loops around ``read`` (within its task) that reread its block, innermost first:
    those whose induction variable none of its indices use. Inside the loop where its block
    index changes: a convolution's pixel rows and pixel tiles (the reduction loops over taps
    and input channels are used and walk the block). Outside it: a matmul's row tiles, each
    of which cycles through the task's weight panels, and the 56x56 convolutions' rows and
    pixel tiles, each of which cycles through every filter block. The first pass over a
    block is the one where all of them are at their first iteration."""
    indices = list(read.operands)[1:ir.MemRefType(read.operands[0].type).rank + 1]

    loops = []
    loop = _enclosing_for(read)
    while loop is not None:
        induction = loop.regions[0].blocks[0].arguments[0]
        if not any(_uses(index, induction) for index in indices):
            loops.append(loop)
        loop = _enclosing_for(loop)
    return loops


def _prefetch_lines(read: ir.Operation) -> None:
    """Prefetch, before ``read``, the lines of the next blocks (as many as it reads) at the
    position it reads."""
    source = read.operands[0]
    memref_type = ir.MemRefType(source.type)
    rank = memref_type.rank
    indices = list(read.operands)[1:rank + 1]
    covered, blocks, _shape = _row_shape(read)  # covered: the dims before the vector's rows
    index = ir.IndexType.get()
    with ir.InsertionPoint(read), read.location:
        last_block = arith.constant(index, memref_type.shape[0] - 1)
        following = [arith.minui(arith.addi(indices[0], arith.constant(index, blocks * _BLOCKS_AHEAD + block)),
                                 last_block) for block in range(blocks)]
        shifts: dict[tuple[int, int], ir.Value] = {}

        def shifted(dim: int, by: int) -> ir.Value:
            """The read's index of vector dim ``dim`` plus ``by`` (made once)."""
            if by == 0:
                return indices[covered + dim]
            if (dim, by) not in shifts:
                shifts[dim, by] = arith.addi(indices[covered + dim], arith.constant(index, by))
            return shifts[dim, by]

        for block, *offset in _line_offsets(read):
            at = [following[block], *indices[1:covered], *(shifted(dim, by) for dim, by in enumerate(offset))]
            memref.prefetch(source, at, False, _LOCALITY, True)


def _few_lines(read: ir.Operation) -> bool:
    return len(_line_offsets(read)) <= _MAX_PREFETCHES_PER_READ


def _nest_in(read: ir.Operation, loop: ir.Operation) -> ir.Operation:
    """The op of ``loop``'s body that holds ``read`` (its reduction nest, or the read)."""
    op = read
    while _parent(op) != loop:
        op = _parent(op)
    return op


def _transfer_reads(root: ir.Operation) -> list[ir.Operation]:
    return ops_where(root, lambda op: op.name == "vector.transfer_read")


def prefetch_on_first_pass(nest: ir.Operation, rereading: list[ir.Operation],
                           reads: list[ir.Operation]) -> None:
    """Version ``nest`` (the loops under the innermost of ``rereading`` that walk the
    blocks of ``reads``): when every loop of ``rereading`` is at its first iteration, a copy
    of the nest whose reads also prefetch the next block runs; otherwise the nest as it was.

    Why a version and not a guard in the loop: a prefetch that hits L2 still takes a load
    slot and a fill buffer, and an ``scf.if`` around the prefetches inside the hot loop
    made LLVM's code for it slower (28x28x128 3x3 layers); prefetching on every pass
    (branch-free) cost time there too (docs/performance.md, round 11)."""
    position = [i for i, op in enumerate(_transfer_reads(nest)) if any(op == read for read in reads)]
    with ir.InsertionPoint(nest), nest.location:
        first = None
        for loop in rereading:
            at_start = arith.cmpi(arith.CmpIPredicate.eq, loop.regions[0].blocks[0].arguments[0],
                                  loop.operands[0])
            first = at_start if first is None else arith.andi(first, at_start)
        version = scf.IfOp(first, [result.type for result in nest.results], has_else=True)
    for result, replacement in zip(nest.results, version.results):
        result.replace_all_uses_with(replacement)
    with ir.InsertionPoint(version.then_block), nest.location:
        copy = nest.clone()
        scf.YieldOp(list(copy.results))
    with ir.InsertionPoint(version.else_block), nest.location:
        keep = scf.YieldOp(list(nest.results))
    nest.move_before(keep.operation)
    copied = _transfer_reads(copy)
    for i in position:
        _prefetch_lines(copied[i])


@register_pass(
    PREFETCH_NEXT_BLOCKS,
    "Reads of a block-major constant (filter, weight panels) also prefetch the next block "
    "into L2 on their first pass over a block, so that it does not wait on memory",
)
def prefetch_next_blocks_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        groups: list[tuple[ir.Operation, list[ir.Operation], list[ir.Operation]]] = []
        for read in ops_where(function, lambda op: _blocked_read(op) and _few_lines(op)):
            rereading = _first_pass_loops(read)
            if not rereading:
                _prefetch_lines(read)  # each block is read once: every pass is the first
                continue
            nest = _nest_in(read, rereading[0])
            for group_nest, _loops, group_reads in groups:
                if group_nest == nest:
                    group_reads.append(read)
                    break
            else:
                groups.append((nest, rereading, [read]))
        for nest, rereading, reads in groups:
            prefetch_on_first_pass(nest, rereading, reads)
