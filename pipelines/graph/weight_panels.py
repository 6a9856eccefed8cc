"""Constant matmul weights packed into column panels: ``tilecraft-pack-weight-panels``.

The default schedule keeps a register tile of accumulators (8 rows x 32 or 48 columns on
AVX-512) and, per step of K, loads that many consecutive floats of B's row k. With B stored
(K, N) those rows are N floats apart: a 128x768 @ 768x3072 tile walks 384 rows 12 KB apart
per cache block, a fresh page every step, and ran at about half numpy's rate per core.
Stored as panels ``B'[n / P, k, n % P]`` (P = 16, one AVX-512 vector; the register tile
takes up to three panels side by side), the same tile reads one contiguous stream per
panel, and BERT's four projection shapes ran at about numpy's single-thread GEMM rate
(onnxruntime prepacks its constant weights the same way; docs/performance.md).

The pass rewrites ``linalg.matmul`` (default or plain ``(m, k), (k, n)`` maps) whose B is a
compile-time constant into the 3-D contraction

    C'[m, nb, j] += A[m, k] * B'[nb, k, j]      (loops m, nb, j | k)

on views of C (``tensor.expand_shape`` of its init, ``tensor.collapse_shape`` of the
result: no data moves). ``B'`` is ``transpose(expand_shape(B))``, which
``tilecraft-fold-constants`` (the next pass) evaluates at compile time, so the packing costs
nothing per call. The planner (schedule/matmul_plan.py, ``plan_contraction``) tiles the panel loop
``nb`` for threads, keeps ``j`` whole and puts up to three panels side by side as the
register tile's columns (``panel_register_tile``).

Left alone: non-constant B (packing per call would cost a copy of B), dynamic or non-f32
shapes, and N not a multiple of P (or a single panel, where the layout is already the
same).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...ir.maps import has_indexing_maps, indexing_map_texts
from ...ir import contraction, core
from ..tensor.fusion_barrier import PANELS_ATTR as PACKED_ATTR
from ..ir_queries import defined_functions, defining_op, ops_where, static_f32_tensors
from ..passes import positive_int_option, register_pass
from .constant_folding import ConstantAnalysis

# Panel width in f32 elements: one AVX-512 vector (two AVX2 ones). The register tile takes
# panels side by side (schedule/plan.py, panel_register_tile: 3 on AVX-512, where they
# divide N), so the width sets the granularity of N, not the tile: 16-column panels let
# BERT's 768-multiples take 8 x 48 tiles, which 32-column panels cannot (docs/performance.md,
# round 14).
PANEL_COLUMNS = 16


def plain_matmul(op: ir.Operation) -> bool:
    """``linalg.matmul`` reading A (m, k) and B (k, n), static f32 shapes."""
    if op.name != "linalg.matmul" or len(op.operands) != 3:
        return False
    if has_indexing_maps(op):
        maps = indexing_map_texts(op)
        if maps != ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"]:
            return False
    return static_f32_tensors(op.operands)


def pack_weights(op: ir.Operation, panel: int) -> bool:
    """Rewrite ``op`` (a plain matmul with constant B) into the panel form; False when the
    shape does not take it."""
    a, b, init = op.operands
    k, n = ir.RankedTensorType(b.type).shape
    m = ir.RankedTensorType(init.type).shape[0]
    if n % panel or n // panel < 2:
        return False
    panels = n // panel
    with ir.InsertionPoint(op), op.location:
        packed = core.transpose(contraction.expand(b, [[0], [1, 2]], [k, panels, panel]), [1, 0, 2])
        fill = defining_op(init)
        if fill is not None and fill.name == "linalg.fill":
            # A fresh 3-D fill rather than a view of the 2-D one: a fusion group slices the
            # init by whole panels, which is no box through an expand_shape (group.py).
            empty = tensor.EmptyOp([m, panels, panel], ir.RankedTensorType(init.type).element_type).result
            init3 = linalg.fill(fill.operands[0], outs=[empty])
        else:
            init3 = contraction.expand(init, [[0], [1, 2]], [m, panels, panel])
        dims = [ir.AffineDimExpr.get(i) for i in range(4)]  # m, nb, j, k
        maps = [ir.AffineMap.get(4, 0, [dims[0], dims[3]]),
                ir.AffineMap.get(4, 0, [dims[1], dims[3], dims[2]]),
                ir.AffineMap.get(4, 0, [dims[0], dims[1], dims[2]])]
        result3 = contraction.generic_op(
            [a, packed], init3, maps, 3, 1,
            lambda x, w, acc: arith.addf(acc, arith.mulf(x, w)))
        result3.owner.attributes[PACKED_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), panel)
        result = contraction.collapse(result3, [[0], [1, 2]])
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


@register_pass(
    "tilecraft-pack-weight-panels",
    "Matmuls with constant weights read them as column panels B'[n/P, k, n%P] "
    "(packed at compile time by the constant folder)",
    options={"panel": "panel width in elements (default 32)"},
)
def pack_weight_panels_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    panel = positive_int_option("panel", options.get("panel", str(PANEL_COLUMNS)))
    for function in defined_functions(module):
        constants = ConstantAnalysis()
        for op in ops_where(function, plain_matmul):
            if constants.value_is_constant(op.operands[1]):
                pack_weights(op, panel)
