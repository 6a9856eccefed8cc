"""Sequences and optionals (frontend/onnx/ops/sequence.py) against onnxruntime: sequences
of known length, positions known at import or read at run time (including negative ones),
elements of different shapes chosen at run time."""

from __future__ import annotations

import numpy as np
import onnx

import onnxruntime
import pytest
from onnx import TensorProto, helper

import tilecraft

RNG = np.random.default_rng(11)


def run_both(nodes, inputs: dict, outputs: list[tuple[str, int]], opset: int = 17, constants=()):
    """``constants``: names of ``inputs`` that become initializers (known at import)."""
    initializers = [onnx.numpy_helper.from_array(inputs.pop(n), n) for n in constants]
    graph = helper.make_graph(
        nodes, "seq",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, o[0]) if o else helper.make_empty_tensor_value_info(n)
         for n, t, *o in outputs], initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # types the outputs
    del model.graph.value_info[:]  # sequences there lack the shape field the checker wants
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    got = tilecraft.compile(model)(**inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)
    return got


def tensors(*shapes):
    return {name: RNG.standard_normal(shape).astype(np.float32) for name, shape in zip("XYZ", shapes)}


@pytest.mark.parametrize("insert_at", [0, 1, 2, 3, -1])
@pytest.mark.parametrize("at", [0, 2, -1])
def test_insert_then_at_with_runtime_positions_and_ragged_elements(insert_at, at):
    inputs = tensors((2, 3), (1, 3), (4, 3))
    inputs["W"] = RNG.standard_normal((3, 3)).astype(np.float32)
    inputs["pos"] = np.array(insert_at, np.int64)
    inputs["at"] = np.array(at, np.int64)
    nodes = [
        helper.make_node("SequenceConstruct", ["X", "Y", "Z"], ["s"]),
        helper.make_node("SequenceInsert", ["s", "W", "pos"], ["s2"]),
        helper.make_node("SequenceAt", ["s2", "at"], ["out"]),
        helper.make_node("SequenceLength", ["s2"], ["n"]),
    ]
    run_both(nodes, inputs, [("out", TensorProto.FLOAT), ("n", TensorProto.INT64)])


@pytest.mark.parametrize("erase", [0, 1, -1])
def test_erase_at_runtime_position(erase):
    inputs = tensors((2, 3), (2, 3), (2, 3))
    inputs["pos"] = np.array(erase, np.int64)
    nodes = [
        helper.make_node("SequenceConstruct", ["X", "Y", "Z"], ["s"]),
        helper.make_node("SequenceErase", ["s", "pos"], ["s2"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["out"], axis=0),
    ]
    run_both(nodes, inputs, [("out", TensorProto.FLOAT)])


def test_empty_sequence_grows_and_stacks():
    inputs = tensors((2, 3), (2, 3))
    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
        helper.make_node("SequenceInsert", ["s0", "X"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "Y"], ["s2"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["out"], axis=-1, new_axis=1),
    ]
    run_both(nodes, inputs, [("out", TensorProto.FLOAT, [2, 3, 2])])


@pytest.mark.parametrize("split", [None, np.array(2, np.int64), np.array([1, 3, 1], np.int64)])
def test_split_to_sequence_then_length_and_at(split):
    inputs = {"X": RNG.standard_normal((3, 5)).astype(np.float32), "at": np.array(-1, np.int64)}
    names = ["X"]
    if split is not None:
        inputs["split"] = split
        names.append("split")
    nodes = [
        helper.make_node("SplitToSequence", names, ["s"], axis=1),
        helper.make_node("SequenceLength", ["s"], ["n"]),
        helper.make_node("SequenceAt", ["s", "at"], ["out"]),
    ]
    # A scalar split must be known at import (it decides the length); a 1-D one may not be.
    constants = ["split"] if split is not None and split.ndim == 0 else []
    run_both(nodes, inputs, [("n", TensorProto.INT64), ("out", TensorProto.FLOAT)], constants=constants)


def test_optional_of_a_tensor():
    inputs = tensors((2, 2))
    nodes = [
        helper.make_node("Optional", ["X"], ["o"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
        helper.make_node("OptionalGetElement", ["o"], ["out"]),
    ]
    run_both(nodes, inputs, [("has", TensorProto.BOOL), ("out", TensorProto.FLOAT)], opset=18)


def test_sequence_graph_output_is_refused_by_name():
    inputs = tensors((2, 2))
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["X"], ["s"])], "seq",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(tilecraft.ModelImportError, match="'s' is a TensorSequence"):
        tilecraft.compile(model)

