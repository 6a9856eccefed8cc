"""Strided ``memref.copy`` ops become loops of vector transfers along their contiguous rows.

Why: ``memref.copy`` between memrefs that are not both contiguous (a slice of an image copied
into the interior of a padded buffer: what bufferization makes of a ``tensor.pad``; a
transposed slice that a fused producer became, as BERT's attention output read by the
output projection) lowers to a call of the runtime's ``memrefCopy``, which walks the
elements one by one through generic descriptor arithmetic. A depthwise convolution whose pad
is fused into each task spent most of its time there.

Where both sides are contiguous along their last dim and that dim is static, the copy
becomes ``scf.for`` loops over the outer dims around ``vector.transfer_read`` /
``transfer_write`` pairs of up to ``_ROW_CHUNK_BITS`` along the row. Left to LLVM, the same
copy as scalar loops (``linalg.copy`` lowered by ``convert-linalg-to-loops``) was not
vectorized: its 64-element rows were unrolled into 64 scalar load/store pairs, and BERT's
output projection, whose tasks each copy the attention output's rows, ran slower.
Other strided copies (a dynamic or strided last dim, rows too short to fill a vector) become
``linalg.copy``, loops of scalars. Copies between contiguous memrefs stay ``memref.copy``
(they lower to ``memcpy``).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, linalg, memref, scf, vector

from ..ir_queries import is_strided_copy, ops_where
from ..loop_nest import element_bits
from ..passes import register_pass

STRIDED_COPIES_TO_LINALG = "tilecraft-strided-copies-to-linalg"

# Bits one transfer of a row moves: four 512-bit vectors (64 f32), which LLVM splits into
# full-width moves on any x86 or AArch64 target.
_ROW_CHUNK_BITS = 2048
# Rows shorter than this many bits stay scalar: a narrower vector gains nothing.
_MIN_ROW_BITS = 128


def _row_copy_shape(source: ir.Value, target: ir.Value) -> tuple[list[int], int] | None:
    """(shape, element bits) of a copy that can move whole rows as vectors: a static last
    dim with unit stride on both sides, the same static sizes elsewhere (outer dims may be
    dynamic), a plain int or float element of 8-64 bits, rows of at least
    ``_MIN_ROW_BITS``. ``None`` otherwise."""
    types = [ir.MemRefType(v.type) for v in (source, target)]
    if types[0].rank != types[1].rank or types[0].rank < 1:
        return None
    shape = list(types[0].shape)
    if any(a != b for a, b in zip(shape, types[1].shape)) or ir.ShapedType.is_dynamic_size(shape[-1]):
        return None
    if any(t.get_strides_and_offset()[0][-1] != 1 for t in types):
        return None
    if not isinstance(types[0].element_type, (ir.IntegerType, ir.FloatType)):
        return None
    bits = element_bits(types[0])
    if bits not in (8, 16, 32, 64) or shape[-1] * bits < _MIN_ROW_BITS:
        return None
    return shape, bits


def _copy_rows(source: ir.Value, target: ir.Value, shape: list[int], bits: int) -> None:
    """At the insertion point: loops over every dim but the last (bounded by the source's
    sizes), and along each row transfers of at most ``_ROW_CHUNK_BITS`` (a loop of whole
    chunks, then the static tail)."""
    index = ir.IndexType.get()
    element = ir.MemRefType(source.type).element_type
    zero = arith.constant(index, 0)
    one = arith.constant(index, 1)
    padding = arith.constant(element, 0 if isinstance(element, ir.IntegerType) else 0.0)
    row_map = ir.AffineMap.get_minor_identity(len(shape), 1)

    def move(at: list[ir.Value], column: ir.Value, width: int) -> None:
        indices = [*at, column]
        row = vector.transfer_read(ir.VectorType.get([width], element), source, indices, row_map,
                                   padding, in_bounds=[True])
        vector.transfer_write(None, row, target, indices, row_map, in_bounds=[True])

    def rows(dim: int, at: list[ir.Value]) -> None:
        if dim == len(shape) - 1:
            width = shape[-1]
            chunk = min(width, max(_ROW_CHUNK_BITS // bits, 1))
            whole = width // chunk * chunk
            if whole == chunk:
                move(at, zero, chunk)
            else:
                loop = scf.ForOp(zero, arith.constant(index, whole), arith.constant(index, chunk))
                with ir.InsertionPoint(loop.body):
                    move(at, loop.induction_variable, chunk)
                    scf.YieldOp([])
            if width > whole:
                move(at, arith.constant(index, whole), width - whole)
            return
        if shape[dim] == 1:
            rows(dim + 1, [*at, zero])
            return
        bound = (memref.dim(source, arith.constant(index, dim)) if ir.ShapedType.is_dynamic_size(shape[dim])
                 else arith.constant(index, shape[dim]))
        loop = scf.ForOp(zero, bound, one)
        with ir.InsertionPoint(loop.body):
            rows(dim + 1, [*at, loop.induction_variable])
            scf.YieldOp([])

    rows(0, [])


@register_pass(
    STRIDED_COPIES_TO_LINALG,
    "Rewrite memref.copy between non-contiguous memrefs as loops of vector transfers along "
    "their contiguous rows, else as linalg.copy (not the runtime's element-by-element memrefCopy)",
)
def strided_copies_to_linalg_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for copy in ops_where(module, is_strided_copy):
        source, target = copy.operands
        with ir.InsertionPoint(copy), copy.location:
            rows = _row_copy_shape(source, target)
            if rows is not None:
                _copy_rows(source, target, *rows)
            else:
                linalg.copy(source, outs=[target])
        copy.erase()
