"""Keep upstream elementwise fusion from duplicating work into reductions (and reshapes from
folding into named contractions).

Why these passes exist: upstream ``linalg-fuse-elementwise-ops`` fuses an elementwise
producer into *any* consumer ``linalg.generic`` whose operand it feeds once — including a
contraction. Its reshape folding first turns ``collapse_shape -> linalg.matmul`` into a 3-D
``linalg.generic`` with a reduction loop, and then a GELU (or an attention scaling) that feeds
the matmul's left operand moves into the matmul's body: it is recomputed for every column, N
times per element (a linear -> GELU -> linear block ran orders of magnitude slower than its
two halves; docs/performance.md). TVM's FuseOps rule is the one wanted: never fuse when it duplicates work. Upstream
offers that choice only through a C++ control function, so:

- ``tilecraft-fusion-barriers`` finds each elementwise producer whose result (through
  reshapes) is read by an op with reduction loops *not* along all of that op's loops — a
  contraction, convolution or pooling input — and gives it a second use: a call to an
  external, side-effecting barrier function. Upstream fusion only fuses single-use producers.
- ``tilecraft-drop-fusion-barriers`` erases the calls and their declarations afterwards.

The producer still fuses with its own elementwise producers and consumers; only the
duplicating fusion is refused. A reshape that feeds a named contraction, convolution or
pooling input gets a barrier too: folded in, it turns the named op into a generic with
several reduction loops, which the schedule vectorizes into a ``vector.contract`` with two
reduction dims that lowers element by element.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import func

from ...ir.maps import indexing_maps
from ..ir_queries import RESHAPE_OPS, defining_op

PANELS_ATTR = "tilecraft.weight_panels"  # graph/weight_panels.py's mark
from ..passes import register_pass

INSERT_BARRIERS = "tilecraft-fusion-barriers"
DROP_BARRIERS = "tilecraft-drop-fusion-barriers"
_BARRIER_PREFIX = "__tilecraft_fusion_barrier"

# Named linalg ops with reduction loops whose every input is reused across some loop (so a
# producer fused into them would be recomputed): contractions, convolutions, pooling.
_REUSING_PREFIXES = (
    "linalg.matmul", "linalg.batch_matmul", "linalg.batch_reduce_matmul", "linalg.matvec",
    "linalg.vecmat", "linalg.batch_matvec", "linalg.batch_vecmat", "linalg.dot",
    "linalg.contract", "linalg.mmt4d", "linalg.batch_mmt4d", "linalg.conv_",
    "linalg.depthwise_conv_", "linalg.pooling_",
)


def _iterator_types(op: ir.Operation) -> list[str]:
    return [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]


def _is_elementwise_generic(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and all("parallel" in t for t in _iterator_types(op))


def _reused_inputs(op: ir.Operation) -> list[int]:
    """Input operand indexes of ``op`` that a fused producer would be recomputed for."""
    name = op.name
    if name.startswith(_REUSING_PREFIXES):
        return list(range(len(op.operands) - len(op.results)))
    if name != "linalg.generic":
        return []
    iterators = _iterator_types(op)
    if all("parallel" in t for t in iterators):
        return []
    maps = indexing_maps(op)
    num_inputs = len(op.operands) - len(op.results)
    reused = []
    for index in range(num_inputs):
        used = {str(e) for e in maps[index].results if str(e).startswith("d")}
        if len(used) < len(iterators):
            reused.append(index)
    return reused


def _producer_through_reshapes(value: ir.Value) -> ir.Value | None:
    """The elementwise ``linalg.generic`` result ``value`` comes from, looking through
    reshapes (which upstream fusion folds away), or ``None``."""
    while isinstance(value, ir.OpResult):
        op = value.owner
        op = op.operation if isinstance(op, ir.OpView) else op
        if op.name in RESHAPE_OPS:
            value = op.operands[0]
            continue
        return value if _is_elementwise_generic(op) else None
    return None  # a block argument


def _barrier_callee(module: ir.Operation, value_type: ir.Type, declared: dict[str, str]) -> str:
    key = str(value_type)
    if key not in declared:
        name = f"{_BARRIER_PREFIX}_{len(declared)}"
        with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]), ir.Location.unknown():
            declaration = func.FuncOp(name, ir.FunctionType.get([value_type], []))
            declaration.attributes["sym_visibility"] = ir.StringAttr.get("private")
        declared[key] = name
    return declared[key]


@register_pass(
    INSERT_BARRIERS,
    "give elementwise producers of contraction/convolution/pooling inputs a barrier use, so "
    "linalg-fuse-elementwise-ops does not recompute them per reduction step",
)
def insert_fusion_barriers(module: ir.Operation, options: Mapping[str, str]) -> None:
    guarded: dict[ir.Value, None] = {}  # insertion-ordered set: barriers in program order

    def visit(op: ir.Operation) -> ir.WalkResult:
        for index in _reused_inputs(op):
            operand = op.operands[index]
            producer = _producer_through_reshapes(operand)
            if producer is not None:
                guarded[producer] = None
            reshape = defining_op(operand)
            if op.name.startswith(_REUSING_PREFIXES) and reshape is not None and reshape.name in RESHAPE_OPS:
                # A reshape folded into a named contraction makes it a generic with several
                # reduction loops (attention's heads x head_dim feeding the output
                # projection): its vector.contract keeps two reduction dims, which lowered
                # to element-by-element code (BERT's output projection ran scalar).
                guarded[operand] = None
        if (op.name == "linalg.generic" and PANELS_ATTR in op.attributes
                and isinstance(op.operands[0], ir.OpResult)):
            # A matmul on weight panels (graph/weight_panels.py): its result is collapsed
            # back to 2-D, and upstream reshape propagation would carry that collapse through
            # the epilogue into the next panel matmul's A, splitting its K loop in two
            # (the same two-reduction-dim vector.contract as above). A second use of A stops
            # the fold, which only takes single-use reshapes.
            guarded[op.operands[0]] = None
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    declared: dict[str, str] = {}
    for value in guarded:
        callee = _barrier_callee(module, value.type, declared)
        owner = value.owner
        owner = owner.operation if isinstance(owner, ir.OpView) else owner
        with ir.InsertionPoint.after(owner), owner.location:
            func.CallOp([], ir.FlatSymbolRefAttr.get(callee), [value])


@register_pass(DROP_BARRIERS, f"erase the barrier calls {INSERT_BARRIERS} inserted")
def drop_fusion_barriers(module: ir.Operation, options: Mapping[str, str]) -> None:
    doomed: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(_BARRIER_PREFIX):
            doomed.append(op)
        elif op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value.startswith(_BARRIER_PREFIX):
            doomed.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in doomed:
        op.erase()
