"""The bf16 dot-product kernels of ``precision="bf16"`` on AVX512-BF16 targets
(pipelines/tensor/bf16_matmul.py): their numerics (on ``vdpbf16ps`` where this host has
AVX512-BF16, through the portable dot products elsewhere), and ``vdpbf16ps`` in the code
generated for a Sapphire Rapids target (mlir-translate, opt, llc: compiled, not run)."""

from __future__ import annotations

import re
import subprocess

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from mlir import ir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.dialects import graph  # noqa: E402
from tilecraft.errors import PipelineError, TargetError  # noqa: E402
from tilecraft.frontend.loader import load_module  # noqa: E402
from tilecraft.pipelines.graph.padded_extents import padded_filters  # noqa: E402
from tilecraft.pipelines.tensor.bf16_matmul import pack_weights  # noqa: E402
from tilecraft.pipelines.tensor.bf16_weights import BF16_WEIGHTS, with_bf16_weights  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.runtime.host import host_cpu_flags  # noqa: E402
from tilecraft.runtime.libraries import llvm_tool, mlir_package_dir  # noqa: E402

SAPPHIRE_RAPIDS = "llvm -mcpu=sapphirerapids"


def _dense(m: int, k: int, n: int, seed: int = 0) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """``relu(x @ w + b)``: a matmul with a bias and activation epilogue."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    graph_proto = helper.make_graph(
        nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)]), w, b


def _bf16(array: np.ndarray) -> np.ndarray:
    return array.astype(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize("m, k, n", [(13, 37, 70), (32, 64, 64), (1, 5, 16), (50, 128, 200)])
def test_kernels_compute_bf16_products_summed_in_f32(m, k, n):
    """Odd K (a masked last pair), N not a multiple of the tile, M not a multiple of the
    register tile's rows; the result is the product of the bf16-rounded operands to f32's
    precision, the bias and ReLU applied to the accumulators (tilecraft-bf16-epilogues)."""
    model, w, b = _dense(m, k, n)
    target = Target.parse("llvm")
    pipeline = with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True)
    module = tilecraft.compile(model, pipeline=pipeline)
    assert re.search(r"call @tilecraft_bf16_matmul_\w+_epilogue\d+\(", module.ir("simplify"))  # bias, ReLU
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    expected = np.maximum(_bf16(x) @ _bf16(w) + b, 0)
    np.testing.assert_allclose(module(x), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_packed_layout_puts_two_k_of_a_column_side_by_side():
    w = np.arange(3 * 5, dtype=np.float32).reshape(3, 5).astype(ml_dtypes.bfloat16)
    packed = pack_weights(w, 16)
    assert packed.shape == (1, 2, 32) and packed.dtype == ml_dtypes.bfloat16
    # column 4: k = 0, 1 in the first pair, k = 2 and a zero pad in the second
    assert packed[0, 0, 8:10].astype(np.float32).tolist() == [4.0, 9.0]
    assert packed[0, 1, 8:10].astype(np.float32).tolist() == [14.0, 0.0]


def test_pipeline_for_a_bf16_cpu_uses_kernels_and_no_weight_panels():
    target = Target.parse(SAPPHIRE_RAPIDS)
    assert target.has_avx512_bf16 and not Target.parse("llvm -mcpu=skylake-avx512").has_avx512_bf16
    pipeline = with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target)
    graph_passes = pipeline.stage("graph").passes
    assert graph_passes[-1] == f"{BF16_WEIGHTS}{{kernels=1 num-threads={target.num_threads}}}"
    assert "tilecraft-pack-weight-panels" not in graph_passes
    assert pipeline.stage("vector").passes[0] == "tilecraft-bf16-dot-products"
    plain = with_bf16_weights(tilecraft.cpu_pipeline("llvm -mcpu=znver3", opt_level=3), "llvm -mcpu=znver3")
    assert plain.stage("graph").passes[-1] == BF16_WEIGHTS
    assert "tilecraft-bf16-dot-products" not in plain.stage("vector").passes
    assert with_bf16_weights(plain, "llvm -mcpu=znver3") is plain  # once


def test_sapphire_rapids_code_has_vdpbf16ps(tmp_path):
    """The whole CPU pipeline for Sapphire Rapids, then LLVM's tools as packages use them."""
    model, _, _ = _dense(24, 96, 64)
    target = Target.parse(SAPPHIRE_RAPIDS)
    pipeline = with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target)
    context = ir.Context()
    graph.load(context)
    module = load_module(model, context)
    with context, ir.Location.unknown():
        pipeline.run(module)
        (tmp_path / "model.mlir").write_text(module.operation.get_asm())
    assert "llvm.x86.avx512bf16.dpbf16ps.512" in (tmp_path / "model.mlir").read_text()
    machine = ["-mtriple=x86_64-unknown-linux-gnu", "-mcpu=sapphirerapids"]
    subprocess.run([str(mlir_package_dir() / "bin" / "mlir-translate"), "--mlir-to-llvmir",
                    str(tmp_path / "model.mlir"), "-o", str(tmp_path / "model.ll")], check=True)
    subprocess.run([llvm_tool("opt"), "-O2", *machine, str(tmp_path / "model.ll"), "-o", str(tmp_path / "model.bc")],
                   check=True)
    assembly = subprocess.run([llvm_tool("llc"), "-O2", *machine, str(tmp_path / "model.bc"), "-o", "-"],
                              check=True, capture_output=True, text=True).stdout
    assert "vdpbf16ps" in assembly
    assert "vcvtneps2bf16" in assembly  # A's f32 pairs rounded to bf16 by the hardware


