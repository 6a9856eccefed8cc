"""ONNX shape and data-movement operators against ONNX's reference implementation.

Every op runs with graph inputs (so the handler runs, not import-time folding); the ops that
keep a batch dim also run with a symbolic first dim (``dynamic=["x"]``).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import tilecraft
from tilecraft.frontend.onnx import import_model

from onnx_testing import check_node, import_error, make_model

RNG = np.random.default_rng(0)

# Gathers read with tensor.extract at computed positions, which the default schedule's
# `transform.structured.vectorize` rejects without `vectorize_nd_extract` (it then warns and
# keeps scalar loops; tests/conftest.py makes that an error). The numbers are checked here;
# the schedule gap is reported, not worked around in the emitters.
SCALAR_FALLBACK = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
IMAGE = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def declared(model: onnx.ModelProto, *shapes: tuple[int, ...]) -> onnx.ModelProto:
    """``model`` with its outputs' shapes declared (as exporters do): what lets a handler
    whose structure operand is a runtime input know the result shape."""
    for output, shape in zip(model.graph.output, shapes):
        dtype = model.graph.input[0].type.tensor_type.elem_type
        output.CopyFrom(helper.make_tensor_value_info(output.name, dtype, shape))
    return model


def run(model: onnx.ModelProto, inputs: dict) -> list[np.ndarray]:
    got = tilecraft.compile(model)(**inputs)
    return list(got) if isinstance(got, tuple) else [got]



# ------------------------------------------------------------------------- Shape, Size

@pytest.mark.parametrize("start,end", [(0, None), (-1, None), (1, 2), (-10, 10), (2, 1)])
def test_shape_of_dynamic_input(start, end):
    attributes = {"start": start, **({"end": end} if end is not None else {})}
    check_node("Shape", {"x": X}, attributes=attributes, opset=15, dynamic=["x"])


def test_static_shape_folds_to_a_constant():
    text = str(import_model(make_model("Shape", {"x": X})))
    assert "tensor.dim" not in text and "dense<[2, 3, 4]>" in text


def test_size_of_dynamic_input():
    check_node("Size", {"x": X}, dynamic=["x"])


def test_size_of_static_input_is_a_scalar():
    check_node("Size", {"x": X})


# ----------------------------------------------------------------------- Reshape family

@pytest.mark.parametrize("target", [(0, -1), (-1, 4), (0, 3, 2, 2), (0, 12, 1), (-1,)])
def test_reshape_keeps_the_dynamic_batch(target):
    check_node("Reshape", {"x": X}, constants={"shape": i64(*target)}, dynamic=["x"])


@pytest.mark.parametrize("target", [(4, 3, 2), (2, 1, 12, 1), (0, 0, 2, 2)])
def test_reshape_static(target):
    check_node("Reshape", {"x": X}, constants={"shape": i64(*target)})


def test_reshape_with_a_runtime_shape():
    check_node("Reshape", {"x": X, "shape": i64(0, -1, 2)}, dynamic=["x"])


def test_reshape_allowzero_keeps_zero_extents():
    empty = np.zeros((0, 3), np.float32)
    check_node("Reshape", {"x": empty}, constants={"shape": i64(3, 0)}, attributes={"allowzero": 1}, opset=14)


def test_pure_collapse_and_expand_are_views():
    collapse = str(import_model(make_model("Reshape", {"x": X}, constants={"s": i64(0, -1)}, dynamic=["x"])))
    assert "tensor.collapse_shape" in collapse and "tensor.reshape" not in collapse
    expand = str(import_model(make_model("Reshape", {"x": X}, constants={"s": i64(0, 3, 2, 2)})))
    assert "tensor.expand_shape" in expand and "tensor.reshape" not in expand


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_flatten(axis):
    check_node("Flatten", {"x": X}, attributes={"axis": axis}, dynamic=["x"] if axis else [])


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_axes_as_attribute_then_input(opset):
    x = RNG.standard_normal((1, 3, 1, 2)).astype(np.float32)
    if opset < 13:
        check_node("Squeeze", {"x": x}, attributes={"axes": [0, -2]}, opset=opset)
    else:
        check_node("Squeeze", {"x": x}, constants={"axes": i64(0, -2)}, opset=opset)


def test_squeeze_every_unit_dim():
    check_node("Squeeze", {"x": RNG.standard_normal((1, 3, 1)).astype(np.float32)})


@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze_axes_as_attribute_then_input(opset):
    if opset < 13:
        check_node("Unsqueeze", {"x": X}, attributes={"axes": [0, -1]}, opset=opset, dynamic=["x"])
    else:
        check_node("Unsqueeze", {"x": X}, constants={"axes": i64(0, -1)}, opset=opset, dynamic=["x"])


def test_unsqueeze_and_squeeze_with_runtime_axes_use_the_declared_shape():
    model = declared(make_model("Unsqueeze", {"x": X, "axes": i64(0, 3)}), (1, 2, 3, 1, 4))
    (got,) = run(model, {"x": X, "axes": i64(0, 3)})
    np.testing.assert_array_equal(got, X[None, :, :, None])
    model = declared(make_model("Squeeze", {"x": X[:1], "axes": i64(0)}), (3, 4))
    (got,) = run(model, {"x": X[:1], "axes": i64(0)})
    np.testing.assert_array_equal(got, X[0])


# ----------------------------------------------------------------- Concat, Split, Slice

@pytest.mark.parametrize("dtype,axis", [(np.float32, 0), (np.float16, 1), (np.int64, -1), (np.bool_, 2)])
def test_concat(dtype, axis):
    a, b = (RNG.standard_normal((2, 3, 4)) > 0).astype(dtype), RNG.standard_normal((2, 3, 4)).astype(dtype)
    check_node("Concat", {"a": a, "b": b}, constants={"c": a}, attributes={"axis": axis},
               dynamic=["a", "b"] if axis else [])


def test_concat_along_the_dynamic_dim():
    check_node("Concat", {"a": X, "b": X[:1]}, attributes={"axis": 0}, dynamic=["a", "b"])


@pytest.mark.parametrize("opset,split", [(11, [1, 3]), (13, [3, 1]), (18, None)])
def test_split(opset, split):
    options: dict = {"attributes": {"axis": -1}, "opset": opset, "num_outputs": 2}
    if split is not None and opset < 13:
        options["attributes"]["split"] = split
    elif split is not None:
        options["constants"] = {"split": i64(*split)}
    else:
        options["attributes"]["num_outputs"] = 2
    check_node("Split", {"x": X}, **options)


def test_split_uneven_num_outputs():
    x = RNG.standard_normal((7, 2)).astype(np.float32)
    check_node("Split", {"x": x}, attributes={"num_outputs": 3}, opset=18, num_outputs=3)


def test_split_of_a_dynamic_axis():
    check_node("Split", {"x": X}, attributes={"axis": 0}, dynamic=["x"], num_outputs=2)


def test_split_sizes_at_run_time():
    split = i64(1, 0, 3)
    model = declared(make_model("Split", {"x": X, "split": split}, attributes={"axis": 2}, num_outputs=3),
                     (2, 3, 1), (2, 3, 0), (2, 3, 3))
    got = run(model, {"x": X, "split": split})
    for g, e in zip(got, np.split(X, [1, 1], axis=2)):
        np.testing.assert_array_equal(g, e)


def test_slice_attributes_before_opset_10():
    check_node("Slice", {"x": X}, attributes={"starts": [1, -3], "ends": [1000, -1], "axes": [1, 2]}, opset=9)


@pytest.mark.parametrize(
    "starts,ends,axes,steps",
    [
        ((1, 0), (3, 4), (1, 2), (1, 2)),
        ((-1,), (INT64_MIN,), (2,), (-1,)),  # reversed
        ((2, 10), (-100, -1), (1, 2), (-2, 1)),  # clamped, empty-safe
        ((0,), (INT64_MAX,), (-1,), (3,)),
        ((5,), (1,), (2,), (-2,)),
    ],
)
def test_slice_on_a_dynamic_batch(starts, ends, axes, steps):
    check_node("Slice", {"x": X}, constants={"s": i64(*starts), "e": i64(*ends), "a": i64(*axes),
                                             "t": i64(*steps)}, dynamic=["x"])


def test_slice_of_the_dynamic_dim():
    check_node("Slice", {"x": X}, constants={"s": i64(-1), "e": i64(INT64_MIN), "a": i64(0), "t": i64(-1)},
               dynamic=["x"])


def test_slice_with_runtime_starts_and_ends():
    check_node("Slice", {"x": X, "s": i64(1, -3), "e": i64(3, 100)}, constants={"a": i64(1, 2)})


def test_slice_with_everything_at_run_time():
    check_node("Slice", {"x": X, "s": i64(3, -1), "e": i64(-100, 0), "a": i64(-1, 1), "t": i64(-2, -1)})


# ---------------------------------------------------------------------------- Gathers

@SCALAR_FALLBACK
@pytest.mark.parametrize("axis,indices", [(0, [[0, -1], [1, 1]]), (1, -2), (-1, [3, 0, 3])])
def test_gather_runtime_indices(axis, indices):
    check_node("Gather", {"x": X, "i": np.array(indices, np.int64)}, attributes={"axis": axis})


@pytest.mark.parametrize("indices", [np.array(-1), np.array([0, 2]), np.array([3, 1, 1]), np.array([[1]])])
def test_gather_constant_indices_on_a_dynamic_batch(indices):
    check_node("Gather", {"x": X}, constants={"i": indices.astype(np.int64)}, attributes={"axis": 2},
               dynamic=["x"])


@SCALAR_FALLBACK
def test_gather_rows_of_a_weight():
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    check_node("Gather", {"ids": np.array([[1, 9], [0, -10]], np.int32)}, constants={"table": table},
               input_order=["table", "ids"])


def test_gather_from_a_dynamic_shape_folds_its_static_dims():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 3, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 12])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
             helper.make_node("ReduceProd", ["d"], ["p"], keepdims=1),
             helper.make_node("Concat", ["m1", "p"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [onnx.numpy_helper.from_array(i64(1, 2), "i"), onnx.numpy_helper.from_array(i64(-1), "m1")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    text = str(import_model(model))
    assert "tensor.collapse_shape" in text and "tensor.reshape" not in text
    compiled = tilecraft.compile(model)
    np.testing.assert_array_equal(compiled(x=X), X.reshape(2, 12))


@SCALAR_FALLBACK
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    indices = RNG.integers(-2, 2, (2, 3, 4))
    check_node("GatherElements", {"x": X, "i": indices}, attributes={"axis": axis})


@SCALAR_FALLBACK
@pytest.mark.parametrize("batch_dims,indices", [(0, [[0, 1], [1, -1]]), (0, [[[1]], [[0]]]), (1, [[1], [0]])])
def test_gather_nd(batch_dims, indices):
    check_node("GatherND", {"x": X, "i": np.array(indices, np.int64)}, attributes={"batch_dims": batch_dims})


@pytest.mark.parametrize("reduction", ["none", "mul", "min"])
def test_scatter_elements(reduction):
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    indices = np.array([[1, 0, 2, 0], [0, 2, 1, -1]], np.int64)
    updates = RNG.standard_normal((2, 4)).astype(np.float32)
    attributes = {"axis": 0, **({"reduction": reduction} if reduction != "none" else {})}
    check_node("ScatterElements", {"d": data, "i": indices, "u": updates}, attributes=attributes, opset=18)


@SCALAR_FALLBACK
def test_scatter_before_opset_11():
    data, indices, updates = np.zeros((2, 3), np.int32), i64(1, 0, 2).reshape(1, 3), np.array([[7, 8, 9]], np.int32)
    (got,) = run(make_model("Scatter", {"d": data, "i": indices, "u": updates}, attributes={"axis": 1}, opset=10),
                 {"d": data, "i": indices, "u": updates})
    np.testing.assert_array_equal(got, [[8, 7, 9], [0, 0, 0]])


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd(reduction):
    data = RNG.standard_normal((4, 3)).astype(np.float32)
    indices = np.array([[1], [3], [1]] if reduction == "add" else [[1], [3]], np.int64)
    updates = RNG.standard_normal((len(indices), 3)).astype(np.float32)
    attributes = {"reduction": reduction} if reduction != "none" else {}
    check_node("ScatterND", {"d": data, "i": indices, "u": updates}, attributes=attributes, opset=18)


def test_nonzero_has_a_data_dependent_extent():
    check_node("NonZero", {"x": np.array([[0, 1, 0], [2, 0, 3]], np.int32)}, dynamic=["x"])


# ----------------------------------------------------------- Expand, Tile, Transpose, Pad

@pytest.mark.parametrize("shape", [(2, 1, 4), (3, 1, 1, 1), (1,)])
def test_expand(shape):
    check_node("Expand", {"x": X[:, :1]}, constants={"shape": i64(*shape)}, dynamic=["x"])


def test_expand_to_a_runtime_shape():
    check_node("Expand", {"x": np.arange(3, dtype=np.int32).reshape(3, 1), "shape": i64(2, 3, 5)})


@pytest.mark.parametrize("runtime", [False, True])
def test_tile(runtime):
    repeats = i64(2, 1, 3)
    if runtime:
        check_node("Tile", {"x": X, "r": repeats})
    else:
        check_node("Tile", {"x": X}, constants={"r": repeats}, dynamic=["x"])


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm):
    check_node("Transpose", {"x": X}, attributes={"perm": perm} if perm else {}, dynamic=["x"])


@SCALAR_FALLBACK
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    pads = i64(0, 2, 1, 0, 1, 3)
    check_node("Pad", {"x": X}, constants={"pads": pads}, attributes={"mode": mode}, opset=19)


def test_pad_attributes_before_opset_11():
    check_node("Pad", {"x": X}, attributes={"pads": [0, 1, 0, 0, 2, 1], "value": 2.5}, opset=7)


def test_pad_value_and_axes():
    check_node("Pad", {"x": X.astype(np.int32), "value": np.array(-7, np.int32)},
               constants={"pads": i64(2, 0, 1, 3), "axes": i64(-1, 1)},
               input_order=["x", "pads", "value", "axes"], opset=18)


@SCALAR_FALLBACK
@pytest.mark.parametrize("mode", ["constant", "reflect"])
@pytest.mark.parametrize("runtime", [False, True])
def test_negative_pads_crop(mode, runtime):
    """(ONNX's reference rejects negative pads, which the spec allows: hence numpy.)"""
    pads = i64(0, 1, -1, 0, 2, -2)
    inputs = {"x": X, "pads": pads} if runtime else {"x": X}
    model = make_model("Pad", inputs, constants={} if runtime else {"pads": pads}, attributes={"mode": mode})
    if runtime:
        model = declared(model, (2, 6, 1))
    (got,) = run(model, inputs)
    expected = np.pad(X[:, :, 1:2], [(0, 0), (1, 2), (0, 0)], mode=mode)
    np.testing.assert_array_equal(got, expected)


def test_pad_mode_wrap_needs_opset_19():
    assert "wrap" in import_error("Pad", {"x": X}, constants={"pads": i64(0, 0, 1, 0, 0, 1)},
                                  attributes={"mode": "wrap"}, opset=18)


# ------------------------------------------------------------- DepthToSpace and back

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = RNG.standard_normal((2, 8, 2, 3)).astype(np.float32)
    check_node("DepthToSpace", {"x": x}, attributes={"blocksize": 2, "mode": mode}, dynamic=["x"])


def test_space_to_depth():
    check_node("SpaceToDepth", {"x": IMAGE}, attributes={"blocksize": 2})


def test_depth_to_space_rejects_unknown_modes():
    assert "XYZ" in import_error("DepthToSpace", {"x": IMAGE}, attributes={"blocksize": 2, "mode": "XYZ"})


# ----------------------------------------------------------------------------- Resize

NO_ROI = np.array([], np.float32)


@pytest.mark.parametrize(
    "coordinate_mode,nearest_mode",
    [("half_pixel", "round_prefer_floor"), ("asymmetric", "floor"), ("align_corners", "round_prefer_ceil"),
     ("pytorch_half_pixel", "ceil"), ("half_pixel_symmetric", "round_prefer_floor")],
)
def test_resize_nearest(coordinate_mode, nearest_mode):
    attributes = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode, "nearest_mode": nearest_mode}
    check_node("Resize", {"x": IMAGE}, constants={"roi": NO_ROI, "scales": np.array([1, 1, 1.7, 0.6], np.float32)},
               attributes=attributes, opset=19, dynamic=["x"])


