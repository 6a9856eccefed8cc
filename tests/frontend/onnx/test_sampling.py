"""Sampling and windowed gathers against ONNX's reference: GridSample and AffineGrid
(ir/grid_sample.py), RoiAlign (ir/roi_align.py), DeformConv
(ir/deform_conv.py), Col2Im (ir/conv.py) and TensorScatter (ir/scatter.py). Every interpolation and padding mode, 2-D and 3-D grids,
coordinates and regions far outside the input or NaN (reads clamped: no out-of-bounds read,
bounded loops), shapes given at run time, cache windows in both modes, and the errors bad
shapes and indices get."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft

from onnx_testing import check_node, import_error, make_model

RNG = np.random.default_rng(23)
# The ops are gathers, which the default schedule does not vectorize: they keep scalar
# loops with a warning, which tests/conftest.py would make an error.
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")


def grid(shape) -> np.ndarray:
    """Normalized coordinates, a fifth of them outside [-1, 1] (where padding decides)."""
    return RNG.uniform(-1.25, 1.25, shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d_matches_the_reference(mode, padding_mode, align_corners):
    """(The reference knows opset 20's mode names only; opset 16's are checked against
    PyTorch below.)"""
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    check_node("GridSample", {"x": x, "grid": grid((2, 4, 6, 2))}, opset=20, rtol=1e-5, atol=1e-5,
               attributes={"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners})


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_20_volumes(mode):
    """Opset 20 samples 3-D inputs too (cubic: 2-D only)."""
    x = RNG.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    if mode == "cubic":
        x = x[:, :, 0]
        points = grid((1, 3, 4, 2))
    else:
        points = grid((1, 2, 3, 4, 3))
    check_node("GridSample", {"x": x, "grid": points}, opset=20, rtol=1e-5, atol=1e-5,
               attributes={"mode": mode, "padding_mode": "border"})


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_16_agrees_with_pytorch(mode):
    """(Not bicubic: PyTorch pads only its taps, ONNX also the coordinate, so the two differ
    for coordinates outside the input.)"""
    x = RNG.standard_normal((2, 4, 9, 8)).astype(np.float32)
    points = grid((2, 5, 7, 2))
    model = make_model("GridSample", {"x": x, "grid": points}, opset=16,
                       attributes={"mode": mode, "padding_mode": "border", "align_corners": 1})
    expected = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(points), mode=mode,
                                               padding_mode="border", align_corners=True).numpy()
    np.testing.assert_allclose(tilecraft.compile(model)(x=x, grid=points), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_reads_in_bounds_for_wild_coordinates(padding_mode):
    """Coordinates of 1e30, -1e30, +-inf and NaN: every read is clamped into the input, so
    the result is the padding's value or an input element, never memory outside it."""
    x = RNG.uniform(1.0, 2.0, (1, 1, 3, 4)).astype(np.float32)
    wild = np.array([1e30, -1e30, np.inf, -np.inf, np.nan, 0.5], np.float32)
    points = np.stack(np.meshgrid(wild, wild), axis=-1).reshape(1, 6, 6, 2).astype(np.float32)
    model = make_model("GridSample", {"x": x, "grid": points}, opset=16,
                       attributes={"mode": "nearest", "padding_mode": padding_mode})
    got = tilecraft.compile(model)(x=x, grid=points)
    assert got.shape == (1, 1, 6, 6)
    finite = got[np.isfinite(got)]
    assert np.all((finite == 0) | ((finite >= 1.0) & (finite <= 2.0)))


def test_grid_sample_bad_input_is_an_import_error():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    for points in (grid((1, 3, 3, 3)), grid((2, 3, 3, 2)), grid((1, 3, 2))):  # ONNX's shape inference refuses these
        with pytest.raises(tilecraft.ModelImportError):
            tilecraft.compile(make_model("GridSample", {"x": x, "grid": points}, opset=16))
    assert "float" in import_error("GridSample", {"x": x.astype(np.int32), "grid": grid((1, 3, 3, 2))}, opset=16)
    assert "mode" in import_error("GridSample", {"x": x, "grid": grid((1, 3, 3, 2))}, opset=16,
                                  attributes={"mode": "area"})


COL2IM = [  # (batch, channels, image_shape, block_shape, attributes)
    (1, 1, [5, 5], [1, 5], {}),
    (2, 3, [4, 5], [2, 3], {"pads": [1, 0, 0, 1]}),
    (1, 2, [5, 5], [3, 3], {"strides": [2, 2]}),
    (1, 2, [6, 5], [2, 2], {"dilations": [2, 3], "strides": [2, 1], "pads": [1, 1, 0, 1]}),
    (1, 2, [4, 3, 4], [2, 2, 2], {"strides": [2, 2, 2], "pads": [0, 1, 0, 0, 0, 0]}),
]


