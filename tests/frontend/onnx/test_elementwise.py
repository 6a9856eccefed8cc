"""Elementwise ONNX operators against ONNX's reference implementation.

Shapes are tiny: what is tested is the scalar semantics (signedness, integer division,
casts, NaN, attributes, opset differences) and broadcasting, not speed.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper

import tilecraft
from mlir import ir
from tilecraft.frontend.onnx.model import TensorInfo
from tilecraft.frontend.onnx.node import HandlerError, NodeContext
from tilecraft.frontend.onnx.registry import lookup

from onnx_testing import check_node, make_model, reference_outputs

RNG = np.random.default_rng(7)


def normal(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def uniform(low, high, shape, dtype=np.float32):
    return RNG.uniform(low, high, shape).astype(dtype)


def integers(low, high, shape, dtype=np.int32):
    return RNG.integers(low, high, shape).astype(dtype)


def _signed_view(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return array.view(f"i{array.dtype.itemsize}") if array.dtype.kind == "u" else array


def check_unsigned(op_type: str, inputs: dict, **options) -> None:
    """``check_node`` for models with uintN tensors.

    The importer declares uintN as signless iN (MLIR has no signedness), and the runtime
    then asks for intN arrays: until it accepts uintN arrays, pass bit-identical signed
    views and compare bits. What is checked is the handler's unsigned semantics.
    """
    model = make_model(op_type, inputs, **options)
    expected = reference_outputs(model, inputs)
    compiled = tilecraft.compile(model)
    try:
        got = compiled(**inputs)
    except tilecraft.ArgumentTypeError:
        got = compiled(**{name: _signed_view(v) for name, v in inputs.items()})
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_array_equal(_signed_view(g), _signed_view(e), err_msg=op_type)


def expect_import_error(op_type: str, inputs: dict, match: str, **options) -> None:
    """The node cannot be imported: ModelImportError naming the node and the reason."""
    model = make_model(op_type, inputs, **options)
    with pytest.raises(tilecraft.ModelImportError, match=match) as error:
        tilecraft.compile(model)
    assert f"{op_type.lower()}_node" in str(error.value)


# --- float functions of one tensor -------------------------------------------------------

_DOMAINS = {
    "Sqrt": (0.01, 4.0), "Log": (0.01, 4.0), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99),
    "Atanh": (-0.99, 0.99), "Acosh": (1.0, 6.0), "Reciprocal": (0.5, 4.0),
}
_FLOAT_UNARY = [
    "Sqrt", "Exp", "Log", "Ceil", "Floor", "Reciprocal", "Sin", "Cos", "Tan", "Asin", "Acos",
    "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh", "Erf", "Sigmoid", "Softplus",
    "Softsign", "Mish", "HardSwish",
]


@pytest.mark.parametrize("op_type", _FLOAT_UNARY)
def test_float_unary_f32(op_type):
    low, high = _DOMAINS.get(op_type, (-3.0, 3.0))
    check_node(op_type, {"x": uniform(low, high, (3, 4))}, opset=18, rtol=2e-6, atol=1e-6, dynamic=["x"])


@pytest.mark.parametrize("op_type", ["Erf", "Asinh", "Acosh", "Atanh", "Softplus", "Mish"])
@pytest.mark.parametrize("dtype,rtol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_float_unary_other_widths(op_type, dtype, rtol):
    low, high = _DOMAINS.get(op_type, (-4.0, 4.0))
    if op_type == "Erf" and dtype == np.float64:
        rtol = 1e-7  # the reference's erf is f32-accurate; see test_erf_is_accurate_everywhere
    check_node(op_type, {"x": uniform(low, high, (7,), dtype)}, opset=18, rtol=rtol, atol=rtol)


def test_round_halves_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7], np.float32)
    got = check_node("Round", {"x": x})[0]
    np.testing.assert_array_equal(got, [-2, -2, -0, 0, 2, 2, 0, -1, 4])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-7), (np.float64, 2e-14)])
def test_erf_is_accurate_everywhere(dtype, rtol):
    """erf is a formula here (math.erf does not lower): check it far from the easy range."""
    x = np.concatenate([
        np.linspace(-7, 7, 2801), np.geomspace(1e-30, 1.0, 50), -np.geomspace(1e-30, 1.0, 50),
        [np.inf, -np.inf, 1.5, -1.5, 4.0, 6.0],
    ]).astype(dtype)
    compiled = tilecraft.compile(make_model("Erf", {"x": x}))
    expected = np.array([math.erf(v) for v in x.astype(np.float64)])
    np.testing.assert_allclose(compiled(x=x), expected, rtol=rtol, atol=0)
    assert np.isnan(compiled(x=np.array([np.nan] * x.size, dtype)[: x.size])).all()


def test_inverse_hyperbolics_at_extremes():
    x = np.array([0.0, 1e-20, 1e-4, 1e10, 3e30, np.inf], np.float32)
    np.testing.assert_allclose(
        tilecraft.compile(make_model("Asinh", {"x": x}))(x=x), np.arcsinh(x.astype(np.float64)), rtol=1e-6
    )
    y = np.array([1.0, 1.0 + 1e-6, 2.0, 1e10, 3e30, np.inf, 0.5], np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(
            tilecraft.compile(make_model("Acosh", {"x": y}))(x=y), np.arccosh(y.astype(np.float64)), rtol=1e-6
        )


def test_near_zero_accuracy_of_log1p_and_expm1_formulas():
    """math.log1p/expm1 lower to log(1 + x)/exp(x) - 1, which lose everything near 0."""
    x = np.array([-1e-7, -3e-5, 1e-6, 2e-30, -1e-3], np.float32)
    for op_type, expected in (("Elu", np.expm1(x.astype(np.float64))),
                              ("Asinh", np.arcsinh(x.astype(np.float64))),
                              ("Atanh", np.arctanh(x.astype(np.float64)))):
        got = tilecraft.compile(make_model(op_type, {"x": x}))(x=x)
        np.testing.assert_allclose(got, np.where(x > 0, x, expected) if op_type == "Elu" else expected,
                                   rtol=1e-6, err_msg=op_type)
    very_negative = np.array([-20.0, -80.0, 30.0, 100.0], np.float32)
    got = tilecraft.compile(make_model("Softplus", {"x": very_negative}))(x=very_negative)
    np.testing.assert_allclose(got, np.logaddexp(0, very_negative.astype(np.float64)), rtol=1e-6)


# --- activations ---------------------------------------------------------------------------

@pytest.mark.parametrize("op_type,attributes", [
    ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}),
    ("Elu", {}), ("Elu", {"alpha": 0.5}),
    ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 3.0}),
    ("Celu", {}), ("Celu", {"alpha": 2.0}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.5, "beta": 0.6}),
    ("ThresholdedRelu", {}), ("ThresholdedRelu", {"alpha": 0.5}),
])
def test_activation_attributes(op_type, attributes):
    check_node(op_type, {"x": uniform(-3, 3, (2, 3, 4))}, attributes=attributes)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float16, 2e-3)])
def test_gelu(approximate, dtype, rtol):
    check_node("Gelu", {"x": uniform(-5, 5, (4, 5), dtype)}, attributes={"approximate": approximate},
               opset=20, rtol=rtol, atol=rtol)


def test_gelu_unknown_approximation_is_refused():
    expect_import_error("Gelu", {"x": normal((2,))}, "approximate",
                        attributes={"approximate": "erfc"}, opset=20)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_relu_dynamic_batch(dtype):
    x = (normal((3, 4)) * 10).astype(dtype)
    check_node("Relu", {"x": x}, dynamic=["x"], opset=14)


@pytest.mark.parametrize("slope_shape", [(1,), (4,), (3, 1), (3, 4)])
def test_prelu_slope_broadcasts(slope_shape):
    check_node("PRelu", {"x": normal((2, 3, 4))}, constants={"slope": uniform(0, 1, slope_shape)})


@pytest.mark.parametrize("x_shape", [(2, 3, 4), (2, 3, 4, 5)])
def test_prelu_one_slope_per_channel_that_does_not_broadcast(x_shape):
    """PyTorch's exporter (opsets 6-7) wrote nn.PReLU(C)'s slope as a [C] vector: taken along
    dim 1, as ONNX's pytorch-converted PReLU_*_multiparam cases expect."""
    x, slope = normal(x_shape), uniform(0, 1, (3,))
    model = make_model("PRelu", {"x": x}, constants={"slope": slope}, opset=7)
    expected = np.where(x < 0, x * slope.reshape(3, *[1] * (len(x_shape) - 2)), x)
    np.testing.assert_allclose(tilecraft.compile(model)(x), expected, rtol=1e-6)


