"""ONNX linear quantization (QuantizeLinear, DequantizeLinear, QLinearMatMul, MatMulInteger,
ConvInteger) against ONNX's reference implementation: the three parameter layouts
(per tensor, per axis, blocked), both signednesses, rounding of halves and saturation."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_testing import check_node, import_error
from quantized_reference import qlinear_conv

RNG = np.random.default_rng(7)


def integers(shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, size=shape, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_per_tensor_rounds_halves_to_even_and_saturates(dtype):
    # x / scale hits .5 exactly (ties go to even) and runs past both ends of the range.
    x = np.array([-1e6, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0, 1e6], dtype=np.float32)
    check_node(
        "QuantizeLinear", {"x": x},
        constants={"scale": np.float32(1.0), "zero": np.array(3, dtype=dtype)}, opset=21,
    )


def test_quantize_without_zero_point_defaults_to_uint8():
    x = RNG.standard_normal((4, 5)).astype(np.float32) * 50
    (got,) = check_node("QuantizeLinear", {"x": x, "scale": np.float32(0.25)}, opset=21)
    assert got.dtype == np.uint8


def test_quantize_per_axis_and_runtime_parameters():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check_node(
        "QuantizeLinear",
        {"x": x, "scale": np.array([0.01, 0.02, 0.05], np.float32), "zero": np.array([0, 10, -5], np.int8)},
        attributes={"axis": 1}, opset=21,
    )


def test_quantize_blocked_along_last_axis_with_a_partial_block():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    scale = RNG.uniform(0.01, 0.1, size=(3, 3)).astype(np.float32)  # ceil(5 / 2) blocks
    zero = integers((3, 3), np.uint8)
    check_node(
        "QuantizeLinear", {"x": x, "scale": scale, "zero": zero},
        attributes={"axis": -1, "block_size": 2}, opset=21,
    )


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32])
def test_dequantize_per_tensor(dtype):
    x = integers((4, 6), dtype)
    zero = {} if dtype == np.int32 else {"zero": np.array(2, dtype=dtype)}
    check_node("DequantizeLinear", {"x": x}, constants={"scale": np.float32(0.125), **zero}, opset=21)


def test_dequantize_per_axis_and_blocked():
    x = integers((2, 4, 3), np.int8)
    check_node(
        "DequantizeLinear",
        {"x": x, "scale": np.array([0.5, 0.25, 2.0, 1.0], np.float32), "zero": integers((4,), np.int8)},
        attributes={"axis": 1}, opset=21,
    )
    check_node(
        "DequantizeLinear",
        {"x": x, "scale": RNG.uniform(0.1, 1, (2, 2, 3)).astype(np.float32), "zero": integers((2, 2, 3), np.int8)},
        attributes={"axis": 1, "block_size": 2}, opset=21,
    )


def test_dequantize_to_float16_scale_type():
    x = integers((8,), np.uint8)
    (got,) = check_node(
        "DequantizeLinear", {"x": x, "scale": np.float16(0.5), "zero": np.uint8(128)}, opset=21,
    )
    assert got.dtype == np.float16


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul_requantizes(dtype):
    a, b = integers((2, 3, 8), dtype), integers((8, 5), dtype)
    params = {
        "a_scale": np.array([0.02], np.float32), "a_zero": np.array([3], dtype),
        "b_scale": np.array([0.01], np.float32), "b_zero": np.array([1], dtype),
        "y_scale": np.array([0.05], np.float32), "y_zero": np.array([7], dtype),
    }
    check_node(
        "QLinearMatMul", {"a": a, "b": b}, constants=params,
        input_order=["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"], opset=21,
    )


def test_matmul_integer_and_conv_integer_accumulate_in_int32():
    a, b = integers((4, 16), np.uint8), integers((16, 3), np.uint8)
    (got,) = check_node("MatMulInteger", {"a": a, "b": b, "a_zero": np.uint8(12), "b_zero": np.uint8(200)}, opset=10)
    assert got.dtype == np.int32
    x, w = integers((1, 2, 5, 5), np.uint8), integers((3, 2, 3, 3), np.uint8)
    check_node(
        "ConvInteger", {"x": x, "w": w, "x_zero": np.uint8(100), "w_zero": np.array([1, 50, 250], np.uint8)},
        attributes={"pads": [1, 1, 1, 1]}, opset=10,
    )


def test_float8e8m0_quantization_is_named_as_unsupported():
    # float8/float4/int4/int2 are supported (tests/frontend/onnx/test_small_types.py).
    x = RNG.standard_normal((4,)).astype(np.float32)
    message = import_error("QuantizeLinear", {"x": x}, constants={"scale": np.float32(1)},
                           attributes={"output_dtype": 24}, opset=24)  # FLOAT8E8M0
    assert "QuantizeLinear" in message and "FLOAT8E8M0" in message


def test_scale_of_the_wrong_layout_is_rejected():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    message = import_error("QuantizeLinear", {"x": x, "scale": np.ones(4, np.float32)}, attributes={"axis": 1}, opset=21)
    assert "per-axis" in message


@pytest.mark.parametrize("w_scale_per_channel", [False, True])
def test_qlinear_conv_requantizes_with_bias_and_per_channel_scales(w_scale_per_channel):
    """uint8 activations x int8 weights (per-output-channel zero points and, here, scales),
    an int32 bias, padding and strides: ONNX's reference, exactly."""
    x, w = integers((1, 4, 9, 9), np.uint8), integers((6, 4, 3, 3), np.int8)
    params = {
        "x_scale": np.array(0.02, np.float32), "x_zero": np.array(120, np.uint8),
        "w_scale": (np.linspace(0.005, 0.02, 6).astype(np.float32) if w_scale_per_channel
                    else np.array(0.01, np.float32)),
        "w_zero": np.zeros(6, np.int8),
        "y_scale": np.array(0.02, np.float32), "y_zero": np.array(100, np.uint8),  # some saturate
        "bias": RNG.integers(-2000, 2000, 6).astype(np.int32),
    }
    (got,) = check_node(
        "QLinearConv", {"x": x, "w": w}, constants=params,
        input_order=["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"],
        attributes={"pads": [1, 1, 1, 1], "strides": [2, 2]}, opset=10, rtol=0, atol=0,
    )
    assert got.dtype == np.uint8 and 0 < np.count_nonzero(got == 255) + np.count_nonzero(got == 0) < got.size


