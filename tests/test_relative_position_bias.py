"""A relative position bias gathered from its table by a constant index (Swin v1/v2, CSWin,
Focal, BEiT: ``table[index.view(-1)].view(M, M, heads).permute(2, 0, 1)``) is a constant of
the compiled model: the Gather, Reshape and Transpose of two initializers are folded at
compile time (pipelines/graph/constant_folding.py), so no call gathers it again. Checked on
the ONNX form the TorchScript exporter writes, with odd windows, against onnxruntime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402


def _relative_index(window: int) -> np.ndarray:
    """Swin's relative_position_index for a window x window window, flattened."""
    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij")).reshape(2, -1)
    relative = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + (window - 1)
    return (relative[..., 0] * (2 * window - 1) + relative[..., 1]).reshape(-1).astype(np.int64)


def _biased_scores(window: int, heads: int, windows: int) -> onnx.ModelProto:
    tokens = window * window
    rng = np.random.default_rng(window)
    table = rng.standard_normal(((2 * window - 1) ** 2, heads)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "index"], ["picked"], axis=0),
         helper.make_node("Reshape", ["picked", "shape"], ["square"]),
         helper.make_node("Transpose", ["square"], ["bias"], perm=[2, 0, 1]),
         helper.make_node("Add", ["scores", "bias"], ["biased"]),
         helper.make_node("Softmax", ["biased"], ["y"], axis=-1)],
        "relative_position_bias",
        [helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [windows, heads, tokens, tokens])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [windows, heads, tokens, tokens])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(_relative_index(window), "index"),
         numpy_helper.from_array(np.array([tokens, tokens, heads], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("window, heads, windows", [(7, 3, 4), (5, 2, 3), (3, 4, 2)])
def test_gathered_bias_is_a_constant(window, heads, windows):
    model = _biased_scores(window, heads, windows)
    compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    simplified = compiled.ir("simplify")
    # A run-time gather is a linalg.generic reading its table by tensor.extract.
    assert "tensor.extract " not in simplified
    assert "arith.index_cast" not in simplified
    tokens = window * window
    scores = np.random.default_rng(0).standard_normal((windows, heads, tokens, tokens)).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"scores": scores})[0]
    got = compiled(scores=scores)
    got = np.asarray(got[0] if isinstance(got, (tuple, list)) else got)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