def test_prelu_slope_of_neither_extent_is_refused():
    model = make_model("PRelu", {"x": normal((2, 3, 4))}, constants={"slope": uniform(0, 1, (5,))}, opset=7)
    with pytest.raises(tilecraft.ModelImportError, match="do not broadcast"):
        tilecraft.compile(model)


def test_prelu_integers():
    check_node("PRelu", {"x": integers(-9, 9, (3, 4)), "slope": integers(1, 4, (4,))}, opset=16)


# --- numeric functions of one tensor ------------------------------------------------------

@pytest.mark.parametrize("op_type", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8])
def test_numeric_unary(op_type, dtype):
    x = np.array([-3, -1, 0, 0, 2, 5, -7, 1], dtype)
    if dtype == np.float32:
        x = np.array([-3.5, -0.0, 0.0, np.nan, 2.25, np.inf, -np.inf, 1e-30], dtype)
    check_node(op_type, {"x": x}, opset=13)


@pytest.mark.parametrize("op_type", ["Abs", "Sign", "Relu"])
def test_numeric_unary_unsigned(op_type):
    check_unsigned(op_type, {"x": np.array([0, 1, 200, 255], np.uint8)}, opset=14)


@pytest.mark.parametrize("attributes", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                        {"detect_negative": 0, "detect_positive": 0}])
def test_is_inf(attributes):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 1e38, -2.0], np.float32)
    check_node("IsInf", {"x": x}, attributes=attributes)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_is_nan(dtype):
    check_node("IsNaN", {"x": np.array([np.nan, 1.0, -np.inf, 0.0], dtype)})


