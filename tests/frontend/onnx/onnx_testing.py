"""One-node ONNX models checked against ONNX's reference implementation.

    check_node("Add", {"a": x, "b": y}, opset=17)
    check_node("Reshape", {"x": x}, constants={"shape": np.array([2, -1])})

Inputs in ``inputs`` become graph inputs (so the handler, not import-time folding, is what
runs); ``constants`` become initializers. ``dynamic`` names inputs whose first dimension is
declared symbolic, to exercise dynamic shapes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import tilecraft
from tilecraft.frontend.onnx import import_model


def make_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    *,
    constants: Mapping[str, np.ndarray] | None = None,
    attributes: Mapping[str, Any] | None = None,
    opset: int = 17,
    num_outputs: int = 1,
    input_order: Sequence[str] | None = None,
    dynamic: Sequence[str] = (),
) -> onnx.ModelProto:
    """A model with one ``op_type`` node; node inputs are ``input_order`` (default: inputs
    then constants, in the order given; use "" for an absent optional input)."""
    constants = dict(constants or {})
    order = list(input_order) if input_order is not None else [*inputs, *constants]
    graph_inputs = []
    for name, value in inputs.items():
        shape: list[Any] = list(value.shape)
        if name in dynamic and shape:
            shape[0] = "batch"
        graph_inputs.append(
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), shape)
        )
    outputs = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, order, outputs, name=f"{op_type.lower()}_node", **(attributes or {}))
    initializers = [onnx.numpy_helper.from_array(np.asarray(v), name) for name, v in constants.items()]
    graph = helper.make_graph(
        [node], f"test_{op_type}", graph_inputs,
        [helper.make_empty_tensor_value_info(o) for o in outputs], initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return onnx.shape_inference.infer_shapes(model)


def reference_outputs(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, dict(inputs))]


def check_node(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **model_options: Any,
) -> list[np.ndarray]:
    """Compile a one-node model with tilecraft and compare with the ONNX reference."""
    model = make_model(op_type, inputs, **model_options)
    expected = reference_outputs(model, inputs)
    compiled = tilecraft.compile(model)
    got = compiled(**inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype, f"{op_type}: dtype {g.dtype} != reference {e.dtype}"
        assert g.shape == e.shape, f"{op_type}: shape {g.shape} != reference {e.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=op_type)
    return got


def import_error(op_type: str, inputs: Mapping[str, np.ndarray], **model_options: Any) -> str:
    """The ModelImportError message for a one-node model; it must name the node."""
    with pytest.raises(tilecraft.ModelImportError) as error:
        import_model(make_model(op_type, inputs, **model_options))
    message = str(error.value)
    assert f"{op_type.lower()}_node" in message
    return message
