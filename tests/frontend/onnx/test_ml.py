"""The ai.onnx.ml domain (frontend/onnx/ops/ml.py): ops registered per domain and versioned
by that domain's opset, models that import only ai.onnx.ml, and the numeric ops against
ONNX's reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import tilecraft

from onnx_testing import reference_outputs

RNG = np.random.default_rng(5)
# ArrayFeatureExtractor is a gather, which keeps scalar loops with a warning (tests/conftest.py
# makes it an error).
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")


def ml_model(nodes, inputs, outputs, *, default_opset: int | None = None):
    imports = [helper.make_opsetid("ai.onnx.ml", 3)]
    if default_opset is not None:
        imports.append(helper.make_opsetid("", default_opset))
    graph = helper.make_graph(nodes, "ml", inputs, outputs)
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def value(name, element, shape):
    return helper.make_tensor_value_info(name, element, shape)


def test_binarizer_in_a_model_with_only_the_ml_domain():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    model = ml_model([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.25)],
                     [value("x", TensorProto.FLOAT, [3, 4])], [value("y", TensorProto.FLOAT, [3, 4])])
    np.testing.assert_array_equal(tilecraft.compile(model)(x=x), reference_outputs(model, {"x": x})[0])


@pytest.mark.parametrize("x_shape,indices", [((3, 5), [4, 0, 2]), ((2, 3, 4), [[1, -1]]), ((6,), [5, 1])])
def test_array_feature_extractor_matches_the_reference(x_shape, indices):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    indices = np.array(indices, np.int64)
    out = [1, indices.size] if len(x_shape) == 1 else [*x_shape[:-1], indices.size]
    model = ml_model([helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")],
                     [value("x", TensorProto.FLOAT, list(x_shape)), value("i", TensorProto.INT64, list(indices.shape))],
                     [value("y", TensorProto.FLOAT, out)])
    (expected,) = reference_outputs(model, {"x": x, "i": indices})
    got = tilecraft.compile(model)(x=x, i=indices)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_ml_and_default_ops_together_and_a_bad_index():
    """A scaler-like default-domain op after an ml op, each versioned by its own domain;
    an index past the features is a run-time error, not a read outside."""
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    nodes = [helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["picked"], domain="ai.onnx.ml"),
             helper.make_node("Relu", ["picked"], ["y"])]
    model = ml_model(nodes, [value("x", TensorProto.FLOAT, [2, 5]), value("i", TensorProto.INT64, [2])],
                     [value("y", TensorProto.FLOAT, [2, 2])], default_opset=17)
    compiled = tilecraft.compile(model)
    np.testing.assert_array_equal(compiled(x=x, i=np.array([3, 0])), np.maximum(x[:, [3, 0]], 0))
    with pytest.raises(tilecraft.TilecraftError):
        compiled(x=x, i=np.array([5, 0]))


def test_an_unsupported_ml_op_names_its_domain():
    model = ml_model([helper.make_node("Imputer", ["x"], ["y"], domain="ai.onnx.ml", imputed_value_floats=[0.0])],
                     [value("x", TensorProto.FLOAT, [2])], [value("y", TensorProto.FLOAT, [2])])
    with pytest.raises(tilecraft.ModelImportError, match="Imputer.*ai.onnx.ml"):
        tilecraft.compile(model)
