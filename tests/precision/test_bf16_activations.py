"""bf16 activations between bf16 kernels (pipelines/tensor/bf16_activations.py): which
activations become bf16, and the numerics of the chains that read them. The kernels' dot
products are ``vdpbf16ps`` where this host has AVX512-BF16, portable ones elsewhere
(``kernels=True`` on the host target), so these run on any CPU."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from mlir import ir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import PipelineError  # noqa: E402
from tilecraft.pipelines.ir_queries import ops_where  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.pipelines.tensor.bf16_activations import BF16_ACTIVATIONS_PASS, bf16_activations_pass  # noqa: E402
from tilecraft.pipelines.tensor.bf16_matmul import BF16_INPUT_SUFFIX, read_bf16_input  # noqa: E402
from tilecraft.pipelines.tensor.bf16_weights import bf16_weights_pass, with_bf16_weights  # noqa: E402


def _bf16(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _compile_bf16(model: onnx.ModelProto):
    target = Target.parse("llvm")
    return tilecraft.compile(model, target=target, pipeline=with_bf16_weights(
        tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True))


def _model(nodes, inputs, outputs, arrays) -> onnx.ModelProto:
    graph_proto = helper.make_graph(nodes, "chain", inputs, outputs,
                                    [numpy_helper.from_array(a, name) for name, a in arrays.items()])
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])


def _main(ir_text: str) -> str:
    return re.search(r"func\.func @main.*?\n  }\n", ir_text, re.S).group(0)


def test_pipeline_stores_activations_before_the_epilogues_are_fused():
    target = Target.parse("llvm -mcpu=sapphirerapids")
    passes = with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target).stage("simplify").passes
    assert passes.index(BF16_ACTIVATIONS_PASS) + 1 == passes.index("tilecraft-bf16-epilogues")
    assert BF16_ACTIVATIONS_PASS not in with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target,
                                                          kernels=False).stage("simplify").passes


@pytest.mark.parametrize("m, k, hidden, n", [(13, 37, 69, 20), (32, 64, 64, 48)])
def test_a_matmul_reads_the_previous_kernels_bf16_result(m, k, hidden, n):
    """relu(x @ w0 + b) @ w1: the hidden activation is stored as bf16 and the second kernel
    reads its pairs as they are (an odd hidden size: its last pair masked). The result is the
    chain with the activation rounded to bf16 once, which the kernel did before anyway."""
    rng = np.random.default_rng(m)
    arrays = {"w0": rng.standard_normal((k, hidden)).astype(np.float32),
              "b": rng.standard_normal(hidden).astype(np.float32),
              "w1": rng.standard_normal((hidden, n)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("Add", ["h", "b"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]), helper.make_node("MatMul", ["r", "w1"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], arrays)
    module = _compile_bf16(model)
    entry = _main(module.ir("simplify"))
    assert re.search(rf"call @tilecraft_bf16_matmul_{m}x{hidden}x{k}_t\d+_epilogue\d+\(.*-> tensor<{m}x{hidden}xbf16>",
                     entry)
    assert re.search(rf"call @tilecraft_bf16_matmul_{m}x{n}x{hidden}_t\d+{BF16_INPUT_SUFFIX}\(%\w+, %\w+\) .*"
                     rf": \(tensor<{m}x{hidden}xbf16>", entry)
    x = rng.standard_normal((m, k)).astype(np.float32)
    hidden_values = np.maximum(_bf16(x) @ _bf16(arrays["w0"]) + arrays["b"], 0)
    expected = _bf16(hidden_values) @ _bf16(arrays["w1"])
    # f32 accumulation against float64 (an activation within f32 rounding of a bf16 rounding
    # boundary may round the other way: 2^-8 of it); a wrong pair or lane errs by O(1).
    np.testing.assert_allclose(module(x), expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())


def test_an_activation_something_else_reads_stays_f32():
    """The same chain whose hidden activation a Sigmoid also reads: it stays f32 (the Sigmoid
    would see bf16 values otherwise), and the second kernel rounds it itself."""
    rng = np.random.default_rng(3)
    arrays = {"w0": rng.standard_normal((16, 32)).astype(np.float32), "b": rng.standard_normal(32).astype(np.float32),
              "w1": rng.standard_normal((32, 16)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("Add", ["h", "b"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]), helper.make_node("MatMul", ["r", "w1"], ["y"]),
             helper.make_node("Sigmoid", ["r"], ["z"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16]),
                    helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 32])], arrays)
    module = _compile_bf16(model)
    entry = _main(module.ir("simplify"))
    assert "xbf16>" not in re.sub(r"tensor<1x\d+x\d+xbf16>", "", entry)  # only the packed weights are bf16
    assert BF16_INPUT_SUFFIX not in entry
    x = rng.standard_normal((8, 16)).astype(np.float32)
    hidden_values = np.maximum(_bf16(x) @ _bf16(arrays["w0"]) + arrays["b"], 0)
    y, z = module(x)
    np.testing.assert_allclose(z, 1 / (1 + np.exp(-hidden_values)), rtol=1e-5, atol=1e-6)  # f32, not bf16's 4e-3
    np.testing.assert_allclose(y, _bf16(hidden_values) @ _bf16(arrays["w1"]), rtol=1e-3,
                               atol=1e-3 * np.abs(y).max())


def _bottleneck(rng, channels: int = 32, mid: int = 16, size: int = 9) -> tuple[onnx.ModelProto, dict]:
    """A ResNet bottleneck after a stem: 3x3 (4 -> channels), then 1x1 (-> mid), 3x3 padded,
    1x1 (-> channels) whose epilogue adds the stem's output (the residual) and a ReLU; then a
    stride-2 1x1 projection of the block's output. Biases on every convolution."""
    shapes = {"w0": (channels, 4, 3, 3), "w1": (mid, channels, 1, 1), "w2": (mid, mid, 3, 3),
              "w3": (channels, mid, 1, 1), "w4": (8, channels, 1, 1)}
    arrays = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32) for name, shape in shapes.items()}
    arrays.update({f"b{i}": (rng.standard_normal(shapes[f"w{i}"][0]) * 0.1).astype(np.float32) for i in range(5)})
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4),
             helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             helper.make_node("Add", ["c3", "r0"], ["s"]), helper.make_node("Relu", ["s"], ["r3"]),
             helper.make_node("Conv", ["r3", "w4", "b4"], ["y"], strides=[2, 2])]
    out = (size + 1) // 2
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, out, out])], arrays)
    return model, arrays


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """NCHW convolution in float64."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh, ow = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            window = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, i, j].astype(np.float64))
    return out + b[None, :, None, None]


def test_a_bottleneck_keeps_its_activations_in_bf16():
    """Every activation of the block is stored as bf16: the stem's (read by the 1x1 kernel and
    by the residual add), the 1x1's (into the 3x3's zero padding: a bf16 pad), the 3x3's, and
    the block's output (read by the strided projection); the projection's result, the model's
    output, is f32. 81 pixels: partial register tiles and tasks. The result is the float64 chain
    with each activation rounded to bf16 once, the residual included."""
    rng = np.random.default_rng(11)
    model, a = _bottleneck(rng)
    module = _compile_bf16(model)
    entry = _main(module.ir("simplify"))
    calls = re.findall(r"call @(tilecraft_bf16_matmul\w*)\(.*\) : \((.*)\) -> (tensor<[\dx]+x(?:bf16|f32)>)", entry)
    assert len(calls) == 5
    assert [name.endswith(BF16_INPUT_SUFFIX) or f"{BF16_INPUT_SUFFIX}_" in name for name, _, _ in calls] == [
        False, True, True, True, True]
    assert [result.endswith("xbf16>") for _, _, result in calls] == [True, True, True, True, False]
    assert "tensor<81x32xbf16>" in calls[3][1]  # the residual, read as bf16 by the 1x1's epilogue
    assert "xbf16> to tensor<1x11x11x16xbf16>" in entry or "_into1x11x11x16" in entry  # the 3x3's bf16 pad
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    r0 = _bf16(np.maximum(_conv(_bf16(x), _bf16(a["w0"]), a["b0"], pad=1), 0))
    r1 = _bf16(np.maximum(_conv(r0, _bf16(a["w1"]), a["b1"]), 0))
    r2 = _bf16(np.maximum(_conv(r1, _bf16(a["w2"]), a["b2"], pad=1), 0))
    r3 = _bf16(np.maximum(_conv(r2, _bf16(a["w3"]), a["b3"]) + r0, 0))
    expected = _conv(r3, _bf16(a["w4"]), a["b4"], stride=2)
    np.testing.assert_allclose(module(x), expected, rtol=1e-3, atol=2e-3 * np.abs(expected).max())
    # Against the f32 build: bf16's error (measured 6e-3 of the largest output), not a wrong tap's O(1).
    reference = tilecraft.compile(model, target=Target.parse("llvm"))(x)
    np.testing.assert_allclose(module(x), reference, rtol=0, atol=2e-2 * np.abs(reference).max())


MATMUL = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense_resource<w> : tensor<8x16xf32>
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
{-#
  dialect_resources: {builtin: {w: "0x04000000WEIGHTS"}}
#-}
"""