def blocks(image, block, attributes) -> int:
    """L: the number of sliding blocks the shapes make."""
    rank = len(image)
    pads = attributes.get("pads", [0] * 2 * rank)
    strides, dilations = attributes.get("strides", [1] * rank), attributes.get("dilations", [1] * rank)
    return int(np.prod([(image[d] + pads[d] + pads[rank + d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
                        for d in range(rank)]))


@pytest.mark.parametrize("batch,channels,image,block,attributes", COL2IM)
@pytest.mark.parametrize("given", ["constants", "inputs"])
def test_col2im_matches_the_reference(batch, channels, image, block, attributes, given):
    x_shape = (batch, channels * int(np.prod(block)), blocks(image, block, attributes))
    x = RNG.standard_normal(x_shape).astype(np.float32)
    shapes = {"image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)}
    inputs = {"x": x, **(shapes if given == "inputs" else {})}
    constants = shapes if given == "constants" else {}
    check_node("Col2Im", inputs, constants=constants, attributes=attributes, opset=18,
               input_order=["x", "image_shape", "block_shape"], rtol=1e-5, atol=1e-5)


def test_col2im_agrees_with_torch_fold():
    x = RNG.standard_normal((2, 27, 8)).astype(np.float32)
    model = make_model("Col2Im", {"x": x}, constants={"image_shape": np.array([7, 6]), "block_shape": np.array([3, 3])},
                       attributes={"strides": [2, 1], "pads": [1, 0, 1, 0], "dilations": [1, 2]}, opset=18)
    expected = torch.nn.functional.fold(torch.from_numpy(x), (7, 6), (3, 3), dilation=(1, 2), padding=(1, 0),
                                        stride=(2, 1)).numpy()
    np.testing.assert_allclose(tilecraft.compile(model)(x=x), expected, rtol=1e-5, atol=1e-5)


def test_col2im_integers_sum_exactly():
    x = RNG.integers(-100, 100, (1, 4, 9)).astype(np.int32)
    check_node("Col2Im", {"x": x}, constants={"image_shape": np.array([4, 4]), "block_shape": np.array([2, 2])},
               opset=18, input_order=["x", "image_shape", "block_shape"], rtol=0, atol=0)


def test_col2im_bad_shapes():
    x = RNG.standard_normal((1, 5, 5)).astype(np.float32)
    block = {"image_shape": np.array([5, 5]), "block_shape": np.array([2, 2])}
    assert "multiple of the block size" in import_error("Col2Im", {"x": x}, constants=block, opset=18)
    fits = {"image_shape": np.array([5, 5]), "block_shape": np.array([1, 5])}
    assert "blocks" in import_error("Col2Im", {"x": np.zeros((1, 5, 4), np.float32)}, constants=fits, opset=18)
    assert "strides" in import_error("Col2Im", {"x": x}, constants=fits, opset=18, attributes={"strides": [0, 1]})
    # Shapes given at run time are checked there: a mismatch is an error, not a wrong read.
    model = make_model("Col2Im", {"x": x, "image_shape": np.array([5, 5]), "block_shape": np.array([1, 5])}, opset=18)
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x=x, image_shape=np.array([5, 5]), block_shape=np.array([1, 5])).sum(), x.sum(),
                               rtol=1e-5)
    with pytest.raises(tilecraft.TilecraftError, match="multiple of the block size"):
        compiled(x=x, image_shape=np.array([5, 5]), block_shape=np.array([2, 2]))
    with pytest.raises(tilecraft.TilecraftError, match="blocks"):
        compiled(x=x, image_shape=np.array([6, 5]), block_shape=np.array([1, 5]))


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 1, 2])
def test_tensor_scatter_writes_each_window(mode, axis):
    """A KV-cache update: the update's window goes to each batch entry's write index
    (wrapping around in circular mode, negative indices counted Python's way)."""
    cache = RNG.standard_normal((3, 7, 8, 4)).astype(np.float32)
    shape = list(cache.shape)
    shape[axis] = 3
    update = RNG.standard_normal(shape).astype(np.float32)
    length = cache.shape[axis]
    indices = np.array([0, length - 3, 2], np.int64) if mode == "linear" else np.array([length - 1, -2, 5], np.int64)
    check_node("TensorScatter", {"cache": cache, "update": update, "write_indices": indices}, opset=24,
               attributes={"mode": mode, "axis": axis}, rtol=0, atol=0)


def test_tensor_scatter_without_write_indices_writes_at_the_start():
    cache = RNG.integers(0, 100, (2, 5, 3)).astype(np.int64)
    update = RNG.integers(-100, 0, (2, 2, 3)).astype(np.int64)
    check_node("TensorScatter", {"cache": cache, "update": update}, opset=24, attributes={"axis": 1}, rtol=0, atol=0)


