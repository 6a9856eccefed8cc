"""``tilecraft-unit-stride-gathers``: a ``vector.gather`` from a memref whose innermost
stride is not 1 reads through a 1-D unit-stride view of the same memory instead.

Why: ``convert-vector-to-llvm`` lowers a gather to one ``llvm.masked.gather`` of addresses
``base + index``, which it can only form when the innermost stride is 1; otherwise it leaves
the op, its operands survive as ``unrealized_conversion_cast``s, and LLVM fails to JIT the
module ("Failure while creating the ExecutionEngine"). Bufferization makes such sources: a
gather vectorized from a ``tensor.extract`` of one column of a buffer (``F.pad(x,
mode="circular")`` wraps the last column of a padded tensor into the first: the column is
``memref<1x2x6x1xf32, strided<[84, 42, 7, 1]>>``, collapsed to ``memref<12xf32,
strided<[7], offset: 4>>``).

The rewrite is exact: element ``base[i0, ..., i(n-1) + v]`` of a memref with offset ``o``
and strides ``s`` sits at ``o + sum(i_k s_k) + v s(n-1)`` of the underlying buffer, so the
gather reads a ``memref.reinterpret_cast`` of the base (offset ``o``, one dim covering the
base's extent, stride 1) at ``sum(i_k s_k)`` with indices ``v * s(n-1)``. Bases with a
dynamic stride, offset or size are left as they are (none reach here today).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, memref, vector

from ..ir_queries import replace_each
from ..passes import register_pass

UNIT_STRIDE_GATHERS = "tilecraft-unit-stride-gathers"


def _strided_layout(memref_type: ir.MemRefType) -> tuple[list[int], int] | None:
    """(strides, offset) of a static strided memref whose innermost stride is not 1."""
    if memref_type.rank == 0 or not memref_type.has_static_shape:
        return None
    strides, offset = memref_type.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if dynamic in strides or offset == dynamic or strides[-1] == 1:
        return None
    return list(strides), offset


def _is_strided_gather(op: ir.Operation) -> bool:
    if op.name != "vector.gather":
        return False
    base = op.operands[0].type
    return isinstance(base, ir.MemRefType) and _strided_layout(ir.MemRefType(base)) is not None


def _unit_stride_gather(op: ir.Operation) -> ir.Value:
    base = op.operands[0]
    base_type = ir.MemRefType(base.type)
    strides, offset = _strided_layout(base_type)
    rank = base_type.rank
    offsets, (indices, mask, pass_thru) = list(op.operands[1:1 + rank]), op.operands[1 + rank:]
    extent = 1 + sum((size - 1) * stride for size, stride in zip(base_type.shape, strides))
    layout = ir.StridedLayoutAttr.get(offset, [1])
    flat_type = ir.MemRefType.get([extent], base_type.element_type, layout, base_type.memory_space)
    flat = memref.reinterpret_cast(flat_type, base, [], [], [], [offset], [extent], [1])
    index = ir.IndexType.get()
    position = arith.constant(index, 0)
    for offset_value, stride in zip(offsets, strides):
        position = arith.addi(position, arith.muli(offset_value, arith.constant(index, stride)))
    index_type = ir.VectorType(indices.type)
    step = arith.constant(index_type, ir.DenseElementsAttr.get_splat(
        index_type, ir.IntegerAttr.get(index_type.element_type, strides[-1])))
    return vector.gather(op.results[0].type, flat, [position], arith.muli(indices, step), mask, pass_thru)


@register_pass(UNIT_STRIDE_GATHERS,
               "vector.gather from a memref with a non-unit innermost stride through a unit-stride "
               "view (convert-vector-to-llvm cannot lower it: the JIT failed)")
def unit_stride_gathers_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    replace_each(module, _is_strided_gather, _unit_stride_gather)
