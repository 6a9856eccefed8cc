"""``tilecraft-block-constant-reads`` (pipelines/blocked_constants.py) on whole models: the
filters of NHWC convolutions end up block-major ([output-channel block][kh][kw][ic][V]) and
the results still match onnxruntime, for filter-heavy 3x3 and 1x1 layers, channel counts
that are not a multiple of the block, and on one or two threads. The IR-level rules
(aligned offsets only, no other use) are checked in tests/lit/schedule/block-constant-reads.mlir."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _conv_relu(cin: int, cout: int, kernel: int, size: int):
    rng = np.random.default_rng(cin + 3 * cout + kernel)
    weights = [numpy_helper.from_array((rng.standard_normal((cout, cin, kernel, kernel))
                                        / np.sqrt(cin * kernel * kernel)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[kernel // 2] * 4),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, size, size])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("cin, cout, kernel, size", [
    (64, 256, 3, 7),    # filter-heavy 3x3 (ResNet's 7x7 stage, narrower)
    (256, 512, 1, 7),   # filter-heavy 1x1
    (32, 96, 3, 14),    # 96 channels: 3 blocks of 32, or 6 of 16
    (16, 48, 1, 28),    # 48 channels: one-vector tiles
])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_filters_match_onnxruntime(cin, cout, kernel, size, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    model = _conv_relu(cin, cout, kernel, size)
    x = np.random.default_rng(1).standard_normal((1, cin, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    # The filter [kernel, kernel, cin, cout] is now [cout / V, kernel, kernel, cin, V].
    scheduled = compiled.ir("schedule")
    blocked = re.findall(rf"tensor<(\d+)x{kernel}x{kernel}x{cin}x(\d+)xf32>", scheduled)
    assert blocked, "the filter was not blocked"
    assert all(int(blocks) * int(width) >= cout > int(width) for blocks, width in blocked)
    assert f"tensor<{kernel}x{kernel}x{cin}x{cout}xf32>, vector" not in scheduled