def test_tensor_scatter_past_the_end_is_an_error_not_a_write_outside():
    cache, update = np.zeros((2, 6, 4), np.float32), np.ones((2, 3, 4), np.float32)
    model = make_model("TensorScatter", {"cache": cache, "update": update, "write_indices": np.array([0, 3], np.int64)},
                       opset=24, attributes={"axis": 1})
    compiled = tilecraft.compile(model)
    assert compiled(cache=cache, update=update, write_indices=np.array([0, 3], np.int64)).sum() == 24
    for bad in ([0, 4], [-1, 0]):
        with pytest.raises(tilecraft.TilecraftError, match="write index"):
            compiled(cache=cache, update=update, write_indices=np.array(bad, np.int64))
    assert "mode" in import_error("TensorScatter", {"cache": cache, "update": update}, opset=24,
                                  attributes={"axis": 1, "mode": "ring"})


@pytest.mark.parametrize("size", [(2, 3, 5, 6), (1, 2, 4, 5, 3), (1, 1, 1, 4)])
@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("given", ["constant", "input"])
def test_affine_grid_matches_the_reference(size, align_corners, given):
    rank = len(size) - 2
    theta = RNG.standard_normal((size[0], rank, rank + 1)).astype(np.float32)
    size = np.array(size, np.int64)
    inputs = {"theta": theta, **({"size": size} if given == "input" else {})}
    check_node("AffineGrid", inputs, constants={} if given == "input" else {"size": size}, opset=20,
               input_order=["theta", "size"], attributes={"align_corners": align_corners}, rtol=1e-6, atol=1e-6)