def test_qlinear_conv_with_a_scale_per_channel_of_the_wrong_count_is_rejected():
    x, w = integers((1, 4, 5, 5), np.uint8), integers((6, 4, 3, 3), np.int8)
    message = import_error(
        "QLinearConv", {"x": x, "w": w}, opset=10,
        constants={"x_scale": np.array(0.02, np.float32), "x_zero": np.array(120, np.uint8),
                   "w_scale": np.full(4, 0.01, np.float32), "w_zero": np.zeros(6, np.int8),
                   "y_scale": np.array(0.3, np.float32), "y_zero": np.array(100, np.uint8)},
        input_order=["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"])
    assert "w_scale has 4 values for 6 output channels" in message


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_is_exact(per_channel):
    """Bit for bit against the exact reference (tests/quantized_reference.py; onnxruntime's u8 x s8
    kernels saturate full-range operands on x86 hosts without VNNI)."""
    import tilecraft
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    parameters = {
        "xs": np.array(0.02, np.float32), "xz": np.array(120, np.uint8),
        "w": rng.integers(-128, 127, (16, 8, 3, 3)).astype(np.int8),
        "ws": np.linspace(0.005, 0.02, 16).astype(np.float32) if per_channel else np.array(0.01, np.float32),
        "wz": np.zeros(16, np.int8) if per_channel else np.array(0, np.int8),
        "ys": np.array(0.05, np.float32), "yz": np.array(100, np.uint8),
        "b": rng.integers(-2000, 2000, 16).astype(np.int32),
    }
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "qlinearconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 14, 14])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 16, 14, 14])],
                              [numpy_helper.from_array(v, k) for k, v in parameters.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = rng.integers(0, 255, (1, 8, 14, 14)).astype(np.uint8)
    expected = qlinear_conv(x, *(parameters[k] for k in ("xs", "xz", "w", "ws", "wz", "ys", "yz", "b")), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(tilecraft.compile(model, keep_ir=False)(x), expected)
