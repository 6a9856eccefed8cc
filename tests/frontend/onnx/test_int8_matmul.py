"""8-bit matmuls (MatMulInteger, QLinearMatMul) with constant weights: the u8 x s8 VNNI
kernels of pipelines/tensor/int8_matmul.py where the CPU has them, the widened i32 matmul where it
does not (``-mattr=-avx512vnni``), and both exact against the ONNX reference.

The shapes cover the kernel's edges: K not a multiple of 4 (the last group is read masked),
N not a multiple of the register tile's columns (masked stores), M not a multiple of its rows
(the one-row loop), a 3-D activation, and a matrix too small for a whole tile."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import tilecraft
from tilecraft.pipelines.target import Target

from onnx_testing import make_model, reference_outputs

RNG = np.random.default_rng(11)
HOST_VNNI = Target.parse("llvm").has_avx512_vnni
SHAPES = [((5, 6), 3), ((1, 7, 30), 70), ((13, 64), 48), ((100, 257), 33), ((2, 3, 512), 200)]


def integers(shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, size=shape, dtype=dtype)


def compiled_against_reference(model, inputs, target: str = "llvm") -> tilecraft.CompiledModule:
    compiled = tilecraft.compile(model, target=target)
    (expected,) = reference_outputs(model, inputs)
    got = compiled(**inputs)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    return compiled


@pytest.mark.parametrize("a_shape,n", SHAPES)
@pytest.mark.parametrize("a_dtype", [np.uint8, np.int8])
def test_matmul_integer_with_constant_weights_is_exact(a_shape, n, a_dtype):
    a = integers(a_shape, a_dtype)
    b = integers((a_shape[-1], n), np.int8)
    model = make_model("MatMulInteger", {"a": a}, constants={"b": b, "a_zero": np.array(17 if a_dtype == np.uint8 else -9, a_dtype)},
                       opset=10)
    compiled = compiled_against_reference(model, {"a": a})
    uses_kernel = "tilecraft_int8_matmul" in compiled.ir("schedule")
    assert uses_kernel == HOST_VNNI


@pytest.mark.parametrize("a_dtype", [np.uint8, np.int8])
def test_without_vnni_the_operands_are_widened_and_the_result_is_the_same(a_dtype):
    a = integers((9, 40), a_dtype)
    b = integers((40, 24), np.int8)
    model = make_model("MatMulInteger", {"a": a}, constants={"b": b, "a_zero": np.array(3, a_dtype)}, opset=10)
    compiled = compiled_against_reference(model, {"a": a}, target="llvm -mattr=-avx512vnni")
    assert "tilecraft_int8_matmul" not in compiled.ir("schedule")


@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8])
def test_weights_the_kernel_does_not_take_still_give_exact_results(b_dtype):
    """Unsigned weights (vpdpbusd's second operand is signed), weights given at run time,
    and a weight zero point: the widened matmul."""
    a = integers((6, 20), np.uint8)
    b = integers((20, 18), b_dtype)
    compiled_against_reference(
        make_model("MatMulInteger", {"a": a}, constants={"b": b, "a_zero": np.uint8(5)}, opset=10), {"a": a})
    compiled_against_reference(make_model("MatMulInteger", {"a": a, "b": b}, opset=10), {"a": a, "b": b})
    compiled_against_reference(
        make_model("MatMulInteger", {"a": a}, constants={"b": b, "a_zero": np.uint8(5), "b_zero": np.array(2, b_dtype)},
                   opset=10), {"a": a})


@pytest.mark.parametrize("a_dtype", [np.uint8, np.int8])
def test_qlinear_matmul_with_constant_weights_requantizes_exactly(a_dtype):
    a = integers((2, 10, 72), a_dtype)
    b = integers((72, 40), np.int8)
    params = {
        "a_scale": np.array(0.02, np.float32), "a_zero": np.array(4, a_dtype), "b": b,
        "b_scale": np.array(0.003, np.float32), "b_zero": np.array(0, np.int8),
        "y_scale": np.array(0.4, np.float32), "y_zero": np.array(7, a_dtype),
    }
    model = make_model("QLinearMatMul", {"a": a}, constants=params, opset=10,
                       input_order=["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"])
    compiled = compiled_against_reference(model, {"a": a})
    assert ("tilecraft_int8_matmul" in compiled.ir("schedule")) == HOST_VNNI



@pytest.mark.parametrize("m,k,n", [(13, 40, 70), (6, 3, 128), (1, 64, 16)])
def test_requantizing_epilogue_with_a_residual_runs_on_the_accumulators(m, k, n):
    """MatMulInteger -> per-column scale -> + residual -> ReLU -> QuantizeLinear: one kernel
    whose accumulators go through the whole chain (tilecraft-int8-epilogues), exact against
    the reference, over partial column tiles (N = 70), a K below one group and one row."""
    from onnx import TensorProto, helper, numpy_helper
    a = integers((m, k), np.uint8)
    inits = [numpy_helper.from_array(integers((k, n), np.int8), "b"),
             numpy_helper.from_array(np.array(9, np.uint8), "a_zero"),
             numpy_helper.from_array(RNG.uniform(0.001, 0.01, n).astype(np.float32), "scale"),
             numpy_helper.from_array(np.array(0.07, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(3, np.uint8), "y_zero")]
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["product"]),
             helper.make_node("Cast", ["product"], ["real"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["real", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "residual"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["relu"]),
             helper.make_node("QuantizeLinear", ["relu", "y_scale", "y_zero"], ["y"])]
    graph = helper.make_graph(nodes, "epilogue", [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k]),
                                                  helper.make_tensor_value_info("residual", TensorProto.FLOAT, [m, n])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    residual = RNG.standard_normal((m, n)).astype(np.float32)
    compiled = compiled_against_reference(model, {"a": a, "residual": residual})
    schedule = compiled.ir("schedule")
    assert ("_epilogue" in schedule) == HOST_VNNI
    if HOST_VNNI:  # nothing is left of the chain outside the kernel
        main = schedule[schedule.index("func.func @"):]
        main = main[:main.index("\n  }\n")]
        assert not any(op in main for op in ("linalg.generic", "arith.sitofp", "math.roundeven")), main



def test_epilogue_of_a_product_split_into_heads():
    """MatMulInteger -> dequantize (per-column scale) -> + bias -> Reshape into heads ->
    Transpose, as a quantized attention projection: fusion moves the reshape above the
    dequantization, so the epilogue's domain splits N into (heads, head size); it still
    runs on the accumulators and matches the reference."""
    from onnx import TensorProto, helper, numpy_helper
    tokens, hidden, heads = 10, 96, 3
    a = integers((tokens, hidden), np.uint8)
    inits = [numpy_helper.from_array(integers((hidden, hidden), np.int8), "b"),
             numpy_helper.from_array(np.array(7, np.uint8), "a_zero"),
             numpy_helper.from_array(RNG.uniform(0.001, 0.01, hidden).astype(np.float32), "scale"),
             numpy_helper.from_array(RNG.standard_normal(hidden).astype(np.float32), "bias"),
             numpy_helper.from_array(np.array([1, tokens, heads, hidden // heads], np.int64), "heads")]
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["product"]),
             helper.make_node("Cast", ["product"], ["real"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["real", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "bias"], ["biased"]),
             helper.make_node("Reshape", ["biased", "heads"], ["split"]),
             helper.make_node("Transpose", ["split"], ["y"], perm=[0, 2, 1, 3])]
    graph = helper.make_graph(nodes, "heads", [helper.make_tensor_value_info("a", TensorProto.UINT8, [tokens, hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, heads, tokens, hidden // heads])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (expected,) = reference_outputs(model, {"a": a})
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(a=a), expected, rtol=1e-5, atol=1e-5)
    assert ("_epilogue" in compiled.ir("schedule")) == HOST_VNNI


def test_target_features_decide_vnni():
    assert Target.parse("llvm -mcpu=cascadelake").has_avx512_vnni
    assert not Target.parse("llvm -mcpu=skylake-avx512").has_avx512_vnni
    assert not Target.parse("llvm -mcpu=cascadelake -mattr=-avx512vnni").has_avx512_vnni
    assert Target.parse("llvm -mcpu=skylake-avx512 -mattr=+avx512vnni").has_avx512_vnni
    assert not Target.parse("llvm -mtriple=aarch64-linux-gnu").has_avx512_vnni


def qdq_model(op_type: str, *, per_channel: bool, transposed: bool = False, bias: bool = False,
              weight_zero: bool = False):
    """x (f32) -> QuantizeLinear (u8) -> DequantizeLinear -> MatMul/Gemm with a
    DequantizeLinear'd int8 weight -> y (f32): the pattern quantize_static writes."""
    from onnx import TensorProto, helper, numpy_helper
    k, n = 48, 20
    w = integers((n, k) if transposed else (k, n), np.int8)
    w_scale = (RNG.uniform(0.001, 0.01, n) if per_channel else np.array(0.004)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_scale, "w_scale"),
             numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(128, np.uint8), "x_zero")]
    if weight_zero:
        inits.append(numpy_helper.from_array(np.full(w_scale.shape, 3, np.int8), "w_zero"))
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale", *(["w_zero"] if weight_zero else [])], ["wd"],
                              axis=0 if transposed else 1)]
    inputs = ["xd", "wd"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(n).astype(np.float32), "bias"))
        inputs.append("bias")
    attributes = {"transB": 1} if transposed else {}
    nodes.append(helper.make_node(op_type, inputs, ["y"], **attributes))
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("op_type,transposed,bias", [("MatMul", False, False), ("Gemm", True, True), ("Gemm", False, True)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_matmul_and_gemm_become_integer_matmuls(op_type, transposed, bias, per_channel):
    from tilecraft.frontend.onnx.qdq import integer_qdq_matmuls
    model = qdq_model(op_type, per_channel=per_channel, transposed=transposed, bias=bias)
    rewritten = integer_qdq_matmuls(model)
    assert [n.op_type for n in rewritten.graph.node if n.op_type in ("MatMul", "Gemm", "MatMulInteger")] == ["MatMulInteger"]
    x = RNG.standard_normal((6, 48)).astype(np.float32)
    (expected,) = reference_outputs(model, {"x": x})
    compiled = tilecraft.compile(model)
    # The float reference rounds each product's sum; the integer sum is exact.
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-5, atol=1e-5)
    assert ("tilecraft_int8_matmul" in compiled.ir("schedule")) == HOST_VNNI


def test_qdq_matmul_with_a_weight_zero_point_stays_float():
    from tilecraft.frontend.onnx.qdq import integer_qdq_matmuls
    model = qdq_model("MatMul", per_channel=True, weight_zero=True)
    assert [n.op_type for n in integer_qdq_matmuls(model).graph.node].count("MatMul") == 1
    x = RNG.standard_normal((6, 48)).astype(np.float32)
    (expected,) = reference_outputs(model, {"x": x})
    np.testing.assert_allclose(tilecraft.compile(model)(x), expected, rtol=1e-5, atol=1e-5)


CONVS = [  # (input shape, filter shape, attributes)
    ((1, 3, 9, 9), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 5, 10, 7), (20, 5, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 16, 6, 6), (40, 16, 1, 1), {}),
    ((1, 16, 7, 7), (24, 16, 1, 1), {"strides": [2, 2]}),
    ((1, 4, 11, 11), (6, 4, 3, 3), {"dilations": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 8, 9, 8), (70, 8, 3, 3), {"pads": [1, 2, 0, 1], "strides": [2, 1]}),
    ((1, 3, 8, 8), (5, 3, 2, 2), {"strides": [2, 2]}),  # odd channels, no spatial pad to widen
    ((1, 3, 23, 23), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),  # an RGB stem
]


