"""ONNX models with dynamic input dims compile a static version per call shape
(compiler/specialized.py, ``CompileOptions.specialize_shapes``): results against
onnxruntime through both modules, the limit, errors that stay the dynamic module's, and
the option's bad values."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.compiler.specialized import ShapeSpecializedModule  # noqa: E402
from tilecraft.errors import OptionError, TilecraftError  # noqa: E402


def _dynamic_mlp(features: int = 24, hidden: int = 40):
    """x (batch, features) -> Gemm + Relu -> Gemm, batch symbolic."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((features, hidden)).astype(np.float32), "w1"),
               numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b1"),
               numpy_helper.from_array(rng.standard_normal((hidden, 8)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "dynamic_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _reference(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_each_new_shape_gets_a_static_compile():
    model = _dynamic_mlp()
    compiled = tilecraft.compile(model, specialize_shapes=2)
    assert isinstance(compiled, ShapeSpecializedModule)
    rng = np.random.default_rng(1)
    for batch in (5, 5, 7, 5, 9, 7):
        x = rng.standard_normal((batch, 24)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), _reference(model, x), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(compiled(x=x), _reference(model, x), rtol=1e-4, atol=1e-4)
    # Two static modules (the limit); batch 9 stays with the dynamic one.
    assert set(compiled.specializations) == {((5, 24),), ((7, 24),)}
    static = compiled.specializations[((5, 24),)]
    assert isinstance(static, tilecraft.CompiledModule)
    assert all(d is not None for d in static.signature.arguments[0].shape)
    # The wrapper shows the dynamic module's attributes.
    assert compiled.signature.arguments[0].shape == (None, 24)
    assert "linalg" in compiled.ir("simplify")


def test_bad_calls_raise_the_dynamic_modules_errors():
    compiled = tilecraft.compile(_dynamic_mlp())
    with pytest.raises(TilecraftError, match="24|dimension|shape"):
        compiled(np.zeros((3, 25), np.float32))
    with pytest.raises(TilecraftError):
        compiled(np.zeros((3, 24), np.float32), np.zeros(2, np.float32))
    with pytest.raises(TilecraftError):
        compiled(y=np.zeros((3, 24), np.float32))
    assert not compiled.specializations  # nothing was compiled for calls that failed


def test_static_models_and_zero_keep_the_compiled_module():
    model = _dynamic_mlp()
    assert type(tilecraft.compile(model, specialize_shapes=0)) is tilecraft.CompiledModule
    assert type(tilecraft.compile(model, shape_dict={"x": [4, 24]})) is tilecraft.CompiledModule


@pytest.mark.parametrize("value", [-1, 1.5, True, "4"])
def test_bad_specialize_shapes_is_an_option_error(value):
    with pytest.raises(OptionError, match="specialize_shapes"):
        tilecraft.compile(_dynamic_mlp(), specialize_shapes=value)


def test_time_evaluator_times_the_specialized_module():
    compiled = tilecraft.compile(_dynamic_mlp(), specialize_shapes=1)
    x = np.ones((3, 24), np.float32)
    timing = compiled.time_evaluator(number=2, repeat=2)(x)
    assert len(timing.per_call) == 2 and set(compiled.specializations) == {((3, 24),)}