# --- binary arithmetic ------------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int8])
def test_arithmetic_broadcast(op_type, dtype):
    a = (normal((2, 3, 4)) * 20).astype(dtype)
    b = (uniform(1, 9, (3, 1)) * np.where(normal((3, 1)) > 0, 1, -1)).astype(dtype)
    check_node(op_type, {"a": a, "b": b}, rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_arithmetic_dynamic_batch():
    check_node("Mul", {"a": normal((5, 3)), "b": normal((3,))}, dynamic=["a"])


def test_integer_division_truncates_and_survives_zero():
    a = np.array([7, -7, 7, -7, 5, -128, 0, 9], np.int8)
    b = np.array([2, 2, -2, -2, 0, -1, 3, 0], np.int8)
    with np.errstate(divide="ignore", over="ignore"):
        got = check_node("Div", {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, [3, -3, -3, 3, 0, -128, 0, 0])


def test_unsigned_division():
    a = np.array([200, 255, 7, 9], np.uint8)
    b = np.array([3, 2, 200, 0], np.uint8)
    with np.errstate(divide="ignore"):
        check_unsigned("Div", {"a": a, "b": b})


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float16])
def test_mod_signs(fmod, dtype):
    """fmod=0 on floats breaks ONNX's type rule but follows numpy's mod, as the reference."""
    a = np.array([-4, 7, 5, -9, 8, -3, 0, 6], dtype)
    b = np.array([3, -3, 8, -2, 3, 7, 5, 4], dtype)
    if dtype == np.float32:
        a, b = a * 1.5, b * 0.75
    check_node("Mod", {"a": a, "b": b}, attributes={"fmod": fmod})


def test_mod_by_zero_and_unsigned():
    with np.errstate(divide="ignore", invalid="ignore"):
        check_node("Mod", {"a": np.array([5, -5], np.int32), "b": np.array([0, 0], np.int32)})
    check_unsigned("Mod", {"a": np.array([200, 17, 255], np.uint8), "b": np.array([7, 250, 16], np.uint8)})