def test_bad_pass_option_is_a_pipeline_error():
    target = Target.parse("llvm")
    pipeline = tilecraft.cpu_pipeline(target, opt_level=3)
    pipeline = pipeline.replace("graph", [*pipeline.stage("graph").passes, f"{BF16_WEIGHTS}{{kernels=2}}"])
    model, _, _ = _dense(4, 8, 16)
    with pytest.raises((PipelineError, tilecraft.CompileError), match="kernels must be 0 or 1"):
        tilecraft.compile(model, pipeline=pipeline)


def test_a_bf16_target_this_host_cannot_run_is_refused_before_compiling(monkeypatch):
    """On any host: the flags are this host's without AVX512-BF16 (an AVX2 or Skylake CPU)."""
    from tilecraft.compiler import precision

    flags = {flag for flag in host_cpu_flags() if flag != "avx512_bf16"} | {"avx2"}
    monkeypatch.setattr(precision, "host_cpu_flags", lambda: flags)
    model, _, _ = _dense(4, 8, 16)
    with pytest.raises(TargetError, match="avx512_bf16 kernels, which this machine lacks"):
        tilecraft.compile(model, target=SAPPHIRE_RAPIDS, precision="bf16")


def _conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int = 1) -> np.ndarray:
    """NCHW x OIHW convolution in float64 (numpy), for the kernels' expected values."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    f, _, kh, kw = w.shape
    out_h = (x.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    out_w = (x.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], f, out_h, out_w))
    for i in range(kh):
        for j in range(kw):
            top, left = i * dilation, j * dilation
            window = x[:, :, top:top + stride * out_h:stride, left:left + stride * out_w:stride]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, i, j])
    return out


# This host's CPU (vdpbf16ps where it has AVX512-BF16), and an AVX2 one (the portable dot
# products, as tests pass kernels=True: what an earlier, AVX2-only host ran).
@pytest.mark.parametrize("target_text", ["llvm", "llvm -mcpu=znver3"])
def test_convolutions_take_the_kernel_odd_channels_by_rows(target_text):
    """A 1x1 stride-1 convolution is a matmul of the pixels (its NHWC input and result viewed
    as rows); a 3x3 padded, a strided 3x3, an unpadded 3x3 and a strided 1x1 one read each
    pixel's window from the input (implicit GEMM); the first, of 3 channels (odd: a pair
    would straddle two taps), reads each kernel row's 3x3 = 9 consecutive values of its
    input as pairs, the ninth alone (bf16_matmul.RowSpan: K = 3 rows x 10), with no channel
    added. Each result is the convolution of the bf16-rounded operands to f32's precision."""
    rng = np.random.default_rng(4)
    shapes = {"w0": (16, 3, 3, 3), "w1": (24, 16, 1, 1), "w2": (20, 24, 3, 3), "w3": (18, 20, 3, 3),
              "w4": (32, 18, 3, 3), "w5": (32, 32, 1, 1)}
    weights = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32) for name, shape in shapes.items()}
    b1 = rng.standard_normal(24).astype(np.float32)
    layers = [("w0", 1, 1, 1), ("w1", 1, 0, 1), ("w2", 1, 1, 1), ("w3", 2, 1, 1), ("w4", 1, 0, 1), ("w5", 2, 0, 1)]
    model = _conv_chain(weights, layers, (2, 3, 9, 10), bias=("w1", b1))
    target = Target.parse(target_text)
    module = tilecraft.compile(model, target=target, pipeline=with_bf16_weights(
        tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True))
    simplified = module.ir("simplify")
    assert simplified.count("call @tilecraft_bf16_matmul") == 6
    assert simplified.count("call @tilecraft_bf16_matmul_180x24x16_t") == 1  # 2*9*10 pixels: the pointwise one
    # 20 and 18 filters are computed on whole vectors where the target's lanes ask it
    # (graph/padded_extents.py: 32 on 16 lanes, left as they are on 8).
    lanes = target.vector_bits // 32
    n2, n3 = padded_filters(20, lanes), padded_filters(18, lanes)
    for shape, window in (("180x16x30", "2x11x12x3_k3x3_s1x1_d1x1_rows"), (f"180x{n2}x216", "2x11x12x24_k3x3_s1x1_d1x1"),
                          (f"50x{n3}x180", "2x11x12x20_k3x3_s2x2_d1x1"), ("18x32x162", "2x5x5x18_k3x3_s1x1_d1x1"),
                          ("8x32x32", "2x3x3x32_k1x1_s2x2_d1x1")):
        # A kernel whose result a padded convolution reads writes into the pad (``_into...``);
        # one whose input another kernel stored as bf16 reads it so (``_abf16``).
        into = r"(_abf16)?(_into[\dx]+_at[\dx]+)?"
        call = rf"call @tilecraft_bf16_matmul_{shape}_t\d+_conv{window}{into}_epilogue\d+\("
        assert re.search(call, simplified), shape
    # The rows kernel reads the padded input flat per row: (N, H, W*C), no fourth channel.
    assert "tensor<2x11x36xf32>" in simplified
    graph_ir = module.ir("graph")
    assert "3x3x3x16x" not in graph_ir  # no filter of 3 channels left, f32 or bf16
    assert "tensor<2x11x12x4xf32>" not in graph_ir
    assert ("llvm.x86.avx512bf16.dpbf16ps.512" in module.ir("vector")) == target.has_avx512_bf16
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    _check_conv_chain(module, x, weights, layers, bias=("w1", b1))


