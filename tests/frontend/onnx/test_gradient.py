"""ONNX's Gradient (ai.onnx.preview.training) expanded into derivative nodes before import
(frontend/onnx/gradient.py), checked against derivatives written out with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import tilecraft

RNG = np.random.default_rng(11)


def gradient_model(nodes, xs, y, inputs, outputs, opset=17):
    grads = [f"d_{x}" for x in xs]
    nodes = [*nodes, helper.make_node("Gradient", xs, grads, domain="ai.onnx.preview.training",
                                      name="grad", xs=xs, y=y)]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs]
        + [helper.make_tensor_value_info(g, TensorProto.FLOAT, dict(inputs)[x]) for g, x in zip(grads, xs)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("ai.onnx.preview.training", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("opset", [12, 17])
def test_broadcast_products_quotients_and_a_value_used_twice(opset):
    """``y = (x * w - x) / b``, ``w`` broadcast along rows and ``b`` a [1, 3] row: the
    gradients of the sum of ``y`` (x read twice, w and b summed over the broadcast axes)."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["p"]),
             helper.make_node("Sub", ["p", "x"], ["q"]),
             helper.make_node("Div", ["q", "b"], ["y"])]
    model = gradient_model(nodes, ["x", "w", "b"], "y",
                           [("x", [2, 3]), ("w", [3]), ("b", [1, 3])], [("y", [2, 3])], opset=opset)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    w = RNG.standard_normal(3).astype(np.float32)
    b = (RNG.random((1, 3)) + 0.5).astype(np.float32)
    y, dx, dw, db = tilecraft.compile(model)(x=x, w=w, b=b)
    np.testing.assert_allclose(y, (x * w - x) / b, rtol=1e-6)
    np.testing.assert_allclose(dx, np.broadcast_to((w - 1) / b, (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(dw, (x / b).sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(db, -((x * w - x) / b / b).sum(axis=0, keepdims=True), rtol=1e-5)


def test_an_input_y_does_not_depend_on_gets_zeros():
    nodes = [helper.make_node("Neg", ["x"], ["y"])]
    model = gradient_model(nodes, ["x", "z"], "y", [("x", [4]), ("z", [2])], [("y", [4])])
    _, dx, dz = tilecraft.compile(model)(x=np.ones(4, np.float32), z=np.ones(2, np.float32))
    np.testing.assert_array_equal(dx, -np.ones(4, np.float32))
    np.testing.assert_array_equal(dz, np.zeros(2, np.float32))


def test_an_op_without_a_derivative_rule_is_named():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"), helper.make_node("Add", ["r", "x"], ["y"])]
    model = gradient_model(nodes, ["x"], "y", [("x", [4])], [("y", [4])])
    named = "'grad' \\(Gradient\\): no derivative for Relu \\(node 'act'\\)"
    with pytest.raises(tilecraft.ModelImportError, match=named):
        tilecraft.compile(model)


def test_a_y_the_graph_does_not_compute_is_refused():
    model = gradient_model([helper.make_node("Neg", ["x"], ["y"])], ["x"], "nowhere", [("x", [4])], [("y", [4])])
    with pytest.raises(tilecraft.ModelImportError, match="y 'nowhere' is not computed"):
        tilecraft.compile(model)
