"""Cast, QuantizeLinear and DequantizeLinear with bfloat16, float8, float4, int4 and int2.

The conversions are integer bit manipulation (ir/small_types.py); these tests
compare them bit for bit with ml_dtypes (every float8 code decoded; values around every
rounding boundary, the overflow thresholds, Inf, NaN and subnormals encoded), with ONNX's
reference (saturation rules) and with onnxruntime.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import tilecraft
from onnx_testing import check_node, import_error
from tilecraft.errors import ModelImportError

FLOAT8 = {
    "FLOAT8E4M3FN": ml_dtypes.float8_e4m3fn,
    "FLOAT8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "FLOAT8E5M2": ml_dtypes.float8_e5m2,
    "FLOAT8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
}


def cast_model(source: int, target: int, shape: list[int], **attributes) -> onnx.ModelProto:
    node = helper.make_node("Cast", ["x"], ["y"], to=target, **attributes)
    graph = helper.make_graph(
        [node], "cast", [helper.make_tensor_value_info("x", source, shape)],
        [helper.make_tensor_value_info("y", target, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal codes, except that any NaN equals any NaN."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    nan = np.isnan(expected.astype(np.float32))
    assert (np.isnan(got.astype(np.float32)) == nan).all()
    width = got.dtype.itemsize
    if got.dtype.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        # One value per byte, in its low bits: the upper bits are not part of the value.
        low = (1 << (4 if "4" in got.dtype.name else 2)) - 1
        bits = lambda a: (a.view(np.uint8) & low)[~nan]  # noqa: E731
    else:
        bits = lambda a: a.view(np.dtype(f"u{width}"))[~nan]  # noqa: E731
    mismatch = np.flatnonzero(bits(got) != bits(expected))
    assert mismatch.size == 0, (
        f"{mismatch.size} codes differ, first: {expected[~nan][mismatch[0]]!r} got {got[~nan][mismatch[0]]!r}"
    )


def hard_floats(dtype) -> np.ndarray:
    """Every value of ``dtype``, the midpoints between neighbours (ties), values just off
    them, past the largest finite value, Inf, NaN, zeros, subnormals and random values."""
    codes = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[:-1] + finite[1:]) / 2
    top = float(ml_dtypes.finfo(dtype).max)
    extra = np.array([top * 1.03, top * 1.1, top * 4, 3e38, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30],
                     np.float32)
    rng = np.random.default_rng(3)
    randoms = (rng.standard_normal(200) * np.exp2(rng.integers(-20, 20, 200))).astype(np.float32)
    parts = [finite, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
             extra, randoms]
    values = np.concatenate(parts).astype(np.float32)
    return np.concatenate([values, -values])


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_decodes_every_code_like_ml_dtypes(name):
    dtype = FLOAT8[name]
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    compiled = tilecraft.compile(cast_model(getattr(onnx.TensorProto, name), onnx.TensorProto.FLOAT, [256]))
    same_bits(compiled(codes), codes.astype(np.float32))


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("name", FLOAT8)
def test_float8_encodes_with_onnx_rounding_and_saturation(name, saturate):
    dtype = FLOAT8[name]
    x = hard_floats(dtype)
    model = cast_model(onnx.TensorProto.FLOAT, getattr(onnx.TensorProto, name), [x.size], saturate=saturate)
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0]
    same_bits(tilecraft.compile(model)(x), expected)


def test_float8_from_float16_and_to_float16():
    with np.errstate(over="ignore"):  # 3e38 -> inf in float16: one more Inf to encode
        x = hard_floats(ml_dtypes.float8_e4m3fn).astype(np.float16)
    model = cast_model(onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT8E4M3FN, [x.size])
    same_bits(tilecraft.compile(model)(x), onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0])
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    back = tilecraft.compile(cast_model(onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.FLOAT16, [256]))
    same_bits(back(codes), codes.astype(np.float16))


def test_float8_cast_matches_onnxruntime():
    x = hard_floats(ml_dtypes.float8_e4m3fn)
    x = x[np.isfinite(x)]
    model = cast_model(onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT8E4M3FN, [x.size])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    # onnxruntime's Python API hands float8 back as raw uint8 codes.
    same_bits(tilecraft.compile(model)(x), session.run(None, {"x": x})[0].view(ml_dtypes.float8_e4m3fn))


SUB_BYTE = {
    "INT4": ml_dtypes.int4, "UINT4": ml_dtypes.uint4, "INT2": ml_dtypes.int2, "UINT2": ml_dtypes.uint2,
    "FLOAT4E2M1": ml_dtypes.float4_e2m1fn,
}


@pytest.mark.parametrize("name", SUB_BYTE)
def test_sub_byte_types_round_trip_through_float(name):
    """float -> type wraps (integers, truncating) or rounds and saturates (float4) as ONNX's
    reference; type -> float reads only the low bits of each byte, as ml_dtypes stores them."""
    dtype = SUB_BYTE[name]
    x = np.array([0, 1.5, -1.5, 2.5, 3.7, -3.7, 7, -8, 8, 15, 16, 17, -9, 100.25, 0.25, 6, 6.5, -7], np.float32)
    to = cast_model(onnx.TensorProto.FLOAT, getattr(onnx.TensorProto, name), [x.size])
    expected = onnx.reference.ReferenceEvaluator(to).run(None, {"x": x})[0]
    got = tilecraft.compile(to)(x)
    same_bits(got, expected)
    count = 4 if "2" in name else 16
    codes = np.arange(count, dtype=np.uint8).view(dtype)
    if name != "FLOAT4E2M1":  # ml_dtypes reads an integer from the low bits only; float4 not
        codes = (np.arange(256, dtype=np.uint8) & 0xF3 if count == 4 else np.arange(256, dtype=np.uint8)).view(dtype)
    back = tilecraft.compile(cast_model(getattr(onnx.TensorProto, name), onnx.TensorProto.FLOAT, [codes.size]))
    same_bits(back(codes), codes.astype(np.float32))


def test_int4_to_int8_sign_extends():
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.int4)
    compiled = tilecraft.compile(cast_model(onnx.TensorProto.INT4, onnx.TensorProto.INT8, [16]))
    np.testing.assert_array_equal(compiled(codes), codes.astype(np.int8))


def test_bfloat16_casts_match_ml_dtypes():
    x = hard_floats(ml_dtypes.float8_e5m2)
    x = np.concatenate([x, np.random.default_rng(1).standard_normal(100).astype(np.float32)])
    to = tilecraft.compile(cast_model(onnx.TensorProto.FLOAT, onnx.TensorProto.BFLOAT16, [x.size]))
    same_bits(to(x), x.astype(ml_dtypes.bfloat16))
    b = x.astype(ml_dtypes.bfloat16)
    back = tilecraft.compile(cast_model(onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT16, [x.size]))
    with np.errstate(over="ignore"):
        same_bits(back(b), b.astype(np.float32).astype(np.float16))


@pytest.mark.parametrize("zero", [np.array(0, ml_dtypes.float8_e4m3fn), np.array(-2, ml_dtypes.int4),
                                  np.array(3, ml_dtypes.uint4), np.array(0, ml_dtypes.float4_e2m1fn)])
def test_quantize_and_dequantize_small_types(zero):
    x = np.random.default_rng(5).standard_normal(24).astype(np.float32) * 4
    (q,) = check_node("QuantizeLinear", {"x": x}, constants={"scale": np.float32(0.5), "zero": zero}, opset=21)
    assert q.dtype == zero.dtype
    check_node("DequantizeLinear", {"q": q}, constants={"scale": np.float32(0.5), "zero": zero}, opset=21)


def test_arithmetic_on_int4_is_refused_naming_the_type():
    a = np.arange(4, dtype=np.uint8).view(ml_dtypes.int4)
    message = import_error("Add", {"a": a, "b": a}, opset=21)
    assert "Add" in message and "int4" in message


def test_cast_to_float8e8m0_is_refused_naming_the_type():
    model = cast_model(onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT8E8M0, [4])
    with pytest.raises(ModelImportError, match="FLOAT8E8M0"):
        tilecraft.compile(model)


def test_bfloat16_sums_accumulate_in_float32():
    """1024 ones: a bf16 accumulator stops at 256 (256 + 1 rounds back to 256)."""
    x = np.ones((4, 1024), dtype=ml_dtypes.bfloat16)
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph(
        [node], "sum", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4])],
        [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    got = tilecraft.compile(model)(x)
    assert got.dtype == ml_dtypes.bfloat16 and (got.astype(np.float32) == 1024).all()


def test_arithmetic_on_float8_is_refused_naming_the_type():
    a = np.arange(4, dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    message = import_error("Mul", {"a": a, "b": a}, opset=21)
    assert "Mul" in message and "float8_e5m2" in message
