"""``tilecraft-strided-copies-to-linalg`` (pipelines/buffer/strided_copies.py) on whole models: the
copies bufferization makes of a Concat (each part into a strided slice of the result), a
Pad (the source into the padded buffer's interior) and a head-split transpose (rows of 64
floats) move their contiguous rows as vector transfers (a loop of 64-element chunks and a
static tail), and the results are bit-identical to onnxruntime's. The IR rules are checked
in tests/lit/pipelines/strided-copies.mlir."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _model(nodes, inputs, output, initializers=(), element=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "copies", [helper.make_tensor_value_info(n, element, s) for n, s in inputs],
        [helper.make_tensor_value_info(output[0], element, output[1])], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _check(model, feeds, *vectors):
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_array_equal(compiled(**feeds), expected)
    loops = compiled.ir("loops")
    for shape in vectors:
        assert f"vector<{shape}>" in loops, shape


@pytest.mark.parametrize("element, dtype, name", [
    (TensorProto.FLOAT, np.float32, "f32"), (TensorProto.INT32, np.int32, "i32"),
    (TensorProto.INT8, np.int8, "i8")])
def test_concat_parts_copied_as_row_vectors(element, dtype, name):
    # Rows of 100 elements: one whole chunk (64 x 32-bit; the 8-bit rows fit in one) + a tail.
    rng = np.random.default_rng(0)
    model = _model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
                   [("a", [64, 100]), ("b", [64, 100])], ("y", [64, 200]), element=element)
    feeds = {n: rng.integers(-100, 100, (64, 100)).astype(dtype) for n in ("a", "b")}
    chunks = ("100xi8",) if name == "i8" else (f"64x{name}", f"36x{name}")
    _check(model, feeds, *chunks)


def test_pad_interior_copied_as_row_vectors():
    pads = numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 1, 2], np.int64), "p")
    model = _model([helper.make_node("Pad", ["a", "p"], ["y"])], [("a", [1, 3, 30, 100])],
                   ("y", [1, 3, 32, 104]), [pads])
    feeds = {"a": np.random.default_rng(1).standard_normal((1, 3, 30, 100)).astype(np.float32)}
    _check(model, feeds, "64xf32", "36xf32")


def test_transposed_heads_read_by_a_matmul(monkeypatch):
    """BERT's output projection: the attention output [heads, tokens, 64] transposed to
    [tokens, heads, 64] and fused into the matmul's tasks as a copy of 64-float rows."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    rng = np.random.default_rng(2)
    weights = numpy_helper.from_array((rng.standard_normal((768, 768)) / 28).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([128, 768], np.int64), "shape")
    model = _model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                    helper.make_node("Reshape", ["t", "shape"], ["a"]),
                    helper.make_node("MatMul", ["a", "w"], ["y"])],
                   [("x", [12, 128, 64])], ("y", [128, 768]), [weights, shape])
    x = rng.standard_normal((12, 128, 64)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x=x), expected, rtol=1e-4, atol=1e-4)
    # Whole 64-float rows as vector moves: one of 64 lanes where the target has 512-bit
    # vectors, halves of 32 lanes on 256-bit ones.
    assert re.search(r"vector<(32|64)xf32>", compiled.ir("loops"))
