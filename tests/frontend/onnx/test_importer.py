"""The ONNX importer's own behaviour: loading, dynamic batch, folding, weights, bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import tilecraft
from tilecraft.frontend.onnx import import_model

from onnx_testing import check_node, make_model


def test_add_broadcast_against_reference():
    rng = np.random.default_rng(0)
    check_node("Add", {"a": rng.standard_normal((3, 4), dtype=np.float32),
                       "b": rng.standard_normal((4,), dtype=np.float32)})


def test_dynamic_batch_accepts_any_batch_size():
    x = np.ones((2, 5), np.float32)
    model = make_model("Relu", {"x": x}, dynamic=["x"])
    module = import_model(model)
    assert "tensor<?x5xf32>" in str(module)
    compiled = tilecraft.compile(model)
    for batch in (1, 3, 8):
        value = np.random.default_rng(batch).standard_normal((batch, 5), dtype=np.float32)
        np.testing.assert_array_equal(compiled(x=value), np.maximum(value, 0))


def test_weights_are_resources_not_text():
    weight = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
    model = make_model("Add", {"x": np.ones((64, 64), np.float32)}, constants={"w": weight})
    text = str(import_model(model))
    assert "dense_resource<w>" in text
    assert f"{weight[0, 0]:.6}" not in text.split("{-#")[0]


def test_shape_arithmetic_folds_at_import():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 12])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i"], value=onnx.numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "i"], ["d0"], axis=0),
        helper.make_node("Constant", [], ["m1"], value=onnx.numpy_helper.from_array(np.array([-1], np.int64))),
        helper.make_node("Unsqueeze", ["d0", "zero"], ["d0u"]),
        helper.make_node("Concat", ["d0u", "m1"], ["shape"], axis=0),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["y"]),
    ]
    zero = onnx.numpy_helper.from_array(np.array([0], np.int64), "zero")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [zero]),
                              opset_imports=[helper.make_opsetid("", 17)])
    pytest.importorskip("onnx")
    if tilecraft.frontend.onnx.registry.lookup("Reshape", 17) is None:
        pytest.skip("Reshape not implemented yet")
    text = str(import_model(model))
    assert "tensor.dim" not in text and "Shape" not in text


def test_unsupported_ops_listed_all_at_once():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="fine"),
             helper.make_node("NoSuchOp", ["a"], ["b"], name="first_bad"),
             helper.make_node("AlsoMissing", ["b"], ["y"], name="second_bad", domain="com.example")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(tilecraft.ModelImportError) as error:
        import_model(model)
    message = str(error.value)
    assert "NoSuchOp (node 'first_bad'" in message and "AlsoMissing (node 'second_bad'" in message
    assert [p[0] for p in error.value.problems] == ["first_bad", "second_bad"]


def test_not_onnx_and_truncated_files(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(tilecraft.ModelImportError, match="not a valid ONNX model|no graph"):
        import_model(garbage)
    model = make_model("Relu", {"x": np.ones((2, 2), np.float32)})
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(model.SerializeToString()[:20])
    with pytest.raises(tilecraft.ModelImportError):
        import_model(truncated)
    with pytest.raises(tilecraft.ModelImportError, match="no such"):
        tilecraft.compile(tmp_path / "missing.onnx")


def test_a_model_file_is_read_once_and_named_in_messages(tmp_path, monkeypatch):
    """compile and extract_tasks look for string tensors in the loaded graph, then import
    that same proto: a file is read once (ResNet-50's 100 MB took 0.17 s a read), and an
    import error still names the file, not "model.onnx"."""
    path = tmp_path / "relu.onnx"
    x = np.ones((4, 8), np.float32)
    onnx.save(make_model("Relu", {"x": x}), str(path))
    reads = []
    real_load = onnx.load
    monkeypatch.setattr(onnx, "load", lambda *args, **kwargs: reads.append(args) or real_load(*args, **kwargs))
    np.testing.assert_array_equal(tilecraft.compile(str(path))(x), x)
    assert len(reads) == 1
    tilecraft.extract_tasks(str(path))
    assert len(reads) == 2
    bad = helper.make_model(
        helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    bad_path = tmp_path / "bad.onnx"
    onnx.save(bad, str(bad_path))
    for call in (tilecraft.compile, tilecraft.extract_tasks):
        with pytest.raises(tilecraft.ModelImportError, match="NoSuchOp") as error:
            call(str(bad_path))
        assert str(bad_path) in str(error.value)
    with pytest.raises(tilecraft.ModelImportError) as error:
        tilecraft.compile(bad)
    assert "model.onnx" in str(error.value)


def test_unsupported_input_dtype_is_named():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.COMPLEX64, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.COMPLEX64, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(tilecraft.ModelImportError, match="COMPLEX64|Identity"):
        import_model(model)


def test_shape_dict_overrides_and_rejects_unknown_names():
    model = make_model("Relu", {"x": np.ones((2, 5), np.float32)}, dynamic=["x"])
    assert "tensor<7x5xf32>" in str(import_model(model, {"x": [7, 5]}))
    with pytest.raises(tilecraft.ModelImportError, match="unknown inputs"):
        import_model(model, {"nope": [1]})


def test_function_ops_expand_through_their_onnx_body():
    """RMSNormalization has no handler: it imports through the function ONNX defines."""
    x = np.random.default_rng(0).standard_normal((2, 3, 8), dtype=np.float32)
    scale = np.random.default_rng(1).standard_normal((8,), dtype=np.float32)
    check_node("RMSNormalization", {"x": x, "scale": scale}, attributes={"axis": -1}, opset=23,
               rtol=1e-4, atol=1e-5)


def test_old_opset_models_are_upgraded_by_the_version_converter():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 3
    value = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    np.testing.assert_array_equal(tilecraft.compile(model)(x=value), np.maximum(value, 0))


def test_ir3_model_with_initializers_not_listed_as_inputs():
    """IR 3 wanted every initializer among the inputs; onnxruntime's quantize_static adds
    scales and zero points to old models without listing them, and such models still run."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])
    w = onnx.numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    value = np.array([1, -1, 0.5], np.float32)
    np.testing.assert_array_equal(tilecraft.compile(model)(x=value), value + [1, 2, 3])
    model.graph.node[0].input[1] = "missing"
    with pytest.raises(tilecraft.ModelImportError, match="malformed"):
        tilecraft.compile(model)


def test_ir3_qdq_model_keeps_uint8_activations_unsigned():
    """quantize_static's output of an IR-3 model (QDQ, uint8 activations, per-channel int8
    weights, scales and zero points not listed as inputs) against the QDQ arithmetic in numpy
    (onnxruntime fuses it into u8 x s8 kernels that saturate on x86 hosts without VNNI).

    Shape inference used to run at IR 3, which ignores unlisted initializers: the
    QuantizeLinear output had no element type, its uint8 values >= 128 were dequantized as
    int8, and a QDQ ResNet-50's logits came out 30x too small."""

    rng = np.random.default_rng(0)
    k = n = 64
    weights = [
        onnx.numpy_helper.from_array(np.float32(0.02), "x_scale"),
        onnx.numpy_helper.from_array(np.uint8(10), "x_zero"),
        onnx.numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w_q"),
        onnx.numpy_helper.from_array(np.full(n, 0.01, np.float32), "w_scale"),
        onnx.numpy_helper.from_array(np.zeros(n, np.int8), "w_zero"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"], axis=1),
        helper.make_node("MatMul", ["x_dq", "w"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    outputs = [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [4, n]) for name in ("probs", "logits")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, k])],
                              outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 3
    x = rng.uniform(0, 4.5, (4, k)).astype(np.float32)  # quantized values up to 235
    x_dq = (np.clip(np.rint(x / np.float32(0.02)) + 10, 0, 255) - 10) * np.float32(0.02)
    logits = x_dq @ (onnx.numpy_helper.to_array(weights[2]).astype(np.float32) * np.float32(0.01))
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    expected = [probs / probs.sum(-1, keepdims=True), logits]
    got = tilecraft.compile(model)(x=x)
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-4, atol=1e-4)
