"""An int8 kernel whose requantized result is the padded input of the next 3x3 convolution
or max pool writes into that padded tensor (pipelines/tensor/kernel_destinations.py's
``PaddedResult``, shared with the bf16 kernels): the kernel's name says where, the entry
function copies nothing, and the numbers are onnxruntime's for the same QDQ model."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

from mlir import ir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import PipelineError  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402

from pinned_targets import AVX512  # noqa: E402


def _chain(images: int, size: tuple[int, int], seed: int) -> onnx.ModelProto:
    """conv 3x3 -> ReLU -> conv 3x3 -> ReLU -> max pool 3x3/2 -> conv 1x1 -> ReLU -> conv 3x3
    (every 3x3 padded by 1): each of the first three convolutions' results is padded next."""
    rng = np.random.default_rng(seed)
    weights = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32) for name, shape in
               {"w0": (40, 4, 3, 3), "w1": (40, 40, 3, 3), "w2": (24, 40, 1, 1), "w3": (16, 24, 3, 3)}.items()}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1] * 4), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
             helper.make_node("Conv", ["p1", "w2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[1] * 4)]
    height, width = size
    pooled = ((height - 1) // 2 + 1, (width - 1) // 2 + 1)
    graph = helper.make_graph(
        nodes, "padded_results", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [images, 4, height, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [images, 16, *pooled])],
        [numpy_helper.from_array(a, name) for name, a in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("threads", [1, 2])
def test_int8_kernels_write_into_the_next_layers_padding(threads):
    """Two images of 9x10 pixels (tasks of whole output rows of one image, a last block of
    fewer rows), 40 channels (a partial column tile): into the second convolution's padding,
    the pool's (its right border trimmed: the stride-2 windows never read a 12th column) and
    the last convolution's. On a pinned VNNI target for the IR; numbers on the host."""
    model = _chain(2, (9, 10), seed=threads)
    rng = np.random.default_rng(3)
    samples = [{"x": rng.standard_normal((2, 4, 9, 10)).astype(np.float32)} for _ in range(4)]
    qdq = tilecraft.quantize(model, samples)

    target = dataclasses.replace(Target.parse(AVX512), num_threads=threads)
    pinned = tilecraft.compile(qdq, target=target)
    simplified = pinned.ir("simplify")
    assert re.search(rf"call @tilecraft_int8_matmul_180x40x36_u8_t{threads}_conv2x11x12x4_\w+"
                     r"_into2x11x12x40_at0x1x1x0_epilogue\d+\(", simplified)
    assert re.search(rf"call @tilecraft_int8_matmul_180x40x360_u8_t{threads}_conv2x11x12x40_\w+"
                     r"_into2x11x11x40_at0x1x1x0_epilogue\d+\(", simplified)
    assert re.search(rf"call @tilecraft_int8_matmul_50x24x40_u8_t{threads}_into2x7x7x24_at0x1x1x0_epilogue\d+\(",
                     simplified)
    # No tensor.pad of a kernel's result is left: only the input's and the kernels' borders.
    assert not re.search(r"tensor\.pad %expanded", simplified)
    entry = re.search(r"func\.func @main.*?\n  }\n", pinned.ir("bufferize"), re.S).group(0)
    assert "memref.copy" not in entry  # (the input's quantize and transpose write the first pad's interior)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(qdq.SerializeToString(), options, providers=["CPUExecutionProvider"])
    compiled = tilecraft.compile(qdq, target=dataclasses.replace(Target.parse("llvm"), num_threads=threads))
    for feeds in samples:
        (expected,) = session.run(None, feeds)
        got = np.asarray(compiled(**feeds))
        # onnxruntime's QLinearConv rounds its requantization its own way: one 8-bit step.
        step = float(np.min(np.diff(np.unique(expected))))
        np.testing.assert_allclose(got, expected, rtol=0, atol=step * 1.01)


def test_an_int8_padded_destination_the_result_does_not_fit_is_a_pipeline_error():
    """A ``PaddedResult`` whose interior would run past the padded tensor, or whose pixels are
    not the kernel's rows, is refused when the int8 kernel is built, not written out of bounds."""
    from tilecraft.pipelines.tensor.int8_matmul import kernel_module
    from tilecraft.pipelines.tensor.kernel_destinations import PaddedResult

    with ir.Context(), ir.Location.unknown():
        with pytest.raises(PipelineError, match="int8 kernel: 64x16 result does not fit destination"):
            kernel_module(64, 16, 16, True, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 3, 0), (1, 8, 8)))
        with pytest.raises(PipelineError, match="does not fit destination"):
            kernel_module(63, 16, 16, True, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 1, 0), (1, 8, 8)))
        assert "_into1x10x10x16_at0x1x1x0" in str(
            kernel_module(64, 16, 16, True, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 1, 0), (1, 8, 8))))
