"""``tilecraft-drop-inner-unit-dims``: the unit dims a ``linalg.generic``'s result ends
with are dropped from the op, so that no unit loop is its innermost parallel loop.

Why: upstream ``linalg-fuse-elementwise-ops`` folds reshapes into generics by expansion.
A ``tensor.expand_shape`` that appends unit dims to a reduction's result (PyTorch's
``adaptive_avg_pool2d(1)``, imported as a ``mean`` over H and W with ``keepdim``:
``[1, 1000] -> [1, 1000, 1, 1]``) is pushed up into the reduction, then into the ReLU and
the 1x1 convolution before it, which end up computing ``[1, 13, 13, 1000, 1, 1]``. The
schedule vectorizes and register-tiles the innermost loops, here two unit loops: the
classifier of SqueezeNet ran one lane wide, 2x slower than the same model imported from
ONNX (docs/performance.md, "The PyTorch route's graph"). Teaching the planners to skip
unit loops was tried and was slower; the IR is what should not carry them.

Why not upstream ``linalg-fold-unit-extent-dims``: it drops every unit dim, the leading
batch dim of every op too, which changes the rank of every op the planners were tuned on
(and rank-reduces named ops into generics). Here only the unit dims after a result's last
dim of extent > 1 go, and only from generics: those are the ones that leave a unit loop
innermost. The op computes the same values on a collapsed init; a
``tensor.expand_shape`` gives the result its former shape back, and ``canonicalize``
cancels it against the ``tensor.collapse_shape`` the next such generic makes of its
operand, so a chain of them carries the short shape throughout.

Left alone: generics with dynamic shapes, with ``linalg.index`` in the body (dropping a
loop renumbers the others), and those where a unit loop to drop is read through a
compound expression (``d2 + d4``) or is a reduction loop.
"""

from __future__ import annotations

import re
from typing import Mapping

from mlir import ir

from ...ir.maps import indexing_maps, set_indexing_maps
from ...ir.reduction import drop_unit_dims, expand_dims
from ..ir_queries import defined_functions, fresh_init, ops_where
from ..passes import register_pass

DROP_INNER_UNIT_DIMS = "tilecraft-drop-inner-unit-dims"


def _static_tensors(values) -> bool:
    return all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
               for v in values)


def _reads_index(op: ir.Operation) -> bool:
    return bool(ops_where(op, lambda inner: inner.name == "linalg.index"))


def _plain_dim(expr: ir.AffineExpr) -> int | None:
    return expr.position if isinstance(expr, ir.AffineDimExpr) else None


def droppable_loops(op: ir.Operation) -> list[int]:
    """The loops of generic ``op`` to drop: those its results' trailing unit dims run over
    (each a parallel loop read only as a plain dim); empty when there are none or when the
    op is one this pass leaves alone (module docstring)."""
    if op.name != "linalg.generic" or not _static_tensors(list(op.operands) + list(op.results)):
        return []
    maps = indexing_maps(op)
    iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    n_inputs = len(op.operands) - len(op.results)
    loops: set[int] | None = None
    for index, result in enumerate(op.results):
        shape = ir.RankedTensorType(result.type).shape
        wide = [position for position, extent in enumerate(shape) if extent != 1]
        if not wide:
            return []  # a scalar-like result: its unit dims are leading ones, kept
        trailing = [_plain_dim(maps[n_inputs + index].results[p]) for p in range(wide[-1] + 1, len(shape))]
        if None in trailing:
            return []
        if loops is None:
            loops = set(trailing)
        elif loops != set(trailing):
            return []  # results that end in different loops: not one rewrite
    if not loops or any("parallel" not in iterators[loop] for loop in loops):
        return []
    names = [re.compile(rf"\bd{loop}\b") for loop in loops]
    for affine_map in maps:
        for expr in affine_map.results:
            if _plain_dim(expr) is None and any(name.search(str(expr)) for name in names):
                return []  # read through a compound expression
    if _reads_index(op):
        return []
    return sorted(loops)


def drop_loops(op: ir.Operation, loops: list[int]) -> None:
    """Rebuild generic ``op`` without ``loops`` (unit, parallel, read as plain dims): each
    operand's dims over them collapsed away, each result expanded back after it."""
    maps = indexing_maps(op)
    n_loops = maps[0].n_dims
    kept = [loop for loop in range(n_loops) if loop not in loops]
    renumber = ir.AffineMap.get(len(kept), 0, [
        ir.AffineDimExpr.get(kept.index(loop)) if loop in kept else ir.AffineConstantExpr.get(0)
        for loop in range(n_loops)])
    n_results = len(op.results)
    n_inputs = len(op.operands) - n_results
    new_maps, new_operands, result_positions = [], [], []
    with ir.InsertionPoint(op), op.location:
        for index, (value, affine_map) in enumerate(zip(op.operands, maps)):
            positions = [p for p, expr in enumerate(affine_map.results) if _plain_dim(expr) in loops]
            # An init that is only a destination (empty, or a fill of one) is made anew in the
            # short shape rather than collapsed: nothing is left reading the long one.
            fresh = None if index < n_inputs or not positions else fresh_init(value, [
                extent for p, extent in enumerate(ir.RankedTensorType(value.type).shape) if p not in positions])
            new_operands.append(fresh if fresh is not None else drop_unit_dims(value, positions))
            new_maps.append(ir.AffineMap.get(len(kept), affine_map.n_symbols, [
                expr.compose(renumber) for p, expr in enumerate(affine_map.results) if p not in positions]))
            if index >= n_inputs:
                result_positions.append(positions)
        iterators = [t for loop, t in enumerate(ir.ArrayAttr(op.attributes["iterator_types"])) if loop in kept]
        clone = op.clone(ip=ir.InsertionPoint(op))
        for index, value in enumerate(new_operands):
            clone.operands[index] = value
        set_indexing_maps(clone, new_maps)
        clone.attributes["iterator_types"] = ir.ArrayAttr.get(iterators)
        for index in range(n_results):
            clone.results[index].set_type(new_operands[n_inputs + index].type)
            op.results[index].replace_all_uses_with(expand_dims(clone.results[index], result_positions[index]))
    op.erase()


@register_pass(
    DROP_INNER_UNIT_DIMS,
    "drop the unit dims a linalg.generic's result ends with (reshape folding leaves them "
    "innermost: [1, 13, 13, 1000, 1, 1]), so the op's innermost loop is not a unit loop",
)
def drop_inner_unit_dims_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for op in ops_where(function, lambda candidate: candidate.name == "linalg.generic"):
            loops = droppable_loops(op)
            if loops:
                drop_loops(op, loops)
