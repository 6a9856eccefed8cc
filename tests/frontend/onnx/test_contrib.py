"""onnxruntime's quantized ``com.microsoft`` ops (frontend/onnx/contrib.py) against
onnxruntime itself (the u8 x s8 matrix products against an exact numpy reference: onnxruntime
saturates them on x86 hosts without VNNI): each op alone, and a ResNet-50 quantized by
``quantize_static`` in QOperator format (slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from quantized_reference import qgemm, steps_apart

RNG = np.random.default_rng(0)
U8 = TensorProto.UINT8
X_PARAMETERS = {"xs": np.array(0.05, np.float32), "xz": np.array(120, np.uint8),
                "ys": np.array(0.02, np.float32), "yz": np.array(10, np.uint8)}


def contrib_model(node: "onnx.NodeProto", initializers: dict, inputs: dict, output_shape: list) -> "onnx.ModelProto":
    graph = helper.make_graph(
        [node], "contrib",
        [helper.make_tensor_value_info(name, U8, list(value.shape)) for name, value in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], U8, output_shape)],
        [numpy_helper.from_array(value, name) for name, value in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)


def against_onnxruntime(model: "onnx.ModelProto", inputs: dict, steps: int) -> np.ndarray:
    """tilecraft's output, checked to be within one quantization step of onnxruntime's in at
    most ``steps`` elements (its fixed-point kernels round a few values the other way) and
    equal elsewhere."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    (expected,) = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"]).run(None, inputs)
    got = tilecraft.compile(model, keep_ir=False)(*inputs.values())
    assert got.dtype == expected.dtype and got.shape == expected.shape
    difference = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    assert difference.max() <= 1 and np.count_nonzero(difference) <= steps, difference
    return got


def images(shape=(2, 8, 5, 5)) -> np.ndarray:
    return RNG.integers(0, 255, shape).astype(np.uint8)


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_binary_ops(op_type):
    parameters = {"as": np.array(0.05, np.float32), "az": np.array(120, np.uint8),
                  "bs": np.array(0.03, np.float32), "bz": np.array(100, np.uint8),
                  "cs": np.array(0.06, np.float32), "cz": np.array(128, np.uint8)}
    node = helper.make_node(op_type, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain="com.microsoft")
    against_onnxruntime(contrib_model(node, parameters, {"a": images(), "b": images()}, [2, 8, 5, 5]),
                        {"a": images(), "b": images()}, steps=16)  # of 400


@pytest.mark.parametrize("op_type, attributes, output_shape, parameters", [
    ("QLinearGlobalAveragePool", {"channels_last": 0}, [2, 8, 1, 1], {}),
    ("QLinearGlobalAveragePool", {"channels_last": 1}, [2, 1, 1, 5], {}),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [2, 8, 3, 3], {}),
    ("QLinearSigmoid", {}, [2, 8, 5, 5], {"ys": np.array(1 / 255, np.float32), "yz": np.array(0, np.uint8)}),
    ("QLinearLeakyRelu", {"alpha": 0.1}, [2, 8, 5, 5], {}),
])
def test_unary_ops(op_type, attributes, output_shape, parameters):
    node = helper.make_node(op_type, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft", **attributes)
    inputs = {"x": images()}
    against_onnxruntime(contrib_model(node, {**X_PARAMETERS, **parameters}, inputs, output_shape), inputs, steps=4)


@pytest.mark.parametrize("axis, opset", [(-1, 13), (1, 12)])
def test_softmax_by_the_opset_it_names(axis, opset):
    """Before opset 13, Softmax flattens its input to 2-D at ``axis``: over the last two
    dims of this 3-D input, not the middle one."""
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                            axis=axis, opset=opset)
    parameters = {**X_PARAMETERS, "ys": np.array(1 / 256, np.float32), "yz": np.array(0, np.uint8)}
    inputs = {"x": images((3, 4, 6))}
    got = against_onnxruntime(contrib_model(node, parameters, inputs, [3, 4, 6]), inputs, steps=2)
    assert abs(int(got[0].sum()) - (256 if opset == 12 else 4 * 256)) <= 24  # what each sums to 1 over


def test_concat_of_differently_quantized_inputs():
    parameters = {**X_PARAMETERS, "as": np.array(0.03, np.float32), "az": np.array(100, np.uint8)}
    node = helper.make_node("QLinearConcat", ["ys", "yz", "x", "xs", "xz", "a", "as", "az"], ["y"],
                            domain="com.microsoft", axis=1)
    inputs = {"x": images(), "a": images()}
    against_onnxruntime(contrib_model(node, parameters, inputs, [2, 16, 5, 5]), inputs, steps=4)


