"""Collapse multi-dimensional ``scf.parallel`` loops into one dimension before
``async-parallel-for``.

Why this pass exists: MLIR 22's ``async-parallel-for`` computed wrong results for some
multi-dimensional loops. It splits the iteration space into a fixed number of blocks (16 for
two workers), rounds the block size up to a multiple of the inner loops' trip count (its
"aligned loops" path) but keeps the block count, so the last blocks start past the end and
wrap around (``(first / inner) % outer``): they run rows that other blocks run too. A
25 x 5 loop became 16 blocks of 10 iterations, 160 for 125; a 1000x1000 matmul tiled into
25 x 5 tasks computed some tiles two to four times (racing with itself, or accumulating into
its output). A one-dimensional loop takes the unaligned path, whose last block is clamped.

The collapsed loop iterates ``0 .. prod(trip counts)``; each original induction variable is
recovered as ``lb + ((iv floordiv stride) mod trip) * step``. Loops with reductions
(``init`` values) or bounds that are not constants are left as they are.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith

from ..ir_queries import ops_where
from ..passes import register_pass

COLLAPSE_PARALLEL_LOOPS = "tilecraft-collapse-parallel-loops"


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    op = getattr(owner, "operation", owner)
    if not isinstance(op, ir.Operation) or op.name != "arith.constant":
        return None
    attribute = op.attributes["value"]
    return ir.IntegerAttr(attribute).value if isinstance(attribute, ir.IntegerAttr) else None


def _bounds(loop: ir.Operation) -> tuple[list[int], list[int], list[int]] | None:
    """Constant (lower bounds, upper bounds, steps) of a loop without reductions, or None."""
    sizes = ir.DenseI32ArrayAttr(loop.attributes["operandSegmentSizes"])
    rank, inits = sizes[0], sizes[3]
    if inits:
        return None
    values = [_constant(v) for v in loop.operands]
    if any(v is None for v in values):
        return None
    return values[:rank], values[rank:2 * rank], values[2 * rank:3 * rank]


def collapse(loop: ir.Operation) -> bool:
    """Rewrite ``loop`` (a multi-dimensional ``scf.parallel``) as a 1-D loop; False if it
    cannot (reductions, non-constant bounds, one dimension already)."""
    bounds = _bounds(loop)
    if bounds is None or len(bounds[0]) < 2:
        return False
    lowers, uppers, steps = bounds
    trips = [max(0, -(-(u - lb) // s)) for lb, u, s in zip(lowers, uppers, steps)]
    total = 1
    for trip in trips:
        total *= trip
    index = ir.IndexType.get()
    strides = []
    stride = total
    for trip in trips:
        stride //= trip
        strides.append(stride)
    constants: dict[int, ir.Value] = {}
    with ir.InsertionPoint(loop), loop.location:
        for value in {0, 1, total, *strides, *trips, *lowers, *steps}:
            constants[value] = arith.ConstantOp(index, value).result
        collapsed = ir.Operation.create(
            "scf.parallel", results=[], operands=[constants[0], constants[total], constants[1]],
            attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 1, 0])},
            regions=1,
        )
    old_body = loop.regions[0].blocks[0]
    body = collapsed.regions[0].blocks.append(index, arg_locs=[loop.location])
    with ir.InsertionPoint(body), loop.location:
        iv = body.arguments[0]
        for old_iv, lb, step, trip, stride in zip(old_body.arguments, lowers, steps, trips, strides):
            value = arith.RemUIOp(arith.DivUIOp(iv, constants[stride]).result, constants[trip]).result
            if step != 1:
                value = arith.MulIOp(value, constants[step]).result
            if lb != 0:
                value = arith.AddIOp(value, constants[lb]).result
            old_iv.replace_all_uses_with(value)
        for op in list(old_body.operations):
            op = op.operation
            clone = op.clone()
            for old, new in zip(op.results, clone.results):
                old.replace_all_uses_with(new)
    loop.erase()
    return True


@register_pass(
    COLLAPSE_PARALLEL_LOOPS,
    "Collapse multi-dimensional scf.parallel loops into one dimension (works around "
    "async-parallel-for running some blocks twice)",
)
def collapse_parallel_loops_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    # Inner loops first: collapsing an outer loop clones its body, inner loops included.
    for loop in ops_where(module, lambda op: op.name == "scf.parallel", post_order=True):
        collapse(loop)
