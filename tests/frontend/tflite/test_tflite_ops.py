"""Each TFLite operator the frontend converts, in small Keras models converted by
TensorFlow's converter, against LiteRT's interpreter: float within 1e-4 relative, full int8
within one quantization step of the output."""

import numpy as np
import pytest

from tflite_testing import convert, litert_run, model_inputs, operator_names, output_steps

import tilecraft


def _input(shape):
    import keras

    return keras.Input(shape[1:], batch_size=shape[0])


def conv_net():
    """CONV_2D (fused RELU, SAME), DEPTHWISE_CONV_2D (stride 2, RELU6), TRANSPOSE_CONV,
    MAX_POOL_2D, AVERAGE_POOL_2D, MEAN, RELU6, FULLY_CONNECTED, SOFTMAX."""
    import keras
    from keras import layers

    bias = keras.initializers.RandomNormal(stddev=0.5)
    x0 = _input((1, 12, 12, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="relu", bias_initializer=bias)(x0)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", bias_initializer=bias)(x)
    x = layers.ReLU(6.0)(x)
    x = layers.Conv2D(8, 1, padding="valid", bias_initializer=bias)(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="same", bias_initializer=bias)(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = layers.AveragePooling2D(2, strides=1, padding="valid")(x)
    x = layers.ReLU(6.0)(layers.GlobalAveragePooling2D()(x))
    x = layers.Dense(10, activation="softmax", bias_initializer=bias)(x)
    return keras.Model(x0, x)


def elementwise_net():
    """ADD, SUB, MUL, DIV, LOGISTIC, TANH, RELU, HARD_SWISH, GELU, CONCATENATION."""
    import keras
    from keras import layers, ops

    a, b = _input((1, 4, 6, 8)), _input((1, 4, 6, 8))
    s = layers.Add()([a, b])
    d = layers.Subtract()([a, b])
    m = layers.Multiply()([s, d])
    q = layers.Lambda(lambda t: ops.divide(t[0], ops.abs(t[1]) + 1.0))([m, b])
    parts = [layers.Activation("sigmoid")(q), layers.Activation("tanh")(a), layers.Activation("relu")(d),
             layers.Activation("hard_swish")(s),
             layers.Activation(lambda t: keras.activations.gelu(t, approximate=True))(b)]
    return keras.Model([a, b], layers.Concatenate(axis=-1)(parts))


def shape_net():
    """RESHAPE, TRANSPOSE, SPLIT, STRIDED_SLICE, PAD, BATCH_MATMUL, RESIZE_BILINEAR,
    RESIZE_NEAREST_NEIGHBOR (the converter writes a static squeeze as a RESHAPE)."""
    import keras
    from keras import layers, ops

    x0 = _input((1, 6, 8, 4))
    padded = layers.ZeroPadding2D(((1, 0), (2, 1)))(x0)                     # 1x7x11x4
    sliced = padded[:, 1:7:2, ::2, :]                                       # 1x3x6x4
    left, right = ops.split(sliced, 2, axis=-1)                            # 1x3x6x2 each
    rows = layers.Reshape((3, 12))(left)
    cols = layers.Permute((2, 1))(layers.Reshape((3, 12))(right))          # 1x12x3
    product = ops.matmul(rows, cols)                                       # 1x3x3
    squeezed = ops.squeeze(layers.Reshape((1, 3, 3))(product), axis=1)
    up_linear = layers.UpSampling2D(2, interpolation="bilinear")(x0)
    up_nearest = layers.Resizing(12, 16, interpolation="nearest")(x0)
    channels_first = layers.Permute((3, 1, 2))(x0)
    return keras.Model(x0, [squeezed, up_linear, up_nearest, channels_first])


MODELS = {
    "conv": (conv_net, {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                        "MEAN", "RELU6", "FULLY_CONNECTED", "SOFTMAX"}),
    "elementwise": (elementwise_net, {"ADD", "SUB", "MUL", "DIV", "LOGISTIC", "TANH", "RELU", "HARD_SWISH",
                                      "GELU", "CONCATENATION"}),
    "shape": (shape_net, {"RESHAPE", "TRANSPOSE", "SPLIT", "STRIDED_SLICE", "PAD", "BATCH_MATMUL",
                          "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"}),
}


def _outputs(compiled, inputs):
    results = compiled(*inputs)
    return list(results) if isinstance(results, (list, tuple)) else [results]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float_models_match_litert(tflite_folder, name):
    build, expected_ops = MODELS[name]
    path = convert(tflite_folder, name, build)
    assert expected_ops <= operator_names(path), operator_names(path)
    inputs = model_inputs(path)
    expected = litert_run(path, inputs)
    got = _outputs(tilecraft.compile(str(path)), inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))


@pytest.mark.parametrize("name,io", [("conv", "float-io"), ("elementwise", "int8-io"), ("shape", "int8-io"),
                                     pytest.param("conv", "uint8-io", marks=pytest.mark.slow)])
def test_int8_models_within_one_step_of_litert(tflite_folder, name, io):
    build, expected_ops = MODELS[name]
    path = convert(tflite_folder, name, build, int8=io)
    ops = operator_names(path)
    assert expected_ops <= ops, ops
    if io == "float-io":
        assert {"QUANTIZE", "DEQUANTIZE"} <= ops
    inputs = model_inputs(path)
    expected = litert_run(path, inputs)
    got = _outputs(tilecraft.compile(str(path)), inputs)
    for g, e, step in zip(got, expected, output_steps(path)):
        assert g.shape == e.shape and g.dtype == e.dtype
        if e.dtype.kind == "f":
            np.testing.assert_array_less(np.abs(g - e), step * 1.001 + 1e-6)
        else:
            assert np.abs(g.astype(np.int32) - e.astype(np.int32)).max() <= 1