@pytest.mark.parametrize("target_text", ["llvm", "llvm -mcpu=znver3"])
def test_odd_channels_unpadded_by_rows_and_dilated_on_a_zero_channel(target_text):
    """An unpadded strided 3x3 convolution of 5 channels takes the kernel reading by rows
    (15 values a kernel row: 7 pairs and one alone), with no pad; a dilated, padded one
    (its kernel rows' values are not consecutive) on a zero sixth channel."""
    rng = np.random.default_rng(5)
    weights = {"w0": (rng.standard_normal((8, 5, 3, 3)) * 0.3).astype(np.float32)}
    layers = [("w0", 2, 0, 1)]
    model = _conv_chain(weights, layers, (1, 5, 11, 9))
    target = Target.parse(target_text)
    pipeline = with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True)
    module = tilecraft.compile(model, target=target, pipeline=pipeline)
    simplified = module.ir("simplify")
    assert re.search(r"call @tilecraft_bf16_matmul_20x8x48_t\d+_conv1x11x9x5_k3x3_s2x2_d1x1_rows", simplified)
    assert "tensor<1x11x9x6xf32>" not in module.ir("graph")  # no zero channel
    x = rng.standard_normal((1, 5, 11, 9)).astype(np.float32)
    _check_conv_chain(module, x, weights, layers)

    # Dilated and padded: the graph stage splits off the output rows whose taps read the
    # padding (graph/dilated_convs.py); the 7 inner rows' convolution takes the kernel on a
    # zero channel, and so do the two border parts of 2 rows of taps each: their filters
    # are constants of their own (not views of the whole filter), zero-filled accumulators.
    model = _conv_chain(weights, [("w0", 1, 2, 2)], (1, 5, 11, 9))
    module = tilecraft.compile(model, target=target, pipeline=pipeline)
    simplified = module.ir("simplify")
    assert re.search(r"call @tilecraft_bf16_matmul_63x8x54_t\d+_conv1x11x13x6_k3x3_s1x1_d2x2", simplified)
    assert len(re.findall(r"call @tilecraft_bf16_matmul_\w+_conv1x4x13x6_k2x3_s1x1_d2x2", simplified)) == 2
    assert simplified.count("call @tilecraft_bf16_matmul") == 3
    expected = tilecraft.compile(model, target=target)(x)
    # bf16's error, not a wrong tap's O(1) (rounded activations on some rows, not others).
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=1e-2 * np.abs(expected).max())


