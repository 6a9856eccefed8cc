"""Keras 3 models through tilecraft (frontend/keras): real models built with Keras, outputs
against ``model.predict`` within 1e-4 relative; saved .keras and .h5 round trips; the
models and layers it refuses, by name."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
keras = pytest.importorskip("keras")
pytest.importorskip("onnx")

import tilecraft  # noqa: E402
from tilecraft.errors import ModelImportError  # noqa: E402
from tilecraft.frontend.keras import import_keras  # noqa: E402

L = keras.layers


def _check(model, *inputs) -> None:
    """tilecraft's outputs vs Keras' predict: within 1e-4 of the output's magnitude. The
    batch is fixed through shape_dict (TVM's from_keras(model, shape_dict)), keyed by the
    Keras input layers' names."""
    names = [i.name for i in import_keras(model).graph.input]
    compiled = tilecraft.compile(model, shape_dict={n: list(x.shape) for n, x in zip(names, inputs)})
    got = compiled(*inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    want = model.predict(list(inputs) if len(inputs) > 1 else inputs[0], verbose=0)
    want = want if isinstance(want, list) else [want]
    assert len(got) == len(want)
    for ours, theirs in zip(got, want):
        scale = max(float(np.max(np.abs(theirs))), 1e-6)
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-4, atol=1e-4 * scale)


def _randomize_batch_norms(model, rng) -> None:
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            channels = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.standard_normal(channels).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, channels).astype(np.float32))


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    keras.utils.set_random_seed(0)
    return np.random.default_rng(0)


def test_image_layers(rng):
    """Convolutions of every kind, pooling, normalization, merges, padding, upsampling and
    the activations of the Keras applications, NHWC."""
    inputs = keras.Input((16, 16, 3), name="image")
    h = L.Conv2D(8, 3, padding="same", activation="relu6")(inputs)
    h = L.BatchNormalization()(h)
    h = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="swish")(h)
    h = L.SeparableConv2D(8, 3, activation="hard_swish")(h)
    side = L.Conv2D(8, 1, activation="gelu")(h)
    h = L.Concatenate()([L.Multiply()([L.Add()([h, side]), side]), side])
    h = L.ZeroPadding2D(((1, 0), (2, 1)))(h)
    h = L.MaxPooling2D(padding="same")(h)
    h = L.AveragePooling2D(2, strides=1, padding="same")(h)
    h = L.UpSampling2D(2)(h)
    h = L.Activation("sigmoid")(L.LayerNormalization()(h))
    pooled = L.GlobalAveragePooling2D()(h)
    flat = L.Dropout(0.5)(L.Dense(10, activation="tanh")(L.Flatten()(h)))
    outputs = L.Dense(5, activation="softmax", name="probabilities")(L.Concatenate()([pooled, flat]))
    model = keras.Model(inputs, outputs)
    _randomize_batch_norms(model, rng)
    proto = import_keras(model)
    assert [i.name for i in proto.graph.input] == ["image"]
    assert [o.name for o in proto.graph.output] == ["probabilities"]
    _check(model, rng.standard_normal((2, 16, 16, 3)).astype(np.float32))


def test_sequence_layers(rng):
    model = keras.Sequential([
        keras.Input((12, 4)),
        L.Conv1D(6, 3, padding="causal", activation="elu"),
        L.MaxPooling1D(2),
        L.Conv1D(4, 3, padding="same", dilation_rate=2),
        L.GlobalMaxPooling1D(),
        L.Reshape((2, 2)),
        L.Permute((2, 1)),
        L.Flatten(),
        L.RepeatVector(3),
        L.LeakyReLU(),
        L.PReLU(),
        L.Softmax(),
    ])
    _check(model, rng.standard_normal((3, 12, 4)).astype(np.float32))


def test_multi_head_attention(rng):
    query = keras.Input((6, 16), name="query")
    context = keras.Input((5, 16), name="context")
    attended = L.MultiHeadAttention(num_heads=4, key_dim=8)(query, context)
    normed = L.LayerNormalization()(L.Add()([attended, query]))
    self_attended = L.MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)(normed, normed, normed)
    model = keras.Model([query, context], [normed, self_attended])
    _check(model, rng.standard_normal((2, 6, 16)).astype(np.float32),
           rng.standard_normal((2, 5, 16)).astype(np.float32))


def test_saved_keras_and_h5_round_trip(rng, tmp_path):
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        L.Conv2D(4, 3, activation="relu"),
        L.BatchNormalization(),
        L.MaxPooling2D(),
        L.Flatten(),
        L.Dense(10, activation="softmax"),
    ])
    _randomize_batch_norms(model, rng)
    x = rng.standard_normal((3, 8, 8, 1)).astype(np.float32)
    want = model.predict(x, verbose=0)
    for name in ("model.keras", "model.h5"):
        path = tmp_path / name
        model.save(path)
        loaded = tilecraft.load(path, shape_dict={model.inputs[0]._keras_history.operation.name: [3, 8, 8, 1]})
        assert loaded.name == name and loaded.inputs[0].shape == (3, 8, 8, 1)
        np.testing.assert_allclose(tilecraft.compile(loaded)(x), want, rtol=1e-4, atol=1e-6)


def test_weights_only_h5_is_refused(tmp_path):
    model = keras.Sequential([keras.Input((3,)), L.Dense(2)])
    path = tmp_path / "only.weights.h5"
    model.save_weights(path)
    with pytest.raises(ModelImportError, match="weights only"):
        tilecraft.load(path)


def test_unsupported_layers_are_all_named():
    inputs = keras.Input((4, 3))
    hidden = L.Dense(3, name="hidden")(inputs)
    doubled = L.Lambda(lambda t: t * 2, name="doubler")(hidden)
    outputs = L.LSTM(2, name="recurrent")(doubled)
    expected = r"'doubler' \(Lambda\); 'recurrent' \(LSTM\): Lambda is not supported"
    with pytest.raises(ModelImportError, match=expected) as error:
        tilecraft.compile(keras.Model(inputs, outputs))
    assert [p[:2] for p in error.value.problems] == [("doubler", "Lambda"), ("recurrent", "LSTM")]


def test_subclassed_model_is_refused():
    class Doubler(keras.Model):
        def call(self, x):
            return x * 2

    model = Doubler()
    model(np.ones((1, 2), np.float32))
    with pytest.raises(ModelImportError, match="subclassed keras.Model"):
        tilecraft.compile(model)