def test_mod_bad_fmod_is_refused():
    expect_import_error("Mod", {"a": normal((2,)), "b": normal((2,))}, "fmod=2", attributes={"fmod": 2})


@pytest.mark.parametrize("base_dtype,exponent_dtype", [
    (np.float32, np.float32), (np.float32, np.int64), (np.float64, np.int32),
    (np.int32, np.int32), (np.int64, np.int64), (np.int32, np.float32), (np.int8, np.int64),
])
def test_pow_mixed_types(base_dtype, exponent_dtype):
    if np.dtype(base_dtype).kind == "f":
        base = uniform(0.5, 2.0, (3, 4), base_dtype) * np.where(normal((3, 4)) > 0, 1, -1).astype(base_dtype)
    else:
        base = integers(-6, 7, (3, 4), base_dtype)
    exponent = np.array([0, 1, 2, 5], exponent_dtype)
    check_node("Pow", {"x": base, "y": exponent}, opset=15)


def test_integer_pow_wraps_and_handles_negative_exponents():
    base = np.array([3, 2, -2, 1, -1, -1, 5, 0, 7], np.int32)
    exponent = np.array([40, 31, 3, -5, -3, -4, -1, 0, 12], np.int64)
    compiled = tilecraft.compile(make_model("Pow", {"x": base, "y": exponent}, opset=15))
    expected = [int(b) ** int(e) % 2**32 if e >= 0 else int(int(b) ** int(e)) for b, e in zip(base, exponent)]
    np.testing.assert_array_equal(compiled(x=base, y=exponent), np.array(expected, np.int64).astype(np.int32))


def test_pow_unsigned_exponent():
    base, exponent = np.array([1.5, -2.0, 3.0], np.float32), np.array([2, 3, 4], np.uint32)
    check_unsigned("Pow", {"x": base, "y": exponent}, opset=15)


# --- variadic -----------------------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["Max", "Min", "Sum", "Mean"])
def test_variadic_broadcast(op_type):
    inputs = {"a": normal((2, 3, 4)), "b": normal((4,)), "c": normal((3, 1))}
    inputs["a"][0, 0, 0] = np.nan
    check_node(op_type, inputs, dynamic=["a"])


@pytest.mark.parametrize("op_type", ["Max", "Min", "Sum", "Mean"])
def test_variadic_single_input(op_type):
    check_node(op_type, {"a": normal((3,))}, opset=13)


@pytest.mark.parametrize("op_type", ["Max", "Min"])
def test_extremes_integers(op_type):
    check_node(op_type, {"a": integers(-9, 9, (3, 4), np.int64), "b": integers(-9, 9, (4,), np.int64)})
    check_unsigned(op_type, {"a": np.array([1, 200, 255], np.uint8), "b": np.array([100, 3, 0], np.uint8)})


# --- comparisons and logic -----------------------------------------------------------------

_COMPARISONS = ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"]


