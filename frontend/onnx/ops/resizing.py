"""ONNX Resize and Upsample: scales or sizes (attributes or runtime inputs), coordinate
transformation modes, nearest/linear/cubic, through ``ir/resize.py``; GridSample
and AffineGrid through ``ir/grid_sample.py``."""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mmath

from ....ir import core, extent_math
from ....ir import grid_sample as sampling
from ....ir.checks import check_extent
from ....ir import (
    resize as resampling,  # the module; `resize` below is the ONNX handler
)
from ..node import HandlerError, NodeContext
from ....errors import OperandError
from ..registry import onnx_op
from . import operands

Extent = "int | ir.Value"


def _ratio(a: int | ir.Value, b: int | ir.Value) -> float | ir.Value:
    if operands.is_known(a, b):
        return a / b
    return arith.divf(resampling.as_f64(a), resampling.as_f64(b))


def _floor_size(extent: int | ir.Value, scale: float | ir.Value, rounding: float = 0.0) -> int | ir.Value:
    """``floor(extent * scale + rounding)``, the output extent for a scale."""
    if operands.is_known(extent, scale):
        return int(math.floor(extent * scale + rounding))
    product = arith.addf(arith.mulf(resampling.as_f64(extent), resampling.as_f64(scale)), resampling.as_f64(rounding))
    floor = arith.fptosi(ir.IntegerType.get_signless(64), mmath.floor(product))
    return extent_math.scalar_to_index(floor)


def _resize_axes(
    dims: list[Extent], axes: list[int], scales: list | None, sizes: list | None, policy: str,
    declared: list[int | None],
) -> dict[int, resampling.ResizeAxis]:
    """Per axis, the output extent and scale by ONNX's rules: sizes give scale = out / in
    (``keep_aspect_ratio_policy`` turns them into one common scale, rounding the sizes);
    scales give out = floor(in * scale). Runtime operands give runtime extents unless
    shape inference (or the model) declares them."""
    result = {}
    if sizes is not None:
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise HandlerError(f"keep_aspect_ratio_policy {policy!r} is not supported")
        if policy == "stretch":
            for a, size in zip(axes, sizes):
                size = declared[a] if declared[a] is not None else size
                result[a] = resampling.ResizeAxis(size, _ratio(size, dims[a]))
            return result
        ratios = [_ratio(size, dims[a]) for a, size in zip(axes, sizes)]
        pick = min if policy == "not_larger" else max
        if operands.is_known(*ratios):
            common: float | ir.Value = pick(ratios)
        else:
            combine = arith.minimumf if policy == "not_larger" else arith.maximumf
            common = resampling.as_f64(ratios[0])
            for r in ratios[1:]:
                common = combine(common, resampling.as_f64(r))
        for a in axes:
            size = declared[a] if declared[a] is not None else _floor_size(dims[a], common, 0.5)
            result[a] = resampling.ResizeAxis(size, common)
        return result
    for a, scale in zip(axes, scales):
        if operands.is_known(scale) and scale <= 0:
            raise HandlerError(f"scale {scale} is not positive")
        size = declared[a] if declared[a] is not None else _floor_size(dims[a], scale)
        # floor(in * scale) == size bounds a runtime scale from below by size / in
        bound = size / dims[a] if operands.is_known(size, dims[a]) and size and dims[a] else None
        result[a] = resampling.ResizeAxis(size, scale, min_scale=bound)
    return result


def _with_roi(axes: dict[int, resampling.ResizeAxis], listed: list[int], roi: list | None,
              rank: int) -> dict[int, resampling.ResizeAxis]:
    """Attach crop-and-resize regions (``roi`` is starts then ends, for the listed axes or
    for every axis)."""
    if roi is None:
        raise HandlerError("tf_crop_and_resize needs roi")
    count = len(roi) // 2
    if count not in (len(listed), rank) or len(roi) % 2:
        raise HandlerError(f"roi has {len(roi)} values for {len(listed)} axes")
    position = {a: k for k, a in enumerate(listed)} if count == len(listed) else {a: a for a in listed}
    return {
        a: resampling.ResizeAxis(r.size, r.scale, (roi[position[a]], roi[position[a] + count]), r.min_scale)
        for a, r in axes.items()
    }


def _drop_identity_axes(axes: dict[int, resampling.ResizeAxis], dims: list[Extent]) -> dict[int, resampling.ResizeAxis]:
    """Axes the resize provably leaves as they are (like ONNX's reference, which skips
    them: a scale of about 1 with an unchanged extent and no crop)."""
    kept = {}
    for a, r in axes.items():
        unchanged = (
            operands.is_known(r.scale, r.size, *r.roi) and math.isclose(r.scale, 1.0)
            and extent_math.same_extent(r.size, dims[a]) and r.roi == (0.0, 1.0)
        )
        if not unchanged:
            kept[a] = r
    return kept