def _conv_chain(weights: dict, layers: list, shape: tuple, bias: tuple | None = None) -> onnx.ModelProto:
    """``layers`` of (filter name, stride, pad, dilation): Conv (+ ``bias`` on the named one)
    and ReLU each, NCHW, on an input of ``shape``."""
    nodes, value, out = [], "x", list(shape)
    for name, stride, pad, dilation in layers:
        kernel = weights[name].shape[2]
        out = [out[0], weights[name].shape[0],
               *((extent + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1 for extent in out[2:])]
        inputs = [value, name, "b"] if bias and name == bias[0] else [value, name]
        nodes.append(helper.make_node("Conv", inputs, [f"{name}_out"], strides=[stride] * 2, pads=[pad] * 4,
                                      dilations=[dilation] * 2))
        nodes.append(helper.make_node("Relu", [f"{name}_out"], [f"{name}_relu"]))
        value = f"{name}_relu"
    initializers = [numpy_helper.from_array(a, name) for name, a in weights.items()]
    if bias:
        initializers.append(numpy_helper.from_array(bias[1], "b"))
    graph_proto = helper.make_graph(
        nodes, "convolutions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, out)], initializers)
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])


def _check_conv_chain(module, x: np.ndarray, weights: dict, layers: list, bias: tuple | None = None) -> None:
    """``module(x)`` against the chain computed in float64 from the bf16-rounded filters and
    activations."""
    expected = x.astype(np.float64)
    for name, stride, pad, dilation in layers:
        operand = _bf16(expected.astype(np.float32))
        expected = _conv_reference(operand, _bf16(weights[name]), stride, pad, dilation)
        if bias and name == bias[0]:
            expected += bias[1][:, None, None]
        expected = np.maximum(expected, 0)
    # Not f32's 1e-5: an activation within f32 rounding of a bf16 rounding boundary may round
    # the other way in the kernel (2^-8 of it); a wrong tap or channel order errs by O(1).
    np.testing.assert_allclose(module(x), expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())


