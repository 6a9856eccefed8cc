"""Models exported with both the batch and the token axis dynamic (``dynamic_axes={0: "b",
1: "s"}``, how users export transformers): a (b, s, k) @ (k, n) product collapses (b, s)
into rows and splits them again, an ``expand_shape`` of ``?`` into ``?x?``. That op verifies,
but its memref lowering (expand-strided-metadata) asserts and aborted the process; it is
now a ``tensor.reshape``. Checked against numpy at two shapes from one compile."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

import tilecraft


def _projection_model(k: int = 16, n: int = 8) -> tuple[onnx.ModelProto, np.ndarray]:
    weight = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
        "projection",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "s", k])],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["b", "s", n])],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), weight


def test_projection_with_dynamic_batch_and_tokens():
    model, weight = _projection_model()
    compiled = tilecraft.compile(model, keep_ir=False, verbose=False)
    rng = np.random.default_rng(1)
    for shape in [(2, 5, 16), (1, 9, 16)]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = np.asarray(compiled(x))
        assert got.shape == (*shape[:2], 8)
        np.testing.assert_allclose(got, np.maximum(x @ weight, 0), rtol=1e-5, atol=1e-5)


def test_reshape_splitting_one_dynamic_axis_into_two():
    """The same split written as a Reshape to a runtime shape (Shape of another input)."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["like"], ["target"]), helper.make_node("Reshape", ["x", "target"], ["out"])],
        "split",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["bs", 4]),
         helper.make_tensor_value_info("like", onnx.TensorProto.FLOAT, ["b", "s", 4])],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["b", "s", 4])],
    )
    compiled = tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                                 keep_ir=False, verbose=False)
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(np.asarray(compiled(x, np.zeros((2, 3, 4), np.float32))), x.reshape(2, 3, 4))