def _resize(ctx: NodeContext, x: ir.Value, axes: dict[int, resampling.ResizeAxis],
            method: resampling.ResizeMethod, fill: float = 0.0) -> ir.Value:
    axes = _drop_identity_axes(axes, core.sizes(x))
    try:
        return resampling.resize(x, axes, method, fill=fill, unsigned=ctx.is_unsigned(0))
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


def _method(ctx: NodeContext, **overrides: object) -> resampling.ResizeMethod:
    options = dict(
        mode=ctx.attr("mode", "nearest"),
        coordinate_mode=ctx.attr("coordinate_transformation_mode", "half_pixel"),
        nearest_mode=ctx.attr("nearest_mode", "round_prefer_floor"),
        cubic_a=float(ctx.attr("cubic_coeff_a", -0.75)),
        exclude_outside=bool(ctx.attr("exclude_outside", 0)),
        antialias=bool(ctx.attr("antialias", 0)),
    )
    options.update(overrides)
    try:
        return resampling.ResizeMethod(**options)
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


@onnx_op("Resize", since=11)
def resize(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    dims = core.sizes(x)
    rank = len(dims)
    listed = ctx.attr("axes", None) if ctx.opset >= 18 else None
    listed = list(range(rank)) if listed is None else [operands.axis(a, rank) for a in listed]
    scales, sizes = operands.numbers(ctx, 2, float), operands.numbers(ctx, 3, int)
    if (scales is None) == (sizes is None):
        raise HandlerError("Resize needs exactly one of scales and sizes")
    if len(scales if scales is not None else sizes) != len(listed):
        raise HandlerError(f"{len(scales if scales is not None else sizes)} scales/sizes for {len(listed)} axes")
    method = _method(ctx)
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    axes = _resize_axes(dims, listed, scales, sizes, policy, operands.known_dims(ctx.output_infos[0], rank))
    if method.coordinate_mode == "tf_crop_and_resize":
        axes = _with_roi(axes, listed, operands.numbers(ctx, 1, float), rank)
    return [_resize(ctx, x, axes, method, float(ctx.attr("extrapolation_value", 0.0)))]


def _legacy_resize(ctx: NodeContext, scales: list) -> ir.Value:
    """Upsample (7-9) and Resize 10: out = floor(in * scale), asymmetric coordinates, and
    nearest rounds down (what ONNX's version converter maps them to in Resize 11)."""
    x = ctx.value(0)
    dims = core.sizes(x)
    if len(scales) != len(dims):
        raise HandlerError(f"{len(scales)} scales for a rank-{len(dims)} input")
    mode = {"bilinear": "linear"}.get(ctx.attr("mode", "nearest"), ctx.attr("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        raise HandlerError(f"{ctx.op_type} mode {mode!r} is not supported")
    method = _method(ctx, mode=mode, coordinate_mode="asymmetric", nearest_mode="floor",
                     cubic_a=-0.75, exclude_outside=False, antialias=False)
    declared = operands.known_dims(ctx.output_infos[0], len(dims))
    axes = _resize_axes(dims, list(range(len(dims))), scales, None, "stretch", declared)
    return _resize(ctx, x, axes, method)


@onnx_op("Resize", since=10, until=10)
def resize_10(ctx: NodeContext) -> list[ir.Value]:
    return [_legacy_resize(ctx, operands.numbers(ctx, 1, float) or [])]


@onnx_op("Upsample", since=7, until=9)
def upsample(ctx: NodeContext) -> list[ir.Value]:
    scales = [float(s) for s in ctx.attr("scales")] if ctx.opset < 9 else operands.numbers(ctx, 1, float)
    return [_legacy_resize(ctx, scales or [])]


@onnx_op("GridSample", since=16)
def grid_sample(ctx: NodeContext) -> list[ir.Value]:
    """Opset 16 names the modes bilinear / bicubic and samples 4-D inputs; 20 calls them
    linear / cubic and takes any number of spatial dims. Both spellings are accepted."""
    mode = ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear")
    method = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    try:
        options = sampling.GridSampleMethod(method, ctx.attr("padding_mode", "zeros"),
                                            bool(ctx.attr("align_corners", 0)))
        return [sampling.grid_sample(ctx.value(0), ctx.value(1), options)]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


@onnx_op("AffineGrid", since=20)
def affine_grid(ctx: NodeContext) -> list[ir.Value]:
    """``size`` (N, C, *spatial) read at run time takes the declared output extents
    (``operands.declared_extents``)."""
    size = operands.numbers(ctx, 1, int)
    if size is None or len(size) not in (4, 5):
        raise HandlerError("AffineGrid needs a size of 4 (N, C, H, W) or 5 (N, C, D, H, W) values")
    spatial = size[2:]
    try:
        spatial = operands.declared_extents(spatial, operands.known_dims(ctx.output_infos[0], len(spatial) + 2)[1:-1],
                                            "AffineGrid: size holds {value} where the model declares {bound}")
        theta = ctx.value(0)
        check_extent(size[0], core.sizes(theta)[0], "AffineGrid: size says {value} images, theta has {bound}")
        return [sampling.affine_grid(theta, spatial, bool(ctx.attr("align_corners", 0)))]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