def test_an_encoder_layer_runs_its_projections_on_the_kernels():
    """A BERT layer (tests/graph/graph_models.py): Q/K/V (combined), output and feed-forward
    projections become kernels, attention stays f32; its output stays within bf16's error
    of the f32 build. For Sapphire Rapids their dot products are vdpbf16ps."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    import graph_models

    model = graph_models.bert_layer(seq=16, hidden=64, heads=4, ffn=128)
    host = Target.parse("llvm")
    module = tilecraft.compile(model, pipeline=with_bf16_weights(tilecraft.cpu_pipeline(host, opt_level=3), host,
                                                                 kernels=True))
    assert module.ir("simplify").count("call @tilecraft_bf16_matmul") == 4
    x = np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32)
    expected = tilecraft.compile(model)(x)
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=0.01 * np.abs(expected).max())  # measured 2.6e-3
    target = Target.parse(SAPPHIRE_RAPIDS)
    context = ir.Context()
    graph.load(context)
    lowered = load_module(model, context)
    with context, ir.Location.unknown():
        with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target).run(lowered)
        assert "llvm.x86.avx512bf16.dpbf16ps.512" in lowered.operation.get_asm(large_elements_limit=16,
                                                                                large_resource_limit=16)


def test_kernels_write_into_the_next_layers_padding_on_a_pinned_avx512_target():
    """A kernel whose result (bias, ReLU applied) is the zero-padded input of the next 3x3
    convolution, or the padded input of a max pool, writes it there (bf16_matmul.PaddedResult):
    two images of 9x10 pixels (tasks of whole output rows of one image, and a last block of
    fewer rows), 40 channels (a full and a partial column tile), the pool's stride-2 output
    into a 1x1 convolution and that into a padded one. The entry function copies nothing; the
    result is the f32 build's to bf16's precision."""
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pinned_targets import AVX512

    rng = np.random.default_rng(7)
    weights = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32) for name, shape in
               {"w0": (40, 4, 3, 3), "w1": (40, 40, 3, 3), "w2": (24, 40, 1, 1), "w3": (16, 24, 3, 3)}.items()}
    conv = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4), helper.make_node("Relu", ["c0"], ["r0"]),
            helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1] * 4), helper.make_node("Relu", ["c1"], ["r1"]),
            helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
            helper.make_node("Conv", ["p1", "w2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]),
            helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[1] * 4)]
    graph_proto = helper.make_graph(
        conv, "padded_results", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 9, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 5, 5])],
        [numpy_helper.from_array(a, name) for name, a in weights.items()])
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
    target = dataclasses.replace(Target.parse(AVX512), num_threads=2)
    module = tilecraft.compile(model, target=target, pipeline=with_bf16_weights(
        tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True))
    simplified = module.ir("simplify")
    # Into the second convolution's padding, the pool's (its right border trimmed: the stride-2
    # windows never read a 12th column) and the last convolution's.
    assert re.search(r"call @tilecraft_bf16_matmul_180x40x36_t2_conv2x11x12x4_\w+_into2x11x12x40_at0x1x1x0_epilogue",
                     simplified)
    assert re.search(r"call @tilecraft_bf16_matmul_180x40x360_t2_conv2x11x12x40_\w+_into2x11x11x40_at0x1x1x0_epilogue",
                     simplified)
    assert re.search(r"call @tilecraft_bf16_matmul_50x24x40_t2_into2x7x7x24_at0x1x1x0_epilogue", simplified)
    entry = re.search(r"func\.func @main.*?\n  }\n", module.ir("bufferize"), re.S).group(0)
    assert "memref.copy" not in entry  # (the input's transpose writes the first pad's interior)
    if "avx512_bf16" not in host_cpu_flags():
        pytest.skip("the kernels' vdpbf16ps needs AVX512-BF16; the IR was checked")
    x = rng.standard_normal((2, 4, 9, 10)).astype(np.float32)
    expected = tilecraft.compile(model, target=target)(x)
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=1e-2 * np.abs(expected).max())


def test_a_padded_destination_the_result_does_not_fit_is_a_pipeline_error():
    """A ``PaddedResult`` whose interior would run past the padded tensor, or whose pixels are
    not the kernel's rows, is refused when the kernel is built, not written out of bounds."""
    from tilecraft.pipelines.tensor.bf16_matmul import PaddedResult, kernel_module

    with ir.Context(), ir.Location.unknown():
        with pytest.raises(PipelineError, match="does not fit destination"):
            kernel_module(64, 16, 16, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 3, 0), (1, 8, 8)))
        with pytest.raises(PipelineError, match="does not fit destination"):
            kernel_module(63, 16, 16, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 1, 0), (1, 8, 8)))
        assert "_into1x10x10x16_at0x1x1x0" in str(
            kernel_module(64, 16, 16, 1, into=PaddedResult((1, 10, 10, 16), (0, 1, 1, 0), (1, 8, 8))))


