"""Vector code inside kernels: lowered to what NVVM conversion takes, and 128-bit accesses
marked aligned where that is provable.

``tilecraft-gpu-lower-vectors`` applies a transform script (the same interpreter as the
schedules) that lowers ``vector.contract`` to outer products and FMAs
(``fma.rn.f32``), multi-reductions, transposes and broadcasts, and 1-D transfers to
``vector.load`` / ``vector.store``. Canonicalization and dropping leading unit dims run in
pattern sets of their own: each, together with ``lower_broadcast``, kept the greedy driver
from ever converging (softmax, conv2d). Why not ``convert-vector-to-llvm`` on the kernels: it
cannot convert memrefs in ``#gpu.address_space<workgroup>`` (shared memory); the vector
ops left after this script are converted by ``convert-gpu-to-nvvm`` itself, which maps the
address spaces.

``tilecraft-gpu-vector-alignment`` sets ``alignment`` on ``vector.load`` / ``vector.store``
of global memory when the element offset is provably a multiple of the vector length:
LLVM's NVPTX backend only emits ``ld.global.v4.f32`` for a 16-byte aligned access, and an
unproven claim would fault at run time (a padded interior, a strided window).
"""

from __future__ import annotations

import math
from typing import Mapping

from mlir import ir
from mlir.dialects.transform import interpreter

from ...pipelines.passes import register_pass
from .arena import ALIGNMENT as ARENA_ALIGNMENT

LOWER_VECTORS_SCRIPT = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
    } : !transform.any_op
    transform.yield
  }
}
"""


@register_pass(
    "tilecraft-gpu-lower-vectors",
    "Lower vector contractions, reductions and 1-D transfers to loads, stores and FMAs",
)
def lower_vectors_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    with module.context:
        script = ir.Module.parse(LOWER_VECTORS_SCRIPT)
    main = next(iter(script.body.operations))
    interpreter.apply_named_sequence(module, main, script.operation)


# ---- alignment ----------------------------------------------------------------------------

_UNKNOWN = 1  # "a multiple of 1": nothing known


def _owner(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


def _expr_multiple(expr: ir.AffineExpr, dims: list[int], symbols: list[int]) -> int:
    if isinstance(expr, ir.AffineConstantExpr):
        return abs(ir.AffineConstantExpr(expr).value)
    if isinstance(expr, ir.AffineDimExpr):
        return dims[ir.AffineDimExpr(expr).position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return symbols[ir.AffineSymbolExpr(expr).position]
    if isinstance(expr, ir.AffineAddExpr):
        add = ir.AffineAddExpr(expr)
        return math.gcd(_expr_multiple(add.lhs, dims, symbols), _expr_multiple(add.rhs, dims, symbols))
    if isinstance(expr, ir.AffineMulExpr):
        mul = ir.AffineMulExpr(expr)
        return _expr_multiple(mul.lhs, dims, symbols) * _expr_multiple(mul.rhs, dims, symbols)
    return _UNKNOWN


def multiple_of(value: ir.Value, depth: int = 0) -> int:
    """The largest known k such that ``value`` is always a multiple of k (0: always zero)."""
    if depth > 32:
        return _UNKNOWN
    owner = _owner(value)
    if owner is None:
        block = value.owner
        parent = block.owner if isinstance(block, ir.Block) else None
        parent = parent.operation if parent is not None and not isinstance(parent, ir.Operation) else parent
        if parent is not None and parent.name == "scf.for" and ir.BlockArgument(value).arg_number == 0:
            lower, step = parent.operands[0], parent.operands[2]
            return math.gcd(multiple_of(lower, depth + 1), multiple_of(step, depth + 1))
        return _UNKNOWN
    name = owner.name
    if name == "arith.constant" and isinstance(value.type, ir.IndexType):
        return abs(ir.IntegerAttr(owner.attributes["value"]).value)
    if name == "arith.addi":
        return math.gcd(*(multiple_of(v, depth + 1) for v in owner.operands))
    if name == "arith.muli":
        a, b = (multiple_of(v, depth + 1) for v in owner.operands)
        return a * b
    if name == "affine.apply":
        affine_map = ir.AffineMapAttr(owner.attributes["map"]).value
        values = [multiple_of(v, depth + 1) for v in owner.operands]
        dims, symbols = values[: affine_map.n_dims], values[affine_map.n_dims:]
        return _expr_multiple(affine_map.results[0], dims, symbols)
    return _UNKNOWN


def _device_buffer(memref: ir.Value) -> bool:
    """A buffer the host allocated (``gpu.alloc`` or the arena: 256-byte aligned) with identity
    layout."""
    memref_type = ir.MemRefType(memref.type)
    layout = memref_type.layout
    if not (memref_type.has_static_shape and isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(memref_type.rank)):
        return False
    if memref_type.memory_space is not None:
        return False
    owner = _owner(memref)
    if owner is None:
        return False  # a block argument: a launch attribution or region value
    while owner is not None and owner.name in ("memref.expand_shape", "memref.collapse_shape",
                                               "memref.cast"):
        owner = _owner(owner.operands[0])
    return owner is not None and (owner.name == "gpu.alloc" or _arena_view(owner))


def _arena_view(view: ir.Operation) -> bool:
    """A buffer of the call's device arena (arena.py): the arena comes from ``cuMemAlloc``
    and each buffer sits at a constant offset that is a multiple of 256 bytes."""
    if view.name != "memref.view" or multiple_of(view.operands[1]) % ARENA_ALIGNMENT != 0:
        return False
    source = _owner(view.operands[0])
    return source is not None and source.name == "builtin.unrealized_conversion_cast"


def _align_access(op: ir.Operation, memref: ir.Value, indices: list[ir.Value],
                  vector_type: ir.VectorType) -> None:
    lanes = vector_type.shape[-1]
    bits = ir.FloatType(vector_type.element_type).width if isinstance(
        vector_type.element_type, ir.FloatType) else ir.IntegerType(vector_type.element_type).width
    nbytes = lanes * bits // 8
    if vector_type.rank != 1 or nbytes not in (8, 16) or lanes < 2:
        return
    shape = ir.MemRefType(memref.type).shape
    offset_multiple = 0
    for i, index in enumerate(indices):
        stride = math.prod(shape[i + 1:])
        offset_multiple = math.gcd(offset_multiple, multiple_of(index) * stride)
    if offset_multiple % lanes == 0:
        op.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), nbytes)


@register_pass(
    "tilecraft-gpu-vector-alignment",
    "Mark vector loads/stores of device buffers aligned where the offset provably is",
)
def vector_alignment_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: ``ld.global.v4.f32`` needs a 16-byte aligned address; MLIR assumes element
    alignment (4 bytes), so without proof LLVM splits each vector into scalar loads."""
    launches: list[ir.Operation] = []

    def find(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch":
            launches.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(find, ir.WalkOrder.PRE_ORDER)
    for launch in launches:

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "vector.load":
                memref, indices = op.operands[0], list(op.operands)[1:]
                if _device_buffer(memref):
                    _align_access(op, memref, indices, ir.VectorType(op.results[0].type))
            elif op.name == "vector.store":
                memref, indices = op.operands[1], list(op.operands)[2:]
                if _device_buffer(memref):
                    _align_access(op, memref, indices, ir.VectorType(op.operands[0].type))
            return ir.WalkResult.ADVANCE

        launch.walk(visit, ir.WalkOrder.PRE_ORDER)
