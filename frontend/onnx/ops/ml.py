"""ONNX's ``ai.onnx.ml`` domain (the ops scikit-learn converters write): Binarizer,
ArrayFeatureExtractor and TreeEnsemble (ir/trees.py), on numeric tensors. The domain's ops on strings (LabelEncoder with
string keys, ...) are out of scope, as strings are everywhere in tilecraft."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from ....ir import core, movement, reshapes, trees
from ....ir.reduction import expand_dims
from ..node import HandlerError, NodeContext
from ....errors import OperandError
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


_POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


@onnx_op("TreeEnsemble", domain=ML_DOMAIN, since=5)
def tree_ensemble(ctx: NodeContext) -> list[ir.Value]:
    """``post_transform`` NONE and LOGISTIC are applied; the others are refused by name
    (ONNX's reference applies none of them)."""
    nodes = len(ctx.attr("nodes_featureids"))
    membership = ctx.attr("membership_values", None)
    members: list[np.ndarray] = []
    if membership is not None:
        values = np.asarray(membership).reshape(-1)
        cuts = np.flatnonzero(np.isnan(values))
        members = [values[a + 1:b] for a, b in zip([-1, *cuts[:-1]], cuts)]
    flags = lambda name: np.asarray(ctx.attr(name, [0] * nodes), bool).reshape(-1)  # noqa: E731
    model = trees.TreeEnsemble(
        features=np.asarray(ctx.attr("nodes_featureids"), np.int64),
        splits=np.asarray(ctx.attr("nodes_splits")).reshape(-1),
        modes=np.asarray(ctx.attr("nodes_modes")).reshape(-1).astype(np.int64),
        true_ids=np.asarray(ctx.attr("nodes_truenodeids"), np.int64),
        false_ids=np.asarray(ctx.attr("nodes_falsenodeids"), np.int64),
        true_leafs=flags("nodes_trueleafs"), false_leafs=flags("nodes_falseleafs"),
        missing_true=flags("nodes_missing_value_tracks_true"),
        leaf_targets=np.asarray(ctx.attr("leaf_targetids"), np.int64),
        leaf_weights=np.asarray(ctx.attr("leaf_weights")).reshape(-1),
        roots=np.asarray(ctx.attr("tree_roots"), np.int64),
        targets=int(ctx.attr("n_targets")), aggregate=int(ctx.attr("aggregate_function", 1)), members=members)
    if not 0 <= model.aggregate < len(trees.AGGREGATES):
        raise HandlerError(f"unknown aggregate_function {model.aggregate}")
    post = int(ctx.attr("post_transform", 0))
    if post not in (0, 2):
        raise HandlerError(f"TreeEnsemble post_transform {_POST_TRANSFORMS[post] if 0 <= post < 5 else post} "
                           "is not supported (NONE and LOGISTIC are)")
    try:
        result = trees.tree_ensemble(ctx.value(0), model)
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
    if post == 2:
        element = core.tensor_type(result).element_type
        one = core.scalar_constant(1.0, element)
        result = core.elementwise([result], element, lambda v: arith.divf(one, arith.addf(one, math.exp(arith.negf(v)))))
    return [result]
