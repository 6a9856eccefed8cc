"""``tilecraft-contiguous-reduction-loops``: a reduction ``linalg.generic`` that reads an
input in another order than its loops runs them in that input's order instead, so that the
loop over the input's contiguous dim is innermost.

Why: after the layout pass (``tilecraft-convert-layout``) a global average pooling of an
NHWC image still iterates ``(n, c, h, w)`` (its input map ``(d0, d2, d3, d1)``), the two
reduced loops innermost. The schedule already vectorizes it along the channels
(schedule/plan.py ``generic_vector_dim``), but the vectorizer keeps the op's loop order,
so the vectors are ``vector<1x64x1x1xf32>``: a unit dim innermost. LLVM lowers an n-D
vector as nested arrays of its innermost dim, one lane here, so every op of the body ran
one lane at a time. With the elementwise producers fused into the pooling (EfficientNet's
SiLU before its head pool and in every squeeze-excite block, MobileNetV3's hardswish),
exp and division included, EfficientNet's head pool took 0.17 ms on one thread against
onnxruntime's 0.016 (docs/performance.md, "Small groups on one thread"). In the input's
order, ``(n, h, w, c)`` with the output map ``(d0, d3)``, the same body vectorizes as
``vector<1x1x1x64xf32>``.

Only the loops are renamed: the body, operands and results are unchanged, each map is
composed with the permutation. Left alone: generics without a reduction loop (a transpose
is an all-parallel op that reads one order and writes another; schedule/plan.py gives it
square register tiles), with dynamic shapes or ``linalg.index`` in the body, ops whose
innermost loop is already parallel, and ops with no input read through a permutation of
all their loops (contractions, convolutions written as generics).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from ...ir.maps import indexing_maps, result_dims, set_indexing_maps
from ..ir_queries import defined_functions, ops_where
from ..passes import register_pass

CONTIGUOUS_REDUCTION_LOOPS = "tilecraft-contiguous-reduction-loops"


def _static(op: ir.Operation) -> bool:
    return all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
               for v in (*op.operands, *op.results))


def loop_order(op: ir.Operation) -> list[int] | None:
    """The new order of generic ``op``'s loops (new loop ``j`` is old loop ``order[j]``):
    the dims of its largest input read through a permutation of all the loops, when the
    op reduces, its innermost loop is a reduction and that input's contiguous dim is a
    parallel loop; ``None`` otherwise (module docstring)."""
    if op.name != "linalg.generic" or not _static(op):
        return None
    iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    if not iterators or "parallel" in iterators[-1] or not any("reduction" in t for t in iterators):
        return None
    if ops_where(op, lambda inner: inner.name == "linalg.index"):
        return None
    n_loops = len(iterators)
    n_inputs = len(op.operands) - len(op.results)
    candidates = []
    for value, affine_map in zip(list(op.operands)[:n_inputs], indexing_maps(op)):
        dims = result_dims(affine_map)
        if dims is not None and sorted(dims) == list(range(n_loops)):
            size = 1
            for extent in ir.RankedTensorType(value.type).shape:
                size *= extent
            candidates.append((size, dims))
    if not candidates:
        return None
    _size, order = max(candidates, key=lambda candidate: candidate[0])
    if order == list(range(n_loops)) or "parallel" not in iterators[order[-1]]:
        return None
    return order


def reorder_loops(op: ir.Operation, order: list[int]) -> None:
    """Rename generic ``op``'s loops in place: new loop ``j`` is old loop ``order[j]``."""
    n_loops = len(order)
    # Old loop i is new loop order.index(i): substituted into each map.
    old_as_new = ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(order.index(i)) for i in range(n_loops)])
    set_indexing_maps(op, [
        ir.AffineMap.get(n_loops, affine_map.n_symbols, [expr.compose(old_as_new) for expr in affine_map.results])
        for affine_map in indexing_maps(op)])
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[i] for i in order])


@register_pass(
    CONTIGUOUS_REDUCTION_LOOPS,
    "a reduction generic reading its input through a permutation (an NHWC global pool "
    "iterated (n, c, h, w)) runs its loops in the input's order: no unit dim innermost in "
    "its vectors",
)
def contiguous_reduction_loops_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for op in ops_where(function, lambda candidate: candidate.name == "linalg.generic"):
            order = loop_order(op)
            if order is not None:
                reorder_loops(op, order)
