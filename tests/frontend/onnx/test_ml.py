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


def random_forest(trees: int, features: int, targets: int, *, depth: int = 3, members: bool = True):
    """TreeEnsemble attributes of ``trees`` random trees: every comparison mode, set
    membership, missing values tracked true on some nodes."""
    nodes, leaves, roots, sets = [], [], [], []
    rng = np.random.default_rng(trees * 7 + features)

    def grow(level: int) -> tuple[int, bool]:
        if level == depth or (level > 1 and rng.random() < 0.3):
            leaves.append((int(rng.integers(targets)), float(rng.uniform(-5, 5))))
            return len(leaves) - 1, True
        index = len(nodes)
        mode = int(rng.integers(7 if members else 6))
        nodes.append({"feature": int(rng.integers(features)), "split": float(rng.normal()), "mode": mode,
                      "missing": int(rng.random() < 0.5)})
        if mode == 6:  # (no 0 in a set: ONNX's reference stops reading a set at a 0, as at its NaN end)
            sets.append(rng.choice([-1.0, 0.5, 1.0, 2.0], size=2, replace=False))
        nodes[index]["true"] = grow(level + 1)
        nodes[index]["false"] = grow(level + 1)
        return index, False

    for _ in range(trees):
        roots.append(grow(0)[0])
    attributes = {
        "nodes_featureids": [n["feature"] for n in nodes],
        "nodes_splits": helper.make_tensor("s", TensorProto.FLOAT, [len(nodes)], [n["split"] for n in nodes]),
        "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [len(nodes)], [n["mode"] for n in nodes]),
        "nodes_truenodeids": [n["true"][0] for n in nodes], "nodes_trueleafs": [int(n["true"][1]) for n in nodes],
        "nodes_falsenodeids": [n["false"][0] for n in nodes], "nodes_falseleafs": [int(n["false"][1]) for n in nodes],
        "nodes_missing_value_tracks_true": [n["missing"] for n in nodes],
        "leaf_targetids": [t for t, _ in leaves],
        "leaf_weights": helper.make_tensor("w", TensorProto.FLOAT, [len(leaves)], [w for _, w in leaves]),
        "tree_roots": roots, "n_targets": targets,
    }
    if sets:
        flat = np.concatenate([np.append(s, np.nan) for s in sets]).astype(np.float32)
        attributes["membership_values"] = helper.make_tensor("mv", TensorProto.FLOAT, [len(flat)], flat)
    return attributes


def tree_model(attributes, samples: int, features: int, targets: int):
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attributes)
    graph = helper.make_graph([node], "forest", [value("x", TensorProto.FLOAT, [samples, features])],
                              [value("y", TensorProto.FLOAT, [samples, targets])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 5), helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_matches_the_reference(aggregate):
    attributes = random_forest(12, 4, 3)
    attributes["aggregate_function"] = aggregate
    x = RNG.choice([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan], size=(40, 4)).astype(np.float32)
    x[::3] = RNG.standard_normal((14, 4)).astype(np.float32)
    model = tree_model(attributes, 40, 4, 3)
    np.testing.assert_allclose(tilecraft.compile(model)(x=x), reference_outputs(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_tree_ensemble_logistic_post_transform():
    attributes = {**random_forest(5, 3, 2, members=False), "post_transform": 2}
    x = RNG.standard_normal((8, 3)).astype(np.float32)
    model = tree_model(attributes, 8, 3, 2)
    raw = reference_outputs(tree_model({**attributes, "post_transform": 0}, 8, 3, 2), {"x": x})[0]
    np.testing.assert_allclose(tilecraft.compile(model)(x=x), 1 / (1 + np.exp(-raw)), rtol=1e-6)


def test_malformed_trees_are_import_errors():
    good = random_forest(2, 3, 2, members=False)
    cyclic = {**good, "nodes_truenodeids": [0] * len(good["nodes_truenodeids"]),
              "nodes_trueleafs": [0] * len(good["nodes_trueleafs"])}
    outside = {**good, "leaf_targetids": [5] * len(good["leaf_targetids"])}
    softmax = {**good, "post_transform": 1}
    for attributes, message in ((cyclic, "twice"), (outside, "target id"), (softmax, "SOFTMAX")):
        with pytest.raises(tilecraft.ModelImportError, match=message):
            tilecraft.compile(tree_model(attributes, 4, 3, 2))


def test_tree_ensemble_set_membership_holds_zero():
    """A set with 0 in it (which ONNX's reference would cut short at the 0): as the spec
    reads it, membership of 0 and 3."""
    attributes = {
        "nodes_featureids": [0], "nodes_splits": helper.make_tensor("s", TensorProto.FLOAT, [1], [0.0]),
        "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [1], [6]),
        "nodes_truenodeids": [0], "nodes_trueleafs": [1], "nodes_falsenodeids": [1], "nodes_falseleafs": [1],
        "leaf_targetids": [0, 0], "leaf_weights": helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0]),
        "tree_roots": [0], "n_targets": 1,
        "membership_values": helper.make_tensor("mv", TensorProto.FLOAT, [3], [0.0, 3.0, np.nan]),
    }
    x = np.array([[0.0], [3.0], [1.0], [np.nan]], np.float32)
    got = tilecraft.compile(tree_model(attributes, 4, 1, 1))(x=x)
    np.testing.assert_array_equal(got[:, 0], [1.0, 1.0, 2.0, 2.0])