def test_a_spatial_transformer_agrees_with_pytorch():
    """AffineGrid then GridSample, the pair a spatial transformer network uses."""
    from onnx import TensorProto, helper, numpy_helper
    x = RNG.standard_normal((2, 3, 8, 9)).astype(np.float32)
    theta = (np.eye(2, 3)[None] + 0.2 * RNG.standard_normal((2, 2, 3))).astype(np.float32)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="zeros", align_corners=0)]
    graph = helper.make_graph(nodes, "stn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                             helper.make_tensor_value_info("theta", TensorProto.FLOAT, [2, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 6, 7])],
                              [numpy_helper.from_array(np.array([2, 3, 6, 7], np.int64), "size")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    grid = torch.nn.functional.affine_grid(torch.from_numpy(theta), [2, 3, 6, 7], align_corners=False)
    expected = torch.nn.functional.grid_sample(torch.from_numpy(x), grid, align_corners=False).numpy()
    np.testing.assert_allclose(tilecraft.compile(model)(x=x, theta=theta), expected, rtol=1e-5, atol=1e-5)


def test_affine_grid_bad_input():
    theta = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    for bad_theta, size in ((theta, [2, 3, 4]), (theta[:, :, :2], [2, 1, 4, 4]), (theta, [3, 1, 4, 4])):
        with pytest.raises(tilecraft.ModelImportError):  # ours, or ONNX's shape inference first
            tilecraft.compile(make_model("AffineGrid", {"theta": bad_theta}, constants={"size": np.array(size)}, opset=20))


def rois(count: int, extent: float) -> np.ndarray:
    """Regions (x1, y1, x2, y2), some reaching past the image, one inverted."""
    corners = RNG.uniform(-2.0, extent + 2.0, (count, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    boxes[0] = boxes[0][[2, 3, 0, 1]]  # x2 < x1: an empty region
    return boxes


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_matches_the_reference(mode, sampling_ratio, transform):
    x = RNG.standard_normal((2, 3, 10, 12)).astype(np.float32)
    boxes = rois(6, 20.0)
    batch = np.array([0, 1, 1, 0, 1, 0], np.int64)
    check_node("RoiAlign", {"x": x, "rois": boxes, "batch_indices": batch}, opset=16, rtol=1e-5, atol=1e-5,
               attributes={"mode": mode, "sampling_ratio": sampling_ratio, "coordinate_transformation_mode": transform,
                           "output_height": 3, "output_width": 4, "spatial_scale": 0.5})


def test_roi_align_wild_regions_take_bounded_time_and_read_in_bounds():
    """Regions of 1e30 pixels, NaN corners, or entirely outside: the sample loops run over
    what can reach the image only, and every read stays inside it."""
    x = RNG.uniform(1.0, 2.0, (1, 2, 6, 6)).astype(np.float32)
    boxes = np.array([[-1e30, -1e30, 1e30, 1e30], [np.nan, 0, 3, 3], [100, 100, 200, 200], [0, 0, 5, 5]], np.float32)
    batch = np.zeros(4, np.int64)
    model = make_model("RoiAlign", {"x": x, "rois": boxes, "batch_indices": batch}, opset=16,
                       attributes={"output_height": 2, "output_width": 2})
    got = tilecraft.compile(model)(x=x, rois=boxes, batch_indices=batch)
    assert got.shape == (4, 2, 2, 2)
    assert np.all(got[2] == 0) and np.all((got[3] >= 1.0) & (got[3] <= 2.0))
    assert np.all(np.isnan(got[0]) | (np.abs(got[0]) <= 2.0))


def test_roi_align_bad_batch_index_is_an_error():
    x = RNG.standard_normal((2, 1, 4, 4)).astype(np.float32)
    boxes = rois(2, 4.0)
    model = make_model("RoiAlign", {"x": x, "rois": boxes, "batch_indices": np.array([0, 1], np.int64)}, opset=16)
    compiled = tilecraft.compile(model)
    for bad in ([0, 2], [-1, 0]):
        with pytest.raises(tilecraft.TilecraftError, match="batch index"):
            compiled(x=x, rois=boxes, batch_indices=np.array(bad, np.int64))
    assert "mode" in import_error("RoiAlign", {"x": x, "rois": boxes, "batch_indices": np.array([0, 1], np.int64)},
                                  opset=16, attributes={"mode": "median"})


DEFORM = [  # (x shape, w shape, attributes, offset_groups, mask, bias)
    ((1, 2, 5, 5), (3, 2, 3, 3), {}, 1, False, False),
    ((2, 4, 7, 6), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 1]}, 2, True, True),
    ((1, 4, 6, 6), (4, 4, 2, 2), {"dilations": [2, 2], "pads": [1, 1, 1, 1]}, 4, True, False),
]


@pytest.mark.parametrize("x_shape,w_shape,attributes,offset_groups,mask,bias", DEFORM)
def test_deform_conv_matches_the_reference(x_shape, w_shape, attributes, offset_groups, mask, bias):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    kh, kw = w_shape[2:]
    pads = attributes.get("pads", [0, 0, 0, 0])
    strides, dilations = attributes.get("strides", [1, 1]), attributes.get("dilations", [1, 1])
    out = [(x_shape[2 + d] + pads[d] + pads[2 + d] - dilations[d] * (w_shape[2 + d] - 1) - 1) // strides[d] + 1
           for d in range(2)]
    inputs = {"x": x, "w": w, "offset": RNG.uniform(-2, 2, (x_shape[0], offset_groups * 2 * kh * kw, *out)).astype(np.float32)}
    order = ["x", "w", "offset"]
    if bias or mask:
        inputs["bias"] = RNG.standard_normal(w_shape[0]).astype(np.float32) if bias else np.zeros(w_shape[0], np.float32)
        order.append("bias")
    if mask:
        inputs["mask"] = RNG.uniform(0, 1, (x_shape[0], offset_groups * kh * kw, *out)).astype(np.float32)
        order.append("mask")
    check_node("DeformConv", inputs, opset=19, input_order=order, rtol=1e-4, atol=1e-4,
               attributes={**attributes, "offset_group": offset_groups})


def test_deform_conv_with_zero_offsets_is_a_convolution():
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    offset = np.zeros((1, 18, 6, 6), np.float32)
    deform = tilecraft.compile(make_model("DeformConv", {"x": x, "offset": offset}, constants={"w": w}, opset=19,
                                          input_order=["x", "w", "offset"]))(x=x, offset=offset)
    plain = tilecraft.compile(make_model("Conv", {"x": x}, constants={"w": w}, opset=19))(x=x)
    np.testing.assert_allclose(deform, plain, rtol=1e-5, atol=1e-5)


def test_deform_conv_wild_offsets_read_in_bounds():
    x = RNG.uniform(1.0, 2.0, (1, 1, 4, 4)).astype(np.float32)
    w = np.ones((1, 1, 2, 2), np.float32)
    offset = np.full((1, 8, 3, 3), 1e30, np.float32)
    offset[0, :4] = np.nan
    got = tilecraft.compile(make_model("DeformConv", {"x": x, "w": w, "offset": offset}, opset=19))(x=x, w=w, offset=offset)
    assert got.shape == (1, 1, 3, 3)
    assert np.all(np.isnan(got) | (np.abs(got) <= 8.0))


def test_deform_conv_bad_shapes():
    x, w = np.zeros((1, 2, 5, 5), np.float32), np.zeros((3, 2, 3, 3), np.float32)
    for offset in (np.zeros((1, 17, 3, 3), np.float32), np.zeros((1, 18, 4, 3), np.float32)):
        with pytest.raises(tilecraft.ModelImportError):
            tilecraft.compile(make_model("DeformConv", {"x": x, "offset": offset}, constants={"w": w}, opset=19,
                                         input_order=["x", "w", "offset"]))
