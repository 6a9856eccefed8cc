"""What the ONNX import skips for speed changes nothing: shape inference runs on a copy
without the large weights' data (frontend/onnx/model.py) and gives ONNX's own result, and
the QDQ rewrite's types are computed only for a graph with DequantizeLinear nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.frontend.onnx import model as onnx_model
from tilecraft.frontend.onnx import qdq


def _weighted_model(shape_input: str = "x") -> onnx.ModelProto:
    """x (1, 64) -> MatMul by a 64x128 weight (large) -> Reshape to a shape held in a small
    int64 initializer -> Add a small float bias: shapes that inference must propagate."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 8, 16], dtype=np.int64), "shape")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", [shape_input, "w"], ["m"]),
             helper.make_node("Reshape", ["m", "shape"], ["r"]),
             helper.make_node("Add", ["r", "b"], ["y"])]
    graph = helper.make_graph(nodes, "weighted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16])], [weight, shape, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("shape_dict", [None, {"x": [1, 64]}])
def test_shape_inference_without_weights_is_onnxs(shape_dict):
    model = _weighted_model()
    reference = onnx.shape_inference.infer_shapes(onnx_model.override_input_shapes(model, shape_dict),
                                                  strict_mode=False, data_prop=True)
    ours = onnx_model.infer_shapes(model, shape_dict)
    assert ours.SerializeToString() == reference.SerializeToString()
    # the weight's data came back, and the caller's model was not touched
    assert numpy_helper.to_array(ours.graph.initializer[0]).tobytes() == \
        numpy_helper.to_array(model.graph.initializer[0]).tobytes()
    assert model.graph.value_info == _weighted_model().graph.value_info


def test_stripped_weights_keep_their_types():
    """A large weight of the wrong element type (f64 against an f32 input) is still refused,
    by name: its data skipped inference, its type did not."""
    model = _weighted_model()
    weight = numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(weight, "w"))
    with pytest.raises(tilecraft.ModelImportError, match="MatMul"):
        onnx_model.infer_shapes(model)


def test_qdq_rewrite_skips_type_inference_without_dequantize(monkeypatch):
    calls = []
    monkeypatch.setattr(qdq, "_Graph", lambda proto: calls.append(proto))
    model = _weighted_model()
    assert qdq.integer_qdq_matmuls(model) is model
    assert calls == []


def test_compiled_model_matches_numpy():
    model = _weighted_model()
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    expected = (x @ arrays["w"]).reshape(1, 8, 16) + arrays["b"]
    np.testing.assert_allclose(tilecraft.compile(model, cache=False)(x), expected, rtol=1e-5, atol=1e-5)