@pytest.mark.parametrize("coordinate_mode,nearest_mode", [
    ("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
    ("pytorch_half_pixel", "round_prefer_floor"),
    # Not input o // factor: the general gather (scalar loops, a warning).
    pytest.param("align_corners", "round_prefer_floor", marks=SCALAR_FALLBACK),
])
@pytest.mark.parametrize("shape,scales", [((1, 3, 4, 5), [1, 1, 2, 3]), ((2, 3, 5), [1, 1, 2]),
                                          ((1, 2, 3, 4), [1, 2, 2, 1])])
def test_resize_nearest_by_whole_factors(coordinate_mode, nearest_mode, shape, scales):
    """Whole factors repeat elements (a broadcast, vectorized: a scalar fallback would be a
    warning, an error here) where the rounding picks input o // factor."""
    attributes = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode, "nearest_mode": nearest_mode}
    check_node("Resize", {"x": RNG.standard_normal(shape).astype(np.float32)},
               constants={"roi": NO_ROI, "scales": np.array(scales, np.float32)}, attributes=attributes, opset=19)


@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "pytorch_half_pixel",
                                             pytest.param("align_corners", marks=SCALAR_FALLBACK)])
@pytest.mark.parametrize("shape,scales", [((1, 3, 4, 5), [1, 1, 2, 3]), ((2, 3, 5), [1, 1, 4]),
                                          ((1, 2, 3, 4), [1, 2, 2, 1])])
