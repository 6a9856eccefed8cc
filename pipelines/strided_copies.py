"""Strided ``memref.copy`` ops become ``linalg.copy``, so that they lower to plain loops.

Why: ``memref.copy`` between memrefs that are not both contiguous (a slice of an image copied
into the interior of a padded buffer: what bufferization makes of a ``tensor.pad``) lowers to
a call of the runtime's ``memrefCopy``, which walks the elements one by one through generic
descriptor arithmetic. A depthwise convolution whose pad is fused into each task spent most
of its time there. As ``linalg.copy`` the copy becomes a loop nest whose innermost loop runs
along the contiguous dimension, which LLVM vectorizes. Copies between contiguous memrefs stay
``memref.copy`` (they lower to ``memcpy``).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import linalg

from .ir_queries import ops_where
from .passes import register_pass

STRIDED_COPIES_TO_LINALG = "tilecraft-strided-copies-to-linalg"


def _identity_layout(value: ir.Value) -> bool:
    memref = ir.MemRefType(value.type)
    return memref.layout == ir.AffineMapAttr.get(ir.AffineMap.get_identity(memref.rank))


def _is_strided_copy(op: ir.Operation) -> bool:
    if op.name != "memref.copy":
        return False
    source, target = op.operands
    if not all(isinstance(v.type, ir.MemRefType) for v in (source, target)):
        return False  # unranked: no loop nest to write
    return not (_identity_layout(source) and _identity_layout(target))


@register_pass(
    STRIDED_COPIES_TO_LINALG,
    "Rewrite memref.copy between non-contiguous memrefs as linalg.copy (vectorizable loops "
    "instead of the runtime's element-by-element memrefCopy)",
)
def strided_copies_to_linalg_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for copy in ops_where(module, _is_strided_copy):
        source, target = copy.operands
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(source, outs=[target])
        copy.erase()