@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm_with_an_int32_bias(per_column):
    """Against the exact reference (tests/quantized_reference.py), not onnxruntime: its u8 x s8
    kernels saturate on x86 hosts without VNNI, and full-range operands reach that."""
    parameters = {"as": np.array(0.05, np.float32), "az": np.array(120, np.uint8),
                  "B": RNG.integers(-127, 127, (16, 32)).astype(np.int8),
                  "bs": np.linspace(0.01, 0.02, 16).astype(np.float32) if per_column else np.array(0.015, np.float32),
                  "bz": np.zeros(16, np.int8) if per_column else np.array(0, np.int8),
                  "C": RNG.integers(-3000, 3000, 16).astype(np.int32),
                  "ys": np.array(0.5, np.float32), "yz": np.array(128, np.uint8)}
    node = helper.make_node("QGemm", ["a", "as", "az", "B", "bs", "bz", "C", "ys", "yz"], ["y"],
                            domain="com.microsoft", transB=1)
    a = images((4, 32))
    got = tilecraft.compile(contrib_model(node, parameters, {"a": a}, [4, 16]), keep_ir=False)(a)
    expected = qgemm(a, *(parameters[k] for k in ("as", "az", "B", "bs", "bz", "C", "ys", "yz")), trans_b=True)
    assert 0 < np.count_nonzero(expected) and steps_apart(got, expected).max() == 0


def test_an_output_type_nobody_states_is_refused():
    """No zero point anywhere on the node and an input whose type shape inference cannot
    know (it comes out of another contrib op): refused, not guessed as uint8."""
    first = helper.make_node("QLinearSigmoid", ["x", "xs", "", "ys", ""], ["h"], domain="com.microsoft")
    second = helper.make_node("QLinearSigmoid", ["h", "ys", "", "ys", ""], ["y"], domain="com.microsoft")
    graph = helper.make_graph([first, second], "untyped", [helper.make_tensor_value_info("x", TensorProto.INT8, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [4])],
                              [numpy_helper.from_array(np.array(0.1, np.float32), n) for n in ("xs", "ys")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    with pytest.raises(tilecraft.ModelImportError, match=r"QLinearSigmoid.*cannot tell the output's quantized type"):
        tilecraft.compile(model)


def test_a_contrib_op_without_an_expansion_is_named():
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], domain="com.microsoft", activation="Relu")
    graph = helper.make_graph([node], "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    with pytest.raises(tilecraft.ModelImportError, match=r"FusedConv .*domain 'com.microsoft'"):
        tilecraft.compile(model)


@pytest.mark.slow
def test_qoperator_resnet50_against_onnxruntime(tmp_path):
    """A ResNet-50 quantized by onnxruntime's quantize_static in QOperator format (QLinearConv,
    and com.microsoft's QLinearAveragePool, QGemm and QLinearSoftmax): the softmax within one
    step of onnxruntime's, the same top class."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import int8_resnet50  # noqa: PLC0415  (quantize_static on the benchmarks' ResNet-50)

    _, model, name = int8_resnet50.quantized_resnet50(str(tmp_path), calibration=2, quant_format="QOperator")
    assert any(node.domain == "com.microsoft" for node in model.graph.node)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {name: x})
    got = tilecraft.compile(model, keep_ir=False)(x)
    probabilities = got[0] if isinstance(got, tuple) else got
    assert int(probabilities.argmax()) == int(expected[0].argmax())
    np.testing.assert_allclose(probabilities, expected[0], atol=1 / 255 + 1e-6)


def test_qgemm_without_an_output_scale_is_a_float_gemm():
    """QGemm with no y_scale returns float: alpha * A' @ B' + C' (onnxruntime's definition),
    checked against the exact reference."""
    parameters = {"as": np.array(0.05, np.float32), "az": np.array(120, np.uint8),
                  "B": RNG.integers(-127, 127, (32, 16)).astype(np.int8),
                  "bs": np.array(0.015, np.float32), "bz": np.array(0, np.int8),
                  "C": RNG.integers(-3000, 3000, 16).astype(np.int32)}
    node = helper.make_node("QGemm", ["a", "as", "az", "B", "bs", "bz", "C"], ["y"], domain="com.microsoft", alpha=0.5)
    graph = helper.make_graph([node], "qgemm_float", [helper.make_tensor_value_info("a", U8, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              [numpy_helper.from_array(value, name) for name, value in parameters.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    a = images((4, 32))
    got = tilecraft.compile(model, keep_ir=False)(a)
    assert got.dtype == np.float32
    expected = qgemm(a, *(parameters[k] for k in ("as", "az", "B", "bs", "bz", "C")), alpha=0.5)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_a_concat_without_whole_triples_is_refused():
    node = helper.make_node("QLinearConcat", ["ys", "yz", "x", "xs"], ["y"], domain="com.microsoft", axis=1)
    graph = helper.make_graph([node], "bad_concat", [helper.make_tensor_value_info("x", U8, [2, 8, 5, 5])],
                              [helper.make_tensor_value_info("y", U8, [2, 8, 5, 5])],
                              [numpy_helper.from_array(value, name) for name, value in X_PARAMETERS.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    with pytest.raises(tilecraft.ModelImportError, match=r"QLinearConcat.*triples"):
        tilecraft.compile(model)