def test_resize_linear_by_whole_factors(coordinate_mode, shape, scales):
    """Half-pixel linear upsampling by whole factors blends fixed neighbours per output
    phase (vectorized, no warning), the edges repeated as the reference pads them."""
    attributes = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    check_node("Resize", {"x": RNG.standard_normal(shape).astype(np.float32)},
               constants={"roi": NO_ROI, "scales": np.array(scales, np.float32)}, attributes=attributes, opset=19,
               rtol=1e-5, atol=1e-6)


@SCALAR_FALLBACK
@pytest.mark.parametrize("mode,coordinate_mode", [("linear", "half_pixel"), ("linear", "align_corners"),
                                                  ("cubic", "half_pixel"), ("cubic", "asymmetric")])
def test_resize_interpolating(mode, coordinate_mode):
    attributes = {"mode": mode, "coordinate_transformation_mode": coordinate_mode}
    check_node("Resize", {"x": IMAGE}, constants={"roi": NO_ROI, "scales": np.array([1, 1, 2, 0.5], np.float32)},
               attributes=attributes, opset=13, rtol=1e-4, atol=1e-5)


@SCALAR_FALLBACK
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialiased_downsample_with_sizes_and_axes(mode):
    x = RNG.standard_normal((1, 1, 8, 8)).astype(np.float32)
    check_node("Resize", {"x": x}, constants={"roi": NO_ROI, "sizes": i64(3, 5)}, input_order=["x", "roi", "", "sizes"],
               attributes={"mode": mode, "antialias": 1, "axes": [3, 2], "exclude_outside": 1}, opset=18,
               rtol=1e-4, atol=1e-5)


