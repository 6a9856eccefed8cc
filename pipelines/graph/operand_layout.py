"""Contraction operands in the layout the schedule vectorizes: ``tilecraft-contraction-operand-layout``.

The default schedule vectorizes a contraction along the output's innermost dim (N of a
matmul) and keeps accumulators of that width in registers. An operand that carries that dim
but not innermost — ``linalg.matmul`` with a transposed-B map (``(m, n, k) -> (n, k)``), a
batch matmul or contraction generic reading ``B[b, n, k]`` — is then read one lane at a time
(each vector gathered across rows K apart), well below numpy's ``a @ b.T``
(docs/performance.md).

This pass gives such an operand a ``linalg.transpose`` into the order whose innermost dim is
the output's innermost (``(n, k)`` -> ``(k, n)``) and rewrites the op's indexing map to read
it, where that transpose costs nothing at run time or is computed once per element:

- a constant operand (weights): ``tilecraft-fold-constants``, which runs next, transposes it
  at compile time;
- an operand of a batched contraction (einsum's ``bmk,bnk->bmn``, attention's Q·K^T): the
  transpose is a producer the fusion group computes per task, and tasks split the batch, not
  M (``plan_contraction``), so each head is transposed once (measured faster).

A non-constant operand of an unbatched contraction is left as it is: its tasks split M as
well, each would transpose the same columns again (measured slower).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from ...ir.maps import indexing_maps, set_indexing_maps
from ...ir import core
from ..ir_queries import defined_functions, ops_where
from ..passes import register_pass
from .constant_folding import ConstantAnalysis

_CONTRACTIONS = frozenset({"linalg.matmul", "linalg.batch_matmul", "linalg.generic"})


def _maps(op: ir.Operation) -> list[ir.AffineMap] | None:
    if "indexing_maps" not in op.attributes:
        return None
    return indexing_maps(op)


def _is_contraction(op: ir.Operation) -> bool:
    """Two static tensor inputs, one output, a reduction loop, explicit indexing maps."""
    if op.name not in _CONTRACTIONS or len(op.operands) != 3 or len(op.results) != 1:
        return False
    if _maps(op) is None:
        return False  # a named op without maps reads its operands in the default layout
    if op.name == "linalg.generic":
        iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        if not any("reduction" in it for it in iterators):
            return False
    return all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
               for v in op.operands)


def _dims(affine_map: ir.AffineMap) -> list[int] | None:
    """The loop dim of each result, or ``None`` unless every result is a distinct dim."""
    dims = []
    for expr in affine_map.results:
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        dims.append(expr.position)
    return dims if len(set(dims)) == len(dims) else None


def reorder_operands(op: ir.Operation, constants: ConstantAnalysis) -> bool:
    """Transpose the inputs of ``op`` that carry the output's innermost dim elsewhere, where
    that is free or done once per element (module docstring); False when none is."""
    maps = _maps(op)
    output_dims = _dims(maps[-1])
    if not output_dims:
        return False
    innermost = output_dims[-1]
    input_dims = [_dims(m) for m in maps[:2]]
    batched = any(all(d is not None and o in d for d in input_dims) for o in output_dims)
    changed = False
    for index in range(2):
        dims = input_dims[index]
        if dims is None or innermost not in dims or dims[-1] == innermost:
            continue
        if not (batched or constants.value_is_constant(op.operands[index])):
            continue
        order = [i for i, d in enumerate(dims) if d != innermost] + [dims.index(innermost)]
        with ir.InsertionPoint(op), op.location:
            op.operands[index] = core.transpose(op.operands[index], order)
        maps[index] = ir.AffineMap.get(maps[index].n_dims, 0,
                                       [ir.AffineDimExpr.get(dims[i]) for i in order])
        changed = True
    if changed:
        set_indexing_maps(op, maps)
    return changed


@register_pass(
    "tilecraft-contraction-operand-layout",
    "Transpose contraction operands that carry the output's innermost dim elsewhere "
    "(B^T of a matmul) so the schedule reads them as vectors",
)
def contraction_operand_layout_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        constants = ConstantAnalysis()
        for op in ops_where(function, _is_contraction):
            reorder_operands(op, constants)
