"""Contractions, convolution and pooling ATen ops."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ....ir import (
    contraction,
    conv,
    core,
    elementwise,
    grid_sample,
    movement,
    pooling,
    reduction,
    reshapes,
    resize,
)
from ..importer import OpContext
from . import table
from ....errors import OperandError


@table.aten("mm.default", "bmm.default", "matmul.default")
def matmul(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))


@table.aten("addmm.default")
def addmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.gemm(ctx.tensor(a, dtype), ctx.tensor(b, dtype), ctx.tensor(bias, dtype),
                            alpha=float(alpha), beta=float(beta))


@table.aten("linear.default")
def linear(ctx: OpContext, x: Any, weight: Any, bias: Any = None) -> ir.Value:
    """``x @ weight.T + bias`` as the ONNX exporter writes ``nn.Linear``: a 2-D input as one
    Gemm, any other as MatMul by the transposed weight, then Add; a constant weight is
    transposed here by numpy, once, as the ONNX importer does with Gemm's.

    Why the op is kept whole (export.py leaves it out of the core decomposition): torch's
    decomposition flattens an N-D input to 2-D for ``addmm`` and views the result back, and
    a ViT's sequence-first tokens then reached the schedule through reshapes around every
    Linear (its GELU and residual in other fusion groups than the products), where the
    same model exported to ONNX did not (docs/performance.md, "The PyTorch route's graph").
    """
    dtype = ctx.result_dtype()
    a = ctx.tensor(x, dtype)
    if isinstance(weight, np.ndarray) and weight.ndim == 2:
        b = ctx.tensor(np.ascontiguousarray(weight.T), dtype)
    else:
        b = ctx.tensor(weight, dtype)
        if table.rank(b) == 2:
            b = core.transpose(b, [1, 0])
    if table.rank(a) == 2 and table.rank(b) == 2:
        return contraction.gemm(a, b, None if bias is None else ctx.tensor(bias, dtype))
    product = contraction.matmul(a, b)
    return product if bias is None else table.map_(ctx, [product, bias], dtype, elementwise.add)


@table.aten("baddbmm.default")
def baddbmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    product = contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))

    def body(p: ir.Value, c: ir.Value) -> ir.Value:
        return elementwise.add(elementwise.multiply(p, elementwise.like(alpha, p)),
                               elementwise.multiply(c, elementwise.like(beta, c)))

    return core.elementwise([product, ctx.tensor(bias, dtype)], core.element_type(dtype), body)


def _per_dim(value: Any, count: int, name: str) -> list[int]:
    values = [value] if isinstance(value, int) else list(value)
    if len(values) == 1:
        values *= count
    if len(values) != count or not all(isinstance(v, int) for v in values):
        raise OperandError(f"{name} {value!r} needs {count} static entries")
    return values


@table.aten("convolution.default")
def convolution(ctx: OpContext, x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    spatial = table.rank(x) - 2
    windows = {
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
        "groups": groups,
    }
    b = None if bias is None else ctx.tensor(bias, dtype)
    if transposed:
        filters = w.astype(dtype) if isinstance(w, np.ndarray) else ctx.tensor(w, dtype)
        return conv.conv_transpose(x, filters, b, output_padding=_per_dim(output_padding, spatial, "output_padding"),
                                   **windows)
    return conv.conv(x, ctx.tensor(w, dtype), b, **windows)


def _pool_windows(kernel: Any, stride: Any, padding: Any, dilation: Any, spatial: int) -> dict:
    kernel = _per_dim(kernel, spatial, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    return {
        "kernel": kernel,
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
    }


def _spatial_rank(ctx: OpContext) -> int:
    """The spatial rank an ATen pooling op works on, from its name (``max_pool2d`` -> 2)."""
    name = ctx.node.target._opname
    return int(name[name.index("pool") + 4])


def _batched(x: ir.Value, spatial: int) -> tuple[ir.Value, bool]:
    """``x`` with a batch dim (an unbatched (C, *spatial) input gets one), and whether it was added."""
    rank = table.rank(x)
    if rank == spatial + 1:
        return reduction.expand_dims(x, [0]), True
    if rank != spatial + 2:
        raise OperandError(f"a {spatial}-d pooling of a rank-{rank} tensor")
    return x, False


def _unbatched(values: Any, added: bool) -> Any:
    if not added:
        return values
    if isinstance(values, tuple):
        return tuple(_unbatched(v, added) for v in values)
    return reduction.drop_unit_dims(values, [0])


@table.aten("max_pool1d_with_indices.default", "max_pool2d_with_indices.default",
            "max_pool3d_with_indices.default", "max_pool1d.default", "max_pool2d.default", "max_pool3d.default")
def max_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Any:
    with_indices = ctx.node.target._opname.endswith("_with_indices")
    spatial = _spatial_rank(ctx)
    x, added = _batched(ctx.tensor(x), spatial)
    windows = _pool_windows(kernel_size, stride, padding, dilation, spatial)
    kernel = windows.pop("kernel")
    dtype = ctx.result_dtype(0 if with_indices else None)
    if with_indices and any(u.args[1] != 0 for u in ctx.node.users):
        return _unbatched(pooling.max_pool_with_indices(x, kernel, ceil_mode=ceil_mode, per_plane=True,
                                                        unsigned=table.unsigned(dtype), **windows), added)
    pooled = _unbatched(pooling.pool(x, "max", kernel, ceil_mode=ceil_mode, unsigned=table.unsigned(dtype),
                                     **windows), added)
    return (pooled, None) if with_indices else pooled


@table.aten("avg_pool1d.default", "avg_pool2d.default", "avg_pool3d.default")
def avg_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True,
             divisor_override: int | None = None) -> ir.Value:
    spatial = _spatial_rank(ctx)
    x, added = _batched(ctx.tensor(x), spatial)
    windows = _pool_windows(kernel_size, stride, padding, 1, spatial)
    kernel = windows.pop("kernel")
    if divisor_override is None:
        return _unbatched(pooling.pool(x, "avg", kernel, ceil_mode=ceil_mode,
                                       count_include_pad=count_include_pad, **windows), added)
    summed = pooling.pool(x, "sum", kernel, ceil_mode=ceil_mode, **windows)
    return _unbatched(core.elementwise([summed], core.tensor_type(summed).element_type,
                                       lambda v: arith.divf(v, elementwise.like(divisor_override, v))), added)


def _adaptive_windows(extent: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows along one dim: ``[floor(i*E/O), ceil((i+1)*E/O))``."""
    return [((i * extent) // out, -((-(i + 1) * extent) // out)) for i in range(out)]


def _adaptive(x: ir.Value, out: Sequence[int], kind: str) -> ir.Value:
    """Adaptive ``kind`` ("avg" or "max") pooling of the trailing ``len(out)`` dims.

    A divisible size is one strided pool; otherwise the windows (which may overlap and
    differ in length) are pooled one dim at a time, since a mean or max over a box is the
    mean or max of per-dim ones: per output position a slice, reduced, then concatenated.
    """
    spatial = len(out)
    extents = core.static_shape(x)[-spatial:]
    if None in extents:
        raise OperandError("adaptive pooling of dynamic spatial extents")
    if any(e == 0 for e in extents):
        raise OperandError("adaptive pooling of an empty spatial extent")
    if all(e % o == 0 for e, o in zip(extents, out)):
        kernel = [e // o for e, o in zip(extents, out)]
        return pooling.pool(x, kind, kernel, strides=kernel, padding_low=[0] * spatial,
                            padding_high=[0] * spatial, dilations=[1] * spatial)
    rank = table.rank(x)
    for position, (extent, size) in enumerate(zip(extents, out)):
        axis = rank - spatial + position
        if extent == size:
            continue
        pieces = []
        for start, end in _adaptive_windows(extent, size):
            window = movement.slice_axis(x, axis, start, end - start)
            pieces.append(reduction.mean(window, [axis], keepdims=True) if kind == "avg"
                          else reduction.reduce(window, [axis], "max", keepdims=True))
        x = movement.concat(pieces, axis)
    return x


@table.aten("_adaptive_avg_pool2d.default", "adaptive_avg_pool2d.default", "_adaptive_avg_pool1d.default",
            "adaptive_avg_pool1d.default", "_adaptive_avg_pool3d.default", "adaptive_avg_pool3d.default")
def adaptive_avg_pool(ctx: OpContext, x: Any, output_size: Sequence[int]) -> ir.Value:
    spatial = _spatial_rank(ctx)
    x, added = _batched(ctx.tensor(x), spatial)
    out = _per_dim(output_size, spatial, "output_size")
    if all(o == 1 for o in out):
        return _unbatched(pooling.global_pool(x, "avg"), added)
    return _unbatched(_adaptive(x, out, "avg"), added)


# Adaptive max pooling with indices builds one reduction per output cell: beyond this many
# cells the IR grows too large to be worth it, and the import refuses instead.
ADAPTIVE_INDEX_CELLS = 512


def _adaptive_max_with_indices(x: ir.Value, out: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """Values and per-plane int64 positions (row-major over the spatial dims, as eager's
    ``return_indices``) of adaptive max pooling: per output cell, the arg-max of its box
    (first maximum in row-major order, a NaN wins), shifted to the box's place in the plane."""
    spatial = len(out)
    extents = core.static_shape(x)[-spatial:]
    if None in extents:
        raise OperandError("adaptive max pooling indices of dynamic spatial extents")
    if int(np.prod(out)) > ADAPTIVE_INDEX_CELLS:
        raise OperandError(f"adaptive max pooling indices for more than {ADAPTIVE_INDEX_CELLS} "
                                  f"output cells ({list(out)})")
    rank = table.rank(x)
    axes = list(range(rank - spatial, rank))
    plane_strides = [int(np.prod(extents[d + 1:])) for d in range(spatial)]
    windows = [_adaptive_windows(e, o) for e, o in zip(extents, out)]
    i64 = ir.IntegerType.get_signless(64)

    def cell(box: list[tuple[int, int]]) -> tuple[ir.Value, ir.Value]:
        region = x
        for axis, (start, end) in zip(axes, box):
            region = movement.slice_axis(region, axis, start, end - start)
        values = reduction.reduce(region, axes, "max", keepdims=True)
        local = reduction.arg_reduce(region, axes, "max", keepdims=True)
        lengths = [end - start for start, end in box]

        def to_plane(position: ir.Value) -> ir.Value:
            total = arith.constant(i64, 0)
            for d, (start, _end) in enumerate(box):
                inner = int(np.prod(lengths[d + 1:]))
                coordinate = arith.remsi(arith.divsi(position, arith.constant(i64, inner)),
                                         arith.constant(i64, lengths[d]))
                shifted = arith.addi(coordinate, arith.constant(i64, start))
                total = arith.addi(total, arith.muli(shifted, arith.constant(i64, plane_strides[d])))
            return total

        return values, core.elementwise([local], i64, to_plane)

    def build(prefix: list[tuple[int, int]]) -> tuple[ir.Value, ir.Value]:
        if len(prefix) == spatial:
            return cell(prefix)
        parts = [build(prefix + [window]) for window in windows[len(prefix)]]
        axis = axes[len(prefix)]
        return (movement.concat([p[0] for p in parts], axis), movement.concat([p[1] for p in parts], axis))

    return build([])


@table.aten("adaptive_max_pool1d.default", "adaptive_max_pool2d.default", "adaptive_max_pool3d.default")
def adaptive_max_pool(ctx: OpContext, x: Any, output_size: Sequence[int]) -> tuple[ir.Value, Any]:
    spatial = _spatial_rank(ctx)
    x, added = _batched(ctx.tensor(x), spatial)
    out = _per_dim(output_size, spatial, "output_size")
    if any(u.args[1] != 0 for u in ctx.node.users):
        return _unbatched(_adaptive_max_with_indices(x, out), added)
    return _unbatched(_adaptive(x, out, "max"), added), None


@table.aten("addmv.default")
def addmv(ctx: OpContext, bias: Any, matrix: Any, vector: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    """``beta * bias + alpha * (matrix @ vector)`` (beta 0 ignores NaN in ``bias``, as eager)."""
    dtype = ctx.result_dtype()
    a = ctx.tensor(matrix, dtype)
    v = ctx.tensor(vector, dtype)
    product = reshapes.reshape(contraction.matmul(a, reshapes.reshape(v, [core.sizes(v)[0], 1])),
                               [core.sizes(a)[0]])
    return _scaled_sum(ctx, product, bias, alpha, beta, dtype)


@table.aten("addbmm.default")
def addbmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    """``beta * bias + alpha * sum_i a[i] @ b[i]``."""
    dtype = ctx.result_dtype()
    product = reduction.reduce(contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype)), [0], "sum")
    return _scaled_sum(ctx, product, bias, alpha, beta, dtype)


def _scaled_sum(ctx: OpContext, product: ir.Value, bias: Any, alpha: float, beta: float,
                dtype: np.dtype) -> ir.Value:
    element = core.element_type(dtype)
    scaled = core.elementwise([product], element, lambda p: elementwise.multiply(p, elementwise.like(alpha, p)))
    if beta == 0:
        return movement.broadcast_to(scaled, core.broadcast_extents([scaled, ctx.tensor(bias, dtype)]))
    return core.elementwise([scaled, ctx.tensor(bias, dtype)], element, lambda p, c: elementwise.add(
        p, elementwise.multiply(c, elementwise.like(beta, c))))


_GRID_SAMPLER_MODES = ("linear", "nearest", "cubic")  # PyTorch's interpolation_mode 0, 1, 2
_GRID_SAMPLER_PADDINGS = ("zeros", "border", "reflection")  # padding_mode 0, 1, 2


@table.aten("grid_sampler_2d.default", "grid_sampler_3d.default")
def grid_sampler(ctx: OpContext, x: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> ir.Value:
    """``grid_sample`` through the shared emitter (one generic op; torch's decomposition
    gathers every corner as its own tensor). The grid's last dim holds (x, y[, z]), as ONNX's."""
    if interpolation_mode not in range(3) or padding_mode not in range(3):
        raise OperandError(f"grid_sampler: interpolation_mode {interpolation_mode} / padding_mode "
                         f"{padding_mode} (expected 0, 1 or 2)")
    if interpolation_mode == 2 and padding_mode == 1:
        # eager clamps each of the 16 taps' positions to the border; ONNX (the emitter) clamps the
        # sampled position: different values near the edges
        raise OperandError("grid_sample with mode='bicubic' and padding_mode='border'")
    method = grid_sample.GridSampleMethod(_GRID_SAMPLER_MODES[interpolation_mode],
                                          _GRID_SAMPLER_PADDINGS[padding_mode], bool(align_corners))
    dtype = ctx.result_dtype()
    return grid_sample.grid_sample(ctx.tensor(x, dtype), ctx.tensor(grid, dtype), method)


@table.aten("upsample_bilinear2d.vec", "upsample_bilinear2d.default")
def upsample_bilinear2d(ctx: OpContext, x: Any, output_size: Sequence[int] | None, align_corners: bool,
                        *scales: Any) -> ir.Value:
    """Bilinear ``interpolate`` of the last two dims through the shared resize emitter (one
    pass over the output; torch's decomposition gathers each corner separately).
    Coordinates as eager: ``(y + 0.5) / scale - 0.5`` with the edge repeated (ONNX's
    ``half_pixel``), or ``y * (n - 1) / (out - 1)`` with ``align_corners``; ``scale`` is the
    given scale factor (not with ``align_corners``), else ``out / in``."""
    factors = scales[0] if ctx.node.target._overloadname == "vec" else list(scales)
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    if len(shape) != 4 or any(extent is None for extent in shape[2:]):
        raise OperandError(f"upsample_bilinear2d needs a 4-d input with static spatial dims, got {shape}")
    given = [None, None] if factors is None else list(factors) + [None] * (2 - len(factors))
    if output_size is None:
        if given[0] is None or given[1] is None:
            raise OperandError("upsample_bilinear2d needs output_size or scale factors")
        output_size = [int(n * f) for n, f in zip(shape[2:], given)]
    # with align_corners eager steps (n - 1) / (out - 1) whatever factor was given
    axes = {2 + i: resize.ResizeAxis(size=int(out), scale=float(f) if f and not align_corners else out / n)
            for i, (out, n, f) in enumerate(zip(output_size, shape[2:], given))}
    method = resize.ResizeMethod(mode="linear", coordinate_mode="align_corners" if align_corners else "half_pixel")
    return resize.resize(x, axes, method)
