"""The TFLite frontend's structure: images stay NHWC through the compile, int8 convolutions
and dense layers reach the integer kernels, and bad files get typed errors."""

import re

import numpy as np
import pytest

from tflite_testing import convert, litert_run, model_inputs
from test_tflite_ops import MODELS

import tilecraft
from tilecraft.errors import ModelImportError
from tilecraft.frontend.tflite import import_tflite, tflite_to_onnx


def nhwc_net():
    """Convolutions (a transposed one too), pooling and a dense head: nothing TFLite itself
    transposes."""
    import keras
    from keras import layers

    x0 = keras.Input((10, 10, 4), batch_size=1)
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x0)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(16, 1)(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(x0, layers.Dense(4)(x))


@pytest.mark.parametrize("io", [None, "int8-io"])
def test_convolutions_stay_nhwc_without_transposes(tflite_folder, io):
    """Each conv/pool is written between NHWC->NCHW->NHWC transposes (int8: of the 8-bit
    values); the layout pass must cancel every pair, leaving no transpose."""
    path = convert(tflite_folder, "nhwc", nhwc_net, int8=io)
    compiled = tilecraft.compile(str(path), keep_ir=True)
    graph_ir = compiled.ir("graph")
    assert "linalg.transpose" not in graph_ir
    assert "linalg.depthwise_conv_2d_nhwc_hwc" in graph_ir and "linalg.pooling_nhwc_max" in graph_ir
    inputs = model_inputs(path)
    expected = litert_run(path, inputs)[0]
    if io is None:
        assert len(re.findall(r"linalg\.conv_2d_nhwc_hwcf", graph_ir)) == 3
        np.testing.assert_allclose(compiled(*inputs), expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))
    else:  # the three convolutions are integer im2col matmuls on NHWC windows
        assert np.abs(compiled(*inputs).astype(np.int32) - expected.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("kernel,stride,padding,io", [
    (3, 2, "same", None), (2, 2, "valid", None), pytest.param(4, 2, "same", None, marks=pytest.mark.slow),
    pytest.param(1, 3, "valid", None, marks=pytest.mark.slow), (5, 3, "same", "int8-io")])
def test_transposed_convolutions_match_litert(tflite_folder, kernel, stride, padding, io):
    """TRANSPOSE_CONV as a zero-inserted NHWC convolution: kernels smaller than, equal to and
    larger than the stride, both paddings."""
    def build():
        import keras

        x0 = keras.Input((5, 7, 3), batch_size=1)
        y = keras.layers.Conv2DTranspose(4, kernel, strides=stride, padding=padding,
                                         bias_initializer="random_normal")(x0)
        return keras.Model(x0, y)

    path = convert(tflite_folder, f"transpose_conv_{kernel}_{stride}_{padding}", build, int8=io)
    inputs = model_inputs(path)
    expected = litert_run(path, inputs)[0]
    got = tilecraft.compile(str(path))(*inputs)
    if io is None:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))
    else:
        assert np.abs(got.astype(np.int32) - expected.astype(np.int32)).max() <= 1


def test_int8_convolutions_and_dense_become_integer_products(tflite_folder):
    """Per-channel int8 filters stay int8 behind a DequantizeLinear, in the QDQ form that
    qdq.py turns into ConvInteger/MatMulInteger (the int8 kernels)."""
    from tilecraft.frontend.onnx.qdq import integer_qdq_matmuls

    path = convert(tflite_folder, "conv", MODELS["conv"][0], int8="float-io")
    proto = tflite_to_onnx(path)
    per_channel = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"
                   and any(a.name == "axis" for a in n.attribute)]
    assert per_channel
    rewritten = [n.op_type for n in integer_qdq_matmuls(proto).graph.node]
    # CONV_2D twice and TRANSPOSE_CONV (a convolution of the zero-inserted input); the
    # depthwise one is grouped, which qdq.py leaves in float.
    assert rewritten.count("ConvInteger") == 3 and rewritten.count("MatMulInteger") == 1


def test_import_tflite_gives_an_mlir_module(tflite_folder):
    path = convert(tflite_folder, "nhwc", nhwc_net)
    module = import_tflite(path.read_bytes())
    assert "func.func @main" in str(module)


def test_truncated_files_are_refused(tflite_folder):
    data = convert(tflite_folder, "nhwc", nhwc_net).read_bytes()
    for length in (0, 7, 12, 64, len(data) // 3, len(data) // 2, len(data) - 16):
        with pytest.raises(ModelImportError, match="truncated|too short|corrupt|outside|past the end"):
            tflite_to_onnx(data[:length])


def test_a_file_with_the_wrong_identifier_is_refused(tflite_folder, tmp_path):
    data = bytearray(convert(tflite_folder, "nhwc", nhwc_net).read_bytes())
    data[4:8] = b"ONNX"
    path = tmp_path / "model.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelImportError, match=r"not a TFLite model .*ONNX"):
        tilecraft.compile(str(path))


def test_an_unsupported_operator_is_named_with_its_index(tflite_folder):
    def cumulative():
        import keras
        from keras import layers, ops

        x0 = keras.Input((4, 6), batch_size=1)
        y = layers.Lambda(lambda t: ops.cumsum(t, axis=-1))(layers.Activation("relu")(x0))
        return keras.Model(x0, y)

    path = convert(tflite_folder, "cumsum", cumulative)
    with pytest.raises(ModelImportError, match=r"unsupported TFLite operator.*CUMSUM \(operator 1\)") as error:
        tilecraft.compile(str(path))
    assert error.value.problems == [("operator 1", "CUMSUM", "no converter")]


def test_load_describes_the_tflite_model(tflite_folder):
    path = convert(tflite_folder, "nhwc", nhwc_net)
    model = tilecraft.load(str(path))
    assert model.name == "nhwc.tflite"
    assert [(t.dtype, t.shape) for t in model.inputs] == [("float32", (1, 10, 10, 4))]
    assert [t.shape for t in model.outputs] == [(1, 4)]
    assert model.operators["CONV_2D"] == 2 and model.operators["TRANSPOSE_CONV"] == 1 and model.operators["FULLY_CONNECTED"] == 1
    inputs = model_inputs(path)
    np.testing.assert_allclose(tilecraft.compile(model)(*inputs), litert_run(path, inputs)[0], rtol=1e-4, atol=1e-5)


def test_corrupt_bytes_give_typed_errors(tflite_folder):
    """Bytes overwritten anywhere in the flatbuffer (offsets, lengths, option tables): the
    result is a ModelImportError or a converted model, never another exception."""
    data = convert(tflite_folder, "nhwc", nhwc_net).read_bytes()
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(300):
        corrupt = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            corrupt[int(rng.integers(8, min(len(data), 6000)))] = int(rng.integers(0, 256))
        try:
            tflite_to_onnx(bytes(corrupt))
        except ModelImportError:
            refused += 1
    assert refused > 0


def test_a_missing_extra_is_named(tflite_folder, monkeypatch):
    path = convert(tflite_folder, "nhwc", nhwc_net)
    monkeypatch.setitem(__import__("sys").modules, "tflite", None)  # as if not installed
    with pytest.raises(ModelImportError, match=r"needs the 'tflite' extra"):
        tflite_to_onnx(path)