def test_a_row_span_kernel_reads_no_value_past_its_window():
    """The rows kernel (bf16_matmul.RowSpan) on 3 channels: a kernel row's 9 values make 4
    pairs and one value alone, read with a zero, not with the next pixel's first value (whose
    filter row is zero: 0 * inf would be NaN). An inf in the input then reaches only the
    outputs whose windows hold it; every other output is the convolution's, finite."""
    rng = np.random.default_rng(6)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    graph_proto = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 7])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
    target = Target.parse("llvm")
    module = tilecraft.compile(model, target=target, pipeline=with_bf16_weights(
        tilecraft.cpu_pipeline(target, opt_level=3), target, kernels=True))
    assert re.search(r"call @tilecraft_bf16_matmul_28x8x30_t\d+_conv1x6x9x3_k3x3_s1x1_d1x1_rows", module.ir("simplify"))
    x = rng.standard_normal((1, 3, 6, 9)).astype(np.float32)
    x[0, 0, 2, 4] = np.inf  # channel 0 of pixel (2, 4): the value just past the windows at column 1
    with np.errstate(invalid="ignore"):
        expected = _conv_reference(_bf16(x).astype(np.float64), _bf16(w), 1, 0)
    got = module(x)
    finite = np.isfinite(expected)
    assert not finite.all() and finite[0, :, 0:3, 1].all()
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-3, atol=1e-3 * np.abs(expected[finite]).max())


def test_bf16_kernels_keep_filters_written_in_place_unpadded():
    """The graph stage pads an odd multiple of 8 filters written into a pad or concat where
    the f32 register tile gains more than the copy costs (padded_extents.py,
    destination_padding_pays); bf16 kernels tile their own filters, so their pipeline turns
    that off and the kernel keeps writing the destination in place. A bad value is a typed
    error naming the option."""
    import dataclasses
    import sys
    from pathlib import Path

    from tilecraft.errors import TilecraftError
    from tilecraft.pipelines.tensor.bf16_weights import PAD_MATMUL_EXTENTS

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pinned_targets import AVX512

    target = dataclasses.replace(Target.parse(AVX512), num_threads=2)
    f32 = tilecraft.cpu_pipeline(target, opt_level=3)
    bf16 = with_bf16_weights(f32, target, kernels=True)
    element = next(p for p in bf16.stage("graph").passes if p.startswith(PAD_MATMUL_EXTENTS))
    assert element == f"{PAD_MATMUL_EXTENTS}{{lanes=16 destination-padding=0}}"
    assert all("destination-padding" not in p for p in with_bf16_weights(f32, target, kernels=False).stage("graph").passes)
    x = np.zeros((1, 4, 4, 4), np.float32)
    source = ("func.func @f(%x: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {\n"
              "  return %x : tensor<1x4x4x4xf32>\n}")
    with pytest.raises(TilecraftError, match="destination-padding must be 0 or 1"):
        tilecraft.compile(source, target=target, cache=False,
                          pipeline=f32.replace("graph", [f"{PAD_MATMUL_EXTENTS}{{destination-padding=maybe}}"]))(x)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3"])  # bf16 kernels where the host has them; widened weights
def test_one_weight_read_by_two_matmuls_is_stored_once(target):
    """A weight shared by two contractions (CBAM's channel MLP, applied to the average- and
    the max-pooled features): its constant is met twice, through two Python wrappers of one
    operation, and was erased twice (a segmentation fault). Both products stay right."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p"]), helper.make_node("MatMul", ["b", "w"], ["q"]),
             helper.make_node("Add", ["p", "q"], ["y"])]
    graph_ = helper.make_graph(nodes, "shared",
                               [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 64]) for n in ("a", "b")],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 48])],
                               initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    a, b = rng.standard_normal((2, 8, 64)).astype(np.float32)
    compiled = tilecraft.compile(model, precision="bf16", target=target, cache=False)
    expected = (a + b) @ w.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(compiled(a=a, b=b), expected, rtol=2e-2, atol=2e-2 * np.abs(expected).max())