@pytest.mark.parametrize("op_type", _COMPARISONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_comparisons(op_type, dtype):
    a = np.array([[1, 2, 3, 4], [4, 3, 2, 1], [0, 0, 5, 5]], dtype)
    b = np.array([2, 2, 2, 5], dtype)
    if dtype == np.float32:
        a[0, 0] = np.nan
    check_node(op_type, {"a": a, "b": b}, opset=16, dynamic=["a"])


@pytest.mark.parametrize("op_type", ["Greater", "LessOrEqual"])
def test_comparisons_unsigned(op_type):
    a, b = np.array([200, 1, 128], np.uint8), np.array([100, 255, 127], np.uint8)
    check_unsigned(op_type, {"a": a, "b": b}, opset=16)


def test_equal_bool():
    check_node("Equal", {"a": np.array([True, False, True]), "b": np.array([True, True, False])}, opset=13)


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logical_binary(op_type):
    check_node(op_type, {"a": normal((2, 3, 4)) > 0, "b": normal((3, 4)) > 0}, dynamic=["a"])


def test_not():
    check_node("Not", {"x": normal((3, 4)) > 0})


@pytest.mark.parametrize("op_type", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_binary(op_type):
    check_node(op_type, {"a": integers(-100, 100, (3, 4)), "b": integers(-100, 100, (4,))}, opset=18)


@pytest.mark.parametrize("dtype", [np.int16, np.int64])
def test_bitwise_not(dtype):
    check_node("BitwiseNot", {"x": integers(-100, 100, (5,), dtype)}, opset=18)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bit_shift_including_out_of_range(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([1, 5, 255, 128, 3, 7], dtype)
    y = np.array([0, 1, 3, bits - 1, bits, bits + 9], dtype)
    check_unsigned("BitShift", {"x": x, "y": y}, attributes={"direction": direction})


def test_bit_shift_bad_direction_is_refused():
    x = np.array([1, 2], np.uint8)
    expect_import_error("BitShift", {"x": x, "y": x}, "direction", attributes={"direction": "UP"})


def test_where_broadcast_dynamic():
    check_node("Where", {"c": normal((3, 1, 4)) > 0, "x": normal((5, 4)), "y": normal((1,))},
               dynamic=["c"])


# --- Clip --------------------------------------------------------------------------------

@pytest.mark.parametrize("attributes", [{"min": -0.5, "max": 0.5}, {"min": 0.0}, {"max": 0.1}, {}])
def test_clip_attributes_before_opset_11(attributes):
    check_node("Clip", {"x": normal((3, 4))}, attributes=attributes, opset=10)


@pytest.mark.parametrize("order", [["x", "lo", "hi"], ["x", "lo"], ["x", "", "hi"], ["x"], ["x", "hi", "lo"]])
def test_clip_optional_inputs(order):
    """Bounds as initializers; swapping them gives min > max (numpy: everything is max)."""
    check_node("Clip", {"x": normal((3, 4))}, opset=13, input_order=order,
               constants={"lo": np.array(-0.25, np.float32), "hi": np.array(0.5, np.float32)})


def test_clip_runtime_bounds_integers_dynamic():
    check_node("Clip", {"x": integers(-100, 100, (4, 3), np.int8), "lo": np.array(-10, np.int8),
                        "hi": np.array(20, np.int8)}, opset=13, dynamic=["x"])


# --- types ----------------------------------------------------------------------------------

_CASTS = [
    (np.float32, np.float16), (np.float16, np.float64), (np.float64, np.float32),
    (np.float32, np.int32), (np.float32, np.int8), (np.float64, np.int64), (np.float16, np.int16),
    (np.int32, np.float32), (np.int64, np.float16), (np.int8, np.int64), (np.int64, np.int16),
    (np.bool_, np.float32), (np.float32, np.bool_), (np.int32, np.bool_), (np.bool_, np.int64),
]


@pytest.mark.parametrize("source,target", _CASTS)
def test_cast(source, target):
    values = np.array([-3.75, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 100.25], np.float64)
    if source == np.bool_:
        x = values > 0
    else:
        x = values.astype(source)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(target))
    check_node("Cast", {"x": x}, attributes={"to": to}, opset=13)


@pytest.mark.parametrize("source,target", [(np.float32, np.uint8), (np.float64, np.uint32),
                                           (np.uint16, np.float32), (np.uint8, np.int64),
                                           (np.int32, np.uint64), (np.uint64, np.float64)])
def test_cast_unsigned(source, target):
    """200.0 -> uint8 must not go through a signed i8 (LLVM poison)."""
    x = np.array([0, 1, 7, 200, 255], source)
    check_unsigned("Cast", {"x": x}, attributes={"to": helper.np_dtype_to_tensor_dtype(np.dtype(target))})


def test_cast_to_unsupported_type_is_refused():
    expect_import_error("Cast", {"x": normal((2,))}, "FLOAT8E8M0", attributes={"to": onnx.TensorProto.FLOAT8E8M0},
                        opset=24)


def test_cast_like_dynamic():
    check_node("CastLike", {"x": normal((3, 2)) * 10, "like": np.zeros((1,), np.int16)}, dynamic=["x"])


# --- pass-through ------------------------------------------------------------------------

def test_identity():
    check_node("Identity", {"x": integers(0, 9, (2, 3), np.int64)})


@pytest.mark.parametrize("opset", [10, 13, 22])
def test_dropout_is_identity_with_true_mask(opset):
    check_node("Dropout", {"x": normal((3, 4))}, num_outputs=2, opset=opset, dynamic=["x"])


def test_dropout_opset_7_mask_has_the_input_type():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 3])
    outputs = [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["n", 3])
               for name in ("y", "mask")]
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.25)
    model = helper.make_model(helper.make_graph([node], "g", [x], outputs),
                              opset_imports=[helper.make_opsetid("", 7)])
    value = normal((2, 3))
    y, mask = tilecraft.compile(model)(x=value)
    np.testing.assert_array_equal(y, value)
    np.testing.assert_array_equal(mask, np.ones((2, 3), np.float32))


