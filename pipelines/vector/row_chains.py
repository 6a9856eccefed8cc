"""``tilecraft-elementwise-by-rows``: a run of elementwise ops on an n-D vector (a
register tile's epilogue) computed one 1-D row at a time instead of one op at a time.

Why: a kernel's register tile is an n-D vector (a 1x1 convolution's 8x32 f32 accumulators,
16 AVX-512 registers), and its fused epilogue (bias, SiLU with its ~25-instruction
polynomial exp, the product) is a chain of ops on that n-D vector. ``convert-vector-to-llvm``
splits each op into its rows where it stands, so LLVM receives the chain op-major: the
first op on all 16 registers, then the second on all 16, ... Every intermediate of every
row is live at once: with the 16 accumulators, the 13 splatted constants of the exp and its
temporaries the 32 registers overflow, and the epilogue of EfficientNet's 112x112 16 -> 96
expansion spent more on spills and reloads than on its arithmetic (docs/performance.md,
"Sigmoid and SiLU epilogues"). LLVM's schedulers do not undo that order. Row-major order
keeps one row's chain in flight: its temporaries die before the next row starts, and its
result is ready for its store.

What the pass does, per block: a *run* is a maximal sequence of consecutive ops that are
elementwise arith/math ops on vectors of one n-D shape (n >= 2), plus splat constants and
broadcasts from a row (``vector.broadcast`` of a 1-D vector to the shape), which stay where
they are. The run is re-emitted after its last op as each row's chain in turn (operands from
outside the run are taken row by row with ``vector.extract``, which canonicalization folds
into the row of a splat, of a broadcast or of the 1-D pieces the value was made of); results
used after the run are put back together with ``vector.insert``, so the IR after it is
unchanged (the unrolled stores' ``vector.extract`` of a row folds to the row).

It runs after tilecraft-approximate-exp, so the exp's polynomial is part of the chain. LLVM
still moves instructions across rows (the machine scheduler interleaves them for latency),
so spills remain, fewer: measured, not assumed (docs/performance.md).
"""

from __future__ import annotations

import itertools
from typing import Mapping, Sequence

from mlir import ir
from mlir.dialects import ub, vector

from ..passes import register_pass

ELEMENTWISE_BY_ROWS = "tilecraft-elementwise-by-rows"

# Dialects whose vector ops (other than those in _NOT_ELEMENTWISE) apply lane by lane.
_ELEMENTWISE_DIALECTS = ("arith", "math")
_NOT_ELEMENTWISE = frozenset({"arith.constant"})
# Ops a run may hold that stay where they are (splats, row broadcasts: _is_movable_source).
_MOVABLE = frozenset({"arith.constant", "vector.broadcast"})


def _vector_shape(value: ir.Value) -> tuple[int, ...] | None:
    if not isinstance(value.type, ir.VectorType):
        return None
    vector_type = ir.VectorType(value.type)
    if vector_type.scalable:
        return None
    return tuple(vector_type.shape)


def _is_elementwise(op: ir.Operation, shape: tuple[int, ...]) -> bool:
    """An arith/math op with one result, whose operands and result all have ``shape``."""
    if op.name.split(".")[0] not in _ELEMENTWISE_DIALECTS or op.name in _NOT_ELEMENTWISE:
        return False
    if len(op.results) != 1 or len(op.regions) != 0:
        return False
    return all(_vector_shape(v) == shape for v in (*op.operands, op.results[0]))


def _is_movable_source(op: ir.Operation, shape: tuple[int, ...]) -> bool:
    """A splat constant or a broadcast of a 1-D row to ``shape``: pure, and each row of it
    folds to a 1-D value."""
    if len(op.results) != 1 or _vector_shape(op.results[0]) != shape:
        return False
    if op.name == "arith.constant":
        return isinstance(op.attributes["value"], ir.DenseElementsAttr) and ir.DenseElementsAttr(
            op.attributes["value"]).is_splat
    if op.name == "vector.broadcast":
        return _vector_shape(op.operands[0]) == shape[-1:]
    return False


def _runs(block: ir.Block) -> list[list[ir.Operation]]:
    """Maximal runs of consecutive elementwise ops of one n-D shape (n >= 2), with the
    splats and row broadcasts among them; a run holds at least two elementwise ops."""
    runs: list[list[ir.Operation]] = []
    current: list[ir.Operation] = []
    shape: tuple[int, ...] | None = None

    def close() -> None:
        if sum(1 for op in current if op.name not in _MOVABLE) >= 2:
            runs.append(list(current))
        current.clear()

    for op in block.operations:
        op = op.operation
        result_shape = _vector_shape(op.results[0]) if len(op.results) == 1 else None
        if shape is not None and (_is_elementwise(op, shape) or _is_movable_source(op, shape)):
            current.append(op)
            continue
        close()
        shape = None
        if result_shape is not None and len(result_shape) >= 2 and _is_elementwise(op, result_shape):
            shape = result_shape
            current.append(op)
    close()
    return runs


def _row_type(value: ir.Value) -> ir.Type:
    return ir.VectorType.get(ir.VectorType(value.type).shape[-1:], ir.VectorType(value.type).element_type)


def _rewrite(run: Sequence[ir.Operation]) -> None:
    """Emit ``run`` (from :func:`_runs`) row by row after its last op and replace its
    results' uses after it by the rows put back together."""
    shape = _vector_shape(run[0].results[0])
    in_run = {op.results[0]: op for op in run}
    last = run[-1]
    rows: dict[ir.Value, list[ir.Value]] = {}
    positions = list(itertools.product(*(range(n) for n in shape[:-1])))
    computed = [op for op in run if op.name not in _MOVABLE]
    with ir.InsertionPoint.after(last), last.location:
        for index, position in enumerate(positions):
            outside: dict[ir.Value, ir.Value] = {}  # this row of each operand from outside the chain
            for op in computed:
                operands = []
                for operand in op.operands:
                    if operand in rows:
                        operands.append(rows[operand][index])
                        continue
                    if operand not in outside:
                        outside[operand] = vector.extract(operand, [], list(position))
                    operands.append(outside[operand])
                attributes = {name: op.attributes[name] for name in op.attributes}
                new = ir.Operation.create(op.name, results=[_row_type(op.results[0])], operands=operands,
                                          attributes=attributes, loc=op.location)
                rows.setdefault(op.results[0], []).append(new.results[0])
        for op in run:
            result = op.results[0]
            if result not in rows or all(use.owner in in_run.values() for use in result.uses):
                continue
            whole = ub.poison(result.type)
            for index, position in enumerate(positions):
                whole = vector.insert(rows[result][index], whole, [], list(position))
            result.replace_all_uses_with(whole)
    for op in reversed(run):
        if not list(op.results[0].uses):
            op.erase()


@register_pass(ELEMENTWISE_BY_ROWS,
               "Runs of elementwise ops on an n-D vector (a register tile's epilogue) emitted "
               "row by row, so LLVM keeps one row's temporaries live instead of every row's")
def elementwise_by_rows_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    blocks: list[ir.Block] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            blocks.extend(region.blocks)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for block in blocks:
        for run in _runs(block):
            _rewrite(run)
