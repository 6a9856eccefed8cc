"""A projection shortcut in QDQ form (two convolutions' products, each quantized, added,
ReLU, quantized): the product that is not the shortcut kernel's accumulator is quantized
to 8 bits in its own kernel's epilogue (``quantize_other_products``,
pipelines/tensor/int8_matmul.py) instead of stored as i32 for the other's epilogue.
Numerics against onnxruntime running the same QDQ model; the kernel form in IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402

from pinned_targets import AVX512  # noqa: E402
from qdq_reference import differing_within_one_step  # noqa: E402

HOST_VNNI = Target.parse("llvm").has_avx512_vnni


def _bottleneck_tail(channels: int, mid: int, out: int, size: int, seed: int) -> onnx.ModelProto:
    """relu(conv_c(relu(conv_b(x))) + conv_d(x)), 1x1 convolutions with biases; ``conv_d``
    strided 2 when ``size`` is even (a stage's first block), as ResNet's downsample."""
    rng = np.random.default_rng(seed)
    stride = 2 if size % 2 == 0 else 1

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    initializers = [weight("wb", (mid, channels, 1, 1)), weight("bb", (mid,)),
                    weight("wc", (out, mid, 1, 1)), weight("bc", (out,)),
                    weight("wd", (out, channels, 1, 1)), weight("bd", (out,))]
    nodes = [helper.make_node("Conv", ["x", "wb", "bb"], ["b"], strides=[stride, stride]),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Conv", ["rb", "wc", "bc"], ["c"]),
             helper.make_node("Conv", ["x", "wd", "bd"], ["d"], strides=[stride, stride]),
             helper.make_node("Add", ["c", "d"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    outer = size // stride
    graph = helper.make_graph(nodes, "tail",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out, outer, outer])],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("channels,mid,out,size", [(16, 8, 32, 8), (12, 16, 64, 7)])
def test_shortcut_products_stay_8_bit_and_match_onnxruntime(channels, mid, out, size):
    model = _bottleneck_tail(channels, mid, out, size, seed=channels)
    rng = np.random.default_rng(1)
    samples = [{"x": rng.standard_normal((1, channels, size, size)).astype(np.float32)} for _ in range(4)]
    qdq = tilecraft.quantize(model, samples)
    # onnxruntime's QLinearConv rounds its requantization its own way: one 8-bit step.
    differing_within_one_step(tilecraft.compile(qdq), qdq, samples)

    # The form, on a VNNI target whatever the host: three int8 kernels, each with an
    # epilogue; none returns its i32 product (the shortcut's returns the model's f32 output).
    simplified = tilecraft.compile(qdq, target=AVX512).ir("simplify")
    calls = re.findall(r"call @(tilecraft_int8_matmul_\w+)\(.*-> tensor<(\w+)>", simplified)
    assert len(calls) == 3, calls
    assert all(name.rsplit("_", 1)[-1].startswith("epilogue") and not result.endswith("xi32")
               for name, result in calls), calls
    shortcut = [line for line in simplified.splitlines() if "call @tilecraft_int8_matmul" in line
                and re.search(rf"tensor<{(size // (2 - size % 2)) ** 2}x{out}xi8>,", line.split(":")[-1])]
    assert shortcut, "the shortcut's epilogue reads the other product as 8-bit values"