def test_dropout_inference_inputs():
    check_node("Dropout", {"x": normal((3, 4))}, num_outputs=2, opset=13,
               constants={"ratio": np.array(0.3, np.float32), "training_mode": np.array(False)})


def test_dropout_training_is_refused():
    expect_import_error("Dropout", {"x": normal((3,))}, "training_mode", opset=13,
                        constants={"ratio": np.array(0.3, np.float32), "training_mode": np.array(True)})


def _run_constant_handler(opset: int = 17, **attributes) -> list:
    node = helper.make_node("Constant", [], ["c"], **attributes)
    context = NodeContext(node=node, opset=opset, inputs=[], input_infos=[], output_infos=[None],
                          materialize=lambda array, name: None)
    return lookup("Constant", opset).emit(context)


@pytest.mark.parametrize("attributes,expected", [
    ({"value": onnx.numpy_helper.from_array(np.array([[1, 2]], np.int32))}, np.array([[1, 2]], np.int32)),
    ({"value_float": 2.5}, np.array(2.5, np.float32)),
    ({"value_floats": [1.0, 2.0]}, np.array([1.0, 2.0], np.float32)),
    ({"value_int": 7}, np.array(7, np.int64)),
    ({"value_ints": [3, 4, 5]}, np.array([3, 4, 5], np.int64)),
])
def test_constant_handler(attributes, expected):
    """The importer folds Constant nodes; the handler must still give the same arrays."""
    [array] = _run_constant_handler(**attributes)
    assert array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected)


def test_constant_handler_refuses_strings():
    with pytest.raises(HandlerError, match="value_string"):
        _run_constant_handler(value_string="hello")


def test_constant_feeds_a_graph():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])
    nodes = [helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0]),
             helper.make_node("Add", ["x", "c"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    value = normal((2, 2))
    np.testing.assert_allclose(tilecraft.compile(model)(x=value), value + [1.0, 2.0])


def test_mismatched_operand_types_are_refused():
    """ONNX needs one type for both operands; an inconsistent model gets a clear error."""
    context = NodeContext(
        node=helper.make_node("Add", ["a", "b"], ["c"]), opset=17,
        inputs=[np.zeros(2, np.float32), np.zeros(2, np.int32)], input_infos=[None, None],
        output_infos=[TensorInfo("c", np.dtype(np.float32), (2,))], materialize=lambda a, n: None,
    )
    with ir.Context(), pytest.raises(HandlerError, match="one element type"):
        lookup("Add", 17).emit(context)


def test_shrink_soft_and_hard():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    check_node("Shrink", {"x": x}, attributes={"lambd": 1.5, "bias": 1.5}, opset=10)
    check_node("Shrink", {"x": x}, attributes={"lambd": 1.5}, opset=10)


@pytest.mark.parametrize("source, target", [(np.float32, onnx.TensorProto.INT32), (np.int64, onnx.TensorProto.DOUBLE),
                                            (np.uint16, onnx.TensorProto.INT16), (np.bool_, onnx.TensorProto.UINT8)])
def test_bitcast_reinterprets_bits(source, target):
    x = np.array([1.5, -2.0, 0.0, 3.25]).astype(source) if source != np.bool_ else np.array([True, False, True, True])
    check_node("BitCast", {"x": x}, attributes={"to": target}, opset=26)



def test_dropout_with_zero_ratio_and_runtime_training_mode_is_an_identity():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_node("Dropout", {"x": x, "training": np.array(True)}, constants={"ratio": np.float32(0.0)},
               input_order=["x", "ratio", "training"], num_outputs=2, opset=22)
