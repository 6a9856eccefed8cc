"""A stem convolution on an NCHW model input stays one fusion group on one thread: the
input's transpose to NHWC runs before it as an op of its own, not fused into the group's
bands (schedule/group.py ``_fused_producers``), so the conv and its bias + ReLU are one
loop nest. Numerics against onnxruntime at odd and prime image sides, strides 1 and 2,
3x3 and 7x7 windows, on one and two threads; the kernel count of one stem on one thread.
The loop structure is checked in tests/lit/schedule/sequential-group.mlir."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from pinned_targets import AVX2, AVX512


def stem(channels: int, filters: int, size: int, kernel: int, stride: int, pad: int):
    """Conv (bias, ``pad`` on each side) + ReLU on a [1, channels, size, size] input."""
    rng = np.random.default_rng(size * kernel + stride)
    scale = 1.0 / np.sqrt(channels * kernel * kernel)
    weights = [numpy_helper.from_array((rng.standard_normal((filters, channels, kernel, kernel)) * scale)
                                       .astype(np.float32), "w"),
               numpy_helper.from_array((rng.standard_normal(filters) * 0.1).astype(np.float32), "b")]
    out = (size + 2 * pad - kernel) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride], pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, filters, out, out])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# Unpadded (SqueezeNet's stem: the transpose feeds the conv directly) and padded (a
# tensor.pad between them, never fused into the group).
CASES = [(3, 64, 97, 3, 2, 0), (3, 32, 113, 3, 2, 1), (3, 24, 61, 7, 2, 3), (5, 16, 31, 3, 1, 0),
         (3, 48, 224, 3, 2, 0), (3, 64, 224, 3, 2, 1)]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("channels,filters,size,kernel,stride,pad", CASES)
def test_stems_against_onnxruntime(channels, filters, size, kernel, stride, pad, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = stem(channels, filters, size, kernel, stride, pad)
    x = np.random.default_rng(size).standard_normal((1, channels, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_one_thread_stem_is_one_group(target, monkeypatch):
    """Three kernels for SqueezeNet's unpadded stem: the input's transpose, the stem's group
    (conv, bias and ReLU in one loop nest), the result's transpose back to NCHW. The
    group falling apart made five (its fill, conv and epilogue each a loop nest)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    compiled = tilecraft.compile(stem(3, 64, 224, 3, 2, 0), target=target, cache=False)
    assert compiled.kernel_count == 3