def test_a_call_whose_input_is_not_bf16_is_refused():
    """``read_bf16_input`` on a kernel call whose A is still f32 is a PipelineError (a wrong
    kernel would read f32 memory as bf16 pairs); the pass refuses options."""
    with ir.Context(), ir.Location.unknown():
        weights = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 64
        module = ir.Module.parse(MATMUL.replace("WEIGHTS", weights.tobytes().hex().upper()))
        bf16_weights_pass(module.operation, {"kernels": "1"})
        call = ops_where(module.operation, lambda op: op.name == "func.call")[0]
        with pytest.raises(PipelineError, match="not bf16"):
            read_bf16_input(module.operation, call)
        with pytest.raises(PipelineError, match="takes no options"):
            bf16_activations_pass(module.operation, {"x": "1"})
        bf16_activations_pass(module.operation, {})  # no epilogue, nothing read by a kernel: unchanged
        assert "tensor<4x8xf32>" in str(call) and BF16_INPUT_SUFFIX not in str(module)


def test_a_max_pool_keeps_the_stems_result_f32():
    """Convolution, ReLU, a padded 3x3 stride-2 max pool, a 1x1 convolution (ResNet's stem):
    the pool is no bf16 kernel, so the first kernel writes f32 into its padding (by -inf)
    and the pool stores f32, which the next kernel rounds (a bf16 pool was measured: no
    faster, docs/performance.md). The max of bf16-rounded values is the rounded max."""
    rng = np.random.default_rng(5)
    w0 = (rng.standard_normal((32, 4, 3, 3)) * 0.3).astype(np.float32)
    w1 = (rng.standard_normal((16, 32, 1, 1)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
             helper.make_node("Conv", ["p", "w1"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 10])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 5])], {"w0": w0, "w1": w1})
    module = _compile_bf16(model)
    entry = _main(module.ir("simplify"))
    assert re.search(r"linalg\.pooling_nhwc_max .*ins\(%\w+, %\w+ : tensor<1x11x11x32xf32>, tensor<3x3xf32>\) "
                     r"outs\(%\w+ : tensor<1x5x5x32xf32>\)", entry)
    assert re.search(r"call @tilecraft_bf16_matmul_100x32x36_t\d+_conv\w+_into1x11x11x32_at0x1x1x0_epilogue\d+\(.*"
                     r"-> tensor<1x11x11x32xf32>", entry)
    assert BF16_INPUT_SUFFIX not in entry
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    r0 = np.maximum(_conv(_bf16(x), _bf16(w0), np.zeros(32), pad=1), 0)
    padded = np.pad(r0, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    pooled = np.max([padded[:, :, i:i + 10:2, j:j + 10:2] for i in range(3) for j in range(3)], axis=0)
    expected = _conv(_bf16(pooled), _bf16(w1), np.zeros(16))
    np.testing.assert_allclose(module(x), expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