@pytest.mark.parametrize("x_shape,w_shape,attributes", CONVS)
@pytest.mark.parametrize("x_dtype", [np.uint8, np.int8])
def test_conv_integer_with_a_constant_filter_is_an_exact_int8_matmul(x_shape, w_shape, attributes, x_dtype):
    x, w = integers(x_shape, x_dtype), integers(w_shape, np.int8)
    zero = np.array(131 if x_dtype == np.uint8 else -7, x_dtype)
    model = make_model("ConvInteger", {"x": x}, constants={"w": w, "x_zero": zero}, attributes=attributes, opset=10)
    compiled = compiled_against_reference(model, {"x": x})
    schedule = compiled.ir("schedule")
    assert ("tilecraft_int8_matmul" in schedule) == HOST_VNNI
    # A window (not a 1x1 stride-1 matmul of pixels): the kernel reads it in place, no im2col
    # copy; channels not a multiple of 4 are widened with zero-weight channels first.
    windowed = w_shape[2:] != (1, 1) or attributes.get("strides", [1, 1]) != [1, 1]
    assert ("_conv" in schedule) == (HOST_VNNI and windowed)
    if HOST_VNNI and windowed and x_shape[1] % 4:
        assert f"x{-(-x_shape[1] // 4) * 4}_k" in schedule  # the kernel's input: C rounded up to 4


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_with_constant_filter_and_bias_requantizes_exactly(per_channel):
    x, w = integers((1, 6, 8, 8), np.uint8), integers((10, 6, 3, 3), np.int8)
    params = {
        "x_scale": np.array(0.03, np.float32), "x_zero": np.array(120, np.uint8), "w": w,
        "w_scale": (RNG.uniform(0.002, 0.02, 10) if per_channel else np.array(0.01)).astype(np.float32),
        "w_zero": np.zeros(10 if per_channel else (), np.int8),
        "y_scale": np.array(0.5, np.float32), "y_zero": np.array(100, np.uint8),
        "bias": RNG.integers(-3000, 3000, 10).astype(np.int32),
    }
    model = make_model("QLinearConv", {"x": x}, constants=params, attributes={"pads": [1, 1, 1, 1]}, opset=10,
                       input_order=["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"])
    compiled = compiled_against_reference(model, {"x": x})
    assert ("tilecraft_int8_matmul" in compiled.ir("schedule")) == HOST_VNNI


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qdq_conv_becomes_an_integer_convolution(per_channel, bias):
    from onnx import TensorProto, helper, numpy_helper

    from tilecraft.frontend.onnx.qdq import integer_qdq_matmuls
    f, c = 12, 5
    w = integers((f, c, 3, 3), np.int8)
    w_scale = (RNG.uniform(0.001, 0.01, f) if per_channel else np.array(0.004)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_scale, "w_scale"),
             numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(128, np.uint8), "x_zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale"], ["wd"], axis=0)]
    inputs = ["xd", "wd"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(f).astype(np.float32), "bias"))
        inputs.append("bias")
    nodes += [helper.make_node("Conv", inputs, ["conv"], pads=[1, 1, 1, 1], strides=[2, 2]),
              helper.make_node("Relu", ["conv"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, f, 5, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    assert "ConvInteger" in [n.op_type for n in integer_qdq_matmuls(model).graph.node]
    x = RNG.standard_normal((1, c, 9, 9)).astype(np.float32)
    (expected,) = reference_outputs(model, {"x": x})
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-5, atol=1e-5)
    assert ("tilecraft_int8_matmul" in compiled.ir("schedule")) == HOST_VNNI


@pytest.mark.parametrize("indices", [False, True])
@pytest.mark.parametrize("zero", [128, None])
def test_max_pool_of_a_dequantized_tensor_pools_the_8_bit_values(indices, zero):
    """MaxPool(DequantizeLinear(q)) pools q and dequantizes after (qdq.py): exact, padding
    and the ceil-mode border window included; with the Indices output it stays float."""
    from onnx import TensorProto, helper, numpy_helper

    from tilecraft.frontend.onnx.qdq import integer_qdq_matmuls
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "scale")]
    if zero is not None:
        inits.append(numpy_helper.from_array(np.array(zero, np.uint8), "zero"))
    quant = ["x", "scale", *(["zero"] if zero is not None else [])]
    outputs = ["y", "i"] if indices else ["y"]
    nodes = [helper.make_node("QuantizeLinear", quant, ["q"]),
             helper.make_node("DequantizeLinear", ["q", *quant[1:]], ["d"]),
             helper.make_node("MaxPool", ["d"], outputs, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
                              ceil_mode=1)]
    graph = helper.make_graph(nodes, "qdq_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 6, 6]),
                               *([helper.make_tensor_value_info("i", TensorProto.INT64, [1, 5, 6, 6])] if indices else [])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    pool = next(n for n in integer_qdq_matmuls(model).graph.node if n.op_type == "MaxPool")
    assert (pool.input[0] == "q") == (not indices)
    x = RNG.standard_normal((1, 5, 10, 10)).astype(np.float32) * 4
    expected = reference_outputs(model, {"x": x})
    got = tilecraft.compile(model)(x)
    got = got if isinstance(got, (tuple, list)) else [got]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(g), e)


def test_a_package_for_a_vnni_cpu_requires_vnni_where_it_is_loaded():
    """A named CPU with VNNI, or +avx512vnni, puts the cpuinfo flag in the manifest's
    required flags, so loading on a CPU without it is refused instead of faulting."""
    from tilecraft.compiler.package import _required_flags
    host_arch = platform.machine() in ("x86_64", "AMD64")
    for spec, needs_vnni in (("llvm -mcpu=cascadelake", True), ("llvm -mcpu=skylake-avx512", False),
                             ("llvm -mcpu=skylake-avx512 -mattr=+avx512vnni", True),
                             ("llvm -mcpu=cascadelake -mattr=-avx512vnni", False)):
        target = Target.parse(spec)
        if host_arch and target.is_host:
            assert ("avx512_vnni" in _required_flags(target)) == needs_vnni, spec
