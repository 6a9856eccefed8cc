"""QuantizeLinear's clamp to the integer range (frontend/onnx/ops/quantization.py
``_saturate_to_integer``): ``maxnumf``/``minnumf`` against the constant bounds, one
instruction each on x86 where ``maximumf``/``minimumf`` take six, in every int8 kernel's
requantizing epilogue. The integers are numpy's (ONNX's reference) for every number,
saturated at both ends; a NaN gives the low bound, not an undefined conversion."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402


def _quantize_model(dtype, zero: int) -> onnx.ModelProto:
    element = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    node = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"])
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", element, [64])],
                              [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
                               numpy_helper.from_array(np.array(zero, dtype), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dtype,zero", [(np.uint8, 0), (np.uint8, 131), (np.int8, 0), (np.int8, -7)])
def test_quantize_linear_clamps_with_one_instruction_bounds(dtype, zero):
    model = _quantize_model(dtype, zero)
    compiled = tilecraft.compile(model)
    graph_ir = compiled.ir("graph")
    assert "arith.maxnumf" in graph_ir and "arith.minnumf" in graph_ir
    assert "arith.maximumf" not in graph_ir and "arith.minimumf" not in graph_ir
    rng = np.random.default_rng(3)
    edges = [-0.0, 0.0, -0.25, 0.25, 0.75, 1e9, -1e9, np.nan]
    x = np.concatenate([rng.uniform(-300, 300, 56), edges]).astype(np.float32)
    got = np.asarray(compiled(x=x))
    info = np.iinfo(dtype)
    expected = np.clip(np.rint(x[:-1] / np.float32(0.5)) + zero, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(got[:-1], expected)
    assert got[-1] == info.min  # NaN: the low bound
