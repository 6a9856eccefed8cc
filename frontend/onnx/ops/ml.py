"""ONNX's ``ai.onnx.ml`` domain (the ops scikit-learn converters write): Binarizer and
ArrayFeatureExtractor, on numeric tensors. The domain's ops on strings (LabelEncoder with
string keys, ...) are out of scope, as strings are everywhere in tilecraft."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ...emit import core, movement, reshapes
from ...emit.reduction import expand_dims
from ..node import HandlerError, NodeContext
from ..registry import onnx_op

ML_DOMAIN = "ai.onnx.ml"


@onnx_op("Binarizer", domain=ML_DOMAIN)
def binarizer(ctx: NodeContext) -> list[ir.Value]:
    """1 where the element is greater than ``threshold``, else 0, in the input's type."""
    x = ctx.value(0)
    element = core.tensor_type(x).element_type
    if not core.is_float(element):
        raise HandlerError(f"Binarizer takes float tensors; got {element}")
    threshold = core.scalar_constant(float(ctx.attr("threshold", 0.0)), element)
    one, zero = core.scalar_constant(1.0, element), core.scalar_constant(0.0, element)
    return [core.elementwise([x], element, lambda v: arith.select(
        arith.cmpf(arith.CmpFPredicate.OGT, v, threshold), one, zero))]


@onnx_op("ArrayFeatureExtractor", domain=ML_DOMAIN)
def array_feature_extractor(ctx: NodeContext) -> list[ir.Value]:
    """``x[..., indices]`` with the indices flattened; a 1-D ``x`` gives one row (as
    onnxruntime and ONNX's reference do). Indices are range-checked at run time."""
    x, indices = ctx.value(0), ctx.value(1)
    rank, index_rank = len(core.sizes(x)), len(core.sizes(indices))
    if rank == 0:
        raise HandlerError("ArrayFeatureExtractor needs an input of rank >= 1")
    if index_rank == 0:
        indices = expand_dims(indices, [0])
    elif index_rank > 1:
        indices = reshapes.collapse(indices, [list(range(index_rank))])
    picked = movement.gather(x, indices, rank - 1)
    return [expand_dims(picked, [0]) if rank == 1 else picked]