@SCALAR_FALLBACK
def test_resize_tf_crop_and_resize_extrapolates():
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    roi = np.array([0, 0, 0.4, -0.3, 1, 1, 1.2, 0.9], np.float32)
    check_node("Resize", {"x": x}, constants={"roi": roi, "sizes": i64(1, 1, 3, 3)},
               input_order=["x", "roi", "", "sizes"], rtol=1e-4, atol=1e-5,
               attributes={"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                           "extrapolation_value": 10.0})


def test_resize_with_runtime_scales_of_integers():
    x = RNG.integers(-100, 100, (1, 1, 3, 4)).astype(np.int32)
    check_node("Resize", {"x": x, "scales": np.array([1, 1, 2, 1.5], np.float32)}, input_order=["x", "", "scales"],
               attributes={"mode": "linear"})


@SCALAR_FALLBACK
@pytest.mark.parametrize("op_type,opset", [("Resize", 10), ("Upsample", 9), ("Upsample", 7)])
def test_legacy_upsampling(op_type, opset):
    """Nearest with asymmetric coordinates rounding down: integer scales repeat elements.
    (ONNX's reference has no Upsample 7 nor Resize 10, hence numpy.)"""
    scales = [1.0, 1.0, 2.0, 3.0]
    if opset == 7:
        model = make_model(op_type, {"x": IMAGE}, attributes={"scales": scales}, opset=opset)
    else:
        model = make_model(op_type, {"x": IMAGE}, constants={"scales": np.array(scales, np.float32)}, opset=opset)
    (got,) = run(model, {"x": IMAGE})
    np.testing.assert_array_equal(got, IMAGE.repeat(2, axis=2).repeat(3, axis=3))


def test_resize_antialias_without_a_known_scale_is_rejected():
    message = import_error("Resize", {"x": IMAGE, "scales": np.array([1, 1, 0.5, 0.5], np.float32)},
                           input_order=["x", "", "scales"], attributes={"mode": "linear", "antialias": 1},
                           opset=18, dynamic=["x"])
    assert "antialias" in message


# ------------------------------------------------------------------------- Generators

@pytest.mark.parametrize("value", [None, np.array([3], np.int32), np.array([True])])
def test_constant_of_shape_at_run_time(value):
    attributes = {"value": onnx.numpy_helper.from_array(value)} if value is not None else {}
    check_node("ConstantOfShape", {"shape": i64(2, 3)}, attributes=attributes)


@pytest.mark.parametrize("start,limit,delta", [(1.0, 5.5, 0.5), (10, -3, -4), (3, 3, 1)])
def test_range_at_run_time(start, limit, delta):
    dtype = np.float32 if isinstance(start, float) else np.int32
    check_node("Range", {"start": np.array(start, dtype), "limit": np.array(limit, dtype),
                         "delta": np.array(delta, dtype)})


@pytest.mark.parametrize("upper,k", [(1, 0), (0, -1), (1, 2)])
def test_trilu(upper, k):
    check_node("Trilu", {"x": X}, constants={"k": np.array(k, np.int64)}, attributes={"upper": upper}, opset=14)


def test_trilu_with_runtime_k():
    check_node("Trilu", {"x": X, "k": np.array(-1, np.int64)}, attributes={"upper": 0}, opset=14)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    indices = np.array([[0, -1, 2], [5, 1, -4]], np.int64)
    check_node("OneHot", {"i": indices}, constants={"depth": np.array(4, np.int64),
                                                     "values": np.array([-1, 3], np.float32)},
               attributes={"axis": axis}, opset=11)


@pytest.mark.parametrize("k,dtype", [(0, None), (1, onnx.TensorProto.INT32), (-2, onnx.TensorProto.BOOL)])
def test_eye_like(k, dtype):
    attributes = {"k": k, **({"dtype": dtype} if dtype is not None else {})}
    check_node("EyeLike", {"x": X[0]}, attributes=attributes)


@SCALAR_FALLBACK
def test_max_unpool_writes_values_at_their_maxpool_indices():
    x = np.array([[[[5.0, 6.0], [7.0, 8.0]]]], np.float32)
    indices = np.array([[[[5, 7], [13, 15]]]], np.int64)
    check_node("MaxUnpool", {"x": x, "i": indices}, attributes={"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
