"""LayerNorm over channels as ConvNeXt and Swin export it, in both ONNX spellings: the opset-17
``LayerNormalization`` op and the decomposed ``ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div``
chain (older exporters, hand-written ``LayerNorm2d`` modules), over the last axis of
channels-last tensors and over axis 1 of NCHW ones, odd channel counts, one and two threads,
against onnxruntime. And the structure: on two threads each spelling is one kernel (its two
row reductions and the normalization in one loop nest), so the decomposed form gets the same
fast path as the op (issue #43, wt-norms)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.schedule.group import count_kernels
from mlir import ir

EPSILON = 1e-6


def _model(nodes: list, x_shape: list[int], constants: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "layer_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape)],
        initializer=[numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _params(channels: int, rank: int, axis: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(channels)
    shape = [channels] if axis == rank - 1 else [channels] + [1] * (rank - 1 - axis)
    return {"gamma": rng.uniform(0.5, 1.5, shape).astype(np.float32),
            "beta": rng.uniform(-0.5, 0.5, shape).astype(np.float32),
            "eps": np.array(EPSILON, np.float32), "two": np.array(2.0, np.float32)}


def op_spelling(x_shape: list[int], axis: int) -> onnx.ModelProto:
    """The opset-17 op; over axis 1 of NCHW as ConvNeXt's LayerNorm2d: transposed to channels
    last, normalized, transposed back."""
    rank = len(x_shape)
    constants = _params(x_shape[axis], rank, rank - 1)
    norm = helper.make_node("LayerNormalization", ["t", "gamma", "beta"], ["n"], axis=-1, epsilon=EPSILON)
    if axis == rank - 1:
        norm.input[0], norm.output[0] = "x", "y"
        return _model([norm], x_shape, constants)
    return _model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), norm,
                   helper.make_node("Transpose", ["n"], ["y"], perm=[0, 3, 1, 2])], x_shape, constants)


def decomposed_spelling(x_shape: list[int], axis: int) -> onnx.ModelProto:
    """``(x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta`` as torch exports a
    hand-written norm (opset 17: ReduceMean's axes an attribute)."""
    constants = _params(x_shape[axis], len(x_shape), axis)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[axis], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["centered"]),
        helper.make_node("Pow", ["centered", "two"], ["squared"]),
        helper.make_node("ReduceMean", ["squared"], ["variance"], axes=[axis], keepdims=1),
        helper.make_node("Add", ["variance", "eps"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["std"]),
        helper.make_node("Div", ["centered", "std"], ["normalized"]),
        helper.make_node("Mul", ["normalized", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    return _model(nodes, x_shape, constants)


CASES = {
    "channels_last_odd": ([1, 14, 14, 37], 3),   # Swin / ConvNeXt block: [.., C] rows
    "tokens_odd": ([1, 49, 91], 2),              # Swin's [B, tokens, C]
    "nchw_axis1_odd": ([1, 37, 13, 11], 1),      # ConvNeXt's LayerNorm2d
    "nchw_axis1_96": ([1, 96, 14, 14], 1),
}


def _reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("spelling", [op_spelling, decomposed_spelling])
@pytest.mark.parametrize("case", CASES)
def test_matches_onnxruntime(case, spelling, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    shape, axis = CASES[case]
    model = spelling(shape, axis)
    # An offset and a scale unlike 0 and 1, so a one-pass variance would lose digits.
    x = (np.random.default_rng(1).standard_normal(shape) * 3 + 20).astype(np.float32)
    got = tilecraft.compile(model)(x=x)
    np.testing.assert_allclose(got, _reference(model, x), rtol=2e-5, atol=2e-5)


def _kernels(model: onnx.ModelProto) -> int:
    compiled = tilecraft.compile(model)
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        return count_kernels(ir.Module.parse(compiled.ir("schedule")).operation)


@pytest.mark.parametrize("shape,axis", [([1, 56, 56, 37], 3), ([1, 3136, 91], 2), ([1, 37, 56, 56], 1)])
def test_both_spellings_are_one_kernel_on_two_threads(shape, axis, monkeypatch):
    """At Swin's and ConvNeXt's first-stage sizes. (A norm below the planner's parallel-work
    threshold, or any norm on one thread, has no thread level and stays one loop nest per
    op: five kernels; see docs/performance.md, "ConvNeXt and Swin outside attention".)"""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    assert _kernels(op_spelling(shape, axis)) == 1
    assert _kernels(decomposed_spelling(shape, axis)) == 1
